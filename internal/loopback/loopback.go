// Package loopback finds free ports on 127.0.0.1 for tests and benchmarks.
package loopback

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreeAddr returns a 127.0.0.1 address whose port is free right now and
// that no live process of this machine, this one included, got from
// FreeAddr before. (The kernel may offer a port it just freed twice in a
// row: Caddy's admin endpoint and its site, given one port, would both
// listen on it with SO_REUSEPORT and share its connections.) The port
// may still be taken by something else before the caller listens on it:
// callers that can retry on "address already in use" do. It panics if
// loopback cannot be listened on at all, which leaves nothing to test.
//
// The reservation matters because Caddy listens with SO_REUSEPORT: two
// test processes (make test runs several) given the same port would both
// listen on it without an error, and the kernel would share the
// connections out between them.
func FreeAddr() string {
	for range maxTries {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if reserve(ln.Addr().(*net.TCPAddr).Port) {
			return addr
		}
	}
	panic(fmt.Sprintf("loopback: no port of %d tried was free of other processes' reservations", maxTries))
}

// FreePort is the port of FreeAddr: one for a client to bind its end of
// a connection to.
func FreePort() int {
	_, port, _ := net.SplitHostPort(FreeAddr())
	n, _ := strconv.Atoi(port)
	return n
}

const maxTries = 1000

// reservations is where each reserved port is a file holding the pid of
// the process that reserved it.
var reservations = filepath.Join(os.TempDir(), "caddy-ha-ports")

// reserve records port for this process, unless a live process holds it,
// this one included; a dead process's reservation is taken over.
func reserve(port int) bool {
	if err := os.MkdirAll(reservations, 0o777); err != nil {
		return true // no room for reservations: the kernel's choice alone
	}
	file := filepath.Join(reservations, strconv.Itoa(port))
	me := strconv.Itoa(os.Getpid())
	for range 2 {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			_, _ = f.WriteString(me)
			f.Close()
			return true
		}
		if !errors.Is(err, fs.ErrExist) {
			return true
		}
		owner, _ := os.ReadFile(file)
		if string(owner) == me {
			return false // handed out already
		}
		pid, err := strconv.Atoi(string(owner))
		if err == nil && alive(pid) {
			return false
		}
		if info, statErr := os.Stat(file); err != nil && statErr == nil && time.Since(info.ModTime()) < time.Second {
			return false // being written by its reserver
		}
		_ = os.Remove(file) // its process is gone: try again
	}
	return false
}

// alive reports whether a process of that pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Listening counts the sockets of this machine that listen on TCP port
// (on any address, IPv4 or IPv6), as the kernel lists them; -1 if it
// cannot tell. Caddy opens a socket per config (SO_REUSEPORT) and closes
// the old one after a reload has returned: a test waits for this count.
func Listening(port int) int {
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			return -1
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" { // TCP_LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				n++
			}
		}
	}
	return n
}
