// Package demo holds `make demo`: run.sh starts the fake cluster, the
// upload servers and the custom Caddy with the Caddyfile here, and prints
// the scenarios to try, each one a ./demo/try command. Its test runs the
// demo as a newcomer does and checks that every printed command does what
// its text says.
package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/tools"
)

// Bounds that hold on a loaded 2-core machine: the demo's own settings
// (demo/Caddyfile, run.sh) plus slack for a slow scheduler.
const (
	hold                  = 10 * time.Second // lb_policy leader's hold
	responseHeaderTimeout = 3 * time.Second  // transport pinned's response_header_timeout
	crashFailover         = 6 * time.Second  // lease TTL 5s + a renew tick of 1s
	slack                 = 2500 * time.Millisecond
	scenarioTimeout       = 90 * time.Second
)

// TestDemo builds bin/caddy and bin/fakecluster as make demo does (into a
// temporary directory), starts ./demo/run.sh, runs every command it
// prints and checks each against what the demo says it shows.
func TestDemo(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "go"} {
		tools.Must(t, tool)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build(t, root, bin)

	demo := start(t, root, bin)
	commands := demo.printedCommands(t)
	checkListeners(t)

	checks := map[string]func(t *testing.T, out string){
		"./demo/try write":        checkWrite,
		"./demo/try planned-stop": checkPlannedStop,
		"./demo/try crash":        checkCrash,
		"./demo/try hang":         checkHang,
		"./demo/try db-down":      checkDatabaseDown,
		"./demo/try rate-limit":   checkRateLimit,
		"./demo/try ntlm":         checkNTLM,
		"./demo/try upload":       checkUpload,
		"./demo/try reload":       checkReload,
		"./demo/try haproxy":      checkHAProxy,
		"./demo/try status":       checkStatus,
		"./demo/try metrics":      checkMetrics,
	}
	for _, c := range commands {
		check, ok := checks[c]
		if !ok {
			t.Errorf("the demo prints %q, which this test does not check", c)
			continue
		}
		delete(checks, c)
		t.Run(strings.TrimPrefix(c, "./demo/try "), func(t *testing.T) {
			began := time.Now()
			out := demo.run(t, c)
			t.Logf("%s took %v:\n%s", c, time.Since(began).Round(10*time.Millisecond), out)
			check(t, out)
			if changesCluster[c] {
				checkRestored(t, out)
			}
		})
	}
	for c := range checks {
		t.Errorf("the demo no longer prints %q", c)
	}
	demo.stop(t)
}

// changesCluster are the scenarios that fault the cluster: each must
// restore the known state.
var changesCluster = map[string]bool{"./demo/try planned-stop": true, "./demo/try crash": true, "./demo/try hang": true, "./demo/try db-down": true}

// build builds the two binaries into bin, with the race detector if this
// test has it (the build then reuses the packages the test compiled).
func build(t *testing.T, root, bin string) {
	args := []string{"build"}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	for _, name := range []string{"caddy", "fakecluster"} {
		began := time.Now()
		cmd := exec.Command("go", append(args, "-o", filepath.Join(bin, name), "./cmd/"+name)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
		t.Logf("built %s in %v", name, time.Since(began).Round(100*time.Millisecond))
	}
}

type demo struct {
	root, bin, tmp string
	cmd            *exec.Cmd
	exited         chan struct{}
	lines          chan string
	printed        strings.Builder
}

// start starts ./demo/run.sh in a process group of its own, which every
// process it starts shares: stop, or the cleanup after a failure, ends
// them all. Pdeathsig asks run.sh to stop them if the test binary dies.
func start(t *testing.T, root, bin string) *demo {
	d := &demo{root: root, bin: bin, tmp: t.TempDir(), exited: make(chan struct{}), lines: make(chan string, 1024)}
	d.cmd = exec.Command("./demo/run.sh")
	d.cmd.Dir = root
	d.cmd.Env = d.env()
	d.cmd.Stderr = os.Stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case d.lines <- sc.Text():
			default: // nobody reads after the start-up text: drop
			}
		}
	}()
	go func() {
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// env is the test's environment with the binaries just built, and
// run.sh's log directory (mktemp) in the test's temporary directory.
func (d *demo) env() []string {
	return append(os.Environ(), "CADDY_HA_DEMO_BIN="+d.bin, "TMPDIR="+d.tmp)
}

// printedCommands waits for the start-up text (at most 60 s: run.sh
// itself waits up to 30 s for Caddy) and returns the commands it prints,
// in order.
func (d *demo) printedCommands(t *testing.T) []string {
	t.Helper()
	command := regexp.MustCompile(`^\s+(\./demo/try [a-z-]+)\s+#`)
	var commands []string
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				t.Fatalf("run.sh ended before it said it was running:\n%s", d.printed.String())
			}
			d.printed.WriteString(line + "\n")
			if m := command.FindStringSubmatch(line); m != nil {
				commands = append(commands, m[1])
			}
			if line == "Ctrl-C stops everything." {
				t.Logf("run.sh printed:\n%s", d.printed.String())
				if !strings.Contains(d.printed.String(), "caddy-ha demo is running, on 127.0.0.1 only") || len(commands) == 0 {
					t.Fatal("the start-up text lacks the addresses or the scenarios")
				}
				return commands
			}
		case <-deadline:
			t.Fatalf("run.sh printed no start-up text within 60s:\n%s", d.printed.String())
		}
	}
}

// run runs a printed command as it is printed, in a shell in the
// repository, bounded by scenarioTimeout (its process group killed then).
func (d *demo) run(t *testing.T, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir, cmd.Env = d.root, d.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v (context: %v)\n%s", command, err, ctx.Err(), out)
	}
	return string(out)
}

// stop ends run.sh as Ctrl-C does (its trap stops what it started), then
// kills the process group if anything is left after 10 s; it fails the
// test if a race-built binary logged a data race.
func (d *demo) stop(t *testing.T) {
	if d.cmd.Process == nil {
		return
	}
	pgid := d.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("run.sh did not stop within 10s of SIGTERM: killing its process group")
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // anything left of the group
	<-d.exited
	logs, _ := filepath.Glob(filepath.Join(d.tmp, "*", "*.log"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), "DATA RACE") {
			t.Errorf("%s reports a data race:\n%s", l, b)
		}
	}
	d.cmd.Process = nil
}

// checkListeners: the text says 127.0.0.1, so every site listens there only.
func checkListeners(t *testing.T) {
	var servers map[string]struct {
		Listen []string `json:"listen"`
	}
	getJSON(t, "http://127.0.0.1:2019/config/apps/http/servers", &servers)
	if len(servers) != 3 {
		t.Errorf("%d servers, want 3 (8080, 8081, 8082)", len(servers))
	}
	for name, s := range servers {
		for _, l := range s.Listen {
			if !strings.HasPrefix(l, "127.0.0.1:") {
				t.Errorf("server %s listens on %q, not on 127.0.0.1 only", name, l)
			}
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", url, err, b)
	}
}

// clusterState is the part of the fake cluster's /state the checks read.
type clusterState struct {
	Leader       string `json:"leader"`
	Epoch        int64  `json:"epoch"`
	DatabaseDown bool   `json:"databaseDown"`
	Nodes        []struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Leader bool   `json:"leader"`
	} `json:"nodes"`
}

// checkRestored: a scenario that began from the known state says it
// restored it, and the cluster agrees.
func checkRestored(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^restored: database up, node-a and node-b running, node-a leads \(epoch (\d+)\), Caddy sends to it$`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("no 'restored:' line that says node-a leads")
		return
	}
	var s clusterState
	getJSON(t, "http://127.0.0.1:9000/state", &s)
	if s.Leader != "node-a" || strconv.FormatInt(s.Epoch, 10) != m[1] || s.DatabaseDown {
		t.Errorf("restored to node-a, epoch %s, but the cluster says %+v", m[1], s)
	}
	for _, n := range s.Nodes {
		if n.State != "running" {
			t.Errorf("restored, but %s is %s", n.ID, n.State)
		}
	}
}

// answer is one "write N: …" line of a scenario.
type answer struct {
	n      int
	status int // 0: no answer
	node   string
	epoch  int64
	retry  string
	took   time.Duration
	line   string
}

var writeLine = regexp.MustCompile(`^  write (\d+): (\d{3})(?: from (\S+))?(?: \(epoch (\d+)\))?(?: with Retry-After (\d+))? after ([\d.]+)s$`)

// writes returns the write lines of out, failing on a write without an
// answer (every client has a timeout, and every scenario says what
// answers to expect) and on a line it cannot read.
func writes(t *testing.T, out string) []answer {
	t.Helper()
	var ws []answer
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  write ") {
			continue
		}
		m := writeLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("a write without an answer, or a line this test cannot read: %q", line)
		}
		a := answer{line: line, node: m[3], retry: m[5]}
		a.n, _ = strconv.Atoi(m[1])
		a.status, _ = strconv.Atoi(m[2])
		a.epoch, _ = strconv.ParseInt(m[4], 10, 64)
		secs, _ := strconv.ParseFloat(m[6], 64)
		a.took = time.Duration(secs * float64(time.Second))
		ws = append(ws, a)
	}
	if len(ws) == 0 {
		t.Fatal("no write lines")
	}
	return ws
}

// after returns the writes printed after the line that contains marker.
func after(t *testing.T, out, marker string, ws []answer) []answer {
	t.Helper()
	i := strings.Index(out, marker)
	if i < 0 {
		t.Fatalf("no %q in the output", marker)
	}
	var later []answer
	for _, w := range ws {
		if strings.Index(out, w.line) > i {
			later = append(later, w)
		}
	}
	return later
}

func checkWrite(t *testing.T, out string) {
	ws := writes(t, out)
	if len(ws) != 1 || ws[0].status != 200 || ws[0].node != "node-a" {
		t.Errorf("writes %+v, want one 200 from node-a", ws)
	}
}

// servedInTurn checks that every write got 200, from node-a before the
// line with marker, and after it in the order that pattern (a regexp over
// "node-a node-b …") says; it returns the writes after the marker.
func servedInTurn(t *testing.T, out, marker, pattern string) []answer {
	t.Helper()
	ws := writes(t, out)
	for _, w := range ws {
		if w.status != 200 {
			t.Errorf("a write failed: %q", w.line)
		}
	}
	later := after(t, out, marker, ws)
	for _, w := range ws[:len(ws)-len(later)] {
		if w.node != "node-a" {
			t.Errorf("before %q, %q", marker, w.line)
		}
	}
	var nodes []string
	for _, w := range later {
		nodes = append(nodes, w.node)
	}
	if seq := strings.Join(nodes, " "); !regexp.MustCompile(pattern).MatchString(seq) {
		t.Fatalf("after %q the writes went to %q, want %s", marker, seq, pattern)
	}
	return later
}

func checkPlannedStop(t *testing.T, out string) {
	// The stop runs beside the writes: node-a may serve some before it
	// releases the lease. None waits longer than about a renew tick (1 s)
	// and the probes that see the new leader.
	var longest time.Duration
	for _, w := range servedInTurn(t, out, "/nodes/node-a/stop", `^(node-a )*node-b( node-b){2,}$`) {
		longest = max(longest, w.took)
	}
	if longest > time.Second+slack {
		t.Errorf("a write around the stop took %v, want at most about 1s", longest)
	}
	t.Logf("planned stop: the longest write around it took %v", longest)
}

func checkCrash(t *testing.T, out string) {
	first := servedInTurn(t, out, "/nodes/node-a/kill", `^node-b( node-b){2,}$`)[0]
	if first.took > crashFailover+slack || first.took >= hold {
		t.Errorf("the first write after the crash took %v, want within the lease's end and a renew tick (%v), under hold: %q", first.took, crashFailover, first.line)
	}
	t.Logf("crash: the first write after it took %v", first.took)
	// Brought back, node-a is a follower: neither the leader nor the
	// epoch moved.
	m := regexp.MustCompile(`(?m)^node-a is back: running, leader false; node-b leads, epoch (\d+) \(before its start: node-b, epoch (\d+)\)$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Errorf("node-a did not come back as a follower with node-b's epoch unchanged")
	}
}

func checkHang(t *testing.T, out string) {
	ws := writes(t, out)
	later := after(t, out, "/nodes/node-a/kill?mode=hang", ws)
	timedOut, served := 0, false
	for _, w := range later {
		switch {
		case w.status == 504 && w.node == "" && !served:
			timedOut++
			if w.took < responseHeaderTimeout-50*time.Millisecond || w.took > responseHeaderTimeout+slack {
				t.Errorf("a 504 after %v, want after response_header_timeout (%v): %q", w.took, responseHeaderTimeout, w.line)
			}
		case w.status == 200 && w.node == "node-b":
			served = true
		default:
			t.Errorf("after the hang, %q: want 504s, then 200s from node-b", w.line)
		}
	}
	if timedOut == 0 || later[len(later)-1].node != "node-b" {
		t.Errorf("after the hang: %d writes answered 504, the last one %q; want at least one 504, then node-b", timedOut, later[len(later)-1].line)
	}
	t.Logf("hang: %d writes answered 504", timedOut)
}

func checkDatabaseDown(t *testing.T, out string) {
	if !strings.Contains(out, "both nodes are followers now (node-a leader false, node-b leader false)") {
		t.Errorf("with the database down, the nodes are not both followers")
	}
	ws := after(t, out, "/database/down", writes(t, out))
	if len(ws) < 2 {
		t.Fatalf("writes after the database went down: %+v, want one while it is down, then one after", ws)
	}
	down := ws[0]
	if down.status != 503 || down.retry != "5" || down.took < hold-50*time.Millisecond || down.took > hold+slack {
		t.Errorf("the write with the database down: %q, want 503 with Retry-After 5 after hold (%v)", down.line, hold)
	}
	up := after(t, out, "/database/up", ws)
	if len(up) == 0 || up[len(up)-1].status != 200 || up[len(up)-1].took > hold {
		t.Errorf("after the database came back: %+v, want a 200 within hold", up)
	}
}

func checkRateLimit(t *testing.T, out string) {
	signIn := regexp.MustCompile(`(?m)^  sign-in (\d+): (\d{3})  (.*)$`)
	all := signIn.FindAllStringSubmatch(out, -1)
	// After a wait for a new window, the count starts again.
	last := 0
	for i, m := range all {
		if m[1] == "1" {
			last = i
		}
	}
	got := all[last:]
	if len(got) != 6 {
		t.Fatalf("sign-ins in the last window: %d, want 6 (5 allowed, then 429)", len(got))
	}
	for i, m := range got[:5] {
		if m[2] != "200" || !strings.Contains(m[3], fmt.Sprintf(`Ratelimit: "login";r=%d;`, 4-i)) {
			t.Errorf("sign-in %s: %s %s, want 200 with r=%d", m[1], m[2], m[3], 4-i)
		}
	}
	if m := got[5]; m[2] != "429" || !strings.Contains(m[3], "Retry-After: ") || !strings.Contains(m[3], `Ratelimit-Policy: "login";q=5;w=60`) {
		t.Errorf("sign-in 6: %s %s, want 429 with Retry-After and the RateLimit fields", m[2], m[3])
	}
}

func checkNTLM(t *testing.T, out string) {
	m := regexp.MustCompile(`(?m)^  /sso/me with NTLM NEGOTIATE: 401 anonymous on node connection (\S+)
  /sso/me with NTLM AUTHENTICATE: 200 as alice on node connection (\S+)
  /api/whoami without credentials: 200 as alice on node connection (\S+)$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[2] != m[3] || !strings.HasPrefix(m[1], "node-a/") {
		t.Errorf("the sign-in: want 401, 200 as alice, 200 as alice, on one connection to node-a")
	}
	for _, want := range []string{"  Www-Authenticate: Negotiate\n", "  Www-Authenticate: NTLM\n", "  status 401\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the fresh connection's answer lacks %q", want)
		}
	}
}

func checkUpload(t *testing.T, out string) {
	m := regexp.MustCompile(`(?m)^  create: 201 from (srv-\d), Location /api/uploads/\S+
  chunk 0-4: 204 from (srv-\d)
  chunk 5-9: 204 from (srv-\d)
  complete: 200 from (srv-\d)$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[2] != m[3] || m[3] != m[4] {
		t.Errorf("the upload: want 201, 204, 204, 200, all from the server that created it")
	}
}

// checkReload: five reloads cost none of curl's requests, and the new
// configs answered on curl's connection: it connected once, or once more
// for each reload that caught a request in flight (answered with
// Connection: close), and every other reload handed the connection on.
func checkReload(t *testing.T, out string) {
	m := regexp.MustCompile(`(?m)^  (\d+) requests: (\d+) answered 200, (\d+) failed; curl connected (\d+) time`).FindStringSubmatch(out)
	h := regexp.MustCompile(`(?m)^  connections handed on to a new config: (\d+)$`).FindStringSubmatch(out)
	if m == nil || h == nil {
		t.Fatal("the reload scenario printed no summary")
	}
	n, ok, failed, connects, handed := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4]), atoi(h[1])
	if reloads := strings.Count(out, "caddy reload --config"); reloads != 5 {
		t.Errorf("%d reloads printed, want 5", reloads)
	}
	// curl ran through the five reloads (7.5 s at least, 20 a second).
	if n < 100 || ok != n || failed != 0 {
		t.Errorf("%d requests, %d answered 200, %d failed: want 100 or more, all answered 200", n, ok, failed)
	}
	if connects < 1 || handed < 5-(connects-1) {
		t.Errorf("curl connected %d times and %d connections were handed on: every reload that closed none of curl's connections hands it on", connects, handed)
	}
}

// checkHAProxy: the seed's HAProxy configuration, run through the adapter,
// became the leader policy and transport pinned over verified TLS, sent
// the write to the leader, and passed on the forwarding headers as the
// seed's HAProxy does: the client's own address, proto https, and nothing
// of what the client forged.
func checkHAProxy(t *testing.T, out string) {
	for _, want := range []string{"lb_policy leader {", "host nodepilot.internal.example", "transport pinned {",
		"tls_server_name nodepilot.internal.example", "forwarded {", "  write: 200 from node-a over HTTP/1.1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the haproxy scenario lacks %q", want)
		}
	}
	m := regexp.MustCompile(`(?m)^  (\{"epoch".*\})$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the haproxy scenario printed no read")
	}
	var heard struct {
		Node, Forwarded, XForwardedFor, XForwardedProto string
	}
	if err := json.Unmarshal([]byte(m[1]), &heard); err != nil {
		t.Fatal(err)
	}
	if heard.Node != "node-a" || heard.Forwarded != "" || heard.XForwardedFor != "127.0.0.1" || heard.XForwardedProto != "https" {
		t.Errorf("the node got %+v, want from node-a X-Forwarded-For 127.0.0.1 alone, X-Forwarded-Proto https, no Forwarded", heard)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func checkStatus(t *testing.T, out string) {
	for _, want := range []string{"LEADER POOL 127.0.0.1:9001,127.0.0.1:9002: leader 127.0.0.1:9001, epoch ", `{"leader":"node-a"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the status lacks %q", want)
		}
	}
	// A history row names two different leaders, or none.
	for _, m := range regexp.MustCompile(`(?m)^  \S+ ago: (\S+) → (\S+):`).FindAllStringSubmatch(out, -1) {
		if m[1] == m[2] {
			t.Errorf("a history row from a leader to itself: %q", m[0])
		}
	}
}

func checkMetrics(t *testing.T, out string) {
	for _, want := range []string{`caddy_ha_leader_current{pool="127.0.0.1:9001,127.0.0.1:9002",upstream="127.0.0.1:9001"} 1`,
		`caddy_ha_leader_failovers_total{pool="127.0.0.1:9001,127.0.0.1:9002"}`, `caddy_ha_pinned_pins_total{pool="127.0.0.1:9001,127.0.0.1:9002"}`} {
		if !strings.Contains(out, want) {
			t.Errorf("the metrics lack %q", want)
		}
	}
	if strings.Contains(out, "_bucket{") {
		t.Errorf("the metrics list histogram buckets")
	}
}
