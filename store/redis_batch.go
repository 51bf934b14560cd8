package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// batchCall is one call waiting to be sent: an increment (MULTI INCRBY
// PEXPIRE [MGET] EXEC) or a GetAndTouch (GETEX PX). It owns its keys and
// results: a caller that gives up returns at once and reuses its own
// memory, while the call may still be in a batch on the wire. Its results
// are read only after done closes.
type batchCall struct {
	pending
	getEx    bool // a GetAndTouch; otherwise an increment
	key      string
	amount   int64
	lifetime time.Duration
	others   []string // prefixed
	counts   []int64  // the others' counts
	count    int64
	value    string // GetAndTouch's value
	found    bool
}

func (s *Redis) newCall(getEx bool, key string, amount int64, lifetime time.Duration, others []string) *batchCall {
	c := &batchCall{pending: newPending(), getEx: getEx, key: strings.Clone(s.prefix + key), amount: amount, lifetime: lifetime}
	if len(others) > 0 {
		c.others = make([]string, len(others))
		c.counts = make([]int64, len(others))
		for i, o := range others {
			c.others[i] = strings.Clone(s.prefix + o)
		}
	}
	return c
}

// batcher sends the calls of concurrent callers together. A few senders
// each take whatever is queued (up to batchMax) and send it as one
// pipeline; a caller whose deadline passes before its turn is dropped
// unsent, so it is never counted after its request fell back.
type batcher struct {
	client redis.UniversalClient
	queue  chan *batchCall
	stop   chan struct{}
	wg     sync.WaitGroup
}

// Two senders: while one batch is on the wire the next one fills, so a
// busy proxy sends several requests' calls per round trip (measured: about
// 0.2 round trips per request at 5k req/s on loopback), and a Redis far
// away still gets two batches in flight.
const (
	batchSenders  = 2
	batchMax      = 128
	batchQueueCap = 4096
)

func newBatcher(client redis.UniversalClient) *batcher {
	b := &batcher{client: client, queue: make(chan *batchCall, batchQueueCap), stop: make(chan struct{})}
	b.wg.Add(batchSenders)
	for range batchSenders {
		go func() {
			defer b.wg.Done()
			// A sender that panicked goes on: the calls of its batch end
			// by their deadlines, later ones are sent.
			recovered.Loop(reporter("a Redis batch sender"), batchPanicPause, b.stop, b.send)
		}()
	}
	return b
}

func (b *batcher) close() {
	close(b.stop)
	b.wg.Wait()
}

// do queues c and waits for its answer, its deadline or close.
func (b *batcher) do(ctx context.Context, c *batchCall) error {
	return awaitCall(ctx, b.queue, c, b.stop, redis.ErrClosed)
}

// batchPanicPause is how long a sender that panicked pauses before it
// goes on, so that a panic on every batch does not spin.
const batchPanicPause = 10 * time.Millisecond

func (b *batcher) send() { sendBatches(b.queue, b.stop, b.exec) }

// sendBatches is a batch sender's loop, the Redis and the PostgreSQL
// store's: it waits for a call, takes whatever else is queued (up to
// batchMax) and hands them to exec together, until stop closes.
func sendBatches[C any](queue <-chan C, stop <-chan struct{}, exec func([]C)) {
	batch := make([]C, 0, batchMax)
	for {
		select {
		case <-stop:
			return
		case c := <-queue:
			batch = append(batch[:0], c)
		}
	more:
		for len(batch) < batchMax {
			select {
			case c := <-queue:
				batch = append(batch, c)
			default:
				break more
			}
		}
		exec(batch)
	}
}

// exec sends the live calls of batch in one pipeline, bounded by the
// latest of their deadlines.
func (b *batcher) exec(batch []*batchCall) {
	live := batch[:0]
	var deadline time.Time
	for _, c := range batch {
		if c.ctx.Err() != nil {
			continue // its caller has moved on: do not count it
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); !ok {
			deadline = time.Now().Add(time.Hour) // the client's own timeouts bound it
		} else if d.After(deadline) {
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer failUnanswered(live)
	replies := make([]*redis.Cmd, len(live))
	_, err := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range live {
			ms := max(c.lifetime.Milliseconds(), 1)
			if c.getEx {
				replies[i] = p.Do(ctx, "GETEX", c.key, "PX", ms)
				continue
			}
			p.Do(ctx, "MULTI")
			p.Do(ctx, "INCRBY", c.key, c.amount)
			p.Do(ctx, "PEXPIRE", c.key, ms)
			if len(c.others) > 0 {
				args := make([]any, 0, len(c.others)+1)
				args = append(args, "MGET")
				for _, o := range c.others {
					args = append(args, o)
				}
				p.Do(ctx, args...)
			}
			replies[i] = p.Do(ctx, "EXEC")
		}
		return nil
	})
	for i, c := range live {
		if c.getEx {
			c.value, c.err = replies[i].Text()
			c.found = c.err == nil
			if errors.Is(c.err, redis.Nil) {
				c.err = nil
			} else if c.err != nil && err != nil && replies[i].Err() == nil {
				c.err = err
			}
		} else {
			c.count, c.err = execResult(replies[i], c.counts, err)
		}
		close(c.done)
	}
}

// execResult reads one EXEC reply: [count, expiry set, [others…]].
func execResult(cmd *redis.Cmd, counts []int64, pipeErr error) (int64, error) {
	reply, err := cmd.Slice()
	if err != nil {
		if pipeErr != nil && cmd.Err() == nil {
			err = pipeErr
		}
		return 0, counterErr(err)
	}
	if len(reply) < 2 {
		return 0, fmt.Errorf("store: EXEC answered %d replies", len(reply))
	}
	if e, ok := reply[0].(error); ok {
		return 0, counterErr(e)
	}
	count, ok := reply[0].(int64)
	if !ok {
		return 0, fmt.Errorf("store: INCRBY answered %T", reply[0])
	}
	if len(reply) > 2 {
		values, _ := reply[2].([]any)
		for i := range counts {
			counts[i] = 0
			if i < len(values) {
				if text, ok := values[i].(string); ok {
					counts[i], _ = parseCount(text)
				}
			}
		}
	}
	return count, nil
}
