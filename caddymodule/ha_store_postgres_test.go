package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/jackc/pgx/v5"

	"github.com/caddy-ha/caddy-ha/internal/pgtest"
	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// postgresStoreOption is a store subdirective for a PostgreSQL store.
func postgresStoreOption(pg *pgtest.Server, prefix string) string {
	return fmt.Sprintf("store postgres {\n\t\t\tconnection_string %s\n\t\t\tprefix %s\n\t\t}", pg.URL(), prefix)
}

// postgresOption is the ha option with a PostgreSQL store.
func postgresOption(pg *pgtest.Server, prefix string) string {
	return "ha {\n\t\t" + postgresStoreOption(pg, prefix) + "\n\t\thealth_interval 100ms\n\t}"
}

// postgresValue reads a key's live value in the table, "" if none.
func postgresValue(t *testing.T, pg *pgtest.Server) func(string) string {
	db := pg.Pool(t)
	return func(key string) string {
		var v string
		err := db.QueryRow(context.Background(), "SELECT value FROM short_lived_store WHERE key = $1 AND expires_at > now()", key).Scan(&v)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Errorf("reading %s: %v", key, err)
		}
		return v
	}
}

// postgresUnderTest starts a PostgreSQL for the test.
func postgresUnderTest(t *testing.T) storeUnderTest {
	pg := pgtest.Start(t)
	addr := strings.TrimPrefix(strings.Split(pg.URL(), "/")[2], "postgres@")
	return storeUnderTest{
		kind: "postgres", label: func(prefix string) string {
			return "postgres " + addr + "/postgres user=postgres table=short_lived_store prefix=" + prefix
		},
		option: func(prefix string) string { return postgresOption(pg, prefix) },
		fail:   map[string]func(){"kill": pg.Kill, "pause": pg.Pause},
		heal:   map[string]func(){"kill": pg.Restart, "pause": pg.Resume},
		value:  postgresValue(t, pg),
	}
}

// The database stopped and paused under load: each on_store_error policy
// honoured, no request waiting past store_timeout, recovery on its own.
func TestPostgresStoreOutage(t *testing.T) {
	testStoreOutage(t, postgresUnderTest)
}

// Two Caddy instances sharing one database let exactly the limit through
// per window, with the database as the ha app's store and as the
// handler's own: 10 of 400 one request at a time, 1000 of 2000 in leases.
func TestPostgresExactAcrossTwoInstances(t *testing.T) {
	pg := pgtest.Start(t)
	t.Run("ha store", func(t *testing.T) {
		testExactAcrossTwoInstances(t, postgresValue(t, pg), "ha:", postgresOption(pg, "ha:"), "")
	})
	t.Run("own store", func(t *testing.T) {
		testExactAcrossTwoInstances(t, postgresValue(t, pg), "own:", "", postgresStoreOption(pg, "own:"))
	})
}

// Upload bindings in the database are shared between instances.
func TestPostgresUploadBindingsShared(t *testing.T) {
	pg := pgtest.Start(t)
	policy := " {\n\t\t\tunknown reject\n\t\t}"
	testUploadsThroughTwoInstances(t, postgresValue(t, pg), "up:", postgresOption(pg, "up:"), policy)
}

// A reload with the same store settings keeps the pool: the one open
// store (its pool) is the same before and after three reloads, and the
// database sees one connection of caddy-ha's (pool_size 1), none of a
// second pool. Which backend it is may change: pgx replaces a connection
// whose call was cancelled (a store timeout on a loaded machine).
func TestPostgresReloadKeepsThePool(t *testing.T) {
	pg := pgtest.Start(t)
	db := pg.Pool(t)
	option := "ha {\n\t\tstore postgres {\n\t\t\tconnection_string " + pg.URL() + "\n\t\t\tpool_size 1\n\t\t}\n\t\thealth_interval 100ms\n\t}"
	site := func(events int) string {
		return fmt.Sprintf("edge_rate_limit {\n\t\tzone z {\n\t\t\tkey {http.request.remote.host}\n\t\t\tevents %d\n\t\t\twindow 1h\n\t\t}\n\t}\n\trespond ok", events)
	}
	tc := startCaddy(t, nil, option, site(100))
	send(t, "GET", tc.url("/"))
	before := openStores()
	if len(before) != 1 {
		t.Fatalf("%d open stores, want 1", len(before))
	}
	for i := range 3 {
		tc.load(nil, option, site(101+i))
		if s := sendAfterReload(t, "GET", tc.url("/")).status; s != 200 {
			t.Fatalf("after reload %d: %d", i, s)
		}
	}
	if after := openStores(); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("reloads with the same store settings opened a new store (pool): %v, then %v", before, after)
	}
	poll.Until(t, 5*time.Second, "one connection of caddy-ha's", func() bool { return len(backendPIDs(t, db)) == 1 })
}

// openStores are the stores open now, shared by the configs that use them.
func openStores() []*sharedStore {
	var open []*sharedStore
	storePools.Range(func(_, v any) bool {
		open = append(open, v.(*sharedStore))
		return true
	})
	return open
}

// backendPIDs are the database's connections of caddy-ha (its pool names
// itself application_name caddy-ha).
func backendPIDs(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) map[int32]bool {
	t.Helper()
	rows, err := db.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = current_database() AND application_name = 'caddy-ha'")
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]bool{}
	for _, p := range pids {
		out[p] = true
	}
	return out
}

// Bad PostgreSQL settings fail at adapt time with their line; a table of
// another shape fails at load.
func TestPostgresStoreConfig(t *testing.T) {
	for _, tt := range []struct{ block, want string }{
		{"table short_lived_store", "connection_string is required, at Caddyfile:"},
		{"connection_string postgres://127.0.0.1/db\n\t\t\ttable drop;table", `table "drop;table" is not an SQL identifier ([A-Za-z_][A-Za-z0-9_]*, optionally schema.table), at Caddyfile:5`},
		{"connection_string postgres://127.0.0.1/db\n\t\t\tpool_size 0", "pool_size must be a whole number of at least 1"},
		{"connection_string postgres://127.0.0.1/db\n\t\t\tstatement_timeout -1s", "statement_timeout must be positive"},
		{"connection_string postgres://127.0.0.1/db\n\t\t\tfrobnicate", "unrecognized postgres store option 'frobnicate'"},
		{"connection_string ://nope", "connection_string cannot be parsed"},
	} {
		cf := "{\n\tha {\n\t\tstore postgres {\n\t\t\t" + tt.block + "\n\t\t}\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.block, err, tt.want)
		}
	}

	pg := pgtest.Start(t)
	db := pg.Pool(t)
	if _, err := db.Exec(context.Background(), "CREATE TABLE wrong_shape (key text PRIMARY KEY, count bigint)"); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"admin":{"disabled":true},"apps":{"ha":{"store":{"backend":"postgres","connection_string":%q,"table":"wrong_shape"}}}}`, pg.URL())
	if err := caddy.Validate(mustConfig(t, cfg)); err == nil || !strings.Contains(err.Error(), "wrong_shape") {
		t.Fatalf("a table of another shape: %v", err)
	}
	// The right table is created if missing.
	cfg = fmt.Sprintf(`{"admin":{"disabled":true},"apps":{"ha":{"store":{"backend":"postgres","connection_string":%q,"table":"made_%d"}}}}`, pg.URL(), rand.IntN(1e6))
	if err := caddy.Validate(mustConfig(t, cfg)); err != nil {
		t.Fatalf("a missing table: %v", err)
	}
}
