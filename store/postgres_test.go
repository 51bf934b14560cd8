package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-ha/caddy-ha/internal/pgtest"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/store"
)

// newPostgresStore opens a store on srv in table (created if missing),
// closed when the test ends.
func newPostgresStore(t testing.TB, srv *pgtest.Server, table, prefix string, options ...store.PostgresOption) *store.Postgres {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return ensured(t, store.NewPostgres(pool, table, prefix, options...))
}

func ensured(t testing.TB, s *store.Postgres) *store.Postgres {
	t.Helper()
	t.Cleanup(func() { s.Close() })
	if err := s.EnsureTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidTableName(t *testing.T) {
	for name, want := range map[string]bool{
		"short_lived_store": true, "_t1": true, "ha.short_lived_store": true, "T": true,
		strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
		"": false, "1t": false, "a.b.c": false, "a.": false, ".a": false,
		`"t"`: false, "t; DROP TABLE x": false, "t-1": false, "té": false,
	} {
		if got := store.ValidTableName(name); got != want {
			t.Errorf("ValidTableName(%q) = %v, want %v", name, got, want)
		}
	}
}

// EnsureTable creates the guide's table and index, in a schema too, and
// is harmless when they are there.
func TestPostgresEnsureTableCreates(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.Pool(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, "CREATE SCHEMA ha"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"short_lived_store", "ha.short_lived_store"} {
		s := newPostgresStore(t, srv, table, "")
		if err := s.EnsureTable(ctx); err != nil {
			t.Fatalf("EnsureTable of %s a second time: %v", table, err)
		}
		var columns, index string
		if err := db.QueryRow(ctx, `SELECT string_agg(column_name || ' ' || data_type || ' ' || is_nullable, ', ' ORDER BY ordinal_position)
			FROM information_schema.columns WHERE table_schema || '.' || table_name = $1`, qualified(table)).Scan(&columns); err != nil {
			t.Fatal(err)
		}
		if want := "key text NO, value text NO, expires_at timestamp with time zone NO"; columns != want {
			t.Errorf("%s has the columns %q, want %q", table, columns, want)
		}
		if err := db.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE schemaname || '.' || tablename = $1 AND indexname = 'short_lived_store_expires_at'",
			qualified(table)).Scan(&index); err != nil || !strings.HasSuffix(index, "USING btree (expires_at)") {
			t.Errorf("the index of %s: %q, %v", table, index, err)
		}
		mustAdd(t, s, "k", "v", time.Minute)
	}
}

func qualified(table string) string {
	if strings.Contains(table, ".") {
		return table
	}
	return "public." + table
}

// A table of that name with another shape is refused, saying what it has
// and what the store needs; the table is left as it was.
func TestPostgresEnsureTableRefusesAnotherShape(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.Pool(t)
	ctx := context.Background()
	for table, ddl := range map[string]string{
		"no_primary_key": "(key text NOT NULL, value text NOT NULL, expires_at timestamptz NOT NULL)",
		"int_value":      "(key text PRIMARY KEY, value bigint NOT NULL, expires_at timestamptz NOT NULL)",
		"nullable":       "(key text PRIMARY KEY, value text, expires_at timestamptz NOT NULL)",
		"no_zone":        "(key text PRIMARY KEY, value text NOT NULL, expires_at timestamp NOT NULL)",
		"extra":          "(key text PRIMARY KEY, value text NOT NULL, expires_at timestamptz NOT NULL, owner text)",
	} {
		if _, err := db.Exec(ctx, "CREATE TABLE "+table+" "+ddl); err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		s := store.NewPostgres(pool, table, "")
		err = s.EnsureTable(ctx)
		s.Close()
		if err == nil || !strings.Contains(err.Error(), "the table "+table+" has the columns") ||
			!strings.Contains(err.Error(), "the store needs key text not null primary key, value text not null, expires_at timestamp with time zone not null") {
			t.Errorf("EnsureTable of %s %s: %v", table, ddl, err)
		}
		var indexes int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%(expires_at)'", table).Scan(&indexes); err != nil || indexes != 0 {
			t.Errorf("EnsureTable indexed the refused table %s: %d, %v", table, indexes, err)
		}
	}
}

// A role that may not create tables (PostgreSQL 15's public schema) uses
// a table made beforehand: EnsureTable only reads it.
func TestPostgresEnsureTableOfARoleThatCannotCreate(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.Pool(t)
	ctx := context.Background()
	for _, ddl := range []string{
		"CREATE ROLE caddy LOGIN",
		"CREATE TABLE short_lived_store (key text PRIMARY KEY, value text NOT NULL, expires_at timestamptz NOT NULL)",
		"CREATE INDEX short_lived_store_expires_at ON short_lived_store (expires_at)",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON short_lived_store TO caddy",
	} {
		if _, err := db.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(ctx, strings.Replace(srv.URL(), "postgres@", "caddy@", 1))
	if err != nil {
		t.Fatal(err)
	}
	s := ensured(t, store.NewPostgres(pool, "short_lived_store", ""))
	if _, err := pool.Exec(ctx, "CREATE TABLE other (n int)"); err == nil {
		t.Fatal("the role may create tables: the test shows nothing")
	}
	mustAdd(t, s, "k", "v", time.Minute)
}

// Stores with other prefixes share one table without meeting, and a row's
// key is the prefix and the key.
func TestPostgresPrefixKeepsKeysApart(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	a, b := newPostgresStore(t, srv, "short_lived_store", "svc-a:"), newPostgresStore(t, srv, "short_lived_store", "svc-b:")
	mustAdd(t, a, "k", "a", time.Minute)
	wantAbsent(t, b, "k")
	mustAdd(t, b, "k", "b", time.Minute)
	wantValue(t, a, "k", "a")
	if _, err := b.Increment(ctx, "n", 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	counts := []int64{-1}
	if n, err := a.IncrementAndCount(ctx, "m", 1, time.Minute, []string{"n"}, counts); n != 1 || err != nil || counts[0] != 0 {
		t.Fatalf("a's IncrementAndCount = %d, %v, counts %v: it saw b's counter", n, err, counts)
	}
	if _, _, err := a.Take(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	wantValue(t, b, "k", "b")
	rows, err := srv.Pool(t).Query(ctx, "SELECT key || '=' || value FROM short_lived_store ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		got = append(got, row)
	}
	if want := "svc-a:m=1 svc-b:k=b svc-b:n=5"; strings.Join(got, " ") != want {
		t.Fatalf("the table holds %v, want %s", got, want)
	}
}

// Each operation runs exactly the statement it names, once, as its own
// transaction (no BEGIN or COMMIT), as pg_stat_statements counts them.
func TestPostgresOneStatementPerOperation(t *testing.T) {
	srv := pgtest.Start(t)
	if !srv.StatementStats {
		t.Skip("pg_stat_statements is not installed")
	}
	db := srv.Pool(t)
	ctx := context.Background()
	s := newPostgresStore(t, srv, "short_lived_store", "p:")
	if _, err := db.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, "k", "v", time.Minute)
	wantValue(t, s, "k", "v")
	if _, _, err := s.GetAndTouch(ctx, "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Take(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Increment(ctx, "n", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IncrementAndCount(ctx, "n", 1, time.Minute, []string{"m"}, make([]int64, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Now(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `SELECT calls, query FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'`)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int64{}
	for rows.Next() {
		var calls int64
		var query string
		if err := rows.Scan(&calls, &query); err != nil {
			t.Fatal(err)
		}
		ran[query] = calls
	}
	t.Logf("statements run: %v", ran)
	table := `"short_lived_store"`
	for _, prefix := range []string{
		"INSERT INTO " + table + " AS t (key, value, expires_at) VALUES ($1, $2, now() + $3::interval) ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at WHERE t.expires_at <= now()",
		"SELECT value FROM " + table + " WHERE key = $1 AND expires_at > now()",
		"UPDATE " + table + " SET expires_at = now() + $2::interval WHERE key = $1 AND expires_at > now() RETURNING value",
		"DELETE FROM " + table + " WHERE key = $1 AND expires_at > now() RETURNING value",
		"DELETE FROM " + table + " WHERE key = $1",
		incrementStatement,
		"WITH counted AS (INSERT INTO " + table,
		"SELECT $1", // SELECT 1, normalised
		"SELECT now()",
	} {
		found := 0
		for query, calls := range ran {
			if strings.HasPrefix(query, prefix) && (prefix != "DELETE FROM "+table+" WHERE key = $1" || query == prefix) {
				found++
				if calls != 1 {
					t.Errorf("%d calls of %s", calls, query)
				}
			}
		}
		if found != 1 {
			t.Errorf("%d statements start with %s", found, prefix)
		}
	}
	if len(ran) != 9 {
		t.Errorf("%d statements ran for 9 operations", len(ran))
	}
}

// incrementStatement is the guide's Increment as the store runs it on the
// table short_lived_store.
const incrementStatement = `INSERT INTO "short_lived_store" AS t (key, value, expires_at) VALUES ($1, $2::bigint::text, now() + $3::interval) ` +
	`ON CONFLICT (key) DO UPDATE SET value = CASE WHEN t.expires_at > now() THEN (t.value::bigint + $2)::text ELSE excluded.value END, ` +
	`expires_at = excluded.expires_at RETURNING value::bigint`

// The sweeper deletes the rows of expired values, and only those.
func TestPostgresSweeperDeletesExpiredRows(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	s := newPostgresStore(t, srv, "short_lived_store", "", store.PostgresSweep(20*time.Millisecond))
	for i := range 50 {
		mustAdd(t, s, fmt.Sprint("short", i), "v", 50*time.Millisecond)
	}
	mustAdd(t, s, "long", "v", time.Hour)
	db := srv.Pool(t)
	poll.Until(t, 5*time.Second, "the expired rows to be deleted", func() bool {
		var rows int
		return db.QueryRow(ctx, "SELECT count(*) FROM short_lived_store").Scan(&rows) == nil && rows == 1
	})
	wantValue(t, s, "long", "v")
}

// roundTrips counts the writes of a pool's connections to the database:
// a batch goes out in one write (Flush) and waits for its answers, so
// writes are round trips. Connecting, preparing and pgxpool's pings of
// idle connections write too, and are counted alike.
type roundTrips struct{ writes atomic.Int64 }

func (r *roundTrips) pool(t testing.TB, srv *pgtest.Server, size int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = size
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := new(net.Dialer).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c, writes: &r.writes}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// Concurrent calls share round trips, and a call that fails in a batch
// (an increment of a word) fails alone: each statement is its own
// transaction.
func TestPostgresBatchesConcurrentCalls(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	var trips roundTrips
	s := ensured(t, store.NewPostgres(trips.pool(t, srv, 4), "short_lived_store", ""))
	mustAdd(t, s, "word", "abc", time.Hour)
	warm(t, s)
	const workers, each = 64, 20
	before := trips.writes.Load()
	var notCounter atomic.Int64
	race(t, workers, func(i int) error {
		for range each {
			if i%8 == 0 {
				if _, err := s.Increment(ctx, "word", 1, time.Hour); !errors.Is(err, store.ErrNotCounter) {
					return fmt.Errorf("Increment of a word: %v", err)
				}
				notCounter.Add(1)
				continue
			}
			if _, err := s.Increment(ctx, fmt.Sprint("c", i%4), 1, time.Hour); err != nil {
				return err
			}
		}
		return nil
	})
	calls := int64(workers * each)
	writes := trips.writes.Load() - before
	t.Logf("%d concurrent calls from %d goroutines took %d round trips (%.3f per call)", calls, workers, writes, float64(writes)/float64(calls))
	if writes*2 > calls {
		t.Errorf("%d calls took %d round trips: expected them shared, 2 calls or more a trip", calls, writes)
	}
	var total int64
	for i := range 4 {
		v, _, err := s.Get(ctx, fmt.Sprint("c", i))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if want := calls - notCounter.Load(); total != want {
		t.Fatalf("the counters hold %d increments, want %d", total, want)
	}
}

// warm has every connection of the store's pool connected and its
// statements prepared, so that counts measure calls only.
func warm(t testing.TB, s *store.Postgres) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for range 20 {
				if _, err := s.Increment(context.Background(), fmt.Sprint("warm", i), 1, time.Minute); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// A database that hangs makes calls fail within the caller's deadline; one
// that comes back (resumed, or restarted after a kill) is used again.
func TestPostgresHonoursDeadlinesAndRecovers(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	s := newPostgresStore(t, srv, "short_lived_store", "")
	if _, err := s.Increment(ctx, "n", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	for range 3 {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		start := time.Now()
		_, err := s.Increment(short, "n", 1, time.Minute)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Increment on a paused database: %v, want its deadline", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("Increment on a paused database took %v with a 50ms deadline", d)
		}
	}
	srv.Resume()
	recovers(t, s)
	srv.Kill()
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.Ping(short); err == nil {
		t.Fatal("Ping of a killed database succeeded")
	}
	srv.Restart()
	recovers(t, s)
}

// Close ends the calls on the wire to a database that hangs, even those
// without a deadline, and returns.
func TestPostgresCloseEndsCallsOnAHungDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	var trips roundTrips
	s := ensured(t, store.NewPostgres(trips.pool(t, srv, 4), "short_lived_store", ""))
	warm(t, s)
	srv.Pause()
	defer srv.Resume()
	before := trips.writes.Load()
	failed := make(chan error)
	go func() {
		_, err := s.Increment(context.Background(), "n", 1, time.Minute)
		failed <- err
	}()
	poll.Until(t, 5*time.Second, "the increment to be sent", func() bool { return trips.writes.Load() > before })
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("an increment on a paused database succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close left a call waiting on a paused database")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while the database hung")
	}
}

func recovers(t *testing.T, s *store.Postgres) {
	t.Helper()
	poll.Until(t, 5*time.Second, "the store to answer again", func() bool {
		short, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.Increment(short, "n", 1, time.Minute)
		return err == nil
	})
}

// Concurrent increments, as a busy proxy's rate limits make them: the
// figures are ns/op at this concurrency, and round trips per call
// (trips/op).
func BenchmarkPostgresIncrement(b *testing.B) {
	benchmarkPostgres(b, 100, 0)
}

// One hot key, as in a rate limit whose key is the same for every
// request (the bench/ratelimit setting): the calls are merged into few
// statements.
func BenchmarkPostgresIncrementOneKey(b *testing.B) {
	benchmarkPostgres(b, 1, 0)
}

// Sliding-window rate limits: the current slot's counter, and the counts
// of the window's other slots (ratelimit.SlidingSlots, 10).
func BenchmarkPostgresIncrementAndCount(b *testing.B) {
	benchmarkPostgres(b, 100, 10)
}

// What the batches save: the store's increment statement by pgx alone,
// each call a round trip of its own, on as many connections and callers.
func BenchmarkPostgresIncrementUnbatched(b *testing.B) {
	srv := pgtest.Start(b)
	newPostgresStore(b, srv, "short_lived_store", "") // the table
	var trips roundTrips
	pool := trips.pool(b, srv, 4)
	defer pool.Close()
	b.SetParallelism(32)
	var clients atomic.Int64
	before := trips.writes.Load()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprint("bench:{client", clients.Add(1)%100, "}:0")
		var n int64
		for pb.Next() {
			if err := pool.QueryRow(context.Background(), incrementStatement, key, int64(1), time.Minute).Scan(&n); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(trips.writes.Load()-before)/float64(b.N), "trips/op")
}

// benchmarkPostgres increments keys counters from 64 goroutines, with
// others slots read as IncrementAndCount reads them, and reports, per
// call, the round trips, the statements the database ran (when
// pg_stat_statements is there) and the processor time PostgreSQL used.
func benchmarkPostgres(b *testing.B, keys, others int) {
	srv := pgtest.Start(b)
	var trips roundTrips
	s := ensured(b, store.NewPostgres(trips.pool(b, srv, 4), "short_lived_store", "bench:"))
	warm(b, s)
	db := srv.Pool(b)
	b.SetParallelism(32) // goroutines per GOMAXPROCS: requests waiting on the store
	var clients atomic.Int64
	statementsBefore := statementCalls(b, srv, db)
	cpuBefore, err := srv.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	before := trips.writes.Load()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := fmt.Sprint("{client", clients.Add(1)%int64(keys), "}:")
		slots := make([]string, others)
		for i := range slots {
			slots[i] = fmt.Sprint(client, i+1)
		}
		counts := make([]int64, others)
		for pb.Next() {
			if _, err := s.IncrementAndCount(context.Background(), client+"0", 1, time.Minute, slots, counts); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(trips.writes.Load()-before)/float64(b.N), "trips/op")
	if cpuAfter, err := srv.CPUTime(); err == nil {
		b.ReportMetric(float64((cpuAfter-cpuBefore).Microseconds())/float64(b.N), "pg-µs/op")
	}
	if srv.StatementStats {
		b.ReportMetric(float64(statementCalls(b, srv, db)-statementsBefore)/float64(b.N), "stmts/op")
	}
}

// statementCalls is the number of statements run in the database so far
// but those reading pg_stat_statements (0 without pg_stat_statements).
func statementCalls(t testing.TB, srv *pgtest.Server, db *pgxpool.Pool) int64 {
	t.Helper()
	if !srv.StatementStats {
		return 0
	}
	var n int64
	if err := db.QueryRow(context.Background(), "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements"+
		" WHERE query NOT LIKE '%pg_stat_statements%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Concurrent increments of one key (a hot rate-limit key) are merged into
// one statement per batch: each caller still gets a count of its own, as
// if they had run in turn, and the database runs fewer statements than
// there were calls.
func TestPostgresMergesIncrementsOfOneKey(t *testing.T) {
	srv := pgtest.Start(t)
	if !srv.StatementStats {
		t.Skip("pg_stat_statements is not installed")
	}
	ctx := context.Background()
	db := srv.Pool(t)
	s := newPostgresStore(t, srv, "short_lived_store", "merge:")
	warm(t, s)
	if _, err := db.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatal(err)
	}
	const workers, each = 64, 10
	var mu sync.Mutex
	seen := map[int64]bool{}
	race(t, workers, func(int) error {
		for range each {
			n, err := s.Increment(ctx, "hot", 1, time.Hour)
			if err != nil {
				return err
			}
			mu.Lock()
			dup := seen[n]
			seen[n] = true
			mu.Unlock()
			if dup {
				return fmt.Errorf("count %d given twice", n)
			}
		}
		return nil
	})
	for n := int64(1); n <= workers*each; n++ {
		if !seen[n] {
			t.Fatalf("no caller got count %d of %d", n, workers*each)
		}
	}
	var statements int64
	if err := db.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE 'INSERT INTO%'`).Scan(&statements); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d increments of one key took %d statements", workers*each, statements)
	if statements >= workers*each {
		t.Fatalf("%d increments took %d statements: none merged", workers*each, statements)
	}
}
