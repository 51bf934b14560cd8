package wrkbench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/httpcheck"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/testproc"
)

// backendEnv, when set in the environment, makes the program the trivial
// backend listening on its value: a process of its own, so that its GC and
// scheduling do not share the bench's.
const backendEnv = "WRKBENCH_BACKEND"

// startBackend runs this program again as the trivial backend.
func startBackend(dir string) (string, error) {
	addr := loopback.FreeAddr()
	p, err := StartSelf("backend", filepath.Join(dir, "backend.log"), backendEnv+"="+addr)
	if err != nil {
		return "", err
	}
	if err := WaitHTTP("http://"+addr+"/", p, 10*time.Second); err != nil {
		return "", fmt.Errorf("backend: %v", err)
	}
	return addr, nil
}

// StartSelf runs this program again as a child process, with env added to
// its environment (which tells it what to be), its output logged to
// logPath. The child is to call ExitWithParent: it then exits when this
// process ends, even without running its cleanups.
func StartSelf(name, logPath string, env ...string) (*Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The child exits when its stdin closes: when the write end, kept here,
	// is closed by the cleanup or by this process's end.
	stdin, keep, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	AddCleanup(func() { keep.Close() })
	p, err := StartProcessWith(name, logPath, func(cmd *exec.Cmd) {
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = stdin
	}, self)
	stdin.Close()
	return p, err
}

// ExitWithParent makes a child started by StartSelf exit when its parent
// ends.
func ExitWithParent() {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
}

// serveBackend answers every request with 200 and a 2-byte body, but
// GET /healthz/leader, which it answers as the cluster's leader does, so
// that lb_policy leader routes to it.
func serveBackend(addr string) {
	ExitWithParent()
	body := []byte("ok")
	leader := []byte(`{"status":"leader","nodeId":"backend","leaseEpoch":1}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz/leader" {
			w.Header().Set("Content-Type", "application/json")
			w.Write(leader)
			return
		}
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
	os.Exit(1)
}

// WaitHTTP polls url until it answers 200, p exits, or timeout passes.
func WaitHTTP(url string, p *Process, timeout time.Duration) error {
	err := httpcheck.WaitOK(url, timeout, time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("%s exited: %s", p.name, p.LogTail())
		}
		return interrupted.Err()
	})
	if err != nil && !p.Exited() && interrupted.Err() == nil {
		return fmt.Errorf("%s: %v: %s", p.name, err, p.LogTail())
	}
	return err
}

// Process is a child process, stopped at exit if not before.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	once    sync.Once
}

// StartProcess starts bin with args, its output logged to logPath.
func StartProcess(name, logPath, bin string, args ...string) (*Process, error) {
	return StartProcessWith(name, logPath, nil, bin, args...)
}

// StartProcessWith starts bin with args, its output logged to logPath,
// after setup has adjusted the command.
func StartProcessWith(name, logPath string, setup func(*exec.Cmd), bin string, args ...string) (*Process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if setup != nil {
		setup(cmd)
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %v", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		log.Close()
		close(p.done)
	}()
	AddCleanup(p.Stop)
	return p, nil
}

// CPUTime is the processor time (user and system) the process has used so
// far, in Linux's clock ticks of 10 ms.
func (p *Process) CPUTime() (time.Duration, error) {
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime …
	fields, err := testproc.StatFields(p.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	if len(fields) < 13 {
		return 0, fmt.Errorf("%s: /proc stat has %d fields", p.name, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: /proc stat: %v", p.name, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop asks the process to end and kills it if it has not within 5s.
func (p *Process) Stop() {
	p.once.Do(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// LogTail returns the last lines of the process's output.
func (p *Process) LogTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return LastLines(string(data), 3)
}

var (
	cleanupMu sync.Mutex
	cleanups  []*func()
)

// AddCleanup registers f to run at exit, last added first; remove
// unregisters it.
func AddCleanup(f func()) (remove func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	p := &f
	cleanups = append(cleanups, p)
	return func() {
		cleanupMu.Lock()
		defer cleanupMu.Unlock()
		cleanups = slices.DeleteFunc(cleanups, func(q *func()) bool { return q == p })
	}
}

// Cleanup runs the registered cleanups, last added first; each runs once
// even if Main and the interrupt fallback both call it.
func Cleanup() {
	for {
		cleanupMu.Lock()
		if len(cleanups) == 0 {
			cleanupMu.Unlock()
			return
		}
		f := cleanups[len(cleanups)-1]
		cleanups = cleanups[:len(cleanups)-1]
		cleanupMu.Unlock()
		(*f)()
	}
}

// Port returns addr's port.
func Port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// LastLines returns the last n non-empty lines of s, joined by " | ".
func LastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
