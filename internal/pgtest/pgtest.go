// Package pgtest starts throwaway PostgreSQL servers, from Debian's
// postgresql package, on free loopback ports: for tests (Server) and for
// programs that are not tests (Process). They can be paused, killed and
// restarted on the same port and data.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/testproc"
)

// Server is a PostgreSQL the test started: a Process whose failures fail
// the test, stopped and removed when the test ends.
type Server struct {
	t testing.TB
	*Process
}

// Start runs PostgreSQL on a free loopback port for the test. The test
// fails if PostgreSQL is not installed (make test-deps installs it).
func Start(t testing.TB) *Server {
	t.Helper()
	p, err := StartProcess()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &Server{t: t, Process: p}
}

// Pause stops the server as Process.Pause does.
func (s *Server) Pause() { s.t.Helper(); s.must(s.Process.Pause()) }

// Resume continues a paused server.
func (s *Server) Resume() { s.t.Helper(); s.must(s.Process.Resume()) }

// Restart starts the server again after Kill.
func (s *Server) Restart() { s.t.Helper(); s.must(s.Process.Restart()) }

func (s *Server) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// Process is a PostgreSQL server (the postmaster and its backends) on a
// loopback port, with trust authentication for the user postgres.
type Process struct {
	Port int
	// StatementStats reports whether pg_stat_statements is loaded and
	// created in the postgres database, so that statements can be counted.
	StatementStats bool

	root    string              // holds data/ and postgres.log
	bin     string              // the directory of postgres and initdb
	cred    *syscall.Credential // the postgres user when run by root; else nil
	cmd     *exec.Cmd           // the postmaster
	exited  chan struct{}       // closed once the postmaster has exited
	logFile *os.File
}

// readyTimeout bounds waiting for a started server to accept connections
// (crash recovery after Kill included).
const readyTimeout = 30 * time.Second

// StartProcess creates a database cluster in a new temporary directory and
// runs PostgreSQL on it, on a free loopback port. The caller Stops it.
func StartProcess() (*Process, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	p := &Process{bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		if p.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	if err := p.initdb(); err != nil {
		p.Stop()
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		_, port, _ := net.SplitHostPort(loopback.FreeAddr())
		p.Port, _ = strconv.Atoi(port)
		err := p.run()
		if err == nil {
			break
		}
		if attempt == 4 { // the port was taken in between every time, or worse
			p.Stop()
			return nil, err
		}
	}
	if err := p.createStatementStats(); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// binDir is the bin directory of the highest PostgreSQL version Debian
// installed, else the directory of postgres on PATH.
func binDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) > 0 {
		version := func(path string) int { // /usr/lib/postgresql/15/bin/postgres → 15
			major, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
			return major
		}
		return filepath.Dir(slices.MaxFunc(found, func(a, b string) int { return version(a) - version(b) })), nil
	}
	path, err := exec.LookPath("postgres")
	if err != nil {
		return "", errors.New("PostgreSQL is not installed: run make test-deps (apt-get install postgresql)")
	}
	return filepath.Dir(path), nil
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running PostgreSQL as root needs the postgres user (the postgresql package creates it): %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (p *Process) dataDir() string { return filepath.Join(p.root, "data") }

// initdb makes the temporary directory and the database cluster in it. The
// directory is testproc's, not t.TempDir, whose parents are root's and
// closed to the postgres user; making it sweeps those of killed runs.
func (p *Process) initdb() error {
	var err error
	if p.root, err = testproc.Dir("pgtest", removeSharedMemory); err != nil {
		return err
	}
	if err := os.Mkdir(p.dataDir(), 0o700); err != nil {
		return err
	}
	if p.cred != nil {
		if err := os.Chown(p.dataDir(), int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return err
		}
	}
	if p.logFile, err = os.Create(filepath.Join(p.root, "postgres.log")); err != nil {
		return err
	}
	cmd := p.command("initdb", "-D", p.dataDir(), "--auth=trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return nil
}

// command runs a PostgreSQL program as the user the server runs as, in the
// temporary directory (the postgres user may not read the test's own).
func (p *Process) command(program string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, program), args...)
	cmd.Dir = p.root
	cmd.SysProcAttr = testproc.Attr(p.cred)
	return cmd
}

// run starts the postmaster on p.Port and waits until it accepts
// connections.
func (p *Process) run() error {
	args := []string{"-D", p.dataDir(), "-p", strconv.Itoa(p.Port), "-k", p.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		// Nothing here needs to survive the machine's crash, only Kill's:
		// commits reach the kernel before they return (synchronous_commit
		// stays on), so a table made just before a Kill is there after
		// Restart, as in a real database.
		"-c", "fsync=off", "-c", "full_page_writes=off"}
	if p.hasStatementStats() {
		args = append(args, "-c", "shared_preload_libraries=pg_stat_statements")
	}
	p.cmd = p.command("postgres", args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logFile, p.logFile
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %v", err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(p.cmd, p.exited)
	if err := p.waitReady(); err != nil {
		p.Kill()
		return fmt.Errorf("postgres on port %d did not answer: %v\n%s", p.Port, err, p.logTail())
	}
	return nil
}

// hasStatementStats reports whether pg_stat_statements is installed
// (Debian ships it with the server).
func (p *Process) hasStatementStats() bool {
	_, err := os.Stat(filepath.Join(p.bin, "..", "lib", "pg_stat_statements.so"))
	return err == nil
}

func (p *Process) createStatementStats() error {
	if !p.hasStatementStats() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return fmt.Errorf("creating pg_stat_statements: %v", err)
	}
	p.StatementStats = true
	return nil
}

// waitReady polls a connection until one succeeds, the postmaster exits
// (the port was taken, say) or readyTimeout passes.
func (p *Process) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, p.URL())
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("postgres exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logTail is the end of the server's log, for error messages.
func (p *Process) logTail() string {
	log, _ := os.ReadFile(p.logFile.Name())
	const keep = 4000
	return string(log[max(len(log)-keep, 0):])
}

// URL is a connection string for pgx to the postgres database.
func (p *Process) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
}

// Pool returns a pool of connections for the test's own checks, closed
// when t ends.
func (p *Process) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), p.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Pause stops the postmaster and every backend (SIGSTOP) without closing
// a socket: new connections are accepted by the kernel and existing ones
// stay open, but nothing is answered, like a hung database.
//
// PostgreSQL makes each backend the leader of its own process group, so
// the postmaster's group does not hold them: they are signalled one by
// one, after the postmaster, which then forks no more.
func (p *Process) Pause() error {
	pid, err := p.pid()
	if err != nil {
		return err
	}
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	for _, child := range children(pid) {
		_ = syscall.Kill(child, syscall.SIGSTOP) // it may have just exited
	}
	return nil
}

// Resume continues a paused server: the backends, then the postmaster.
func (p *Process) Resume() error {
	pid, err := p.pid()
	if err != nil {
		return err
	}
	for _, child := range children(pid) {
		_ = syscall.Kill(child, syscall.SIGCONT)
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	return nil
}

// pid is the postmaster's.
func (p *Process) pid() (int, error) {
	if p.cmd == nil {
		return 0, fmt.Errorf("postgres on port %d is not running", p.Port)
	}
	return p.cmd.Process.Pid, nil
}

// children are the processes whose parent is pid.
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var found []int
	for _, path := range stats {
		child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		fields, err := testproc.StatFields(child)
		if err != nil {
			continue // it exited
		}
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			found = append(found, child)
		}
	}
	return found
}

// CPUTime is the processor time (user and system) the server has used so
// far: the postmaster's, its running children's (backends, background
// processes) and that of the children it has reaped. A child's time is
// may be in neither while it is a zombie, and would be
// counted twice, or not at all, if the postmaster reaped it while the
// children are read: CPUTime reads again until neither happened, for up
// to a second. Linux counts the times in clock ticks of 10 ms (USER_HZ).
func (p *Process) CPUTime() (time.Duration, error) {
	pid, err := p.pid()
	if err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		ticks, settled, err := p.cpuTicks(pid)
		if err != nil {
			return 0, err
		}
		if settled || time.Now().After(deadline) {
			return time.Duration(ticks) * (time.Second / userHZ), nil
		}
	}
}

// userHZ is the unit of the times in /proc/<pid>/stat, per second.
const userHZ = 100

// cpuTicks sums the times of the postmaster pid and its children, and
// reports whether the sum is settled: no child was a zombie and none was
// reaped meanwhile (the postmaster's reaped children's time did not
// change).
func (p *Process) cpuTicks(pid int) (ticks int64, settled bool, err error) {
	_, reaped, _, err := procTicks(pid)
	if err != nil {
		return 0, false, err
	}
	settled = true
	for _, child := range children(pid) {
		n, _, zombie, err := procTicks(child)
		if err != nil { // reaped meanwhile
			settled = false
			continue
		}
		ticks += n
		settled = settled && !zombie
	}
	own, reapedAfter, _, err := procTicks(pid)
	if err != nil {
		return 0, false, err
	}
	return ticks + own + reapedAfter, settled && reapedAfter == reaped, nil
}

// procTicks reads pid's user and system time (own), that of its children
// it has reaped, and whether it is a zombie.
func procTicks(pid int) (own, reaped int64, zombie bool, err error) {
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime …
	fields, err := testproc.StatFields(pid)
	if err != nil {
		return 0, 0, false, err
	}
	if len(fields) < 15 {
		return 0, 0, false, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var times [4]int64
	for i, f := range fields[11:15] {
		if times[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return 0, 0, false, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
	}
	return times[0] + times[1], times[2] + times[3], fields[0] == "Z", nil
}

// Kill stops the server at once (SIGKILL to the postmaster and its
// backends, paused or not), leaving its data for Restart. Its port then
// refuses connections. It returns once every one of them has exited: a
// backend still exiting holds the shared memory, and a postmaster started
// meanwhile on the same data refuses to run ("pre-existing shared memory
// block … is still in use").
func (p *Process) Kill() {
	pid, err := p.pid()
	if err != nil {
		return
	}
	_ = p.Pause() // the backends stay its children until they are killed
	kids := children(pid)
	for _, child := range kids {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
	if err := testproc.WaitExited(kids); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: killing postgres on port %d: %v\n", p.Port, err)
	}
}

// Restart starts the server again after Kill, on the same port and data
// (PostgreSQL recovers from the crash), and waits until it answers.
func (p *Process) Restart() error {
	if p.cmd != nil {
		return fmt.Errorf("restarting postgres on port %d: still running", p.Port)
	}
	return p.run()
}

// Stop kills the server and removes its data and shared memory.
func (p *Process) Stop() {
	p.Kill()
	if p.logFile != nil {
		p.logFile.Close()
	}
	if p.root != "" {
		removeSharedMemory(p.root)
		os.RemoveAll(p.root)
	}
}

// removeSharedMemory removes the System V shared memory segment of the
// killed server whose directory is root, which a killed postmaster leaves
// behind (the kernel holds a few thousand at most). A postmaster that
// exits by itself removes it, and its postmaster.pid, which names it.
func removeSharedMemory(root string) {
	lock, err := os.ReadFile(filepath.Join(root, "data", "postmaster.pid"))
	if err != nil {
		return
	}
	// Its seventh line is the segment's key and id.
	lines := strings.Split(string(lock), "\n")
	if len(lines) < 7 {
		return
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return
	}
	if id, err := strconv.Atoi(f[1]); err == nil {
		_, _, _ = syscall.Syscall(syscall.SYS_SHMCTL, uintptr(id), ipcRMID, 0)
	}
}

// ipcRMID is IPC_RMID of <sys/ipc.h>, which package syscall lacks.
const ipcRMID = 0
