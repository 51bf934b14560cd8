package caddymodule

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
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
	upMetric := `caddy_ha_store_up{store="redis ` + srv.Addr + `"}`
	if v := metricValue(tc, upMetric); v != 1 || caddyClients() < 1 {
		t.Fatalf("with the Redis store: store_up %v, %d connections", v, caddyClients())
	}

	tc.load(nil, "", site) // the memory store instead
	poll.Until(t, 5*time.Second, "Caddy's Redis connections closed", func() bool { return caddyClients() == 0 })
	// Nothing left to ping it: three health intervals later, still none.
	time.Sleep(300 * time.Millisecond)
	if n := caddyClients(); n != 0 {
		t.Fatalf("%d connections to the closed store's Redis", n)
	}
	if v := metricValue(tc, upMetric); v != -1 {
		t.Fatalf("store_up of the closed store is still reported: %v", v)
	}
}

// A store down from the start is reported down by the health checks alone,
// without any traffic to fail.
func TestStoreDownAtStartIsReported(t *testing.T) {
	addr := loopback.FreeAddr()
	tc := startCaddy(t, nil, "ha {\n\t\tstore redis {\n\t\t\taddress "+addr+"\n\t\t}\n\t\thealth_interval 50ms\n\t}", `respond "ok"`)
	poll.Until(t, 5*time.Second, "store_up 0", func() bool {
		return metricValue(tc, `caddy_ha_store_up{store="redis `+addr+`"}`) == 0
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
