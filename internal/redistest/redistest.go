// Package redistest starts real redis-server processes on free loopback
// ports for tests (Server), and for programs that are not tests
// (Process, used by cmd/chaos), and can kill, pause and restart them.
package redistest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/testproc"
)

// Server is a redis-server the test started: a Process whose failures
// fail the test, stopped when the test ends.
type Server struct {
	t testing.TB
	*Process
}

// Process is a redis-server on a loopback port.
type Process struct {
	Addr string // 127.0.0.1:port
	cmd  *exec.Cmd
	args func(dir, port string) []string // redis-server's arguments
	dir  string
	// How the test's own clients reach it (password, TLS).
	password string
	tls      *tls.Config
}

// StartProcess runs redis-server on a free loopback port, without
// persistence, working in dir. The caller Kills it when done.
func StartProcess(dir string) (*Process, error) {
	return startProcess(dir, Options{}, serverArgs(Options{}))
}

// Start runs redis-server on a free loopback port, without persistence,
// and stops it when the test ends. The test fails if redis-server is not
// installed (make test-deps installs it).
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// Options are what a secured redis-server asks of its clients.
type Options struct {
	// Password, as requirepass (the default user's).
	Password string
	// TLS only (no plain port): the server's certificate and key files,
	// and the client TLS config the test's own clients use.
	CertFile, KeyFile string
	ClientTLS         *tls.Config
}

// StartWith is Start with a password and/or TLS.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	return startAs(t, o, serverArgs(o))
}

// serverArgs are the arguments of a plain (not Cluster, not Sentinel)
// redis-server with o's password and TLS.
func serverArgs(o Options) func(dir, port string) []string {
	return func(_, port string) []string {
		args := []string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--loglevel", "warning"}
		if o.Password != "" {
			args = append(args, "--requirepass", o.Password)
		}
		if o.CertFile != "" {
			args = append(args, "--port", "0", "--tls-port", port, "--tls-cert-file", o.CertFile,
				"--tls-key-file", o.KeyFile, "--tls-auth-clients", "no")
		}
		return args
	}
}

// StartCluster runs a one-node Redis Cluster holding every hash slot: it
// refuses multi-key commands across slots (CROSSSLOT) as a big one does.
func StartCluster(t testing.TB) *Server {
	t.Helper()
	s := start(t, func(dir, port string) []string {
		return []string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--loglevel", "warning",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes-"+port+".conf")}
	})
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("assigning the hash slots: %v", err)
	}
	poll.Until(t, 5*time.Second, "the cluster to be ok", func() bool {
		return strings.Contains(c.ClusterInfo(ctx).Val(), "cluster_state:ok")
	})
	return s
}

// StartSentinel runs a Sentinel watching master under the name name.
func StartSentinel(t testing.TB, master *Server, name string) *Server {
	t.Helper()
	s := start(t, func(dir, port string) []string {
		conf := filepath.Join(dir, "sentinel-"+port+".conf")
		_, mport, _ := net.SplitHostPort(master.Addr)
		text := fmt.Sprintf("bind 127.0.0.1\nport %s\nsentinel monitor %s 127.0.0.1 %s 1\n", port, name, mport)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{conf, "--sentinel", "--loglevel", "warning"}
	})
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	poll.Until(t, 5*time.Second, "the sentinel to know the master", func() bool {
		addr, err := c.GetMasterAddrByName(context.Background(), name).Result()
		return err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == master.Addr
	})
	return s
}

func start(t testing.TB, args func(dir, port string) []string) *Server {
	t.Helper()
	return startAs(t, Options{}, args)
}

// startAs runs the server in a directory of testproc's, so that one left
// running by a killed test is swept by the next.
func startAs(t testing.TB, o Options, args func(dir, port string) []string) *Server {
	t.Helper()
	dir, err := testproc.Dir("redistest", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := startProcess(dir, o, args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &Server{t: t, Process: p}
}

func startProcess(dir string, o Options, args func(dir, port string) []string) (*Process, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server is not installed: run make test-deps (apt-get install redis-server)")
	}
	s := &Process{args: args, dir: dir, password: o.Password, tls: o.ClientTLS}
	for attempt := 0; ; attempt++ {
		s.Addr = loopback.FreeAddr()
		err := s.run()
		if err == nil {
			return s, nil
		}
		if attempt == 4 {
			return nil, fmt.Errorf("starting redis-server: %v", err)
		}
	}
}

// Restart starts the server again on the same address after Kill.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.Process.Restart(); err != nil {
		s.t.Fatal(err)
	}
}

// Restart starts the process again on the same address after Kill.
func (s *Process) Restart() error {
	if err := s.run(); err != nil {
		return fmt.Errorf("restarting redis-server: %v", err)
	}
	return nil
}

func (s *Process) run() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command("redis-server", s.args(s.dir, port)...)
	s.cmd.Dir = s.dir
	s.cmd.SysProcAttr = testproc.Attr(nil)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.password, TLSConfig: s.tls, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || s.exited() {
			s.Kill()
			return fmt.Errorf("redis-server on %s did not answer: %v", s.Addr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Process) exited() bool {
	return s.cmd.ProcessState != nil || s.cmd.Process.Signal(syscall.Signal(0)) != nil
}

// Kill stops the server at once, and anything it started (its process
// group); its port then refuses connections.
func (s *Process) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // ends a paused one too
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the process without closing its socket: connections are
// accepted by the kernel but never answered, like a hung Redis.
func (s *Server) Pause() { s.t.Helper(); s.must(s.Process.Pause()) }

// Resume continues a paused server.
func (s *Server) Resume() { s.t.Helper(); s.must(s.Process.Resume()) }

func (s *Server) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// Pause stops the process as Server.Pause does.
func (s *Process) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (s *Process) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Process) signal(sig os.Signal) error {
	if s.cmd == nil {
		return fmt.Errorf("signalling redis-server on %s: not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling redis-server: %v", err)
	}
	return nil
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.password, TLSConfig: s.tls})
	s.t.Cleanup(func() { c.Close() })
	return c
}
