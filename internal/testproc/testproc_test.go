package testproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// startInEnv names the directory that the test binary, run again, starts
// a sleeping child in (with Attr), printing the child's pid.
const startInEnv = "TESTPROC_START_IN"

func TestMain(m *testing.M) {
	if dir := os.Getenv(startInEnv); dir != "" {
		cmd := exec.Command("sleep", "600")
		cmd.Dir, cmd.SysProcAttr = dir, Attr(nil)
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		select {} // until killed
	}
	os.Exit(m.Run())
}

// gone reports whether pid has exited (gone, or a zombie).
func gone(pid int) bool {
	f, err := StatFields(pid)
	return err != nil || f[0] == "Z"
}

// A server started with Attr dies with the process that started it, even
// one killed without a chance to clean up.
func TestServerDiesWithItsKilledParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), startInEnv+"="+t.TempDir())
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	if gone(child) {
		t.Fatal("the child is not running")
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	poll.Until(t, 5*time.Second, "the child to die with its parent", func() bool { return gone(child) })
}

// Dir sweeps a directory whose owner has exited: a paused process left in
// it (as a paused server's backend) is killed, leftovers is told, and the
// directory removed. A directory of a live owner is left alone.
func TestDirSweepsWhatAKilledRunLeft(t *testing.T) {
	prefix := fmt.Sprintf("testproc-sweep-%d", os.Getpid())
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"-*"))
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	})
	// A run that was killed: its owner (here a process that has exited),
	// and a paused process still working in its directory.
	stale, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		t.Fatal(err)
	}
	owner := exec.Command("sleep", "600")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := identity(owner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = owner.Process.Kill()
	_ = owner.Wait()
	if err := os.WriteFile(filepath.Join(stale, ownerFile), []byte(id), 0o644); err != nil {
		t.Fatal(err)
	}
	left := exec.Command("sleep", "600")
	left.Dir = stale
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	defer left.Process.Kill()
	exited := make(chan struct{})
	go func() { _ = left.Wait(); close(exited) }()
	_ = left.Process.Signal(syscall.SIGSTOP)

	var told []string
	fresh, err := Dir(prefix, func(dir string) { told = append(told, dir) })
	if err != nil {
		t.Fatal(err)
	}
	again, err := Dir(prefix, nil) // sweeps again, with fresh's owner alive
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the process left in the stale directory still runs")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale directory is still there: %v", err)
	}
	if len(told) != 1 || told[0] != stale {
		t.Errorf("leftovers told of %q, want [%s]", told, stale)
	}
	for _, d := range []string{fresh, again} {
		if _, err := os.Stat(filepath.Join(d, ownerFile)); err != nil {
			t.Errorf("a live owner's directory was swept: %v", err)
		}
	}
}
