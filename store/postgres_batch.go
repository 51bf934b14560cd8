package store

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// postgresCall is one statement waiting to be sent, with its arguments
// and results. It owns them: a caller that gives up returns at once and
// reuses its own memory, while the call may still be on the wire. Its
// results are read only after done closes.
type postgresCall struct {
	pending
	sql  string
	args []any
	// The first row is scanned into dest, pointers to the fields below.
	dest   []any
	value  string
	count  int64
	live   []string // IncrementAndCount's others that have a value
	values []string // and their values
	now    time.Time
	rows   int64 // the rows it returned or changed
}

func newPostgresCall(sql string, args ...any) *postgresCall {
	return &postgresCall{pending: newPending(), sql: sql, args: args}
}

// postgresBatcher sends the calls of concurrent callers together, as the
// Redis batcher does: a few senders each take whatever is queued for them
// (up to batchMax) and send it as one pipeline on one connection. Each
// statement is followed by its own Sync, so it is its own transaction:
// one call's error fails no other, and row locks are held for one
// statement only (in one transaction, two batches touching the same keys
// in different orders would deadlock). A caller whose context has ended
// before its turn is dropped unsent.
//
// A key's calls always go to the same sender (by a hash of the key, the
// statements' $1), so they are sent in the order they were queued, and a
// hot key's increments are never on the wire in two batches at once:
// those arriving while one batch is out wait for the next and are merged
// into one statement there (see mergeIncrements). Several senders with a
// queue in common would each take a few of them, and the database would
// run a statement per batch on the one row, each waiting for the row lock
// the one before holds.
type postgresBatcher struct {
	pool      *pgxpool.Pool
	queues    [postgresSenders]chan *postgresCall // a sender's each
	seed      maphash.Seed
	keyless   atomic.Uint32   // spreads the calls without a key (Ping, Now)
	life      context.Context // the store's: its end stops everything
	wg        sync.WaitGroup
	increment string // the Increment statement, whose calls of one key are merged
}

// postgresSenders is how many batches may be on the wire at once, each on
// a connection of its own: the database runs the statements of one batch
// one after the other, of several in parallel, when they touch different
// rows. (Measured when the senders shared one queue: on two cores with
// pgxpool's 4 connections, 4 senders made about 34k increments/s of
// different keys, 2 or 8 fewer.)
const postgresSenders = 4

// errPostgresClosed is returned for calls after Close.
var errPostgresClosed = errors.New("store: the PostgreSQL store is closed")

func newPostgresBatcher(life context.Context, pool *pgxpool.Pool, increment string) *postgresBatcher {
	b := &postgresBatcher{pool: pool, seed: maphash.MakeSeed(), life: life, increment: increment}
	b.wg.Add(postgresSenders)
	for i := range b.queues {
		queue := make(chan *postgresCall, batchQueueCap)
		b.queues[i] = queue
		send := func() { sendBatches(queue, life.Done(), b.exec) }
		go func() {
			defer b.wg.Done()
			// A sender that panicked goes on: the calls of its batch end
			// by their contexts, later ones are sent.
			recovered.Loop(reporter("a PostgreSQL batch sender"), batchPanicPause, life.Done(), send)
		}()
	}
	return b
}

// wait waits for the senders to stop, once life has ended.
func (b *postgresBatcher) wait() { b.wg.Wait() }

// do queues c and waits for its answer, its context's end or Close.
func (b *postgresBatcher) do(ctx context.Context, c *postgresCall) error {
	return awaitCall(ctx, b.queueOf(c), c, b.life.Done(), errPostgresClosed)
}

// queueOf is the queue of the sender of c's key, the first argument of
// every statement on a key; calls without one take turns.
func (b *postgresBatcher) queueOf(c *postgresCall) chan<- *postgresCall {
	var i uint64
	if key, ok := firstString(c.args); ok {
		i = maphash.String(b.seed, key)
	} else {
		i = uint64(b.keyless.Add(1))
	}
	return b.queues[i%postgresSenders]
}

func firstString(args []any) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	s, ok := args[0].(string)
	return s, ok
}

// exec sends the live calls of batch and hands each its answer; the batch
// is abandoned once every caller in it has given up, or the store closes.
func (b *postgresBatcher) exec(batch []*postgresCall) {
	live := batch[:0]
	for _, c := range batch {
		if c.ctx.Err() == nil { // else its caller has moved on: do not count it
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := untilAllGiveUp(b.life, live)
	defer cancel()
	defer failUnanswered(live)
	sent, merged := b.mergeIncrements(live)
	answered, err := b.pipeline(ctx, sent)
	for i, c := range sent {
		if i >= answered {
			c.err = err
		}
		if group := merged[c]; group != nil {
			splitIncrement(c, group)
			continue
		}
		close(c.done)
	}
}

// mergeIncrements returns the calls to send: calls that increment the
// same key by the Increment statement become one call incrementing it by
// their sum (with the last one's lifetime, as if they ran in turn), so a
// hot key costs one statement per batch rather than one per request;
// merged maps each such call to the calls it stands for, in order.
func (b *postgresBatcher) mergeIncrements(calls []*postgresCall) (sent []*postgresCall, merged map[*postgresCall][]*postgresCall) {
	var byKey map[string]*postgresCall
	for _, c := range calls {
		if c.sql != b.increment {
			sent = append(sent, c)
			continue
		}
		key := c.args[0].(string)
		if byKey == nil {
			byKey, merged = map[string]*postgresCall{}, map[*postgresCall][]*postgresCall{}
		}
		first, seen := byKey[key]
		if !seen {
			byKey[key] = c
			sent = append(sent, c)
			continue
		}
		group := merged[first]
		if group == nil {
			// first is replaced in sent by a call of its own, so that its
			// caller's arguments and results stay its own.
			sum := newPostgresCall(first.sql, first.args[0], first.args[1], first.args[2])
			sum.ctx = first.ctx
			sum.dest = []any{&sum.count}
			sent[slices.Index(sent, first)] = sum
			byKey[key], group = sum, []*postgresCall{first}
			first = sum
		}
		first.args[1] = first.args[1].(int64) + c.args[1].(int64)
		first.args[2] = c.args[2]
		merged[first] = append(group, c)
	}
	return sent, merged
}

// splitIncrement gives each call of group its count out of sum's: the
// counts each would have had, incrementing in turn.
func splitIncrement(sum *postgresCall, group []*postgresCall) {
	before := sum.count - sum.args[1].(int64)
	for _, c := range group {
		before += c.args[1].(int64)
		c.count, c.rows, c.err = before, sum.rows, sum.err
		close(c.done)
	}
}

// untilAllGiveUp is a context that ends with parent or once the contexts
// of all calls have, and its cancel.
func untilAllGiveUp(parent context.Context, calls []*postgresCall) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	var waiting atomic.Int64
	waiting.Store(int64(len(calls)))
	stops := make([]func() bool, len(calls))
	for i, c := range calls {
		stops[i] = context.AfterFunc(c.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// pipeline sends calls on one connection, each statement then a Sync, in
// one write, and reads their answers. The first answered calls have their
// results (a statement's own error among them); the rest get err, the
// connection's failure.
func (b *postgresBatcher) pipeline(ctx context.Context, calls []*postgresCall) (answered int, err error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release() // a connection that failed is closed, and the pool drops it
	c := conn.Conn()
	statements := make([]*pgconn.StatementDescription, len(calls))
	for i, call := range calls {
		// pgx prepares a text once per connection and keeps it.
		if statements[i], err = c.Prepare(ctx, call.sql, call.sql); err != nil {
			return 0, err
		}
	}
	p := c.PgConn().StartPipeline(ctx)
	defer p.Close() // its error is the connection's, already returned
	var args pgx.ExtendedQueryBuilder
	for i, call := range calls {
		if err := args.Build(c.TypeMap(), statements[i], call.args); err != nil {
			return 0, err // a bug: the store passes strings, integers and durations
		}
		// The arguments are copied into the write buffer at once; the
		// result formats are kept until the answer.
		p.SendQueryStatement(statements[i], args.ParamValues, args.ParamFormats, slices.Clone(args.ResultFormats))
		p.SendPipelineSync()
	}
	if err := p.Flush(); err != nil {
		return 0, err
	}
	for i, call := range calls {
		if err := readAnswer(p, c.TypeMap(), call); err != nil {
			return i, err
		}
	}
	return len(calls), nil
}

// readAnswer reads call's result and the Sync after it. A statement's own
// error is call's; the error returned is the connection's.
func readAnswer(p *pgconn.Pipeline, types *pgtype.Map, call *postgresCall) error {
	res, err := p.GetResults()
	var statementErr *pgconn.PgError
	switch {
	case errors.As(err, &statementErr):
		call.err = err // the server skips to the Sync
	case err != nil:
		return err
	default:
		rows, ok := res.(*pgconn.ResultReader)
		if !ok {
			return fmt.Errorf("store: PostgreSQL answered a statement with %T", res)
		}
		if rows.NextRow() && call.dest != nil {
			call.err = pgx.ScanRow(types, rows.FieldDescriptions(), rows.Values(), call.dest...)
		}
		tag, err := rows.Close()
		if errors.As(err, &statementErr) {
			call.err = err
		} else if err != nil {
			return err
		}
		call.rows = tag.RowsAffected()
	}
	res, err = p.GetResults()
	if err != nil {
		return err
	}
	if _, ok := res.(*pgconn.PipelineSync); !ok {
		return fmt.Errorf("store: PostgreSQL answered a Sync with %T", res)
	}
	return nil
}
