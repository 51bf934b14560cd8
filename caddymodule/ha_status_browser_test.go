//go:build unix

package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/healthcheck"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/tools"
	"github.com/caddy-ha/caddy-ha/status"
)

// screenshotEnv names a PNG file that TestStatusPageInChromium also writes
// a screenshot of the page to (a path relative to this package's
// directory), for docs/operations.md:
//
//	CADDY_HA_SCREENSHOT=$PWD/docs/status-page.png go test -run TestStatusPageInChromium ./caddymodule
const screenshotEnv = "CADDY_HA_SCREENSHOT"

// browserTimeout bounds one run of Chromium.
const browserTimeout = 60 * time.Second

// statusScene is Caddy with ha_status on /status in front of two leader
// pools, one steady and one between leaders, and a rate-limit zone.
type statusScene struct {
	tc *testCaddy
	// steady: leader and follower; failing: its leader killed, its lease
	// not yet run out, so nobody leads.
	steady, failing                  *fakecluster.Cluster
	steadyPool, failingPool          string
	leader, follower, killed, waiter string // node addresses
	zone                             string
	allowed, limited                 float64 // the zone's counts the page must show
	killedAt                         time.Time
	killedEpoch                      int64 // the failing pool's lease, which no node may take over while the test looks
}

// failingLease is the lease TTL of the pool whose leader is killed: the
// time the test has to look at it before its follower takes over.
const failingLease = 60 * time.Second

// The page as a person opens it in a browser (headless Chromium, no
// script): the steady pool's leader and follower, the other pool's
// failover in progress with its killed node down, the zone's counts, a
// self-refresh, and nothing fetched from elsewhere. Its JSON forms carry
// the same view.
func TestStatusPageInChromium(t *testing.T) {
	browser := chromiumOrSkip(t)
	s := startStatusScene(t)

	dom := runChromium(t, browser, "--dump-dom", s.tc.url("/status"))
	if s.failing.State().Epoch != s.killedEpoch || time.Since(s.killedAt) > failingLease-5*time.Second {
		t.Fatalf("the failing pool's lease ran out while the test looked (%v after the kill): raise failingLease", time.Since(s.killedAt))
	}
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatalf("parsing Chromium's DOM: %v", err)
	}
	if len(domFind(doc, domClass("pool"))) == 0 {
		t.Fatalf("Chromium's DOM has no leader pool:\n%s", dom)
	}
	checkStatusDOM(t, doc, s)

	for _, req := range []struct {
		name, url, accept string
	}{
		{"?format=json", s.tc.url("/status?format=json"), ""},
		{"Accept: application/json", s.tc.url("/status"), "application/json"},
	} {
		var v status.View
		ctype := getStatusPage(t, req.url, req.accept, &v)
		if !strings.HasPrefix(ctype, "application/json") {
			t.Errorf("%s: Content-Type %q", req.name, ctype)
		}
		checkStatusJSON(t, req.name, v, s)
	}
	// A browser's own Accept gets the page.
	if ctype := getStatusPage(t, s.tc.url("/status"), "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", nil); !strings.HasPrefix(ctype, "text/html") {
		t.Errorf("a browser's Accept: Content-Type %q, want the page", ctype)
	}

	if path := os.Getenv(screenshotEnv); path != "" {
		path, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		runChromium(t, browser, "--hide-scrollbars", "--window-size=1100,1260", "--screenshot="+path, s.tc.url("/status"))
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("no screenshot: %v", err)
		}
		t.Logf("screenshot %s: %d bytes", path, fi.Size())
	}
}

// chromiumOrSkip returns Chromium's path; without it the test is skipped,
// or fails where the tools are required (see tools.Find).
func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	path, ok := tools.Find(t, "chromium", "the status page is not checked in a browser (Debian: apt-get install chromium)")
	if !ok {
		t.SkipNow()
	}
	return path
}

// runChromium runs headless Chromium with a profile of its own and returns
// its standard output; it kills Chromium and every process it started if
// it takes longer than browserTimeout.
func runChromium(t *testing.T, browser string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, browser, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		// Renderers and helpers outlive a browser that exited, at times,
		// and would write in its profile as t.TempDir removes it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("chromium %s: no answer within %v, killed; its stderr ends:\n%s", strings.Join(args, " "), browserTimeout, stderrTail(stderr.String(), 20))
	case err != nil:
		t.Fatalf("chromium %s: %v; its stderr ends:\n%s", strings.Join(args, " "), err, stderrTail(stderr.String(), 20))
	}
	t.Logf("chromium %s: %v", args[len(args)-2], time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

func stderrTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// startStatusScene starts the two clusters and Caddy, sends the zone's
// requests, kills the failing pool's leader and waits until Caddy's view
// (the admin API's /ha/status) shows all of it.
func startStatusScene(t *testing.T) *statusScene {
	t.Helper()
	s := &statusScene{zone: "signin"}
	s.steady = newCluster(t, 2, failingLease, time.Second)
	s.failing = newCluster(t, 2, failingLease, time.Second)
	if poolName(s.failing) < poolName(s.steady) {
		// The page lists pools by name: the steady one first, as a reader
		// of the screenshot expects.
		s.steady, s.failing = s.failing, s.steady
	}
	s.steadyPool, s.failingPool = poolName(s.steady), poolName(s.failing)
	st := s.failing.State()
	for _, n := range s.failing.Nodes() {
		if n.ID() == st.Leader {
			s.killed = n.Addr()
		} else {
			s.waiter = n.Addr()
		}
	}
	site := `handle /status {
		ha_status {
			refresh 5s
		}
	}
	handle /signin {
		edge_rate_limit {
			zone signin {
				key {http.request.remote.host}
				events 3
				window 1h
			}
		}
		respond "signed in"
	}
	handle /b/* {
		reverse_proxy ` + strings.ReplaceAll(s.failingPool, ",", " ") + ` {
			lb_policy leader {
				interval 200ms
				fast_interval 20ms
				hold 30s
			}
		}
	}
	handle {
		reverse_proxy {upstreams} {
			lb_policy leader {
				interval 200ms
				fast_interval 20ms
				hold 1s
			}
		}
	}`
	s.tc = startCaddy(t, s.steady, "", site)

	// Both pools with their leader and follower, as Caddy sees them.
	steadyState := s.steady.State()
	for _, n := range s.steady.Nodes() {
		if n.ID() == steadyState.Leader {
			s.leader = n.Addr()
		} else {
			s.follower = n.Addr()
		}
	}
	poll.Until(t, 10*time.Second, "Caddy to see both pools' leader and follower", func() bool {
		v := adminStatusView(t, s.tc)
		p, q := viewPool(v, s.steadyPool), viewPool(v, s.failingPool)
		return p != nil && q != nil && p.Leader == s.leader && q.Leader == s.killed &&
			viewNode(*p, s.follower).Status == healthcheck.StatusFollower && viewNode(*q, s.waiter).Status == healthcheck.StatusFollower
	})

	// The zone: 3 allowed, then 2 limited, all in one window.
	awayFromWindowEnd(t, time.Hour, 10*time.Second)
	var before status.RateLimitZone
	if z := viewZone(adminStatusView(t, s.tc), s.zone); z != nil {
		before = *z // a zone's counts are the process's (go test -count=N)
	}
	for i, want := range []int{200, 200, 200, 429, 429} {
		if ans := send(t, "POST", s.tc.url("/signin")); ans.status != want {
			t.Fatalf("sign-in %d: status %d, want %d", i+1, ans.status, want)
		}
	}
	s.allowed, s.limited = before.Allowed+3, before.Limited+2

	// The failing pool's leader crashes; its lease holds for failingLease,
	// so its follower cannot take over while the test looks.
	s.killedAt, s.killedEpoch = time.Now(), st.Epoch
	s.failing.Node(st.Leader).Kill(fakecluster.KillRefuse)
	poll.Until(t, 10*time.Second, "Caddy to see the failing pool without a leader and its leader down", func() bool {
		q := viewPool(adminStatusView(t, s.tc), s.failingPool)
		killed := viewNode(*q, s.killed)
		return q.Leader == "" && killed.Status == healthcheck.StatusDown && killed.LastError != ""
	})
	return s
}

func adminStatusView(t testing.TB, tc *testCaddy) status.View {
	t.Helper()
	var v status.View
	if err := json.Unmarshal([]byte(tc.adminGet("/ha/status")), &v); err != nil {
		t.Fatalf("/ha/status: %v", err)
	}
	return v
}

func viewPool(v status.View, pool string) *status.LeaderPool {
	for i := range v.LeaderPools {
		if v.LeaderPools[i].Pool == pool {
			return &v.LeaderPools[i]
		}
	}
	return nil
}

func viewNode(p status.LeaderPool, addr string) healthcheck.NodeView {
	for _, n := range p.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return healthcheck.NodeView{}
}

func viewZone(v status.View, zone string) *status.RateLimitZone {
	for i := range v.RateLimitZones {
		if v.RateLimitZones[i].Zone == zone {
			return &v.RateLimitZones[i]
		}
	}
	return nil
}

// getStatusPage GETs url with the given Accept, decodes the body into v unless
// nil, and returns the Content-Type.
func getStatusPage(t *testing.T, url, accept string, v any) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := rlClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s (Accept %q): status %d: %s", url, accept, resp.StatusCode, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s (Accept %q): not a status view: %v\n%s", url, accept, err, body)
		}
	}
	return resp.Header.Get("Content-Type")
}

// checkStatusDOM checks what a person sees on the page.
func checkStatusDOM(t *testing.T, doc *html.Node, s *statusScene) {
	t.Helper()
	for _, id := range []string{"leader-pools", "rate-limit-zones", "stores", "upload-affinity", "cloudflare-ranges"} {
		if len(domFind(doc, domAttrIs("id", id))) != 1 {
			t.Errorf("no section #%s", id)
		}
	}
	if len(domFind(doc, domAttrIs("id", "pinned-connections"))) != 0 {
		t.Errorf("a Pinned connections section, with no transport pinned in use")
	}

	// The steady pool: its leader, named in the summary, and its follower.
	pool := domOne(t, doc, "the steady pool", domAttrIs("data-pool", s.steadyPool))
	summary := domOne(t, pool, "the steady pool's summary", domClass("summary"))
	leader := domOne(t, summary, "the steady pool's leader", domHasAttr("data-leader"))
	if got := domAttr(leader, "data-leader"); got != s.leader {
		t.Errorf("steady pool: data-leader %q, want %s", got, s.leader)
	}
	if txt := domText(summary); !strings.Contains(txt, "Leader: "+s.leader) {
		t.Errorf("steady pool's summary does not name its leader %s: %q", s.leader, txt)
	}
	checkNodeRow(t, pool, "steady pool", s.leader, "leader")
	checkNodeRow(t, pool, "steady pool", s.follower, "follower")

	// The failing pool: a failover in progress, nobody leading, its killed
	// leader down with the probe's error.
	pool = domOne(t, doc, "the failing pool", domAttrIs("data-pool", s.failingPool))
	summary = domOne(t, pool, "the failing pool's summary", domClass("summary"))
	leader = domOne(t, summary, "the failing pool's leader span", domHasAttr("data-leader"))
	if got := domAttr(leader, "data-leader"); got != "" {
		t.Errorf("failing pool: data-leader %q, want none", got)
	}
	if txt := domText(leader); txt != "Failover in progress" {
		t.Errorf("failing pool's summary says %q, want Failover in progress", txt)
	}
	if txt := domText(summary); strings.Contains(txt, "Leader: ") {
		t.Errorf("failing pool's summary names a leader: %q", txt)
	}
	cells := checkNodeRow(t, pool, "failing pool", s.killed, "down")
	if len(cells) == 7 && strings.TrimSpace(domText(cells[6])) == "" {
		t.Errorf("failing pool: the killed node %s shows no last error", s.killed)
	}
	checkNodeRow(t, pool, "failing pool", s.waiter, "follower")
	if len(domFind(pool, domClass("change"))) == 0 {
		t.Errorf("failing pool: no changes of leader listed")
	}

	// The zone's counts.
	row := domOne(t, doc, "the zone's row", domAttrIs("data-zone", s.zone))
	cells = domFind(row, domTag("td"))
	if len(cells) != 9 {
		t.Fatalf("zone row has %d cells, want 9: %q", len(cells), domText(row))
	}
	if got, want := domText(cells[4]), shownCount(s.allowed); got != want {
		t.Errorf("zone %s: allowed %q, want %s", s.zone, got, want)
	}
	if got, want := domText(cells[5]), shownCount(s.limited); got != want {
		t.Errorf("zone %s: limited %q, want %s", s.zone, got, want)
	}
	if got := domText(cells[1]); !strings.HasPrefix(got, "3 per ") {
		t.Errorf("zone %s: limit %q", s.zone, got)
	}
	for _, st := range domFind(doc, domClass("store")) {
		if domAttr(st, "data-up") != "true" {
			t.Errorf("store %s: data-up %q", domAttr(st, "data-store"), domAttr(st, "data-up"))
		}
	}

	// It refreshes itself, with no script and nothing from elsewhere.
	refresh := domFind(doc, func(n *html.Node) bool {
		return domTag("meta")(n) && strings.EqualFold(domAttr(n, "http-equiv"), "refresh")
	})
	if len(refresh) != 1 || domAttr(refresh[0], "content") != "5" {
		t.Errorf("meta refresh: %d elements, content %q; want one, 5", len(refresh), domFirstAttr(refresh, "content"))
	}
	if n := len(domFind(doc, domTag("script"))); n != 0 {
		t.Errorf("%d script elements", n)
	}
	for _, n := range domFind(doc, func(*html.Node) bool { return true }) {
		for _, a := range n.Attr {
			switch strings.ToLower(a.Key) {
			case "src", "href", "srcset", "action", "data", "poster":
				v := strings.ToLower(strings.TrimSpace(a.Val))
				if strings.HasPrefix(v, "http:") || strings.HasPrefix(v, "https:") || strings.HasPrefix(v, "//") {
					t.Errorf("<%s %s=%q>: an external asset", n.Data, a.Key, a.Val)
				}
			}
		}
		if domTag("style")(n) || domAttr(n, "style") != "" {
			css := strings.ToLower(domText(n) + domAttr(n, "style"))
			if strings.Contains(css, "@import") || strings.Contains(css, "url(") {
				t.Errorf("<%s>: CSS fetches from elsewhere: %q", n.Data, css)
			}
		}
	}
}

// checkNodeRow checks that the pool's row of addr shows status, and
// returns its cells.
func checkNodeRow(t *testing.T, pool *html.Node, name, addr, want string) []*html.Node {
	t.Helper()
	row := domOne(t, pool, name+" node "+addr, func(n *html.Node) bool {
		return domClass("node")(n) && domAttr(n, "data-node") == addr
	})
	if got := domAttr(row, "data-status"); got != want {
		t.Errorf("%s: node %s data-status %q, want %s", name, addr, got, want)
	}
	cells := domFind(row, domTag("td"))
	if len(cells) != 7 {
		t.Errorf("%s: node %s has %d cells, want 7: %q", name, addr, len(cells), domText(row))
		return cells
	}
	if got := domText(cells[0]); got != addr {
		t.Errorf("%s: node cell %q, want %s", name, got, addr)
	}
	if got := domText(cells[1]); !strings.HasPrefix(got, want) {
		t.Errorf("%s: node %s shows state %q, want %s", name, addr, got, want)
	}
	return cells
}

// checkStatusJSON checks the page's JSON form against the scene.
func checkStatusJSON(t *testing.T, name string, v status.View, s *statusScene) {
	t.Helper()
	p, q := viewPool(v, s.steadyPool), viewPool(v, s.failingPool)
	if p == nil || q == nil {
		t.Errorf("%s: pools %+v, want %s and %s", name, v.LeaderPools, s.steadyPool, s.failingPool)
		return
	}
	if p.Leader != s.leader || viewNode(*p, s.leader).Status != healthcheck.StatusLeader || viewNode(*p, s.follower).Status != healthcheck.StatusFollower {
		t.Errorf("%s: steady pool %+v, want leader %s", name, *p, s.leader)
	}
	if q.Leader != "" || !q.InProgress(v.GeneratedAt) || viewNode(*q, s.killed).Status != healthcheck.StatusDown {
		t.Errorf("%s: failing pool %+v, want a failover in progress, %s down", name, *q, s.killed)
	}
	if z := viewZone(v, s.zone); z == nil || z.Allowed != s.allowed || z.Limited != s.limited {
		t.Errorf("%s: zone %+v, want allowed %v, limited %v", name, z, s.allowed, s.limited)
	}
	if v.GeneratedAt.IsZero() {
		t.Errorf("%s: no generated_at", name)
	}
}

// DOM helpers.

func domTag(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == tag }
}

func domClass(class string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		return n.Type == html.ElementNode && slices.Contains(strings.Fields(domAttr(n, "class")), class)
	}
}

func domAttrIs(key, val string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		v, ok := domAttrOK(n, key)
		return ok && v == val
	}
}

func domHasAttr(key string) func(*html.Node) bool {
	return func(n *html.Node) bool { _, ok := domAttrOK(n, key); return ok }
}

func domAttrOK(n *html.Node, key string) (string, bool) {
	if n.Type != html.ElementNode {
		return "", false
	}
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func domAttr(n *html.Node, key string) string { v, _ := domAttrOK(n, key); return v }

func domFirstAttr(ns []*html.Node, key string) string {
	if len(ns) == 0 {
		return ""
	}
	return domAttr(ns[0], key)
}

// domFind returns the elements under root (root included) that match, in
// document order.
func domFind(root *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

func domOne(t *testing.T, root *html.Node, what string, match func(*html.Node) bool) *html.Node {
	t.Helper()
	found := domFind(root, match)
	if len(found) != 1 {
		t.Fatalf("%d elements for %s, want one: %q", len(found), what, domText(root))
	}
	return found[0]
}

// text is the node's text as shown: its text nodes, blanks collapsed.
func domText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// number is a count as the page shows it.
func shownCount(f float64) string { return fmt.Sprint(f) }
