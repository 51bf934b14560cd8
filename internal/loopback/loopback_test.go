package loopback

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A port another live process reserved is not handed out; one reserved by
// a process that is gone, or by this one, is.
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
	if !reserve(40002) {
		t.Error("this process's own port refused")
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
