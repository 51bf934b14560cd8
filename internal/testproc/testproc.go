// Package testproc runs the servers that tests start (PostgreSQL, Redis)
// so that none outlives the test process: each dies with it (Pdeathsig),
// works in a temporary directory marked with its owner, and whatever a
// killed run left in such a directory is killed and removed by the next.
package testproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile, in each directory, names the process that made it: its pid
// and its start time, which tell it from a later process of the same pid.
const ownerFile = "owner"

// unmarkedAge is how old a directory without an owner file must be to be
// swept: one that young may be another process's, just made; older ones
// are an earlier version's. No test binary runs that long (go test's
// -timeout is 10 minutes by default).
const unmarkedAge = time.Hour

// exitTimeout bounds waiting for killed processes to exit.
const exitTimeout = 10 * time.Second

// Attr is how a server runs: as cred (nil: as the test), in its own
// process group, so that a ^C of the test reaches the test only, whose
// cleanup stops the server, and killed if the test dies without cleaning
// up.
func Attr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Dir makes a new directory prefix-* under os.TempDir(), open to every
// user (a server run as another user reaches its own files through it)
// and marked with this process as its owner. First it sweeps the earlier
// ones: those whose owner has exited are stale, their processes (any whose
// working directory is in them) are killed, leftovers (if not nil) frees
// what those processes held outside the directory, and the directory is
// removed.
func Dir(prefix string, leftovers func(dir string)) (string, error) {
	sweep(prefix, leftovers)
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	me, err := identity(os.Getpid())
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(me), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// sweep removes the stale directories of prefix, as Dir says.
func sweep(prefix string, leftovers func(dir string)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"-*"))
	for _, dir := range dirs {
		if !stale(dir) {
			continue
		}
		if err := WaitExited(killIn(dir)); err != nil {
			continue // still running: its files stay with it
		}
		if leftovers != nil {
			leftovers(dir)
		}
		os.RemoveAll(dir)
	}
}

// stale reports whether dir's owner has exited.
func stale(dir string) bool {
	owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		info, err := os.Stat(dir)
		return err == nil && info.IsDir() && time.Since(info.ModTime()) > unmarkedAge
	}
	pid, _, _ := strings.Cut(string(owner), " ")
	n, err := strconv.Atoi(pid)
	if err != nil {
		return true
	}
	now, err := identity(n)
	return err != nil || now != string(owner)
}

// identity is pid and its start time (in clock ticks since boot).
func identity(pid int) (string, error) {
	f, err := StatFields(pid)
	if err != nil {
		return "", err
	}
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return fmt.Sprintf("%d %s", pid, f[19]), nil
}

// killIn kills (SIGKILL, which ends stopped ones too) every process whose
// working directory is dir or below it, and returns their pids.
func killIn(dir string) []int {
	var killed []int
	for _, pid := range pids() {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// pids are the processes running now.
func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// WaitExited waits until each of pids has exited: it is gone, or a
// zombie, whose memory (shared memory included) is already released. It
// gives up after exitTimeout.
func WaitExited(pids []int) error {
	deadline := time.Now().Add(exitTimeout)
	for _, pid := range pids {
		for {
			f, err := StatFields(pid)
			if err != nil || f[0] == "Z" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d has not exited %v after it was killed", pid, exitTimeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// StatFields are the fields of /proc/<pid>/stat after "pid (comm)", whose
// comm may hold spaces and parentheses: state, ppid, pgrp, …
func StatFields(pid int) ([]string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return nil, errors.New("/proc/" + strconv.Itoa(pid) + "/stat: no comm")
	}
	f := strings.Fields(string(stat[end+1:]))
	if len(f) == 0 {
		return nil, errors.New("/proc/" + strconv.Itoa(pid) + "/stat: empty")
	}
	return f, nil
}
