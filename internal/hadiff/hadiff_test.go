package hadiff

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

const sample = `global
    chroot /var/lib/haproxy
    stats socket /run/haproxy/admin.sock mode 660
    log 10.0.0.5:514 local0

defaults
    mode http
    timeout client 5s

frontend web
    bind :::80 v4v6
    bind *:443 ssl crt /etc/ssl/site.pem alpn h2,http/1.1 \
        name tls
    acl api path_beg -i /api
    acl admin hdr(host) admin.example
    acl write method POST PUT
    acl lan src 127.0.0.0/8
    acl img path_reg ^/img/[0-9]+\.png$
    http-request deny if admin write !lan
    http-request set-header X-Proxy "a b#c"
    http-response set-header X-Frame-Options DENY
    use_backend api if api || { path_end .json }
    default_backend app

backend api
    server api1 10.0.0.1:8080 check port 8081
    server api2 10.0.0.2:8080 check

backend app
    balance first
    server app1 10.0.0.3:80 weight 2
    server app2 10.0.0.4:80
`

func parse(t *testing.T, text string) *haproxy.Config {
	t.Helper()
	cfg, err := haproxy.Parse(strings.NewReader(text), "sample.cfg", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Each bind and server line is written anew at its line, on its new
// address, its other words kept (a crt mapped; the old address family's
// and the check's own address dropped); a continued line's other lines
// emptied; the process's global lines commented out; a log server on
// loopback's discard port; the rest as it was,
// every line at its number.
func TestRewriteByLine(t *testing.T) {
	cfg := parse(t, sample)
	l, err := Inspect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Binds) != 2 || !l.Binds[1].TLS || l.Binds[0].TLS || len(l.Servers) != 4 {
		t.Fatalf("layout %+v", l)
	}
	if !l.Balanced["api"] || l.Balanced["app"] {
		t.Errorf("balanced %v, want api (two servers, round robin) and not app (balance first)", l.Balanced)
	}
	out, err := Rewrite([]byte(sample), l, Addresses{
		Bind:   map[int]string{11: "127.0.0.1:1001", 12: "127.0.0.1:1002"},
		Server: map[int]string{26: "127.0.0.1:2001", 27: "127.0.0.1:2002", 31: "127.0.0.1:2003", 32: "127.0.0.1:2004"},
		File:   map[string]string{"/etc/ssl/site.pem": "/tmp/my cert.pem"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRewritten(t, string(out), sample, map[int]string{
		2:  "# hadiff:     chroot /var/lib/haproxy",
		3:  "# hadiff:     stats socket /run/haproxy/admin.sock mode 660",
		4:  "    log 127.0.0.1:9 local0",
		11: "    bind 127.0.0.1:1001",
		12: "    bind 127.0.0.1:1002 ssl crt '/tmp/my cert.pem' alpn h2,http/1.1 name tls",
		13: "",
		26: "    server api1 127.0.0.1:2001 check",
		27: "    server api2 127.0.0.1:2002 check",
		31: "    server app1 127.0.0.1:2003 weight 2",
		32: "    server app2 127.0.0.1:2004",
	})
	checkSampleReadBack(t, parse(t, string(out)))
}

// checkRewritten checks that the rewritten text out has the original's
// lines, each at its number, but those changed (by number).
func checkRewritten(t *testing.T, out, original string, changed map[int]string) {
	t.Helper()
	got, want := strings.Split(out, "\n"), strings.Split(original, "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range got {
		w, ok := changed[i+1]
		if !ok {
			w = want[i]
		}
		if got[i] != w {
			t.Errorf("line %d: %q, want %q", i+1, got[i], w)
		}
	}
}

// checkSampleReadBack checks that HAProxy's reader takes the rewritten
// sample back: the crt as mapped, the header value's quoting as it was.
func checkSampleReadBack(t *testing.T, again *haproxy.Config) {
	t.Helper()
	for _, s := range again.Sections {
		for _, line := range s.Lines {
			if line.Words[0] == "bind" && line.Pos.Line == 12 && line.Words[4] != "/tmp/my cert.pem" {
				t.Errorf("crt read back as %q", line.Words[4])
			}
			if line.Words[0] == "http-request" && line.Words[1] == "set-header" && line.Words[3] != "a b#c" {
				t.Errorf("set-header value read back as %q", line.Words[3])
			}
		}
	}
}

// A server resolved through a resolvers section keeps its name, with its
// backend's port (a host name) or as written (an SRV name), and the
// harness's DNS server answers the name with the backend's address; the
// nameserver lines name that server; a server without resolvers is moved
// to its backend's address as it was.
func TestRewriteResolved(t *testing.T) {
	text := `resolvers dns
    nameserver a 127.0.0.11:53
defaults
    mode http
    default-server resolvers dns init-addr none
frontend f
    bind :80
    default_backend b
backend b
    server web app:8000 check
    server-template task- 1-3 tasks.app:8000 check
    server-template api 5 _api._tcp.service.consul check
defaults
    mode http
backend c
    server plain plain.local:80 check
`
	l, err := Inspect(parse(t, text))
	if err != nil {
		t.Fatal(err)
	}
	var resolved []string
	for _, s := range l.Servers {
		resolved = append(resolved, s.Resolved)
	}
	if want := []string{"app", "tasks.app", "_api._tcp.service.consul", ""}; !slices.Equal(resolved, want) {
		t.Fatalf("resolved %q, want %q", resolved, want)
	}
	backends := map[int]string{10: "127.0.0.1:2001", 11: "127.0.0.1:2002", 12: "127.0.0.1:2003", 16: "127.0.0.1:2004"}
	out, err := Rewrite([]byte(text), l, Addresses{Bind: map[int]string{7: "127.0.0.1:1001"}, Server: backends, Nameserver: "127.0.0.1:5353"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(out), "\n")
	for n, want := range map[int]string{
		2: "    nameserver a 127.0.0.1:5353", 10: "    server web app:2001 check", 11: "    server-template task- 1-3 tasks.app:2002 check",
		12: "    server-template api 5 _api._tcp.service.consul check", 16: "    server plain 127.0.0.1:2004 check",
	} {
		if lines[n-1] != want {
			t.Errorf("line %d: %q, want %q", n, lines[n-1], want)
		}
	}
	checkServed(t, l, backends)
}

// checkServed checks that the harness's DNS server, serving l, answers
// the resolved names with their backends' addresses, and no other name.
func checkServed(t *testing.T, l Layout, backends map[int]string) {
	t.Helper()
	d, err := StartDNS()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := l.Serve(d, backends); err != nil {
		t.Fatal(err)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, network, d.Addr)
	}}
	ctx := context.Background()
	if ips, err := r.LookupIP(ctx, "ip4", "tasks.app"); err != nil || len(ips) != 1 || !ips[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("tasks.app: %v %v", ips, err)
	}
	if _, srvs, err := r.LookupSRV(ctx, "", "", "_api._tcp.service.consul"); err != nil || len(srvs) != 1 || srvs[0].Port != 2003 {
		t.Errorf("the SRV name: %v %v", srvs, err)
	} else if ips, err := r.LookupIP(ctx, "ip4", srvs[0].Target); err != nil || len(ips) != 1 {
		t.Errorf("its target %s: %v %v", srvs[0].Target, ips, err)
	}
	if _, err := r.LookupIP(ctx, "ip4", "plain.local"); err == nil {
		t.Error("plain.local resolved: the harness's DNS knows only the resolved servers")
	}
}

// What the harness cannot move to loopback is refused with its line.
func TestInspectRefusesWhatItCannotMove(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"    server-template app 1-3 app:80 check\nresolvers dns\n    parse-resolv-conf", "line 10: parse-resolv-conf"},
		{"    server s1 10.0.0.1:443 ssl verify none", "line 8: server s1 with ssl"},
		{"    default-server ssl verify none", "line 8: default-server with ssl"},
		{"    server s1 10.0.0.1:80 check check-ssl", "line 8: server s1 with ssl, check-ssl"},
		{"    server s1 10.0.0.1:80 agent-check agent-port 9999", "line 8: server s1"},
	} {
		text := "defaults\n    mode http\nfrontend f\n    bind :80\n    default_backend b\n\nbackend b\n" + tt.line + "\n"
		if _, err := Inspect(parse(t, text)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.line, err, tt.want)
		}
	}
}

func TestIsNetworkAddress(t *testing.T) {
	for w, want := range map[string]bool{"10.0.0.5:514": true, "127.0.0.1": true, "logs.example:514": true, "udp@10.0.0.5:514": true,
		"/dev/log": false, "unix@/dev/log": false, "stdout": false, "fd@1": false, "ring@buf": false, "global": false, "localhost": false} {
		if got := isNetworkAddress(w); got != want {
			t.Errorf("%s: %v", w, got)
		}
	}
}

func TestQuoteReadsBack(t *testing.T) {
	for _, w := range []string{"plain", "", "a b", "it's", `say "hi" $HOME`, "#x", `back\slash`, "new\nline", "it's $x"} {
		cfg := parse(t, "global\n    description "+Quote(w)+"\n")
		if got := cfg.Sections[0].Lines[0].Words; len(got) != 2 || got[1] != w {
			t.Errorf("%q written %s, read back as %q", w, Quote(w), got)
		}
	}
}

// The sample's ACLs and rules give requests that each value matches and
// near misses that it does not, the conditions' alternatives each true
// and each test made false, and the headers the configuration sets sent by
// the client.
func TestDeriveFromACLsAndRules(t *testing.T) {
	d := Derive(parse(t, sample))
	has := func(want Request) *Request {
		for i, r := range d.Requests {
			if r.Method == want.Method && r.Host == want.Host && r.Target == want.Target && r.From == want.From &&
				(want.Header == nil || r.Header.Get("X-Proxy") == want.Header.Get("X-Proxy")) {
				return &d.Requests[i]
			}
		}
		t.Errorf("no request %s among\n%s", want, d.Requests)
		return nil
	}
	get := func(host, target string) Request {
		return Request{Method: http.MethodGet, Host: host, Target: target}
	}
	for _, r := range []Request{
		get(DefaultHost, "/"), {Method: http.MethodHead, Host: DefaultHost, Target: "/"}, {Method: http.MethodPost, Host: DefaultHost, Target: "/"},
		get(DefaultHost, "/api"), get(DefaultHost, "/api/x"), get(DefaultHost, "/API"), // -i: the other case is in
		get(DefaultHost, "/ap"),                                                          // a prefix one short: out
		get("admin.example", "/"), get("admin.examplex", "/"), get("ADMIN.EXAMPLE", "/"), // no -i: the other case is out
		{Method: http.MethodPut, Host: DefaultHost, Target: "/"},
		{Method: http.MethodGet, Host: DefaultHost, Target: "/", From: "127.0.0.2"},
		get(DefaultHost, "/img/0.png"),
		get(DefaultHost, "/x.json"), get(DefaultHost, "/x.jso"), // the anonymous ACL of use_backend's second alternative
	} {
		has(r)
	}
	// The deny's condition: all three true (admin, write, not lan), then
	// each false in turn.
	for _, r := range []Request{
		{Method: http.MethodPost, Host: "admin.example", Target: "/"},
		{Method: http.MethodPost, Host: "admin.examplex", Target: "/"},
		{Method: http.MethodPost, Host: "admin.example", Target: "/", From: "127.0.0.2"},
	} {
		if got := has(r); got != nil && !slices.ContainsFunc(got.Why, func(w string) bool { return strings.HasPrefix(w, "line 19: http-request deny") }) {
			t.Errorf("%s: derived for %q, want the deny's condition among", r, got.Why)
		}
	}
	has(Request{Method: http.MethodGet, Host: DefaultHost, Target: "/", Header: http.Header{"X-Proxy": {"client-value"}}})
	if !slices.Equal(d.ResponseHeaders, []string{"X-Frame-Options"}) {
		t.Errorf("response headers %v", d.ResponseHeaders)
	}
	if hosts := Hosts(d.Requests); !slices.Contains(hosts, "admin.example") || !slices.Contains(hosts, DefaultHost) {
		t.Errorf("hosts %v", hosts)
	}
}

func TestGenerateMatchesSimpleExpressions(t *testing.T) {
	for _, expr := range []string{`^/img/[0-9]+\.png$`, `\.(css|js)$`, `^/api/v[12]/`, `/reports/\d{2,4}`, `^/(foo|bar)?x*$`} {
		s, ok := Generate(expr, false)
		if !ok || !regexp.MustCompile(expr).MatchString(s) || !strings.HasPrefix(s, "/") {
			t.Errorf("%s: %q %v", expr, s, ok)
		}
	}
	if s, ok := Generate(`(?<=a)b`, false); ok {
		t.Errorf("a lookbehind (not RE2) generated %q", s)
	}
}

// Each field that differs is one difference; hop-by-hop headers, Via and
// the request's number are not compared; a header's lines are compared
// joined; the server only where the backend does not balance.
func TestCompare(t *testing.T) {
	seen := func(server, line string, h http.Header) []Seen {
		return []Seen{{Server: server, Line: line, Header: h}}
	}
	a := Outcome{Status: 200, Header: map[string]string{"X-Frame-Options": "DENY"}, Server: "app/app1",
		Seen: seen("app/app1", "GET / HTTP/1.1", http.Header{"X-Forwarded-For": {"1.2.3.4", "127.0.0.1"}, "Connection": {"close"}, "Via": {"1.1 x"}, RequestHeader: {"1"}})}
	b := Outcome{Status: 200, Header: map[string]string{"X-Frame-Options": "DENY"}, Server: "app/app1",
		Seen: seen("app/app1", "GET / HTTP/1.1", http.Header{"X-Forwarded-For": {"1.2.3.4, 127.0.0.1"}, RequestHeader: {"2"}})}
	if d := Compare(a, b, nil); len(d) != 0 {
		t.Errorf("alike: %v", d)
	}
	b.Status, b.Location, b.Header = 301, "https://x/", map[string]string{}
	b.Server, b.Seen = "app/app2", seen("app/app2", "GET /x HTTP/1.1", http.Header{"X-Extra": {"1"}})
	var fields []string
	for _, d := range Compare(a, b, nil) {
		fields = append(fields, d.Field)
	}
	want := []string{"status", "Location", "response header X-Frame-Options", "server", "request line", "request header X-Extra", "request header X-Forwarded-For"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
	if d := Compare(a, Outcome{Status: 200, Header: a.Header, Server: "app/app2", Seen: seen("app/app2", a.Seen[0].Line, a.Seen[0].Header)}, map[string]bool{"app": true}); len(d) != 0 {
		t.Errorf("another server of a balanced backend: %v", d)
	}
	if d := Compare(a, Outcome{Err: "connection refused"}, nil); len(d) != 1 || d[0].Field != "error" {
		t.Errorf("one side unanswered: %v", d)
	}
}

const knownDoc = "# Doc\n\n## Known differences\n\ntext\n\n| field | warning | why |\n|---|---|---|\n" +
	"| `request header X-Forwarded-Host` | `sends X-Forwarded-Host` | the forwarded handler |\n" +
	"| `response header *` | `httpclose` | any response header |\n" +
	"| `request header X-Forwarded-*` when the client sent it | `httpclose` | a client's claim |\n\n## Next\n\n| `status` | `x` | not read |\n"

// Known differences are the rows of their section alone; a document
// without that section, or with a field not in backticks, is refused.
func TestKnownDifferencesParsed(t *testing.T) {
	known, err := ParseKnown([]byte(knownDoc))
	if err != nil || len(known) != 3 || known[0].Field != "request header X-Forwarded-Host" || known[1].Why != "any response header" || known[1].ClientSent || !known[2].ClientSent || known[2].Field != "request header X-Forwarded-*" {
		t.Fatalf("%+v %v", known, err)
	}
	for _, bad := range []string{"# x\n", "## Known differences\n| a | b | c |\n|---|---|---|\n| status | `w` | why |\n"} {
		if _, err := ParseKnown([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A difference is excused only by a row of its field whose warning the
// translation gave.
func TestKnownDifferencesExcused(t *testing.T) {
	known, err := ParseKnown([]byte(knownDoc))
	if err != nil {
		t.Fatal(err)
	}
	warnings := []haproxy.Warning{{Pos: haproxy.Position{File: "f", Line: 7}, Msg: "option httpclose: connections kept alive"}}
	var plain Request
	if _, w, ok := Excuse(Difference{Field: "response header X-A"}, plain, known, warnings); !ok || w.Pos.Line != 7 {
		t.Errorf("a row with * and its warning: %v %v", w, ok)
	}
	if _, _, ok := Excuse(Difference{Field: "request header X-Forwarded-Proto"}, plain, known, warnings); ok {
		t.Error("a row kept to what the client sent excused a header the client did not send")
	}
	forged := Request{Header: http.Header{"X-Forwarded-Proto": {"http"}}}
	if _, _, ok := Excuse(Difference{Field: "request header X-Forwarded-Proto"}, forged, known, warnings); !ok {
		t.Error("a row kept to what the client sent did not excuse the header the client sent")
	}
	if _, _, ok := Excuse(Difference{Field: "request header X-Forwarded-Host"}, plain, known[:1], warnings); ok {
		t.Error("excused without the row's warning")
	}
	if _, _, ok := Excuse(Difference{Field: "status"}, plain, known, warnings); ok {
		t.Error("excused by a row of another section")
	}
}

// A backend answers every request with its ID, health checks too, and
// files each numbered request's line and headers, Host among them.
func TestBackendsRecord(t *testing.T) {
	b := NewBackends()
	defer b.Close()
	addr, err := b.Start("app/app1")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: Timeout}
	for _, n := range []string{"", "7"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/health?x=1", nil)
		req.Host = "site.example"
		if n != "" {
			req.Header.Set(RequestHeader, n)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(ServerHeader) != "app/app1" {
			t.Errorf("%d %q", resp.StatusCode, resp.Header.Get(ServerHeader))
		}
	}
	seen := b.Seen("7")
	if len(seen) != 1 || seen[0].Line != "GET /health?x=1 HTTP/1.1" || seen[0].Header.Get("Host") != "site.example" || seen[0].Server != "app/app1" {
		t.Errorf("seen %+v", seen)
	}
	if len(b.Seen("")) != 0 {
		t.Error("a health check was filed")
	}
}

// A crt that is not there becomes a test certificate (in a directory of
// its own for a directory), one that is stays, a bind's ca-file the test
// CA; each certificate names the requests' hosts.
func TestTestFiles(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "real.pem")
	if err := os.WriteFile(existing, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := Layout{Binds: []Bind{{Line: 1, TLS: true, Words: []string{"bind", ":443", "ssl", "crt", "/etc/none.pem", "crt", "/etc/certs/", "ca-file", "/etc/ca.pem"}},
		{Line: 2, TLS: true, Words: []string{"bind", ":8443", "ssl", "crt", existing}}}}
	dir := t.TempDir()
	files, err := TestFiles(l, dir, []string{"www.example"})
	if err != nil {
		t.Fatal(err)
	}
	if files[existing] != existing || !strings.HasSuffix(files["/etc/certs/"], "/") || files["/etc/ca.pem"] != filepath.Join(dir, "ca.pem") {
		t.Fatalf("files %v", files)
	}
	for _, pemFile := range []string{files["/etc/none.pem"], filepath.Join(files["/etc/certs/"], "site.pem")} {
		cert, err := tls.LoadX509KeyPair(pemFile, pemFile)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil || leaf.VerifyHostname("www.example") != nil || leaf.VerifyHostname("localhost") != nil {
			t.Errorf("%s: %v, names %v", pemFile, err, leaf.DNSNames)
		}
	}
}

// A 1.x line the reader takes as its 2.x replacement is given as read,
// for HAProxy 2.6, which refuses the 1.x one; other lines are not.
func TestModern(t *testing.T) {
	text := "defaults\n    mode http\n    contimeout 5000\nfrontend f\n    bind :80\n    reqadd X-Forwarded-Proto:\\ http\n    default_backend b\n"
	got := Modern([]byte(text), parse(t, text))
	want := map[int][]string{3: {"timeout", "connect", "5000"}, 6: {"http-request", "add-header", "X-Forwarded-Proto", "http"}}
	if len(got) != len(want) || !slices.Equal(got[3], want[3]) || !slices.Equal(got[6], want[6]) {
		t.Errorf("%v, want %v", got, want)
	}
}

// A header value that is the port of the bind a proxy was sent to stands
// for that port, so that dst_port compares equal across the two proxies'
// ports; another value is kept.
func TestMaskBindPort(t *testing.T) {
	o := Outcome{Seen: []Seen{{Header: http.Header{"X-Forwarded-Port": {"41000"}, "X-Other": {"41001", "x41000"}}}}}
	o.MaskBindPort("127.0.0.1:41000")
	if got := o.Seen[0].Header; got.Get("X-Forwarded-Port") != BindPort || got.Values("X-Other")[0] != "41001" || got.Values("X-Other")[1] != "x41000" {
		t.Errorf("%v", got)
	}
}

// A src ACL derives a loopback client it matches and one it does not:
// an address of one is that address, a range its first host (127.0.0.2
// or 127.0.0.1 where it holds them); the out side the first of
// outCandidates that no value holds, none where every one does.
func TestSrcDerivesBothSides(t *testing.T) {
	for v, want := range map[string]string{"127.0.0.3": "127.0.0.3", "127.0.0.0/8": "127.0.0.2", "127.0.0.1": "", "127.0.0.4/30": "127.0.0.5", "127.0.1.0/24": "127.0.1.1"} {
		if got, ok := loopbackIn(v); !ok || got != want {
			t.Errorf("loopbackIn(%s) = %q %t, want %q", v, got, ok, want)
		}
	}
	if _, ok := loopbackIn("10.0.0.0/8"); ok {
		t.Error("loopbackIn(10.0.0.0/8) found an address")
	}
	for _, tt := range []struct {
		values []string
		want   string
		ok     bool
	}{
		{[]string{"10.0.0.0/8"}, "", true},
		{[]string{"127.0.0.1", "127.0.0.2"}, "127.0.0.3", true},
		{[]string{"127.0.0.0/24"}, "127.0.1.1", true},
		{[]string{"10.0.0.0/8", "127.0.0.0/8"}, "", false},
	} {
		if got, ok := loopbackOut(tt.values); got != tt.want || ok != tt.ok {
			t.Errorf("loopbackOut(%q) = %q %t, want %q %t", tt.values, got, ok, tt.want, tt.ok)
		}
	}
}

// An http_auth ACL derives a request with the credentials of its
// userlist's account whose password is in clear, and one with another
// password; a list without one, a note.
func TestDeriveUserlistCredentials(t *testing.T) {
	cfg := parse(t, "userlist admins\n\tuser bob password $2b$05$pZ.bAYENttwDZLni28iqFuFrheiyULNpbR6plyb7iM1T9iUEpMQ1.\n\tuser alice insecure-password pw\nuserlist hashed\n\tuser carol password $6$x$y\n"+
		"defaults\n\tmode http\nfrontend f\n\tbind :80\n\tacl ok http_auth(admins)\n\tacl ok2 http_auth(hashed)\n\thttp-request auth unless ok\n\thttp-request auth unless ok2\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n")
	d := Derive(cfg)
	var sent []string
	for _, r := range d.Requests {
		if a := r.Header.Get("Authorization"); a != "" {
			sent = append(sent, a)
		}
	}
	// alice:pw and alice:pwx
	if want := []string{"Basic YWxpY2U6cHc=", "Basic YWxpY2U6cHd4"}; !slices.Equal(sent, want) {
		t.Errorf("Authorization sent %q, want %q", sent, want)
	}
	if !slices.ContainsFunc(d.Notes, func(n string) bool { return strings.Contains(n, "no user of userlist hashed has an insecure-password") }) {
		t.Errorf("no note of userlist hashed: %q", d.Notes)
	}
}
