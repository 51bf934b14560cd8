// Package redistest starts real redis-server processes on free loopback
// ports for tests, and can kill, pause and restart them.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server the test started.
type Server struct {
	t    testing.TB
	Addr string // 127.0.0.1:port
	cmd  *exec.Cmd
}

// Start runs redis-server on a free loopback port, without persistence,
// and stops it when the test ends. The test fails if redis-server is not
// installed (make test-deps installs it).
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed: run make test-deps (apt-get install redis-server)")
	}
	s := &Server{t: t}
	for attempt := 0; ; attempt++ {
		s.Addr = freeAddr(t)
		if err := s.run(); err == nil {
			break
		} else if attempt == 4 {
			t.Fatalf("starting redis-server: %v", err)
		}
	}
	t.Cleanup(s.Kill)
	return s
}

// Restart starts the server again on the same address after Kill.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.run(); err != nil {
		s.t.Fatalf("restarting redis-server: %v", err)
	}
}

func (s *Server) run() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", s.t.TempDir(), "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
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

func (s *Server) exited() bool {
	return s.cmd.ProcessState != nil || s.cmd.Process.Signal(syscall.Signal(0)) != nil
}

// Kill stops the server at once; its port then refuses connections.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot die otherwise
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the process without closing its socket: connections are
// accepted by the kernel but never answered, like a hung Redis.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signalling redis-server: %v", err)
	}
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	s.t.Cleanup(func() { c.Close() })
	return c
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
