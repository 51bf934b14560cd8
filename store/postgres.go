package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// Postgres is the store in a PostgreSQL table, shared by every Caddy
// instance and by the cluster's app: the toolkit guide's table (key text
// primary key, value text, expires_at timestamptz, indexed) and one
// statement per operation, expiring by the database's clock (now()), so
// the instances' clocks do not matter. Every key is put under prefix.
//
// Calls waiting at the same moment share a round trip: they go out
// pipelined, each statement its own transaction. Expired rows stay in the
// table, absent to every operation, until the sweeper deletes them.
type Postgres struct {
	pool   *pgxpool.Pool
	table  string // quoted, for statements
	name   string // as given, for messages
	index  string // quoted
	prefix string
	sql    postgresStatements
	// IncrementAndCount's statements by the number of others.
	countStatements sync.Map
	batch           *postgresBatcher

	// tableReady is set once EnsureTable has succeeded: until then Ping
	// checks the table first, so that a database down at start gets its
	// table when it answers.
	tableReady atomic.Bool

	stop        context.CancelFunc // ends the senders, their batches and the sweeper
	sweeperDone chan struct{}
	closed      sync.Once
}

// DefaultPostgresSweep is how often the PostgreSQL store deletes expired
// rows: they cost only room meanwhile.
const DefaultPostgresSweep = 2 * time.Minute

// PostgresOption sets up a Postgres store differently from the defaults.
type PostgresOption func(*postgresSettings)

type postgresSettings struct{ sweep time.Duration }

// PostgresSweep makes the store delete expired rows every period instead
// of every DefaultPostgresSweep.
func PostgresSweep(period time.Duration) PostgresOption {
	return func(s *postgresSettings) { s.sweep = period }
}

// NewPostgres returns a store in table (a name ValidTableName accepts,
// taken as written, so case matters) with keys under prefix, on pool,
// which it owns: Close closes it. EnsureTable creates the table.
func NewPostgres(pool *pgxpool.Pool, table, prefix string, options ...PostgresOption) *Postgres {
	settings := postgresSettings{sweep: DefaultPostgresSweep}
	for _, o := range options {
		o(&settings)
	}
	p := &Postgres{pool: pool, name: table, prefix: prefix, sweeperDone: make(chan struct{})}
	schema, name, qualified := strings.Cut(table, ".")
	if qualified {
		p.table = pgx.Identifier{schema, name}.Sanitize()
	} else {
		name = table
		p.table = pgx.Identifier{name}.Sanitize()
	}
	// An index lives in its table's schema: its name is not qualified.
	p.index = pgx.Identifier{name + "_expires_at"}.Sanitize()
	p.sql = newPostgresStatements(p.table)
	life, stop := context.WithCancel(context.Background())
	p.stop = stop
	p.batch = newPostgresBatcher(life, pool, p.sql.increment)
	go func() {
		defer close(p.sweeperDone)
		recovered.Loop(reporter("the PostgreSQL store's sweeper"), settings.sweep, life.Done(), func() { p.sweepEvery(life, settings.sweep) })
	}()
	return p
}

// postgresStatements are the store's statements on its table. $1 is the
// key; lifetimes are intervals added to the database's now().
type postgresStatements struct {
	tryAdd, get, take, remove, getAndTouch, increment, sweep string
}

// sweepLimit bounds the rows one sweeping statement deletes, so that it
// holds its locks briefly.
const sweepLimit = 10000

func newPostgresStatements(t string) postgresStatements {
	insert := "INSERT INTO " + t + " AS t (key, value, expires_at) VALUES "
	// $2 is the amount. A counter that has expired starts again from it,
	// whatever its value was.
	increment := insert + "($1, $2::bigint::text, now() + $3::interval) ON CONFLICT (key) DO UPDATE SET " +
		"value = CASE WHEN t.expires_at > now() THEN (t.value::bigint + $2)::text ELSE excluded.value END, " +
		"expires_at = excluded.expires_at RETURNING value::bigint"
	live := " WHERE key = $1 AND expires_at > now()"
	return postgresStatements{
		// Adds if it affected a row: an expired value is replaced.
		tryAdd: insert + "($1, $2, now() + $3::interval) ON CONFLICT (key) DO UPDATE SET " +
			"value = excluded.value, expires_at = excluded.expires_at WHERE t.expires_at <= now()",
		get:         "SELECT value FROM " + t + live,
		take:        "DELETE FROM " + t + live + " RETURNING value",
		remove:      "DELETE FROM " + t + " WHERE key = $1",
		getAndTouch: "UPDATE " + t + " SET expires_at = now() + $2::interval" + live + " RETURNING value",
		increment:   increment,
		// By ctid = ANY, a TID scan when many rows have expired. The
		// outer condition is checked again on a row changed meanwhile
		// (TryAdd over an expired value), which then stays.
		sweep: fmt.Sprintf("DELETE FROM %[1]s WHERE ctid = ANY (ARRAY(SELECT ctid FROM %[1]s WHERE expires_at <= now() LIMIT %[2]d)) AND expires_at <= now()", t, sweepLimit),
	}
}

const (
	postgresPing = "SELECT 1"
	postgresNow  = "SELECT now()"
)

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// ValidTableName reports whether name is a table name the PostgreSQL store
// takes: an SQL identifier of up to 63 characters ([A-Za-z_][A-Za-z0-9_]*),
// optionally after a schema's (schema.table).
func ValidTableName(name string) bool { return tableName.MatchString(name) }

// EnsureTable creates the table and its index on expires_at if they are
// missing, and fails if a table of that name has another shape. A table
// that is there is only read, so a role that may not create tables (on
// PostgreSQL 15, only the owner of the public schema may by default) works
// with one made beforehand. Instances starting together take turns (an
// advisory lock): CREATE … IF NOT EXISTS alone fails on such a race.
func (p *Postgres) EnsureTable(ctx context.Context) error {
	if p.tableReady.Load() {
		return nil
	}
	if err := p.ensureTable(ctx); err != nil {
		return err
	}
	p.tableReady.Store(true)
	return nil
}

func (p *Postgres) ensureTable(ctx context.Context) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", p.table); err != nil {
		return err
	}
	columns, err := tableColumns(ctx, tx, p.table)
	if err != nil {
		return err
	}
	if len(columns) == 0 {
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+p.table+
			" (key text PRIMARY KEY, value text NOT NULL, expires_at timestamptz NOT NULL)"); err != nil {
			return err
		}
	} else if want := "key text not null primary key, value text not null, expires_at timestamp with time zone not null"; strings.Join(columns, ", ") != want {
		return fmt.Errorf("store: the table %s has the columns %s; the store needs %s", p.name, strings.Join(columns, ", "), want)
	}
	var indexed bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"+
		" WHERE i.indrelid = to_regclass($1) AND a.attname = 'expires_at')", p.table).Scan(&indexed); err != nil {
		return err
	}
	if !indexed {
		if _, err := tx.Exec(ctx, "CREATE INDEX IF NOT EXISTS "+p.index+" ON "+p.table+" (expires_at)"); err != nil {
			return fmt.Errorf("store: the table %s has no index on expires_at, and creating one failed (its owner may: CREATE INDEX ON %s (expires_at)): %w", p.name, p.table, err)
		}
	}
	return tx.Commit(ctx)
}

// tableColumns describes table's columns ("name type[ not null][ primary
// key]"), none if there is no such table.
func tableColumns(ctx context.Context, tx pgx.Tx, table string) ([]string, error) {
	rows, err := tx.Query(ctx, "SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod)"+
		" || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END"+
		" || CASE WHEN EXISTS (SELECT FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary AND i.indnatts = 1 AND i.indkey[0] = a.attnum) THEN ' primary key' ELSE '' END"+
		" FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// key is key under the prefix, in memory of the store's own: the call may
// still be queued after its caller has returned.
func (p *Postgres) key(key string) string {
	if p.prefix == "" {
		return strings.Clone(key)
	}
	return p.prefix + key // a new string
}

// postgresLifetime is lifetime as pgx sends it, an interval of whole
// microseconds: a positive lifetime stays positive.
func postgresLifetime(lifetime time.Duration) time.Duration { return max(lifetime, time.Microsecond) }

func (p *Postgres) TryAdd(ctx context.Context, key, value string, lifetime time.Duration) (bool, error) {
	if err := checkLifetime(lifetime); err != nil {
		return false, err
	}
	c := newPostgresCall(p.sql.tryAdd, p.key(key), value, postgresLifetime(lifetime))
	if err := p.batch.do(ctx, c); err != nil {
		return false, err
	}
	return c.rows == 1, nil
}

func (p *Postgres) Get(ctx context.Context, key string) (string, bool, error) {
	return p.value(ctx, newPostgresCall(p.sql.get, p.key(key)))
}

func (p *Postgres) Take(ctx context.Context, key string) (string, bool, error) {
	return p.value(ctx, newPostgresCall(p.sql.take, p.key(key)))
}

func (p *Postgres) Remove(ctx context.Context, key string) error {
	return p.batch.do(ctx, newPostgresCall(p.sql.remove, p.key(key)))
}

// GetAndTouch renews the expiry of a live key and returns its value in one
// UPDATE … RETURNING, which creates nothing.
func (p *Postgres) GetAndTouch(ctx context.Context, key string, lifetime time.Duration) (string, bool, error) {
	if err := checkLifetime(lifetime); err != nil {
		return "", false, err
	}
	return p.value(ctx, newPostgresCall(p.sql.getAndTouch, p.key(key), postgresLifetime(lifetime)))
}

// value runs c, a statement returning the value of at most one row.
func (p *Postgres) value(ctx context.Context, c *postgresCall) (string, bool, error) {
	c.dest = []any{&c.value}
	if err := p.batch.do(ctx, c); err != nil {
		return "", false, err
	}
	return c.value, c.rows == 1, nil
}

func (p *Postgres) Increment(ctx context.Context, key string, amount int64, lifetime time.Duration) (int64, error) {
	return p.IncrementAndCount(ctx, key, amount, lifetime, nil, nil)
}

// incrementAndCount is the statement of IncrementAndCount with n others
// ($4 to $n+3): the increment in a WITH, and the SELECT that returns its
// count reads the others that are live (as of the statement's start). A
// statement for each n rather than one taking an array, so that
// PostgreSQL keeps one plan for it: it would plan every call with fewer
// than 10 others, as cheaper than the plan for an array of any length.
func (p *Postgres) incrementAndCount(n int) string {
	if sql, ok := p.countStatements.Load(n); ok {
		return sql.(string)
	}
	params := make([]string, n)
	for i := range params {
		params[i] = fmt.Sprintf("$%d", 4+i)
	}
	sql, _ := p.countStatements.LoadOrStore(n, "WITH counted AS ("+p.sql.increment+" AS count) "+
		"SELECT count, coalesce(keys, '{}'), coalesce(vals, '{}') FROM counted, (SELECT array_agg(key) AS keys, array_agg(value) AS vals FROM "+
		p.table+" WHERE key IN ("+strings.Join(params, ", ")+") AND expires_at > now()) AS live")
	return sql.(string)
}

// IncrementAndCount is one statement, incrementAndCount's.
func (p *Postgres) IncrementAndCount(ctx context.Context, key string, amount int64, lifetime time.Duration, others []string, counts []int64) (int64, error) {
	if err := checkLifetime(lifetime); err != nil {
		return 0, err
	}
	c := newPostgresCall(p.sql.increment, p.key(key), amount, postgresLifetime(lifetime))
	c.dest = []any{&c.count}
	keys := make([]string, len(others))
	if len(others) > 0 {
		c.sql = p.incrementAndCount(len(others))
		for i, o := range others {
			keys[i] = p.key(o)
			c.args = append(c.args, keys[i])
		}
		c.dest = append(c.dest, &c.live, &c.values)
	}
	if err := p.batch.do(ctx, c); err != nil {
		return 0, postgresCounterErr(err)
	}
	for i, k := range keys {
		counts[i] = 0 // absent
		if others[i] == key {
			// The SELECT does not see the WITH's increment.
			counts[i] = c.count
			continue
		}
		for j, live := range c.live {
			if live == k {
				counts[i], _ = parseCount(c.values[j]) // a value that is not a count counts as 0
			}
		}
	}
	return c.count, nil
}

// postgresCounterErr is err, or ErrNotCounter when PostgreSQL could not
// read a value as a bigint: not a number (22P02), or out of range (22003).
func postgresCounterErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "22P02" || pgErr.Code == "22003") {
		return ErrNotCounter
	}
	return err
}

// Ping checks that the database answers, through the batches as every
// call goes, and the table (see EnsureTable) until that has succeeded.
func (p *Postgres) Ping(ctx context.Context) error {
	if err := p.EnsureTable(ctx); err != nil {
		return err
	}
	return p.batch.do(ctx, newPostgresCall(postgresPing))
}

// PostgresUnreachable reports whether err says the database did not answer (it
// refused, timed out, or the connection broke), rather than refused what
// was asked: the first is an outage, the second (a table of another shape,
// a role that may not read it) a mistake in the settings.
func PostgresUnreachable(err error) bool {
	var connect *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || pgconn.SafeToRetry(err)
}

// Now is the database's clock (SELECT now()), so that it is a Clock.
func (p *Postgres) Now(ctx context.Context) (time.Time, error) {
	c := newPostgresCall(postgresNow)
	c.dest = []any{&c.now}
	if err := p.batch.do(ctx, c); err != nil {
		return time.Time{}, err
	}
	return c.now, nil
}

// Close stops the batch senders (ending the batches on the wire) and the
// sweeper, then closes the pool.
func (p *Postgres) Close() error {
	p.closed.Do(func() {
		p.stop()
		p.batch.wait()
		<-p.sweeperDone
		// pgx gives a broken connection to a database that hangs 15 s to
		// close (it sends a cancel request first): the pool goes on
		// closing after Close has waited a moment.
		closed := make(chan struct{})
		go func() {
			p.pool.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(postgresCloseWait):
		}
	})
	return nil
}

// postgresCloseWait is how long Close waits for the pool to close.
const postgresCloseWait = time.Second

// sweepEvery sweeps every period until ctx ends.
func (p *Postgres) sweepEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.sweep(ctx)
	}
}

// sweep deletes the expired rows, sweepLimit at a time while a statement
// finds that many. An error (the database is down) waits for the next
// sweep: the rows do no harm meanwhile.
func (p *Postgres) sweep(ctx context.Context) {
	for {
		tag, err := p.pool.Exec(ctx, p.sql.sweep)
		if err != nil || tag.RowsAffected() < sweepLimit {
			return
		}
	}
}
