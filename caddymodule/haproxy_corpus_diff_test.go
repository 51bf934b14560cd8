package caddymodule

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-ha/caddy-ha/haproxy"
	"github.com/caddy-ha/caddy-ha/internal/hadiff"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
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
	doc, err := os.ReadFile("../docs/haproxy.md")
	if err != nil {
		t.Fatal(err)
	}
	known, err := hadiff.ParseKnown(doc)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../haproxy/testdata/corpus/*.cfg")
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus %q %v", files, err)
	}
	var summary []string
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			line := compareCorpusFile(t, bin, file, known)
			summary = append(summary, name+": "+line)
		})
	}
	t.Logf("per file:\n%s", strings.Join(summary, "\n"))
}

// compareCorpusFile runs one file through both proxies and returns what
// it compared, for the summary.
func compareCorpusFile(t *testing.T, bin, file string, known []hadiff.Known) (summary string) {
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	skip := func(why string) string {
		t.Log("not compared: " + why)
		return "not compared: " + why
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
	hapText, err := hadiff.Rewrite(text, layout, hadiff.Addresses{Bind: hapBinds, Server: servers, File: testFiles, Lines: hadiff.Modern(text, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	caddyText, err := hadiff.Rewrite(text, layout, hadiff.Addresses{Bind: caddyBinds, Server: servers, File: testFiles})
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
	// Differences alike (the frontend, field and both values) are one,
	// with the requests that showed it.
	type group struct {
		what string
		reqs []string
	}
	var unknown []*group
	byWhat := map[string]*group{}
	sends, differences, excused := 0, 0, 0
	for i, req := range der.Requests {
		for _, tg := range targets {
			if sends == maxSendsPerConfig {
				t.Logf("%d derived requests not sent: %d sends is the cap", len(der.Requests)-i, maxSendsPerConfig)
				goto done
			}
			sends++
			n := fmt.Sprintf("%s-%d", filepath.Base(file), sends)
			hap := hadiff.Send(tg.hap, req, n+"-haproxy", der.ResponseHeaders)
			hap.Seen = backends.Seen(n + "-haproxy")
			ch := hadiff.Send(tg.caddyha, req, n+"-caddy-ha", der.ResponseHeaders)
			ch.Seen = backends.Seen(n + "-caddy-ha")
			for _, d := range hadiff.Compare(hap, ch, layout.Balanced) {
				differences++
				what := fmt.Sprintf("frontend %s (bind line %d, TLS %t): %s", tg.bind.Section, tg.bind.Line, tg.bind.TLS, d)
				sent := fmt.Sprintf("%s (derived from: %s)", req, strings.Join(req.Why, "; "))
				if k, w, ok := hadiff.Excuse(d, known, tr.Warnings); ok {
					excused++
					t.Logf("known difference: %s, for %s: %s; warning at line %d: %s", what, sent, k.Why, w.Pos.Line, w.Msg)
					continue
				}
				if byWhat[what] == nil {
					byWhat[what] = &group{what: what}
					unknown = append(unknown, byWhat[what])
				}
				byWhat[what].reqs = append(byWhat[what].reqs, sent)
			}
		}
	}
done:
	for _, g := range unknown {
		shown := g.reqs[:min(3, len(g.reqs))]
		more := ""
		if len(g.reqs) > len(shown) {
			more = fmt.Sprintf("\n    and %d more", len(g.reqs)-len(shown))
		}
		t.Errorf("HAProxy and caddy-ha differ, not a known difference: %s, for %d requests:\n    %s%s", g.what, len(g.reqs), strings.Join(shown, "\n    "), more)
	}
	return fmt.Sprintf("%d requests derived, %d sent to each proxy, %d differences (%d known), %d unknown kinds", len(der.Requests), sends, differences, excused, len(unknown))
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
