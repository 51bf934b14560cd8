package haproxy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// corpusOutcomes is what becomes of each configuration of testdata/corpus
// (configurations written for this test in the shapes public projects
// use): translated (line 0), or refused at that line with that text. A
// change of outcome, a keyword newly translated included, fails here
// until the table (and docs/haproxy.md's Corpus section) says so.
var corpusOutcomes = map[string]struct {
	line int
	want string
}{
	"ansible-galera-web.cfg":         {45, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): liste"},
	"ansible-rhel-webfarm.cfg":       {},
	"balance-source.cfg":             {},
	"blue-green-switch.cfg":          {},
	"centos7-default-main.cfg":       {33, "frontend main: an address after the name: write it as a bind line (HAProxy refuses it too)"},
	"certbot-standalone.cfg":         {},
	"cloudflare-origin.cfg":          {},
	"compose-node-stats.cfg":         {},
	"compose-resolvers-api.cfg":      {},
	"compose-wordpress-mysql.cfg":    {34, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): liste"},
	"conditional-blocks.cfg":         {},
	"cookie-serverid.cfg":            {},
	"debian-site.cfg":                {},
	"docker-compose.cfg":             {},
	"elk-kibana-userlist.cfg":        {},
	"env-vars-container.cfg":         {},
	"gitea-ssh-mixed.cfg":            {34, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): front"},
	"grafana-prometheus.cfg":         {},
	"grpc-h2-backends.cfg":           {10, "option http-use-htx: not translated yet"},
	"ha-backup-servers.cfg":          {},
	"homelab-subdomains.cfg":         {},
	"ip-allowlist-admin.cfg":         {},
	"jenkins-agents-mixed.cfg":       {34, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): liste"},
	"k8s-apiserver.cfg":              {9, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): front"},
	"k8s-ingress-rendered.cfg":       {},
	"k8s-lb-apiserver-ingress.cfg":   {19, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): front"},
	"keycloak-cluster.cfg":           {},
	"legacy-1.3-listen.cfg":          {23, "listen webfarm: an address after the name: write it as a bind line (HAProxy refuses it too"},
	"legacy-1.4-reqrep.cfg":          {},
	"legacy-1.4-stunnel.cfg":         {},
	"legacy-1.5-ssl-reqadd.cfg":      {},
	"legacy-1.6-block-reqisetbe.cfg": {21, "reqisetbe ^[^ ]* /images/: removed in HAProxy 2.1: write `use_backend <backend> if <ACL>`"},
	"legacy-1.8-rspadd-hsts.cfg":     {},
	"legacy-1.x.cfg":                 {},
	"letsencrypt-redirect.cfg":       {},
	"log-targets-request-id.cfg":     {},
	"lua-auth.cfg":                   {5, "lua-load /usr/share/haproxy/auth-request.lua: Lua has no counterpart in Caddy: port the sc"},
	"mailserver-webmail-mixed.cfg":   {37, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): liste"},
	"maintenance-page.cfg":           {},
	"mariadb-readwrite-tcp.cfg":      {14, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): front"},
	"matrix-synapse.cfg":             {},
	"microservices.cfg":              {},
	"minimal-no-checks.cfg":          {},
	"minimal-quickstart.cfg":         {},
	"minio-s3-cluster.cfg":           {},
	"monitor-disable-on-404.cfg":     {},
	"mozilla-intermediate.cfg":       {},
	"mozilla-modern.cfg":             {},
	"multi-tenant-hosts.cfg":         {},
	"nextcloud-collabora.cfg":        {},
	"nomad-consul-srv.cfg":           {},
	"oauth2-proxy-sso.cfg":           {},
	"path-prefix-strip.cfg":          {},
	"patroni-postgres-stats.cfg":     {11, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): liste"},
	"peers-active-passive.cfg":       {11, "peers sections are not translated: Caddy has no stick-table replication; edge_rate_limit c"},
	"pfsense-generated.cfg":          {},
	"php-fpm-fastcgi.cfg":            {},
	"postgres-no-mode.cfg":           {13, "frontend postgres: no mode line: HAProxy's default is mode tcp, which is not translated (w"},
	"prometheus-exporter-stats.cfg":  {20, "stats scope: ha_status shows the whole process (every leader pool and its servers, rate-limi"},
	"proxy-protocol-behind-nlb.cfg":  {},
	"rabbitmq-management.cfg":        {10, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): liste"},
	"ratelimit-api.cfg":              {},
	"ratelimit-login-path.cfg":       {},
	"redis-sentinel.cfg":             {13, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): front"},
	"security-headers-after.cfg":     {},
	"sni-passthrough-plus-http.cfg":  {16, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): front"},
	"sni-passthrough-tcp.cfg":        {8, "mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): front"},
	"static-compression-cache.cfg":   {},
	"stats-listen.cfg":               {},
	"stats-userlist-sha512.cfg":      {},
	"sticky-appcookie-table.cfg":     {},
	"swarm-server-template.cfg":      {},
	"tls-termination-hsts.cfg":       {},
	"vaultwarden.cfg":                {},
	"vendor-api-keys.cfg":            {},
	"vendor-bot-protection.cfg":      {18, "http-request track-sc0: no stick-table in this frontend before it"},
	"vendor-ratelimit-conn.cfg":      {},
	"websocket-chat.cfg":             {},
	"wordpress-farm.cfg":             {},
	"wordpress-ssl-offload.cfg":      {},
}

// systemConfigs are the configurations Debian's haproxy package installs:
// HAProxy's own examples and the default haproxy.cfg. Their content is
// Debian's, so only the shape of the outcome is asserted, except that
// the default haproxy.cfg translates (systemTranslated). Absent, they
// are skipped, unless CADDY_HA_REQUIRE_TOOLS=1 (make test), which
// installs the package.
func systemConfigs(t *testing.T) []string {
	examples, _ := filepath.Glob("/usr/share/doc/haproxy/examples/*.cfg")
	files := examples
	if _, err := os.Stat("/etc/haproxy/haproxy.cfg"); err == nil {
		files = append(files, "/etc/haproxy/haproxy.cfg")
	}
	if len(examples) == 0 || len(files) == len(examples) {
		if os.Getenv("CADDY_HA_REQUIRE_TOOLS") == "1" {
			t.Fatalf("Debian's haproxy package's configurations are missing (examples %q, /etc/haproxy/haproxy.cfg); apt-get install haproxy", examples)
		}
		t.Logf("some of Debian's haproxy configurations are absent (found %q): apt-get install haproxy to check them", files)
	}
	return files
}

// systemTranslated are the system configurations that translate: Debian's
// default haproxy.cfg (syslog targets, a chroot, the admin socket, SSL
// bases and TLS defaults with no bind to apply to, log global, option
// httplog and dontlognull, timeouts in bare milliseconds, the errorfile
// lines of /etc/haproxy/errors, in a defaults section no proxy takes).
var systemTranslated = map[string]bool{"/etc/haproxy/haproxy.cfg": true}

// Every configuration of the corpus has the outcome the table says, and
// HAProxy's own examples and Debian's haproxy.cfg are translated or
// refused with the file, a line of it and that line's keyword; none panics.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.cfg")
	if err != nil || len(files) < 12 {
		t.Fatalf("corpus %q %v: want a dozen configurations", files, err)
	}
	for name := range corpusOutcomes {
		if !slices.Contains(files, filepath.Join("testdata/corpus", name)) {
			t.Errorf("%s is in the table but not in testdata/corpus", name)
		}
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { checkCorpusOutcome(t, file) })
	}
	for _, file := range systemConfigs(t) {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(file, "/"), "/", "_"), func(t *testing.T) {
			_, err := translateFile(t, file)
			checkOutcomeShape(t, file, err)
			if err != nil && systemTranslated[file] {
				t.Fatalf("refused, want it translated: %v", err)
			}
			if err != nil {
				t.Logf("refused: %v", err)
			} else {
				t.Logf("translated")
			}
		})
	}
}

// checkCorpusOutcome checks that a corpus file has its table's outcome.
func checkCorpusOutcome(t *testing.T, file string) {
	want, ok := corpusOutcomes[filepath.Base(file)]
	if !ok {
		t.Fatalf("%s has no outcome in corpusOutcomes", file)
	}
	_, err := translateFile(t, file)
	checkOutcomeShape(t, file, err)
	switch {
	case want.line == 0 && err != nil:
		t.Fatalf("refused, want it translated: %v", err)
	case want.line == 0:
	case err == nil:
		t.Fatalf("translated, want refused at line %d: %s", want.line, want.want)
	case !strings.HasPrefix(err.Error(), file+":"+strconv.Itoa(want.line)+": ") || !strings.Contains(err.Error(), want.want):
		t.Fatalf("refused with %v, want %s:%d: …%s", err, file, want.line, want.want)
	}
}

// translateFile parses and translates file; a panic fails the test with
// its stack.
func translateFile(t *testing.T, file string) (text string, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: panic: %v\n%s", file, r, debug.Stack())
		}
	}()
	cfg, err := ParseFile(file)
	if err != nil {
		return "", err
	}
	cfg.Files = corpusFiles{}
	return caddyfileOf(cfg)
}

// corpusFiles are the files the corpus's configurations name that the
// translation reads (a crt-list), as the machines they were written for
// have them: testdata/corpus/files/<path>; others are the filesystem's.
type corpusFiles struct{}

func (corpusFiles) path(name string) string {
	p := filepath.Join("testdata/corpus/files", name)
	if _, err := os.Stat(p); err == nil && filepath.IsAbs(name) {
		return p
	}
	return name
}

func (f corpusFiles) Stat(name string) (fs.FileInfo, error)      { return os.Stat(f.path(name)) }
func (f corpusFiles) ReadFile(name string) ([]byte, error)       { return os.ReadFile(f.path(name)) }
func (f corpusFiles) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(f.path(name)) }

// checkOutcomeShape checks the shape of each refusal of err (nil: none).
func checkOutcomeShape(t *testing.T, file string, err error) {
	t.Helper()
	var r Refusals
	if !errors.As(err, &r) {
		checkRefusalShape(t, file, err)
		return
	}
	for _, e := range r {
		checkRefusalShape(t, file, e)
	}
}

// keywordWords is how many of a refusal's first words name keyword: 1 for
// the keyword itself, 2 for "global <keyword>", 0 if they do not.
func keywordWords(words []string, keyword string) int {
	switch first := strings.Trim(words[0], `":`); {
	case first == keyword:
		return 1
	case first == "global" && len(words) > 1 && strings.TrimSuffix(words[1], ":") == keyword:
		return 2
	}
	return 0
}

// checkRefusalShape checks that a refusal (err not nil) begins with
// "<file>:<line>: ", that the line is a line of the file with a keyword,
// that the text names that keyword (its first word, or "global
// <keyword>"), and that it says why after it.
func checkRefusalShape(t *testing.T, file string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, file+":")
	if !ok {
		t.Fatalf("refusal without its file: %v", err)
	}
	num, why, ok := strings.Cut(rest, ": ")
	n, convErr := strconv.Atoi(num)
	if !ok || convErr != nil {
		t.Fatalf("refusal without its line: %v", err)
	}
	b, readErr := os.ReadFile(file)
	if readErr != nil {
		t.Fatal(readErr)
	}
	lines := strings.Split(string(b), "\n")
	if n < 1 || n > len(lines) {
		t.Fatalf("refusal at line %d of a file of %d lines: %v", n, len(lines), err)
	}
	fields := strings.Fields(lines[n-1])
	if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
		t.Fatalf("refusal at line %d, which has no keyword (%q): %v", n, lines[n-1], err)
	}
	words := strings.Fields(why)
	if len(words) == 0 {
		t.Fatalf("refusal without a text: %v", err)
	}
	named := keywordWords(words, fields[0])
	if named == 0 {
		t.Fatalf("refusal that does not name line %d's keyword %s: %v", n, fields[0], err)
	}
	if len(words) <= named+1 {
		t.Fatalf("refusal that does not say why: %v", err)
	}
}

// A refusal's text names its line's keyword even when the mistake is in
// a value (a time, an address, a condition): Translate puts the line's
// first words before it.
func TestRefusalsNameTheKeyword(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\ttimeout client 5x\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4:80\n",
			`k.cfg:5: timeout client: "5x": unit "x"`},
		{"defaults\n\tmode http\nfrontend f\n\tbind nohost\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4:80\n",
			`k.cfg:4: bind nohost: "nohost": want host:port`},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\thttp-request deny if\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4:80\n",
			`k.cfg:5: http-request deny: a condition without a term`},
		{"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 1.2.3.4\n",
			`k.cfg:7: server s: "1.2.3.4": want host:port`},
		{"frontend f\n\tbind \"*:80\n", `k.cfg:2: bind: a double quote is not closed`},
	} {
		cfg, err := Parse(strings.NewReader(tt.text), "k.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %s…", tt.text, err, tt.want)
		}
	}
	// A line longer than Parse reads is refused at its own line.
	long := "global\n\tdaemon\n\tdescription " + strings.Repeat("x", maxLineBytes) + "\n"
	if _, err := Parse(strings.NewReader(long), "k.cfg", lookup); err == nil || !strings.HasPrefix(err.Error(), "k.cfg:3: ") {
		t.Errorf("a too long line: %v", err)
	}
}

// A checked backend's status: HAProxy passes any 2xx or 3xx without
// http-check expect, Caddy's active health check one status; a check
// without it, or expecting a range, is dynamic checked's rather than
// written as a health_status Caddy cannot read (found by the corpus: the
// classic cookie SERVERID backend with option httpchk alone did not
// adapt); a status HAProxy does not take is refused.
func TestActiveCheckWantsOneStatus(t *testing.T) {
	base := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\toption httpchk GET /health\n%s\tserver s1 10.0.0.1:80 check\n"
	for _, tt := range []struct{ expect, want string }{
		{"", ""}, // any 2xx or 3xx passes: dynamic checked (TestServerChecksAsDynamicChecked)
		{"\thttp-check expect status 200-399\n", ""},
		{"\thttp-check expect status 99\n", "k.cfg:8: http-check expect: status \"99\": want codes (100 to 599)"},
		{"\thttp-check expect status 204\n", ""},
	} {
		cfg, err := Parse(strings.NewReader(strings.Replace(base, "%s", tt.expect, 1)), "k.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		out, err := caddyfileOf(cfg)
		switch {
		case strings.Contains(tt.expect, "200-399") && (err != nil || !strings.Contains(out, "\t\t\texpect status 200-399\n")):
			t.Errorf("%q: %v\n%s", tt.expect, err, out)
		case strings.Contains(tt.expect, "204") && (err != nil || !strings.Contains(out, "health_status 204\n")):
			t.Errorf("%q: %v\n%s", tt.expect, err, out)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%q: error %v, want %s…", tt.expect, err, tt.want)
		}
	}
}

// Values the translation wrote as they were, and Caddy then refused with
// a line of the generated Caddyfile ("does not adapt"), or took with
// another meaning, are refused at their HAProxy line.
func TestRefusesValuesCaddyCannotTake(t *testing.T) {
	fe, be := "defaults\n\tmode http\nfrontend f\n\tbind :80\n", "\tdefault_backend b\nbackend b\n\tserver s1 10.0.0.1:80\n"
	limit := "\thttp-request track-sc0 src\n\thttp-request deny deny_status 429 if { sc_http_req_rate(0) gt 5 }\n"
	check := "\tdefault_backend b\nbackend b\n\toption httpchk GET /\n\thttp-check expect status 200\n"
	for _, tt := range []struct{ text, want string }{
		{fe + "\tacl a src nonsense\n\thttp-request deny if a\n" + be, "k.cfg:5: acl a: src nonsense: want an address or a CIDR range"},
		{fe + "\tacl a path_reg (\n\thttp-request deny if a\n" + be, "k.cfg:5: acl a: (: not a regular expression Go's RE2 reads"},
		{"defaults\n\tmode http\nfrontend f\n\tbind :http\n" + be, `k.cfg:4: bind :http: ":http": want a port from 1 to 65535`},
		{fe + "\tdefault_backend b\nbackend b\n\tserver s1 app:8000-8001\n", `k.cfg:7: server s1: "app:8000-8001": want a port from 1 to 65535`},
		{fe + "\tdefault_backend b\nbackend b\n\tserver s1 10.0.0.1:0\n", `k.cfg:7: server s1: "10.0.0.1:0": want a port from 1 to 65535`},
		{fe + be + "frontend g\n\tbind :80\n\tdefault_backend b\n", "k.cfg:9: bind :80: :80 is bound at k.cfg:4 too"},
		{fe + "\tstick-table type ip store http_req_rate(15ms)\n" + limit + be, "k.cfg:5: stick-table type: store http_req_rate(15ms): a sliding window of whole tens of milliseconds"},
		{"defaults\n\tmode http\nfrontend api.v1\n\tbind :80\n\tstick-table type ip store http_req_rate(10s)\n" + limit + be, `k.cfg:7: http-request deny: the edge_rate_limit zone is named after the frontend, "api.v1"`},
		{fe + check + "\tserver s1 10.0.0.1:80 check fall x\n", "k.cfg:9: server s1: fall x: HAProxy wants a whole number from 1"},
		{fe + check + "\tserver s1 10.0.0.1:80 check rise 0\n", "k.cfg:9: server s1: rise 0: HAProxy wants a whole number from 1"},
		{fe + check + "\tdefault-server inter 0s\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:9: default-server inter: inter 0s: HAProxy wants a check interval above 0"},
	} {
		cfg, err := Parse(strings.NewReader(tt.text), "k.cfg", lookup)
		if err == nil {
			_, err = caddyfileOf(cfg)
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %s…", tt.text, err, tt.want)
		}
	}
}

// Checks Caddy's active health checks cannot do as HAProxy does become
// dynamic checked (issue 28): a TCP connect check without option httpchk,
// any 2xx or 3xx without http-check expect; what dynamic checked cannot
// carry is refused at its line.
func TestServerChecksAsDynamicChecked(t *testing.T) {
	fe := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n"
	for _, tt := range []struct {
		backend, want string
		has           []string
	}{
		{"\tserver s1 10.0.0.1:80 check\n\tserver s2 10.0.0.2:80 check fall 5\n", "k.cfg:8: server s2: its TLS or check options differ from s1's", nil},
		{"\tserver s1 10.0.0.1:80 check\n\tserver s2 10.0.0.2:80\n", "", []string{"\t\tcheck tcp\n", "HAProxy does not check this server (it stays in rotation whatever it answers); dynamic checked checks"}},
		{"\toption httpchk HEAD /up\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\tcheck http\n\t\t\tmethod HEAD\n\t\t\turi /up\n"}},
		{"\thttp-check send meth GET uri /h\n\toption httpchk\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\t\tmethod GET\n\t\t\turi /h\n"}},
		{"\thttp-check expect status 200\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:7: http-check expect: http-check without option httpchk", nil},
		{"\tserver s1 10.0.0.1:80 check weight 2\n\tserver s2 10.0.0.2:80 check\n", "k.cfg:7: server s1: weights with dynamic checked's checks are not translated", nil},
		{"\toption httpchk\n\tserver s1 10.0.0.1:443 check ssl verify none\n", "", []string{"\t\tcheck http\n\t\t\t# the servers' ssl: HAProxy checks them over TLS (check-ssl), with their TLS settings\n\t\t\ttls\n\t\t\ttls_insecure_skip_verify\n"}},
		{"\toption httpchk\n\tserver s1 10.0.0.1:443 check ssl ca-file /etc/ssl/ca.pem verifyhost app.internal check-sni app.internal\n", "", []string{"\t\t\ttls\n\t\t\ttls_server_name app.internal\n\t\t\ttls_trust_pool file /etc/ssl/ca.pem\n\t\t}\n"}},
		{"\toption httpchk\n\tserver s1 10.0.0.1:443 check ssl verify none sni str(app.internal)\n", "", []string{"approximated: HAProxy's checks send no SNI without check-sni; dynamic checked's send app.internal"}},
		{"\toption httpchk GET /status.php\n\thttp-check expect string installed\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\tcheck http\n", "\t\t\texpect string installed\n"}},
		{"\toption httpchk\n\thttp-check expect ! rstatus ^5\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\t\texpect ! rstatus ^5\n"}},
		{"\toption httpchk\n\thttp-check expect ! status 200\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\t\texpect ! status 200\n"}},
		{"\toption httpchk\n\thttp-check expect rstring \"state: (UP|READY)\"\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\t\texpect rstring \"state: (UP|READY)\"\n"}},
		{"\toption httpchk\n\thttp-check expect status 200,301-302\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\t\texpect status 200,301-302\n"}},
		{"\toption httpchk\n\thttp-check disable-on-404\n\thttp-check expect status 200\n\tserver s1 10.0.0.1:80 check\n", "", []string{"\t\t\texpect_status 200\n", "\t\t\tdisable_on_404\n"}},
		{"\tcookie SRV insert\n\toption httpchk\n\thttp-check disable-on-404\n\tserver s1 10.0.0.1:80 check cookie s1\n", "", []string{"\t\t\tdisable_on_404\n", "approximated: a server drained by a 404 gets no request from Caddy"}},
		{"\toption httpchk\n\thttp-check expect hdr name X-Up\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:8: http-check expect: only http-check expect [!] status|rstatus|string|rstring <pattern> is translated", nil},
		{"\toption httpchk\n\thttp-check expect fhdr x\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:8: http-check expect: http-check expect fhdr is not translated yet", nil},
		{"\toption httpchk\n\thttp-check expect min-recv 10 string up\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:8: http-check expect: only http-check expect [!]", nil},
		{"\toption httpchk\n\thttp-check expect status 200\n\thttp-check expect string up\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:9: http-check expect: a second http-check expect", nil},
		{"\toption httpchk\n\thttp-check expect rstring up\\Z\n\tserver s1 10.0.0.1:80 check\n", "k.cfg:8: http-check expect: up\\Z: not a regular expression", nil},
		{"\tserver s1 10.0.0.1:443 check ssl verify none\n", "", []string{"\t\tcheck tcp\n\t\t\t# the servers' ssl: HAProxy checks them over TLS (check-ssl), with their TLS settings\n\t\t\ttls\n\t\t\ttls_insecure_skip_verify\n"}},
		{"\toption httpchk\n\thttp-check expect status 200\n\tserver s1 10.0.0.1:80 check fastinter 1s\n", "k.cfg:9: server s1: fastinter is translated for dynamic checked's checks only", nil},
		{"\tserver s1 10.0.0.1:80 check\n\tserver s2 10.0.0.1:80 check\n", "k.cfg:8: server s2: 10.0.0.1:80 is server s1's address too (line 7)", nil},
	} {
		out, err := translateK(t, fe+tt.backend)
		checkOutcome(t, tt.backend, out, err, tt.want, tt.has...)
	}
}

// A backend's own http-check expect replaces its defaults', as HAProxy
// takes the defaults' check rules only into a proxy without its own; its
// own rules without its own option httpchk are refused (HAProxy 2.6 then
// sends no request: the checks time out).
func TestOwnExpectReplacesTheDefaults(t *testing.T) {
	head := "defaults\n\tmode http\n\toption httpchk\n\thttp-check expect status 200\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n"
	text := head + "\toption httpchk\n\thttp-check expect string up\n\tserver s1 10.0.0.1:80 check\n"
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "", "\t\t\texpect string up\n", "http-check expect status 200  (replaced by line 10)")
	text = head + "\thttp-check expect string up\n\tserver s1 10.0.0.1:80 check\n"
	out, err = translateK(t, text)
	checkOutcome(t, text, out, err, "k.cfg:9: http-check expect: http-check in a backend whose option httpchk is its defaults'")
}

// What HAProxy answers itself without an errorfile (a deny, no
// default_backend) is answered with HAProxy's own page; an errorfile for
// the status replaces it; deny_status takes the statuses HAProxy has a
// page for, as HAProxy does (issue 28.3: the differential found caddy-ha
// answering a deny with no body).
func TestOwnPages(t *testing.T) {
	fe := "defaults\n\tmode http\nfrontend f\n\tbind :80\n"
	page403 := "\t\theader Content-Type text/html\n\t\theader Cache-Control no-cache\n\t\trespond \"<html><body><h1>403 Forbidden</h1>\nRequest forbidden by administrative rules.\n</body></html>\n\" 403\n"
	for _, tt := range []struct {
		text, want  string
		has, hasNot []string
	}{
		{fe + "\thttp-request deny if { path /x }\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n", "", []string{"handle_errors 403 {", page403}, []string{"handle_errors 503"}},
		{fe + "\thttp-request deny deny_status 429 if { path /x }\n", "", []string{"You have sent too many requests in a given amount of time.", "No server is available to handle this request."}, nil},
		{fe + "\terrorfile 403 testdata/403.http\n\thttp-request deny\n", "", []string{"Forbidden here"}, []string{"Request forbidden by administrative rules."}},
		{fe + "\thttp-request deny deny_status 418\n", "k.cfg:5: http-request deny: status 418: HAProxy answers only the statuses it has a page for", nil, nil},
	} {
		out, err := translateK(t, tt.text)
		checkOutcome(t, tt.text, out, err, tt.want, tt.has...)
		for _, h := range tt.hasNot {
			if strings.Contains(out, h) {
				t.Errorf("%q: the translation holds %q", tt.text, h)
			}
		}
	}
}

// A counter of a string table tracks a header or a cookie (issue 28):
// what a zone cannot count as HAProxy does is refused at its line.
func TestRateLimitByKey(t *testing.T) {
	fe := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tstick-table type string len 32 store http_req_rate(10s)\n"
	deny := "\thttp-request deny deny_status 429 if { sc_http_req_rate(0) gt 5 }\n"
	for _, tt := range []struct {
		rules, want string
		has         []string
	}{
		{"\thttp-request track-sc0 req.cook(session)\n" + deny, "", []string{"key {http.request.cookie.session}", "expression `{http.request.cookie.session} != \"\"`"}},
		{"\thttp-request track-sc0 src\n" + deny, "", []string{"key {remote_host}"}},
		{"\thttp-request track-sc0 req.hdr(X-Key,-1)\n" + deny, "", []string{"key {haproxy.hdr.x-key}", "map {http.request.header.x-key} {haproxy.hdr.x-key}"}},
		{"\thttp-request track-sc0 req.hdr(X-Key,2)\n" + deny, "k.cfg:6: http-request track-sc0: track req.hdr(X-Key,2): occurrence 2 is not translated: the last, -1 (what req.hdr(<name>) tracks too), is", nil},
		{"\thttp-request track-sc0 req.cook(a,b)\n" + deny, "k.cfg:6: http-request track-sc0: track req.cook(a,b): only src, req.hdr(<name>[,-1]) and req.cook(<name>)", nil},
		{"\thttp-request track-sc0 src table other\n" + deny, "k.cfg:6: http-request track-sc0: only track-sc<n> <sample> is translated", nil},
		{"\thttp-request track-sc0 src\n" + deny + deny, "k.cfg:8: http-request deny: a second deny over counter 0", nil},
		{"\thttp-request track-sc1 src\n" + deny, "k.cfg:7: http-request deny: sc_http_req_rate(0) without http-request track-sc0 before it", nil},
	} {
		out, err := translateK(t, fe+tt.rules)
		checkOutcome(t, tt.rules, out, err, tt.want, tt.has...)
	}
	// A limit in a variable of a constant, subtracted (sub): count - 10
	// gt 0 is count gt 10; the deny's other terms are the track rule's.
	login := "\thttp-request set-var(txn.limit) int(10)\n\thttp-request track-sc2 req.hdr(X-Key,-1) if { path /login } { method POST }\n\tacl over sc_http_req_rate(2),sub(txn.limit) %s\n\thttp-request deny deny_status 429 if %s\n"
	for _, tt := range []struct{ test, cond, want string }{
		{"gt 0", "{ method POST } over { path /login }", ""},
		{"ge 1", "over { path /login } { method POST }", ""},
		{"gt -10", "{ path /login } { method POST } over", "k.cfg:9: http-request deny: a rate of 0 denies every request"},
		{"gt 0", "{ path /login } over", "k.cfg:9: http-request deny: the deny's other terms must be the track rule's condition (line 7), as written"},
		{"gt 0", "over { path /login } !{ method POST }", "k.cfg:9: http-request deny: the deny's other terms must be the track rule's condition"},
		{"lt 0", "over", "k.cfg:9: http-request deny: sc_http_req_rate(2),sub(txn.limit) lt 0: a counter's test is gt or ge a whole number"},
	} {
		text := fe + fmt.Sprintf(login, tt.test, tt.cond)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, "events 10", "# k.cfg:8: acl over sc_http_req_rate(2),sub(txn.limit) "+tt.test+"\n")
	}
	for _, tt := range []struct{ from, to, want string }{
		{"int(10)", "req.hdr(X-Limit)", "k.cfg:9: http-request deny: sc_http_req_rate(2),sub(txn.limit): sub(txn.limit) is translated of a variable that an http-request set-var(txn.limit) int(<n>) before this rule sets"},
		{"sub(txn.limit)", "sub(txn.other)", "k.cfg:9: http-request deny: sc_http_req_rate(2),sub(txn.other): sub(txn.other) is translated of a variable"},
		{"sub(txn.limit)", "mul(txn.limit)", "k.cfg:9: http-request deny: sc_http_req_rate(2),mul(txn.limit): of a counter's converters, only sub(<variable>) of a constant is translated"},
		{"deny deny_status 429 if", "return status 200 if", "k.cfg:9: http-request return: sc_http_req_rate(2),sub(txn.limit): a counter's test is translated as the condition of a deny_status 429"},
	} {
		text := fe + strings.Replace(fmt.Sprintf(login, "gt 0", "{ path /login } { method POST } over"), tt.from, tt.to, 1)
		_, err := translateK(t, text)
		checkOutcome(t, text, "", err, tt.want)
	}
	ipTable := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tstick-table type ip store http_req_rate(10s)\n\thttp-request track-sc0 req.hdr(X-Key)\n"
	_, err := translateK(t, ipTable)
	checkOutcome(t, ipTable, "", err, "k.cfg:6: http-request track-sc0: track req.hdr(X-Key): a table of type ip keeps addresses")
}
