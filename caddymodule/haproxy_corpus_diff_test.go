package caddymodule

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/haproxy"
	"github.com/caddy-ha/caddy-ha/internal/hadiff"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/tools"
)

// maxSendsPerConfig bounds the requests sent to each proxy for one
// configuration (each derived request through one plain and one TLS bind
// of each frontend, in the order derived), so that the corpus stays within
// make test's time.
const maxSendsPerConfig = 100

// Every configuration of the corpus (haproxy/testdata/corpus) that
// translates is run by HAProxy 2.6 and, adapted, by caddy-ha, side by
// side: its binds moved to loopback ports (TLS ones with test
// certificates), its servers to recording backends (internal/hadiff). The
// requests its ACLs and rules derive (hadiff.Derive) are sent to both, and
// what the client got (status, Location, the response headers the
// configuration sets) and what the server saw (which one, the request line
// and headers) are compared. A difference fails the test unless
// docs/haproxy.md's "Known differences" lists it with a warning that the
// translation gave. HAProxy runs a 1.x line the reader takes as its 2.x
// replacement (reqadd) as that 2.x line, as 2.6 refuses the 1.x one. A
// file the translation refuses is TestCorpus's; one HAProxy 2.6 refuses,
// or that the harness cannot move to loopback, is not compared, the test
// saying why.
func TestHAProxyCorpusDifferential(t *testing.T) {
	bin, ok := tools.Find(t, "haproxy", "the corpus is not compared with HAProxy")
	if !ok {
		t.SkipNow()
	}
	known := knownDifferences(t)
	files, err := filepath.Glob("../haproxy/testdata/corpus/*.cfg")
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus %q %v", files, err)
	}
	files = append(files, differentialShapes...)
	var summary []string
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			r := compareCorpusFile(t, bin, file, known, nil)
			for _, g := range r.unknown {
				t.Errorf("HAProxy and caddy-ha differ, not a known difference: %s", g)
			}
			summary = append(summary, name+": "+r.summary)
		})
	}
	t.Logf("per file:\n%s", strings.Join(summary, "\n"))
}

// The harness finds a difference where there is one: microservices.cfg
// with caddy-ha's copy routing /api/userz instead of /api/users (its
// line 15) gives the requests of that ACL another backend, and only those.
func TestHAProxyCorpusDifferentialFindsADifference(t *testing.T) {
	bin, ok := tools.Find(t, "haproxy", "the corpus is not compared with HAProxy")
	if !ok {
		t.SkipNow()
	}
	r := compareCorpusFile(t, bin, "../haproxy/testdata/corpus/microservices.cfg", nil, func(text []byte) []byte {
		return bytes.Replace(text, []byte("path_beg /api/users"), []byte("path_beg /api/userz"), 1)
	})
	var moved []string
	for _, g := range r.unknown {
		if g.d.Field == "backend" && g.d.HAProxy == "users" {
			moved = append(moved, g.d.Caddy)
			for _, req := range g.reqs {
				moved = append(moved, req[:strings.Index(req, " Host:")])
			}
		}
	}
	if want := []string{"frontend_ui", "GET /api/users", "GET /api/users/x"}; !slices.Equal(moved, want) {
		t.Errorf("requests HAProxy sent to backend users: %q through caddy-ha, want %q", moved, want)
	}
}

// corpusResult is what compareCorpusFile found: a line for the summary,
// and the differences no known one excuses.
type corpusResult struct {
	summary string
	unknown []*diffGroup
}

// diffGroup is one difference (the same field and values through the same
// frontend's bind) and the requests that showed it.
type diffGroup struct {
	bind hadiff.Bind
	d    hadiff.Difference
	reqs []string
}

func (g *diffGroup) String() string {
	shown := g.reqs[:min(3, len(g.reqs))]
	more := ""
	if len(g.reqs) > len(shown) {
		more = fmt.Sprintf("\n    and %d more", len(g.reqs)-len(shown))
	}
	return fmt.Sprintf("frontend %s (bind line %d, TLS %t): %s, for %d requests:\n    %s%s",
		g.bind.Section, g.bind.Line, g.bind.TLS, g.d, len(g.reqs), strings.Join(shown, "\n    "), more)
}

// compareCorpusFile runs one file through both proxies (caddy-ha's copy
// through editCaddy first, if given: for a test of the harness) and
// returns what it compared and found.
func compareCorpusFile(t *testing.T, bin, file string, known []hadiff.Known, editCaddy func([]byte) []byte) corpusResult {
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	skip := func(why string) corpusResult {
		t.Log("not compared: " + why)
		return corpusResult{summary: "not compared: " + why}
	}
	cfg, err := haproxy.Parse(bytes.NewReader(text), file, os.LookupEnv)
	if err != nil {
		return skip(fmt.Sprintf("refused: %v", err))
	}
	tr, err := haproxy.Translate(cfg)
	if err != nil {
		return skip(fmt.Sprintf("refused: %v", err))
	}
	layout, err := hadiff.Inspect(cfg)
	if err != nil {
		return skip(err.Error())
	}
	der := hadiff.Derive(cfg)
	for _, n := range der.Notes {
		t.Log("not derived: " + n)
	}
	backends := hadiff.NewBackends()
	t.Cleanup(backends.Close)
	servers := map[int]string{}
	for _, s := range layout.Servers {
		if servers[s.Line], err = backends.Start(s.ID()); err != nil {
			t.Fatal(err)
		}
	}
	testFiles, err := hadiff.TestFiles(layout, t.TempDir(), hadiff.Hosts(der.Requests))
	if err != nil {
		t.Fatal(err)
	}
	hapBinds, caddyBinds := map[int]string{}, map[int]string{}
	var hapAddrs []string
	for _, b := range layout.Binds {
		hapBinds[b.Line], caddyBinds[b.Line] = loopback.FreeAddr(), loopback.FreeAddr()
		hapAddrs = append(hapAddrs, hapBinds[b.Line])
	}
	nameserver := serveResolved(t, layout, servers)
	hapText, err := hadiff.Rewrite(text, layout, hadiff.Addresses{Bind: hapBinds, Server: servers, File: testFiles, Lines: hadiff.Modern(text, cfg), Nameserver: nameserver})
	if err != nil {
		t.Fatal(err)
	}
	caddyText, err := hadiff.Rewrite(text, layout, hadiff.Addresses{Bind: caddyBinds, Server: servers, File: testFiles, Nameserver: nameserver})
	if err != nil {
		t.Fatal(err)
	}
	checked := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(checked, hapText, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", checked).CombinedOutput(); err != nil {
		return skip(fmt.Sprintf("HAProxy 2.6 refuses it (%v): %s", err, firstAlert(out)))
	}
	startHAProxy(t, string(hapText), hapAddrs...)
	if editCaddy != nil {
		caddyText = editCaddy(caddyText)
	}
	runHAProxyConfigWarned(t, string(caddyText))

	// One plain and one TLS bind of each frontend, in the file's order.
	type target struct {
		bind         hadiff.Bind
		hap, caddyha hadiff.Target
	}
	var targets []target
	for _, b := range layout.Binds {
		if !slices.ContainsFunc(targets, func(x target) bool { return x.bind.Section == b.Section && x.bind.TLS == b.TLS }) {
			targets = append(targets, target{b, hadiff.Target{Addr: hapBinds[b.Line], TLS: b.TLS}, hadiff.Target{Addr: caddyBinds[b.Line], TLS: b.TLS}})
		}
	}
	if nameserver != "" {
		for _, tg := range targets {
			waitResolved(t, tg.hap)
		}
	}
	var unknown []*diffGroup
	byWhat := map[string]*diffGroup{}
	sends, differences, excused, unanswered := 0, 0, 0, 0
sending:
	for i, req := range der.Requests {
		for _, tg := range targets {
			if sends == maxSendsPerConfig {
				t.Logf("%d derived requests not sent: %d sends is the cap", len(der.Requests)-i, maxSendsPerConfig)
				break sending
			}
			sends++
			n := fmt.Sprintf("%s-%d", filepath.Base(file), sends)
			hap := hadiff.Send(tg.hap, req, n+"-haproxy", der.ResponseHeaders)
			hap.Seen = backends.Seen(n + "-haproxy")
			ch := hadiff.Send(tg.caddyha, req, n+"-caddy-ha", der.ResponseHeaders)
			ch.Seen = backends.Seen(n + "-caddy-ha")
			hap.MaskBindPort(tg.hap.Addr)
			ch.MaskBindPort(tg.caddyha.Addr)
			if hap.Err != "" && ch.Err != "" {
				unanswered++ // a connection both closed (a tcp-request connection reject): compared, alike
			}
			for _, d := range hadiff.Compare(hap, ch, layout.Balanced) {
				differences++
				sent := fmt.Sprintf("%s (derived from: %s)", req, strings.Join(req.Why, "; "))
				// The file's own warnings: the rewrite keeps every line's number.
				if k, w, ok := hadiff.Excuse(d, req, known, tr.Warnings); ok {
					excused++
					t.Logf("known difference: frontend %s (bind line %d): %s, for %s: %s; warning at line %d: %s", tg.bind.Section, tg.bind.Line, d, sent, k.Why, w.Pos.Line, w.Msg)
					continue
				}
				what := fmt.Sprintf("%d\n%s", tg.bind.Line, d)
				if byWhat[what] == nil {
					byWhat[what] = &diffGroup{bind: tg.bind, d: d}
					unknown = append(unknown, byWhat[what])
				}
				byWhat[what].reqs = append(byWhat[what].reqs, sent)
			}
		}
	}
	return corpusResult{
		summary: fmt.Sprintf("%d requests derived, %d sent to each proxy (%d answered by neither), %d differences (%d known), %d unknown kinds", len(der.Requests), sends, unanswered, differences, excused, len(unknown)),
		unknown: unknown,
	}
}

// serveResolved starts the harness's DNS server for a configuration with
// servers resolved at run time, answering their names with their
// backends' addresses, and returns its address ("": none resolved).
func serveResolved(t *testing.T, layout hadiff.Layout, servers map[int]string) string {
	if !slices.ContainsFunc(layout.Servers, func(s hadiff.Server) bool { return s.Resolved != "" }) {
		return ""
	}
	d, err := hadiff.StartDNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := layout.Serve(d, servers); err != nil {
		t.Fatal(err)
	}
	return d.Addr
}

// waitResolved waits for HAProxy to have resolved its servers' names:
// until then (init-addr none) it answers 503, where dynamic checked
// resolves them before caddy-ha serves.
func waitResolved(t *testing.T, hap hadiff.Target) {
	poll.Until(t, 15*time.Second, "HAProxy at "+hap.Addr+" to answer / otherwise than 503 (its servers resolved)", func() bool {
		o := hadiff.Send(hap, hadiff.Request{Method: http.MethodGet, Host: "localhost", Target: "/"}, "", nil)
		return o.Err == "" && o.Status != http.StatusServiceUnavailable
	})
}

// firstAlert is the first line of HAProxy's output that says why it
// refused a configuration.
func firstAlert(out []byte) string {
	for l := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(l, "[ALERT]") {
			return l
		}
	}
	return string(out)
}

// differentialShapes are the adapter's golden configurations of shapes
// the corpus has few of, compared as the corpus is.
var differentialShapes = []string{"../haproxy/testdata/acl-methods.cfg", "../haproxy/testdata/variables.cfg", "../haproxy/testdata/resolvers.cfg", "../haproxy/testdata/connection-reject.cfg", "../haproxy/testdata/replace-header.cfg",
	"../haproxy/testdata/backend-auth.cfg", "../haproxy/testdata/bind-tls-options.cfg", "../haproxy/testdata/stats-backend.cfg", "../haproxy/testdata/tls-samples.cfg",
	"../haproxy/testdata/cache.cfg", "../haproxy/testdata/stick.cfg", "../haproxy/testdata/cookie-prefix.cfg",
	"../haproxy/testdata/server-disabled.cfg", "../haproxy/testdata/path-rewrite.cfg", "../haproxy/testdata/redirect-options.cfg"}

// knownDifferences are docs/haproxy.md's known differences.
func knownDifferences(t *testing.T) []hadiff.Known {
	t.Helper()
	doc, err := os.ReadFile("../docs/haproxy.md")
	if err != nil {
		t.Fatal(err)
	}
	known, err := hadiff.ParseKnown(doc)
	if err != nil {
		t.Fatal(err)
	}
	return known
}

// ACLs of -f pattern files (a path list, an address block list), their
// files written here: HAProxy 2.6 and caddy-ha, which read them when the
// configuration is read, route and deny the requests derived from the
// files' patterns alike.
func TestHAProxyDifferentialPatternFiles(t *testing.T) {
	bin, ok := tools.Find(t, "haproxy", "pattern files are not compared with HAProxy")
	if !ok {
		t.SkipNow()
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	paths := write("api.lst", "# the API's prefixes\n/api/\n  /v2/\r\n\n")
	blocked := write("blocked.lst", "127.0.0.2\n")
	cfg := write("patterns.cfg", "defaults\n    mode http\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n\n"+
		"frontend web\n    bind 127.0.0.1:8080\n    acl blocked src -f "+blocked+"\n    acl api path_beg -f "+paths+"\n"+
		"    http-request deny if blocked\n    use_backend api if api\n    default_backend app\n\n"+
		"backend api\n    server api1 127.0.0.1:9001\n\nbackend app\n    server app1 127.0.0.1:9002\n")
	r := compareCorpusFile(t, bin, cfg, knownDifferences(t), nil)
	for _, g := range r.unknown {
		t.Errorf("HAProxy and caddy-ha differ, not a known difference: %s", g)
	}
	t.Log(r.summary)
}
