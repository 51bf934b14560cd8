package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// incrCall is one IncrementAndCount waiting to be sent. It owns its keys
// and counts: a caller that gives up returns at once and reuses its own
// memory, while the call may still be in a batch on the wire.
type incrCall struct {
	ctx      context.Context
	key      string
	amount   int64
	lifetime time.Duration
	others   []string // prefixed
	counts   []int64  // the others' counts, copied to the caller's once done
	count    int64
	err      error
	done     chan struct{}
}

func (s *Redis) prefixed(key string, amount int64, lifetime time.Duration, others []string) *incrCall {
	c := &incrCall{key: strings.Clone(s.prefix + key), amount: amount, lifetime: lifetime, done: make(chan struct{})}
	if len(others) > 0 {
		c.others = make([]string, len(others))
		c.counts = make([]int64, len(others))
		for i, o := range others {
			c.others[i] = strings.Clone(s.prefix + o)
		}
	}
	return c
}

// incrBatcher sends the increments of concurrent callers together. A few
// senders each take whatever is queued (up to maxBatch) and send it as one
// pipeline; a caller whose deadline passes before its turn is dropped
// unsent, so it is never counted after its request fell back.
type incrBatcher struct {
	client redis.UniversalClient
	queue  chan *incrCall
	stop   chan struct{}
	wg     sync.WaitGroup
}

const (
	incrSenders  = 2
	incrMaxBatch = 128
	incrQueueCap = 4096
)

func newIncrBatcher(client redis.UniversalClient) *incrBatcher {
	b := &incrBatcher{client: client, queue: make(chan *incrCall, incrQueueCap), stop: make(chan struct{})}
	b.wg.Add(incrSenders)
	for range incrSenders {
		go b.send()
	}
	return b
}

func (b *incrBatcher) close() {
	close(b.stop)
	b.wg.Wait()
}

// do queues c and waits for its answer or its deadline.
func (b *incrBatcher) do(ctx context.Context, c *incrCall, counts []int64) (int64, error) {
	c.ctx = ctx
	select {
	case b.queue <- c:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-b.stop:
		return 0, redis.ErrClosed
	}
	select {
	case <-c.done:
		copy(counts, c.counts)
		return c.count, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (b *incrBatcher) send() {
	defer b.wg.Done()
	batch := make([]*incrCall, 0, incrMaxBatch)
	for {
		select {
		case <-b.stop:
			return
		case c := <-b.queue:
			batch = append(batch[:0], c)
		}
	more:
		for len(batch) < incrMaxBatch {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.exec(batch)
	}
}

// exec sends the live calls of batch as MULTI INCRBY PEXPIRE [MGET] EXEC
// blocks in one pipeline, bounded by the latest of their deadlines.
func (b *incrBatcher) exec(batch []*incrCall) {
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
	execs := make([]*redis.Cmd, len(live))
	_, err := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range live {
			p.Do(ctx, "MULTI")
			p.Do(ctx, "INCRBY", c.key, c.amount)
			p.Do(ctx, "PEXPIRE", c.key, max(c.lifetime.Milliseconds(), 1))
			if len(c.others) > 0 {
				args := make([]any, 0, len(c.others)+1)
				args = append(args, "MGET")
				for _, o := range c.others {
					args = append(args, o)
				}
				p.Do(ctx, args...)
			}
			execs[i] = p.Do(ctx, "EXEC")
		}
		return nil
	})
	for i, c := range live {
		c.count, c.err = execResult(execs[i], c.counts, err)
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
		if strings.Contains(err.Error(), "not an integer") {
			return 0, ErrNotCounter
		}
		return 0, err
	}
	if len(reply) < 2 {
		return 0, fmt.Errorf("store: EXEC answered %d replies", len(reply))
	}
	if e, ok := reply[0].(error); ok {
		if strings.Contains(e.Error(), "not an integer") {
			return 0, ErrNotCounter
		}
		return 0, e
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
