package poolcount

import "testing"

type fixed int

func (f *fixed) Usable() int { return int(*f) }

// A reload publishes the new configuration's counter beside the old one;
// the old one's withdrawal leaves the new one's, and a new one that is
// withdrawn (a reload that failed) gives the old one's back.
func TestPublishReplacesAndWithdrawsItsOwn(t *testing.T) {
	old, next := fixed(2), fixed(0)
	if _, ok := Usable("app"); ok {
		t.Fatal("app is published before any Publish")
	}
	withdrawOld := Publish("app", &old)
	withdrawNext := Publish("app", &next)
	if n, ok := Usable("app"); !ok || n != 0 {
		t.Fatalf("after the reload's Publish: %d, %v; want the new counter's 0", n, ok)
	}
	withdrawNext()
	if n, _ := Usable("app"); n != 2 {
		t.Fatalf("after the new counter's withdrawal: %d; want the old one's 2 again", n)
	}
	withdrawNext = Publish("app", &next)
	withdrawOld()
	if n, _ := Usable("app"); n != 0 {
		t.Fatalf("after the old counter's withdrawal: %d; want the new one's 0", n)
	}
	withdrawNext()
	if _, ok := Usable("app"); ok {
		t.Fatal("app is still published after every counter's withdrawal")
	}
}

// One counter published twice under a name is two entries: withdrawing
// one leaves the other.
func TestPublishSameCounterTwice(t *testing.T) {
	c := fixed(3)
	first := Publish("shop", &c)
	second := Publish("shop", &c)
	first()
	if n, ok := Usable("shop"); !ok || n != 3 {
		t.Fatalf("after one of two withdrawals: %d, %v; want 3, true", n, ok)
	}
	second()
	if _, ok := Usable("shop"); ok {
		t.Fatal("shop still published")
	}
}
