package affinity

import (
	"context"
	"errors"
	"testing"
)

func TestUnreachable(t *testing.T) {
	var u Unreachable
	if u.Has("a") || u.Len() != 0 {
		t.Fatal("a new set is not empty")
	}
	if !u.Mark("a") || u.Mark("a") || !u.Mark("b") {
		t.Fatal("Mark reports a server already out as newly out, or the reverse")
	}
	if !u.Has("a") || !u.Has("b") || u.Has("c") || u.Len() != 2 {
		t.Fatalf("set after marking a and b: has a %v, b %v, c %v, len %d", u.Has("a"), u.Has("b"), u.Has("c"), u.Len())
	}
	accepting := map[string]bool{"b": true}
	back := u.Recheck(context.Background(), func(_ context.Context, s string) error {
		if accepting[s] {
			return nil
		}
		return errors.New("connection refused")
	})
	if len(back) != 1 || back[0] != "b" || !u.Has("a") || u.Has("b") {
		t.Fatalf("recheck put back %v; a out %v, b out %v", back, u.Has("a"), u.Has("b"))
	}
}

func BenchmarkUnreachableHas(b *testing.B) {
	var u Unreachable
	u.Mark("10.0.0.1:80")
	b.ReportAllocs()
	for b.Loop() {
		u.Has("10.0.0.2:80")
	}
}
