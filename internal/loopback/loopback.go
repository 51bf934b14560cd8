// Package loopback finds free ports on 127.0.0.1 for tests and benchmarks.
package loopback

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
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
	lo, hi := listenPorts()
	for range maxTries {
		port := 0 // the kernel's choice, where the range below is too small
		if hi-lo >= minPorts {
			port = lo + rand.IntN(hi-lo)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil && port != 0 {
			continue // taken: another
		}
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

// listenPorts are the ports FreeAddr picks among, lo to hi-1: those below
// the kernel's ephemeral range (ip_local_port_range), whence each
// connection's local end takes its port. A port from that range, free
// when FreeAddr checked it, could be a connection's before the caller
// listened on it (bind: address already in use, seen in make test beside
// a busy machine's connections); below it, only a listener takes one.
func listenPorts() (lo, hi int) {
	lo, hi = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil {
				hi = start
			}
		}
	}
	return lo, hi
}

// minPorts is the fewest ports listenPorts may give for FreeAddr to pick
// among them.
const minPorts = 1000

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
