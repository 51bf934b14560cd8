package caddymodule

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/store"
)

// A store goes with the last config using it: its connections close, and
// its health checks and batch senders stop (they would reconnect).
func TestStoreClosedWithItsLastConfig(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client()
	// Connections other than this test's own.
	caddyClients := func() int {
		return strings.Count(raw.ClientList(context.Background()).Val(), "\n") - 1
	}
	site := `edge_rate_limit {
		zone z {
			key {http.request.remote.host}
			events 10
			window 1h
		}
	}
	respond "ok"`
	tc := startCaddy(t, nil, redisOption(srv, "close:"), site)
	if s := send(t, "GET", tc.url("/")).status; s != 200 {
		t.Fatalf("status %d", s)
	}
	upMetric := `caddy_ha_store_up{store="redis ` + srv.Addr + ` db=0 prefix=close:"}`
	if v := metricValue(tc, upMetric); v != 1 || caddyClients() < 1 {
		t.Fatalf("with the Redis store: store_up %v, %d connections", v, caddyClients())
	}

	// Another Redis instead, checked as often: once it has answered three
	// health checks, the closed store would have had its own.
	other := redistest.Start(t)
	tc.load(nil, redisOption(other, "close:"), site)
	poll.Until(t, 5*time.Second, "Caddy's connections to the closed store's Redis closed", func() bool { return caddyClients() == 0 })
	otherRaw := other.Client()
	closedChecks, otherChecks := healthChecks(t, raw), healthChecks(t, otherRaw)
	poll.Until(t, 5*time.Second, "three health checks of the new store", func() bool { return healthChecks(t, otherRaw) >= otherChecks+3 })
	if n, checks := caddyClients(), healthChecks(t, raw)-closedChecks; n != 0 || checks != 0 {
		t.Fatalf("%d connections to the closed store's Redis, %d health checks", n, checks)
	}
	if v := metricValue(tc, upMetric); v != -1 {
		t.Fatalf("store_up of the closed store is still reported: %v", v)
	}
}

// Stores that differ in what makes them different stores (Redis's db or
// prefix, PostgreSQL's database, user, table or prefix) each have their own
// row and series, named without secrets; two that differ only in a secret
// (here a wrong password) are told apart by a number. Before, both read as
// one store, whose store_up said whichever health check ran last.
func TestStoresToldApart(t *testing.T) {
	srv := redistest.Start(t)
	const password = "s3cret-store-password"
	if err := srv.Client().ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	zone := func(name, store string) string {
		return `edge_rate_limit {
		zone ` + name + ` {
			key everyone
			events 10
			window 1h
		}
		` + store + `
	}`
	}
	redis := func(opts string) string {
		return "store redis {\n\t\t\taddress " + srv.Addr + "\n\t\t\tpassword " + password + "\n\t\t\t" + opts + "\n\t\t}"
	}
	site := zone("db1", redis("db 1")) + "\n\t" + zone("other", redis("prefix other:")) + "\n\t" +
		zone("badpass", "store redis {\n\t\t\taddress "+srv.Addr+"\n\t\t\tpassword wrong-password\n\t\t}") + "\n\trespond ok"
	tc := startCaddy(t, nil, "ha {\n\t\t"+redis("")+"\n\t\thealth_interval 50ms\n\t}", site)
	base := "redis " + srv.Addr + " db=0 prefix=caddy-ha:"
	want := map[string]float64{base: 1, base + " (2)": 0, "redis " + srv.Addr + " db=1 prefix=caddy-ha:": 1,
		"redis " + srv.Addr + " db=0 prefix=other:": 1}
	poll.Until(t, 5*time.Second, "each store's own store_up", func() bool {
		for name, v := range want {
			if metricValue(tc, `caddy_ha_store_up{store="`+name+`"}`) != v {
				return false
			}
		}
		return true
	})
	if page := tc.adminGet("/metrics") + tc.adminGet("/ha/status"); strings.Contains(page, password) || strings.Contains(page, "wrong-password") {
		t.Fatal("a store's password is in the metrics or the status view")
	}
}

// No store password reaches caddy-ha's logs (at debug), the metrics, the
// status view or a load error: not a Redis password that is refused, nor a
// PostgreSQL one in a connection string that cannot be reached or parsed.
// Caddy's own debug line "adjusted config" prints the http app's handlers
// as written, a literal secret in a handler's store included (as caddy
// adapt and the admin API's /config/ do), so docs/store.md recommends {env.…}
// placeholders: with one, the secret is nowhere.
func TestStorePasswordsNeverShown(t *testing.T) {
	srv := redistest.Start(t)
	const right, wrong, pg, pgLiteral = "right-redis-pw-1", "wrong-redis-pw-2", "postgres-pw-3", "postgres-pw-4"
	if err := srv.Client().ConfigSet(context.Background(), "requirepass", right).Err(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CADDY_HA_TEST_REDIS_PASSWORD", wrong)
	t.Setenv("CADDY_HA_TEST_PG_URL", "postgres://caddy:"+pg+"@"+loopback.FreeAddr()+"/db")
	zone := func(name, store string) string {
		return "edge_rate_limit {\n\t\tzone " + name + " {\n\t\t\tkey everyone\n\t\t\tevents 10\n\t\t\twindow 1h\n\t\t}\n\t\t" +
			store + "\n\t\ton_store_error allow\n\t}\n\t"
	}
	site := zone("refused", "store redis {\n\t\t\taddress "+srv.Addr+"\n\t\t\tpassword {env.CADDY_HA_TEST_REDIS_PASSWORD}\n\t\t}") +
		zone("unreachable", "store postgres {\n\t\t\tconnection_string {env.CADDY_HA_TEST_PG_URL}\n\t\t}") +
		zone("literal", "store postgres {\n\t\t\tconnection_string postgres://caddy:"+pgLiteral+"@"+loopback.FreeAddr()+"/db\n\t\t}") +
		"respond ok"
	tc := startCaddy(t, nil, "debug\n\tha {\n\t\tstore redis {\n\t\t\taddress "+srv.Addr+"\n\t\t\tpassword "+right+
		"\n\t\t}\n\t\thealth_interval 50ms\n\t}", site)
	for i := 0; i < 3; i++ {
		send(t, "GET", tc.url("/"))
	}
	poll.Until(t, 5*time.Second, "the three refused stores logged as unavailable", func() bool {
		return len(tc.logLines("store unavailable")) >= 3
	})
	var log strings.Builder
	for _, line := range tc.logLines("") {
		if !strings.Contains(line, `"logger":"http.auto_https","msg":"adjusted config"`) {
			log.WriteString(line + "\n")
		} else if strings.Contains(line, pg) || !strings.Contains(line, pgLiteral) {
			t.Errorf("Caddy's adjusted config shows the placeholder's value, or not the literal secret: %s", line)
		}
	}
	shown := map[string]string{"log": log.String(), "metrics": tc.adminGet("/metrics"), "status": tc.adminGet("/ha/status")}
	err := tc.tryLoad(nil, "", zone("unparsable", "store postgres {\n\t\t\tconnection_string \"postgres://caddy:"+pgLiteral+"@127.0.0.1:bad/db\"\n\t\t}")+"respond ok")
	if err == nil {
		t.Fatal("a connection string that cannot be parsed was loaded")
	}
	shown["load error"], _, _ = strings.Cut(err.Error(), "\n") // the error, without the Caddyfile it quotes
	for where, text := range shown {
		for _, pw := range []string{right, wrong, pg, pgLiteral} {
			if strings.Contains(text, pw) {
				t.Errorf("the %s shows the password %s", where, pw)
			}
		}
	}
}

// healthChecks counts the commands of the store's health checks (PING,
// and TIME for the clock offset) that the Redis of c has answered.
func healthChecks(t *testing.T, c *redis.Client) int {
	t.Helper()
	stats, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cmd := range []string{"cmdstat_ping:calls=", "cmdstat_time:calls="} {
		if _, rest, ok := strings.Cut(stats, cmd); ok {
			calls, _, _ := strings.Cut(rest, ",")
			c, err := strconv.Atoi(calls)
			if err != nil {
				t.Fatalf("%s%s: %v", cmd, calls, err)
			}
			n += c
		}
	}
	return n
}

// A store down from the start is reported down by the health checks alone,
// without any traffic to fail.
func TestStoreDownAtStartIsReported(t *testing.T) {
	addr := loopback.FreeAddr()
	tc := startCaddy(t, nil, "ha {\n\t\tstore redis {\n\t\t\taddress "+addr+"\n\t\t}\n\t\thealth_interval 50ms\n\t}", `respond "ok"`)
	poll.Until(t, 5*time.Second, "store_up 0", func() bool {
		return metricValue(tc, `caddy_ha_store_up{store="redis `+addr+` db=0 prefix=caddy-ha:"}`) == 0
	})
}

// notAStore is a module in the ha.stores namespace that is no store, as a
// third-party module written against another contract would be.
type notAStore struct{}

func (notAStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "ha.stores.not_a_store", New: func() caddy.Module { return new(notAStore) }}
}

func init() { caddy.RegisterModule(notAStore{}) }

// A module of ha.stores that does not implement StoreBackend is a config
// error, not a panic.
func TestStoreModuleOfAnotherContract(t *testing.T) {
	err := caddy.Validate(mustConfig(t, `{"admin":{"disabled":true},"apps":{"ha":{"store":{"backend":"not_a_store"}}}}`))
	if err == nil || !strings.Contains(err.Error(), "is not an ha store (caddymodule.StoreBackend)") {
		t.Fatalf("error %v", err)
	}
}

// panickyStore is a remote store (not Local) whose first Ping panics.
type panickyStore struct {
	store.Store
	pings atomic.Int32
}

func (s *panickyStore) Local() bool { return false }

func (s *panickyStore) Ping(ctx context.Context) error {
	if s.pings.Add(1) == 1 {
		panic("the first ping panics")
	}
	return nil
}

var panicky = &panickyStore{Store: store.NewMemory(10, 0)}

// panickyBackend is a third-party store module serving panicky.
type panickyBackend struct{}

func (panickyBackend) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "ha.stores.panicky", New: func() caddy.Module { return new(panickyBackend) }}
}
func (panickyBackend) OpenStore() (store.Store, error) { return panicky, nil }
func (panickyBackend) Describe() string                { return "panicky" }
func (panickyBackend) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	return nil
}

func init() { caddy.RegisterModule(panickyBackend{}) }

// A panic in the store's health check is logged with its stack, and the
// checks go on: Caddy stays up.
func TestStoreHealthCheckSurvivesAPanic(t *testing.T) {
	tc := startCaddy(t, nil, "ha {\n\t\tstore panicky\n\t\thealth_interval 20ms\n\t}", "respond ok")
	poll.Until(t, 5*time.Second, "pings after the panic", func() bool { return panicky.pings.Load() >= 3 })
	lines := tc.logLines("the store's health check panicked")
	if len(lines) != 1 || !strings.Contains(lines[0], "the first ping panics") || !strings.Contains(lines[0], "goroutine") {
		t.Fatalf("log lines %q", lines)
	}
}
