package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

type testCall struct{ pending }

// A call queued when the store closes is answered at once with the
// closed error, whichever batcher queued it (the Redis batcher's caller
// waited for its own deadline, forever without one).
func TestAwaitCallAnswersOnClose(t *testing.T) {
	queue, stop, closed := make(chan *testCall, 1), make(chan struct{}), errors.New("closed")
	c := &testCall{newPending()}
	got := make(chan error, 1)
	go func() { got <- awaitCall(context.Background(), queue, c, stop, closed) }()
	<-queue // queued, never sent
	close(stop)
	select {
	case err := <-got:
		if err != closed {
			t.Fatalf("got %v, want the closed error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call queued before close still waits")
	}
}

// A panicking batch answers every call it had not answered, and panics on.
func TestFailUnansweredAnswersAndPanicsOn(t *testing.T) {
	answered, unanswered := &testCall{newPending()}, &testCall{newPending()}
	answered.err = errors.New("its own answer")
	close(answered.done)
	defer func() {
		if recover() != "boom" {
			t.Fatal("the panic was swallowed")
		}
		if unanswered.err != errBatchPanicked || answered.err.Error() != "its own answer" {
			t.Fatalf("answers: %v, %v", unanswered.err, answered.err)
		}
		<-unanswered.done
	}()
	func() {
		defer failUnanswered([]*testCall{answered, unanswered})
		panic("boom")
	}()
}
