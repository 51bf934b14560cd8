package loopback

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A port a live process reserved, this one included, is not handed out
// again; one reserved by a process that is gone is.
func TestReservations(t *testing.T) {
	reservations = t.TempDir()
	write := func(port int, owner string) {
		if err := os.WriteFile(filepath.Join(reservations, strconv.Itoa(port)), []byte(owner), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	write(40001, "1") // init, always alive
	if reserve(40001) {
		t.Error("a port held by a live process was reserved again")
	}
	write(40002, "999999999") // no such process
	if !reserve(40002) {
		t.Error("a dead process's port was not taken over")
	}
	if owner, _ := os.ReadFile(filepath.Join(reservations, "40002")); string(owner) != strconv.Itoa(os.Getpid()) {
		t.Errorf("taken over by %q", owner)
	}
	if reserve(40002) {
		t.Error("a port this process reserved was reserved again")
	}
	seen := map[string]bool{}
	for range 200 {
		a := FreeAddr()
		if seen[a] {
			t.Fatalf("FreeAddr handed out %s twice", a)
		}
		seen[a] = true
	}
	addr := FreeAddr()
	if _, err := os.Stat(filepath.Join(reservations, addr[len("127.0.0.1:"):])); err != nil {
		t.Errorf("FreeAddr left no reservation for %s: %v", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr's %s cannot be listened on: %v", addr, err)
	}
	ln.Close()
}

// Listening counts a port's listening sockets as the kernel lists them.
func TestListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if n := Listening(port); n != 1 {
		t.Errorf("one listener: %d", n)
	}
	ln.Close()
	if n := Listening(port); n != 0 {
		t.Errorf("closed: %d", n)
	}
}

// FreeAddr's ports are below the kernel's ephemeral range, which no
// connection's local end takes them from.
func TestFreeAddrBelowEphemeralPorts(t *testing.T) {
	lo, hi := listenPorts()
	if hi-lo < minPorts {
		t.Skipf("ephemeral ports from %d: too few below them", hi)
	}
	for range 50 {
		_, port, _ := net.SplitHostPort(FreeAddr())
		if n, _ := strconv.Atoi(port); n < lo || n >= hi {
			t.Fatalf("port %d, want one in [%d, %d)", n, lo, hi)
		}
	}
}
