package caddymodule

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// testCaddy is Caddy running in-process with a Caddyfile.
type testCaddy struct {
	t       testing.TB
	admin   string // admin endpoint host:port
	addr    string // the site's host:port
	logFile string
}

// startCaddy adapts site (the body of one site block served on a free
// port) with the given global options and loads it. {upstreams} in site
// is replaced by the cluster's node addresses.
func startCaddy(t testing.TB, c *fakecluster.Cluster, globalOpts, site string) *testCaddy {
	t.Helper()
	tc := &testCaddy{t: t, logFile: filepath.Join(t.TempDir(), "caddy.log")}
	onFreePorts(t, func() error {
		tc.admin, tc.addr = loopback.FreeAddr(), loopback.FreeAddr()
		return tc.tryLoad(c, globalOpts, site)
	})
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stopping caddy: %v", err)
		}
	})
	return tc
}

// onFreePorts runs try, which listens on ports it has just found free,
// again (up to 5 times in all) while it fails because one was taken by
// another test between the probe and the listen; any other error fails t.
func onFreePorts(t testing.TB, try func() error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := try()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 4 {
			t.Fatal(err)
		}
	}
}

// load (re)loads the config, as caddy reload does. The old servers close
// the test clients' kept-alive connections as they stop, so those are
// dropped first: a request must not pick one up as it closes.
func (tc *testCaddy) load(c *fakecluster.Cluster, globalOpts, site string) {
	tc.t.Helper()
	if err := tc.tryLoad(c, globalOpts, site); err != nil {
		tc.t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	rlClient.CloseIdleConnections()
	waitOldSocketClosed(tc.t, tc.addr)
}

// waitOldSocketClosed waits until only the new config uses addr's socket.
// Caddy opens a socket per config (SO_REUSEPORT) and returns from a reload
// before the old server has closed its own; a connection the kernel queued
// on that one meanwhile is reset as it closes (stock Caddy's behaviour), so
// a test's first request after a reload must not race it. Caddy counts a
// listener gone just before it closes its socket, so the kernel's count of
// listening sockets is waited for too.
func waitOldSocketClosed(t testing.TB, addr string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	poll.Until(t, 10*time.Second, "the old config's socket to close", func() bool {
		return caddy.ListenerUsage("tcp", ":"+port) <= 1 && caddy.ListenerUsage("tcp", addr) <= 1 &&
			loopback.Listening(p) <= 1
	})
}

func (tc *testCaddy) tryLoad(c *fakecluster.Cluster, globalOpts, site string) error {
	var ups []string
	if c != nil {
		for _, n := range c.Nodes() {
			ups = append(ups, n.Addr())
		}
	}
	site = strings.ReplaceAll(site, "{upstreams}", strings.Join(ups, " "))
	caddyfile := fmt.Sprintf(`{
	admin %s
	persist_config off
	log {
		output file %s
		format json
	}
	%s
}
http://%s {
	%s
}
`, tc.admin, tc.logFile, globalOpts, tc.addr, site)
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		return fmt.Errorf("adapting Caddyfile: %v\n%s", err, caddyfile)
	}
	if err := caddy.Load(cfg, true); err != nil {
		return fmt.Errorf("loading config: %v", err)
	}
	return nil
}

func (tc *testCaddy) url(path string) string { return "http://" + tc.addr + path }

// adminGet fetches a path from the admin endpoint.
func (tc *testCaddy) adminGet(path string) string {
	tc.t.Helper()
	resp, err := http.Get("http://" + tc.admin + path)
	if err != nil {
		tc.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// logLines returns the lines of Caddy's log that contain s.
func (tc *testCaddy) logLines(s string) []string {
	b, _ := os.ReadFile(tc.logFile)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// newCluster starts a fake cluster with a short lease, whose planned stops
// serve as followers for 250ms before closing the port.
func newCluster(t testing.TB, nodes int, ttl, renew time.Duration) *fakecluster.Cluster {
	t.Helper()
	return newClusterWith(t, fakecluster.Config{LeaseTTL: ttl, RenewInterval: renew, StopDrain: 250 * time.Millisecond}, nodes)
}

// newClusterWith starts a fake cluster and waits for its first leader.
func newClusterWith(t testing.TB, cfg fakecluster.Config, nodes int) *fakecluster.Cluster {
	t.Helper()
	c, err := fakecluster.New(cfg, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.WaitLeader(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// runCaddyEnv names the config file a re-executed test binary runs as a
// second Caddy instance (see startCaddyProcess).
const runCaddyEnv = "CADDYHA_TEST_RUN_CADDY"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(runCaddyEnv); cfg != "" {
		runCaddyProcess(cfg)
		return
	}
	os.Exit(m.Run())
}

// runCaddyProcess is the second instance: it loads the JSON config and
// serves until its parent closes its stdin.
func runCaddyProcess(path string) {
	cfg, err := os.ReadFile(path)
	if err == nil {
		err = caddy.Load(cfg, true)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "second caddy:", err)
		os.Exit(1)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = caddy.Stop()
	os.Exit(0)
}

// caddyProcess is a Caddy instance in a process of its own: the test binary
// run again, with all the same modules.
type caddyProcess struct {
	addr string
}

func (p *caddyProcess) url(path string) string { return "http://" + p.addr + path }

// startCaddyProcess runs a second Caddy serving site on a free port with
// the given global options, and stops it when the test ends.
func startCaddyProcess(t testing.TB, globalOpts, site string) *caddyProcess {
	t.Helper()
	var p *caddyProcess
	onFreePorts(t, func() (err error) {
		p, err = tryCaddyProcess(t, globalOpts, site)
		return err
	})
	return p
}

func tryCaddyProcess(t testing.TB, globalOpts, site string) (*caddyProcess, error) {
	p := &caddyProcess{addr: loopback.FreeAddr()}
	caddyfile := fmt.Sprintf("{\n\tadmin off\n\tpersist_config off\n\tlog {\n\t\toutput discard\n\t}\n\t%s\n}\nhttp://%s {\n\t%s\n}\n", globalOpts, p.addr, site)
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		return nil, fmt.Errorf("adapting Caddyfile: %v\n%s", err, caddyfile)
	}
	path := filepath.Join(t.TempDir(), "second.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runCaddyEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	var exitErr error
	gone := false
	poll.Until(t, 20*time.Second, "the second Caddy to listen", func() bool {
		select {
		case exitErr = <-exited:
			gone = true
			exited <- exitErr // for Cleanup
			return true
		default:
		}
		conn, err := net.Dial("tcp", p.addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	if gone {
		return nil, fmt.Errorf("the second Caddy exited (%v): %s", exitErr, stderr.String())
	}
	return p, nil
}

// counterValue is metricValue for a counter, 0 before its first count.
func counterValue(tc *testCaddy, prefix string) float64 {
	return max(metricValue(tc, prefix), 0)
}

// metricValue returns the value of the metric line that starts with
// prefix (name and labels), or -1 when there is none.
func metricValue(tc *testCaddy, prefix string) float64 {
	for _, l := range strings.Split(tc.adminGet("/metrics"), "\n") {
		if strings.HasPrefix(l, prefix+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, prefix)), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}
