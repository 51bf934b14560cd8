package store

import (
	"context"
	"errors"
)

// pending is what the Redis and the PostgreSQL batchers' calls share: the
// caller's context, and the answer, read only after done closes.
type pending struct {
	ctx  context.Context
	err  error
	done chan struct{}
}

func newPending() pending { return pending{done: make(chan struct{})} }

func (p *pending) state() *pending { return p }

// awaitCall queues c and waits for its answer, its context's end, or stop
// (the store closing: a call queued then may never be sent), which answers
// closed.
func awaitCall[C interface{ state() *pending }](ctx context.Context, queue chan<- C, c C, stop <-chan struct{}, closed error) error {
	p := c.state()
	p.ctx = ctx
	select {
	case queue <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return closed
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return closed
	}
}

// errBatchPanicked is the answer of the calls of a batch whose sending
// panicked.
var errBatchPanicked = errors.New("store: sending a batch panicked")

// failUnanswered, deferred by a batcher's exec, answers the calls a panic
// left unanswered, so that no caller waits for them, and goes on panicking
// (for the sender's recovery to report it).
func failUnanswered[C interface{ state() *pending }](calls []C) {
	v := recover()
	if v == nil {
		return
	}
	for _, c := range calls {
		p := c.state()
		select {
		case <-p.done:
		default:
			p.err = errBatchPanicked
			close(p.done)
		}
	}
	panic(v)
}
