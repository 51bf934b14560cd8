package pgtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-ha/caddy-ha/internal/pgtest"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// A started server answers; paused it answers nothing, on a connection
// opened before (its backend is paused too) or a new one; resumed it
// answers again; killed and restarted it answers on the same URL with the
// data it had, down to its last commit.
func TestStartPauseKillRestart(t *testing.T) {
	srv := pgtest.Start(t)
	pool := srv.Pool(t)
	wantOne(t, pool)
	if _, err := pool.Exec(context.Background(), "CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	if !srv.StatementStats {
		t.Error("pg_stat_statements is not available (Debian's postgresql package ships it)")
	}

	open, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	for _, how := range []string{"an open connection", "a new connection"} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		var n int
		if how == "a new connection" {
			err = srv.Pool(t).QueryRow(ctx, "select 1").Scan(&n)
		} else {
			err = open.QueryRow(ctx, "select 1").Scan(&n)
		}
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("select 1 on %s of a paused server: %v, want a timeout", how, err)
		}
	}
	open.Release() // broken by the timeout: the pool drops it
	srv.Resume()
	wantOne(t, pool)

	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err == nil {
		t.Fatal("a killed server answered")
	}
	srv.Restart()
	wantOne(t, pool)
	var kept int
	if err := pool.QueryRow(context.Background(), "SELECT n FROM kept").Scan(&kept); err != nil || kept != 7 {
		t.Fatalf("after the restart the table holds %d, %v; want 7", kept, err)
	}
}

// A server killed while its backends are busy restarts at once, every
// time: Kill returns only once the backends have exited, which hold the
// shared memory a new postmaster on the same data checks.
func TestKillBusyServerThenRestart(t *testing.T) {
	srv := pgtest.Start(t)
	pool := srv.Pool(t)
	const busy = 6
	for cycle := range 5 {
		for range busy {
			conn, err := pgx.Connect(context.Background(), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			go func() { // ends with an error when the server is killed
				defer conn.Close(context.Background())
				_, _ = conn.Exec(context.Background(), "SELECT count(*) FROM generate_series(1, 1000000000)")
			}()
		}
		poll.Until(t, 10*time.Second, "the busy backends", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT count(*) FROM generate_series%' AND state = 'active'").Scan(&n)
			return err == nil && n == busy
		})
		srv.Kill()
		if err := srv.Process.Restart(); err != nil {
			t.Fatalf("restart %d: %v", cycle, err)
		}
		wantOne(t, srv.Pool(t)) // the old pool's connections broke
	}
}

func wantOne(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := pool.QueryRow(ctx, "select 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("select 1 = %d, %v", n, err)
	}
}

// CPUTime grows while the server works, and keeps the time of a backend
// that has exited.
func TestCPUTime(t *testing.T) {
	srv := pgtest.Start(t)
	before, err := srv.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	busy, err := srv.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	if busy <= before {
		t.Fatalf("CPUTime %v after counting 3,000,000 rows, %v before", busy, before)
	}
	conn.Close(ctx)
	// At once, while the backend may be a zombie, and after.
	for range 5 {
		after, err := srv.CPUTime()
		if err != nil {
			t.Fatal(err)
		}
		if after < busy {
			t.Fatalf("CPUTime %v once the backend exited, %v before", after, busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("CPUTime %v, then %v", before, busy)
}
