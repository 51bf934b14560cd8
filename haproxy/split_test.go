package haproxy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-ha/caddy-ha/internal/tools"
)

// mixedConfig puts mode tcp proxies beside mode http ones, with each
// kind of defaults: named ones taken with from by one side, anonymous
// ones both sides take, and ones no proxy takes.
const mixedConfig = `global
    daemon
    maxconn 100
resolvers dns
    nameserver ns1 127.0.0.1:53
defaults web
    mode http
    timeout connect 5s
    timeout client 1m
    timeout server 1m
defaults db
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
frontend www from web
    bind 127.0.0.1:8080
    default_backend app
backend app from web
    server a 127.0.0.1:9080
listen pg from db
    bind 127.0.0.1:5432
    server p "127.0.0.1:5433" check
defaults
    timeout connect 5s
    timeout client "${CLIENT_TIMEOUT}"
    timeout server 1m
frontend redis
    bind 127.0.0.1:6379
    default_backend redis_nodes
backend redis_nodes
    server r 127.0.0.1:6380 check inter 2s
frontend api
    bind 127.0.0.1:8081
    mode http
    http-request set-header X-Api yes\ please
    default_backend app2
backend app2
    mode http
    server b 127.0.0.1:9081
defaults unused
    mode http
`

// sectionNames names each section of cfg as "kind name".
func sectionNames(cfg *Config) []string {
	var names []string
	for _, s := range cfg.Sections {
		names = append(names, strings.TrimSpace(s.Kind+" "+s.Name))
	}
	return names
}

// SplitTCP gives each side its proxies (a proxy's mode its own, else its
// defaults', else tcp), the defaults they take (both sides' in both),
// and the global and other sections to both; the TCP part's text, as
// written with each position in a comment, reads back as the same lines
// and HAProxy accepts it, as it does the HTTP part's.
func TestSplitTCP(t *testing.T) {
	getenv := func(name string) (string, bool) {
		return map[string]string{"CLIENT_TIMEOUT": "30s"}[name], name == "CLIENT_TIMEOUT"
	}
	cfg, err := Parse(strings.NewReader(mixedConfig), "mixed.cfg", getenv)
	if err != nil {
		t.Fatal(err)
	}
	sp := cfg.SplitTCP()
	wantHTTP := []string{"global", "resolvers dns", "defaults web", "frontend www", "backend app", "defaults", "frontend api", "backend app2", "defaults unused"}
	wantTCP := []string{"global", "resolvers dns", "defaults db", "listen pg", "defaults", "frontend redis", "backend redis_nodes"}
	if got := sectionNames(sp.HTTP); !slices.Equal(got, wantHTTP) {
		t.Errorf("HTTP part %q, want %q", got, wantHTTP)
	}
	if got := sectionNames(sp.TCP); !slices.Equal(got, wantTCP) {
		t.Errorf("TCP part %q, want %q", got, wantTCP)
	}
	if want := []string{"listen pg", "frontend redis", "backend redis_nodes"}; !slices.Equal(sp.TCPProxies, want) {
		t.Errorf("TCPProxies %q, want %q", sp.TCPProxies, want)
	}
	if want := []string{"frontend www", "backend app", "frontend api", "backend app2"}; !slices.Equal(sp.HTTPProxies, want) {
		t.Errorf("HTTPProxies %q, want %q", sp.HTTPProxies, want)
	}
	for _, part := range []*Config{sp.HTTP, sp.TCP} {
		checkTakesItsDefaults(t, part, cfg)
	}

	text := sp.TCP.HAProxyText("# the TCP part\n")
	for _, want := range []string{"# the TCP part\n", "\nlisten pg from db  # mixed.cfg:21\n", "    server p \"127.0.0.1:5433\" check  # mixed.cfg:23\n", "    timeout client \"${CLIENT_TIMEOUT}\"  # mixed.cfg:26\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the TCP part's text lacks %q:\n%s", want, text)
		}
	}
	checkReadsBack(t, text, sp.TCP, getenv)
	haproxyAccepts(t, map[string]string{"mixed.cfg": mixedConfig, "tcp.cfg": text, "http.cfg": sp.HTTP.HAProxyText("")}, "CLIENT_TIMEOUT=30s")
}

// checkTakesItsDefaults checks that each proxy of part takes the defaults
// it takes in the whole configuration.
func checkTakesItsDefaults(t *testing.T, part, whole *Config) {
	for _, s := range part.Sections {
		if (s.Kind == "frontend" || s.Kind == "backend") && part.DefaultsOf(s) != whole.DefaultsOf(s) {
			t.Errorf("%s %s takes other defaults in its part", s.Kind, s.Name)
		}
	}
}

// checkReadsBack checks that part's text parses back to part's sections
// and lines.
func checkReadsBack(t *testing.T, text string, part *Config, getenv func(string) (string, bool)) {
	back, err := Parse(strings.NewReader(text), "residual.cfg", getenv)
	if err != nil {
		t.Fatalf("the part's text does not parse: %v\n%s", err, text)
	}
	if len(back.Sections) != len(part.Sections) {
		t.Fatalf("the part's text has %d sections, want %d", len(back.Sections), len(part.Sections))
	}
	for i, s := range back.Sections {
		orig := part.Sections[i]
		if !slices.Equal(s.line().Words, orig.line().Words) || len(s.Lines) != len(orig.Lines) {
			t.Fatalf("section %d reads back as %q with %d lines, want %q with %d", i, s.line().Words, len(s.Lines), orig.line().Words, len(orig.Lines))
		}
		for j, l := range s.Lines {
			if !slices.Equal(l.Words, orig.Lines[j].Words) {
				t.Errorf("%s reads back as %q, want %q", orig.Lines[j].Pos, l.Words, orig.Lines[j].Words)
			}
		}
	}
}

// haproxyAccepts checks each configuration with haproxy -c (skipped
// without haproxy, but where tools are required).
func haproxyAccepts(t *testing.T, cfgs map[string]string, env ...string) {
	t.Helper()
	bin, ok := tools.Find(t, "haproxy", "the split parts are not checked with haproxy -c")
	if !ok {
		return
	}
	dir := t.TempDir()
	for name, text := range cfgs {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", "-f", file)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("haproxy -c refuses %s: %v\n%s\n%s", name, err, out, text)
		}
	}
}

// splitTranslates are the mixed corpus files whose HTTP part translates
// (docs/haproxy.md's Corpus section names them).
var splitTranslates = map[string]bool{"ansible-galera-web.cfg": true, "compose-wordpress-mysql.cfg": true, "gitea-ssh-mixed.cfg": true, "k8s-lb-apiserver-ingress.cfg": true, "patroni-postgres-stats.cfg": true}

// SplitTCP sorts the corpus's proxies as verdicts.sh does (VERDICTS.tsv's
// class: http-only, tcp or mixed), HAProxy accepts the TCP part of each
// mixed or tcp configuration it accepts, and the HTTP part of the mixed
// files splitTranslates names translates.
func TestSplitTCPCorpus(t *testing.T) {
	_, verdicts := readCorpusVerdicts(t)
	residuals := map[string]string{}
	for name, v := range verdicts {
		cfg, err := ParseFile(filepath.Join("testdata/corpus", name))
		if err != nil {
			continue
		}
		sp := cfg.SplitTCP()
		class := "mixed"
		switch {
		case len(sp.TCPProxies) == 0:
			class = "http-only"
		case len(sp.HTTPProxies) == 0:
			class = "tcp"
		}
		if class != v.class {
			t.Errorf("%s: SplitTCP makes it %s (tcp: %q), VERDICTS.tsv says %s", name, class, sp.TCPProxies, v.class)
		}
		if class != "http-only" && v.status == 0 {
			residuals[name] = sp.TCP.HAProxyText("")
		}
		if _, err := Translate(sp.HTTP); splitTranslates[name] && err != nil {
			t.Errorf("%s: the HTTP part is refused: %v", name, err)
		}
	}
	if len(residuals) < 8 {
		t.Fatalf("%d mixed or tcp configurations HAProxy accepts: want the corpus's", len(residuals))
	}
	haproxyAccepts(t, residuals)
}
