package main

import (
	"context"
	"maps"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-ha/caddy-ha/internal/pgtest"
	"github.com/caddy-ha/caddy-ha/store"
)

func TestParseSS(t *testing.T) {
	// ss -tinH state established '( sport = :5432 )', cut.
	out := "0      0      127.0.0.1:5432 127.0.0.1:41822\n" +
		"\t cubic wscale:7,7 rto:204 rtt:0.02/0.01 mss:32768 bytes_received:26527 segs_out:654 segs_in:651 data_segs_out:647 data_segs_in:640 send 1bps\n" +
		"0      0      127.0.0.1:5432 127.0.0.1:41830\n" +
		"\t cubic wscale:7,7 rto:204 segs_out:2 segs_in:3\n"
	got, err := parseSS(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int64{41822: 640, 41830: 0}
	if !maps.Equal(got, want) {
		t.Errorf("parseSS = %v, want %v", got, want)
	}
	if _, err := parseSS(""); err == nil {
		t.Error("no connection: no error")
	}
	if _, err := parseSS("\t cubic data_segs_in:1\n"); err == nil {
		t.Error("tcp_info without a socket: no error")
	}
}

func TestPostgresFigures(t *testing.T) {
	p := &postgresProbe{statementStats: true}
	if got, want := p.figures(1000, 250, 30*time.Millisecond, 1000), "1.00 statements/req, 0.25 round trips/req (4.0 statements each), PostgreSQL CPU 30 µs/req"; got != want {
		t.Errorf("figures = %q, want %q", got, want)
	}
	p = &postgresProbe{ssMissing: "ss not found"}
	if got, want := p.figures(0, 0, 0, 1000), "PostgreSQL CPU 0 µs/req"; got != want {
		t.Errorf("nothing counted: %q, want %q", got, want)
	}
	p = &postgresProbe{ssMissing: "ss not found", statementStats: true}
	if got, want := p.figures(1000, 0, 5*time.Millisecond, 1000), "1.00 statements/req, PostgreSQL CPU 5 µs/req"; got != want {
		t.Errorf("no ss: %q, want %q", got, want)
	}
}

// TestSegmentsAreRoundTrips checks what the probe counts as round trips
// against the store alone: a call at a time, one segment each; concurrent
// callers, one a batch (a pool acquisition each), give or take the setup
// of a connection.
func TestSegmentsAreRoundTrips(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("ss not found (iproute2)")
	}
	srv := pgtest.Start(t)
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewPostgres(pool, "short_lived_store", "bench:")
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.EnsureTable(ctx); err != nil {
		t.Fatal(err)
	}
	received := func() int64 {
		t.Helper()
		segs, err := receivedSegments(srv.Port)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, n := range segs {
			sum += n
		}
		return sum
	}
	increment := func() {
		if _, err := s.Increment(ctx, "k", 1, time.Minute); err != nil {
			t.Error(err)
		}
	}
	increment() // prepares the statement on a connection

	const calls = 1000
	before := received()
	for range calls {
		increment()
	}
	// At most one more connection's setup (its startup and Prepare).
	if got := received() - before; got < calls || got > calls+3 {
		t.Errorf("%d sequential calls: %d segments received", calls, got)
	}

	before, acquired := received(), pool.Stat().AcquireCount()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range calls / 50 * 4 {
				increment()
			}
		})
	}
	wg.Wait()
	segs, batches := received()-before, pool.Stat().AcquireCount()-acquired
	// Each new connection adds its startup and a Prepare; the pool has 4
	// at most.
	if segs < batches || segs > batches+4*3 {
		t.Errorf("%d concurrent calls in %d batches: %d segments received", 4*calls, batches, segs)
	}
	if batches >= 4*calls {
		t.Errorf("%d concurrent calls in %d batches: none shared", 4*calls, batches)
	}
	t.Logf("%d concurrent calls: %d batches, %d segments", 4*calls, batches, segs)
}
