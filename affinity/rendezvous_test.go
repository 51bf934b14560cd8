package affinity

import (
	"fmt"
	"slices"
	"testing"
)

var threeServers = []string{"10.0.0.1:9101", "10.0.0.2:9101", "10.0.0.3:9101"}

func TestRendezvousEmpty(t *testing.T) {
	if i := Rendezvous("k", nil); i != -1 {
		t.Fatalf("Rendezvous over no servers = %d, want -1", i)
	}
	if i := Rendezvous("k", []string{"only"}); i != 0 {
		t.Fatalf("Rendezvous over one server = %d, want 0", i)
	}
}

// The hash must never change: proxies of different versions must agree.
// These answers were computed once; a change of hash shows here.
func TestRendezvousIsFixed(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want string
	}{
		{"", "10.0.0.3:9101"},
		{"a", "10.0.0.2:9101"},
		{"upload-1", "10.0.0.1:9101"},
		{"01HZX3K9Q7M2V8W4T6R5Y1N0PB", "10.0.0.2:9101"},
		{"client-42", "10.0.0.3:9101"},
		{"10.1.2.3", "10.0.0.1:9101"},
		{"k7", "10.0.0.3:9101"},
		{"zzzz", "10.0.0.2:9101"},
	} {
		if got := threeServers[Rendezvous(tc.key, threeServers)]; got != tc.want {
			t.Errorf("Rendezvous(%q) = %s, want %s", tc.key, got, tc.want)
		}
	}
}

// The scores themselves are pinned too: eight picks out of three could
// survive a change of hash by chance.
func TestRendezvousScoreIsFixed(t *testing.T) {
	for _, tc := range []struct {
		key, server string
		want        uint64
	}{
		{"", "", 0xb9034ad37056f5fb},
		{"01HZX3K9Q7M2V8W4T6R5Y1N0PB", "10.0.0.1:9101", 0x1e6ad9e4cc3b3859},
		{"upload-1", "node-b", 0x5085ae2103a443aa},
	} {
		if got := rendezvousScore(fnv1a(fnvOffset, tc.key), tc.server); got != tc.want {
			t.Errorf("score(%q, %q) = %#x, want %#x", tc.key, tc.server, got, tc.want)
		}
	}
}

func TestRendezvousIgnoresServerOrder(t *testing.T) {
	orders := [][]string{
		threeServers,
		{threeServers[2], threeServers[0], threeServers[1]},
		{threeServers[1], threeServers[2], threeServers[0]},
		{threeServers[1], threeServers[0], threeServers[1], threeServers[2]}, // listed twice
	}
	for k := range 3000 {
		key := fmt.Sprint("key-", k)
		want := threeServers[Rendezvous(key, threeServers)]
		for _, order := range orders[1:] {
			if got := order[Rendezvous(key, order)]; got != want {
				t.Fatalf("%s goes to %s in order %v but to %s in %v", key, got, order, want, threeServers)
			}
		}
	}
}

func TestRendezvousSpreadsEvenly(t *testing.T) {
	for _, servers := range [][]string{
		threeServers,
		{"a:1", "a:2", "a:3"},
		{"node-a", "node-b", "node-c"},
	} {
		const keys = 30_000
		counts := make([]int, len(servers))
		for k := range keys {
			counts[Rendezvous(testKey(k), servers)]++
		}
		want := keys / len(servers)
		for i, n := range counts {
			if n < want*9/10 || n > want*11/10 {
				t.Errorf("%s got %d of %d keys; want %d ± 10%% (all: %v)", servers[i], n, keys, want, counts)
			}
		}
	}
}

func TestRendezvousMovesFewKeys(t *testing.T) {
	const keys = 30_000
	four := append(slices.Clone(threeServers), "10.0.0.4:9101")
	var movedOnAdd, movedOnRemove, removedHad int
	for k := range keys {
		key := testKey(k)
		before := threeServers[Rendezvous(key, threeServers)]
		afterAdd := four[Rendezvous(key, four)]
		if afterAdd != before {
			movedOnAdd++
			if afterAdd != four[3] {
				t.Fatalf("adding a server moved %s from %s to %s, not to the new server", key, before, afterAdd)
			}
		}
		rest := []string{threeServers[0], threeServers[2]} // remove the second
		afterRemove := rest[Rendezvous(key, rest)]
		if before == threeServers[1] {
			removedHad++
		}
		if afterRemove != before {
			movedOnRemove++
			if before != threeServers[1] {
				t.Fatalf("removing %s moved %s off %s", threeServers[1], key, before)
			}
		}
	}
	if movedOnRemove != removedHad {
		t.Errorf("removing a server moved %d keys, but it had %d", movedOnRemove, removedHad)
	}
	// The new server takes ~1/4 of the keys.
	if want := keys / 4; movedOnAdd < want*9/10 || movedOnAdd > want*11/10 {
		t.Errorf("adding a fourth server moved %d of %d keys; want about %d", movedOnAdd, keys, want)
	}
}

func TestRendezvousDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Rendezvous("01HZX3K9Q7M2V8W4T6R5Y1N0PB", threeServers) }); n != 0 {
		t.Fatalf("Rendezvous allocates %v times", n)
	}
}

func testKey(k int) string { return fmt.Sprintf("client-%d", k) }
