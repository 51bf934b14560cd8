package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/store"
)

func init() {
	caddy.RegisterModule(HAApp{})
	httpcaddyfile.RegisterGlobalOption("ha", parseHAOption)
}

// HAApp is the ha app: the short-lived store that caddy-ha's handlers keep
// their state in (rate-limit counters, upload bindings). Without it the
// store is the memory of this Caddy; with Redis it is shared by every Caddy
// instance and by the cluster's own app.
//
// The store is shared across config reloads for as long as its settings do
// not change: a reload neither reconnects nor loses memory-store counts.
type HAApp struct {
	// The store: `{"backend": "memory", …}` (the default),
	// `{"backend": "redis", …}` or `{"backend": "postgres", …}`.
	StoreRaw json.RawMessage `json:"store,omitempty" caddy:"namespace=ha.stores inline_key=backend"`

	// How often a remote store's health is checked (PING), which also
	// notices its recovery without waiting for traffic. Default: 2s.
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`

	ref *storeRef
}

// StoreBackend is what a module in the ha.stores namespace provides: the
// contract of a store that the ha app and the handlers keep their state in
// (memory and redis here; a third-party module implements the same). The
// store's operations and their semantics are store.Store's; its conformance
// suite (store/conformance_test.go) is what a new store must pass.
type StoreBackend interface {
	// OpenStore connects (without waiting for the store: one that is down
	// is an outage, not a config error); the store is shared until its
	// last user leaves, which closes it.
	OpenStore() (store.Store, error)
	// Describe names the store in logs and metrics by what makes it a
	// different store, e.g. "redis 10.0.0.5:6379 db=0 prefix=caddy-ha:".
	// It must not hold secrets.
	Describe() string
}

// CaddyModule returns the Caddy module information.
func (HAApp) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "ha", New: func() caddy.Module { return new(HAApp) }}
}

// storePools shares one open store per settings across config reloads.
var storePools = caddy.NewUsagePool()

const (
	defaultHealthInterval = 2 * time.Second
	// localFallbackKeys bounds the memory that counts for on_store_error
	// local while a remote store is down.
	localFallbackKeys = 100_000
	// A store found down is tried again after storeRetryFirst, the pause
	// doubling up to storeRetryMax while it stays down.
	storeRetryFirst = 100 * time.Millisecond
	storeRetryMax   = 5 * time.Second
)

func (a *HAApp) setDefaults() {
	if a.StoreRaw == nil {
		a.StoreRaw = json.RawMessage(`{"backend":"memory"}`)
	}
	a.HealthInterval = cmp.Or(a.HealthInterval, caddy.Duration(defaultHealthInterval))
}

// Provision sets the defaults and opens (or joins) the store.
func (a *HAApp) Provision(ctx caddy.Context) error {
	a.setDefaults()
	if a.HealthInterval < 0 {
		return a.Validate() // the store's health checks cannot run
	}
	var err error
	a.ref, err = holdStore(ctx, a, "StoreRaw", a.StoreRaw, time.Duration(a.HealthInterval))
	return err
}

// Validate checks the settings: Caddy calls it after Provision, the
// Caddyfile adapter after the block.
func (a *HAApp) Validate() error {
	if a.HealthInterval < 0 {
		return badSetting("ha", "health_interval", "must not be negative")
	}
	return nil
}

// Start does nothing: the store is opened in Provision.
func (a *HAApp) Start() error { return nil }

// Stop does nothing: the store is closed in Cleanup, by its last user.
func (a *HAApp) Stop() error { return nil }

// Cleanup lets go of the store; the last config using it closes it.
func (a *HAApp) Cleanup() error { return a.ref.release() }

// withStoreTimeout bounds a store call by timeout; 0, for a store in this
// process's memory, which cannot hang, sets no timer on the hot path.
func withStoreTimeout(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout == 0 {
		return parent, func() {}
	}
	return context.WithTimeout(parent, timeout)
}

// storeRef is one config's hold on a store in storePools.
type storeRef struct {
	key    string
	shared *sharedStore
}

// holdStore returns the store of the ha.stores module in field of owner
// (raw is its JSON), shared with every config holding the same settings.
func holdStore(ctx caddy.Context, owner any, field string, raw json.RawMessage, healthEvery time.Duration) (*storeRef, error) {
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return nil, err
	}
	// The key is the settings before provisioning changes anything.
	key, err := json.Marshal(struct {
		Store    json.RawMessage
		Interval time.Duration
	}{raw, healthEvery})
	if err != nil {
		return nil, err
	}
	mod, err := ctx.LoadModule(owner, field)
	if err != nil {
		return nil, fmt.Errorf("loading the store: %v", err)
	}
	backend, ok := mod.(StoreBackend)
	if !ok {
		return nil, fmt.Errorf("store module %T is not an ha store (caddymodule.StoreBackend)", mod)
	}
	name := storeName(ctx, string(key), backend.Describe())
	val, _, err := storePools.LoadOrNew(string(key), func() (caddy.Destructor, error) {
		return openShared(backend, name, healthEvery)
	})
	if err != nil {
		return nil, fmt.Errorf("opening the %s store: %v", name, err)
	}
	return &storeRef{key: string(key), shared: val.(*sharedStore)}, nil
}

// storeNames holds, for each config being loaded or running (by its
// context's Done channel, which the contexts Caddy derives for its
// servers share), the name of each store it holds, by the store's
// settings.
var storeNames = struct {
	sync.Mutex
	byConfig map[<-chan struct{}]map[string]string
}{byConfig: map[<-chan struct{}]map[string]string{}}

// storeName names the store of settings key in ctx's config: its
// description, which holds no secret, and for a second store of the same
// description in one config (they differ in a password or a timeout) the
// description and a number, so that each has its own row and series.
func storeName(ctx caddy.Context, key, description string) string {
	storeNames.Lock()
	defer storeNames.Unlock()
	config := ctx.Done()
	names := storeNames.byConfig[config]
	if names == nil {
		names = map[string]string{}
		storeNames.byConfig[config] = names
		context.AfterFunc(ctx, func() {
			storeNames.Lock()
			delete(storeNames.byConfig, config)
			storeNames.Unlock()
		})
	}
	if name, ok := names[key]; ok {
		return name
	}
	taken := map[string]bool{}
	for _, n := range names {
		taken[n] = true
	}
	name := description
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s (%d)", description, i)
	}
	names[key] = name
	return name
}

// release lets go of the store; the last holder closes it.
func (r *storeRef) release() error {
	if r == nil {
		return nil
	}
	_, err := storePools.Delete(r.key)
	return err
}

// handlerStore is the store a handler uses: its own when it names one (raw,
// the ha.stores module in field of owner, checked at the ha app's
// health_interval so that the same settings share one store; the returned
// ref is to be released in Cleanup), else the ha app's, loaded with its
// defaults (the memory store) when the config has none, and a nil ref.
func handlerStore(ctx caddy.Context, owner any, field string, raw json.RawMessage) (*sharedStore, *storeRef, error) {
	mod, err := ctx.App("ha")
	if err != nil {
		return nil, nil, err
	}
	app := mod.(*HAApp)
	if raw == nil {
		return app.ref.shared, nil, nil
	}
	ref, err := holdStore(ctx, owner, field, raw, time.Duration(app.HealthInterval))
	if err != nil {
		return nil, nil, err
	}
	return ref.shared, ref, nil
}

// sharedStore is an open store in storePools.
type sharedStore struct {
	name  string
	store store.Store // the guarded store for a remote one
	guard *store.Guard
	local store.Store // nil for the memory store
	up    prometheus.Gauge
	stop  context.CancelFunc // ends the health checks, and a ping under way
	done  chan struct{}

	// health checks a remote store and measures its clock; nil for the
	// memory store.
	health *store.Health
	series *seriesHold[*sharedStore]
}

// wallClock is this process's clock, which rate-limit windows follow
// unless they follow the store's; tests skew it.
var wallClock = time.Now

func openShared(backend StoreBackend, name string, healthEvery time.Duration) (*sharedStore, error) {
	s, err := backend.OpenStore()
	if err != nil {
		return nil, err
	}
	sh := &sharedStore{name: name, store: s}
	sh.series = storeSeries.hold(sh.name) // before its series are looked up
	sh.up = storeMetrics.up.WithLabelValues(sh.name)
	sh.up.Set(1)
	if store.IsLocal(s) {
		sh.series.publish(sh)
		return sh, nil
	}
	log := caddy.Log().Named("ha.store")
	sh.guard = store.NewGuard(s, storeRetryFirst, storeRetryMax, func(err error) {
		// Once per outage: handlers answer by their on_store_error policy meanwhile.
		if err != nil {
			sh.up.Set(0)
			log.Error("store unavailable: rate limits and bindings use their fallback until it answers",
				zap.String("store", sh.name), zap.Error(err))
			return
		}
		sh.up.Set(1)
		log.Info("store available again", zap.String("store", sh.name))
	})
	sh.store, sh.local = sh.guard, store.NewMemory(localFallbackKeys, 0)
	sh.health = store.NewHealth(sh.guard, s, func() time.Time { return wallClock() })
	pingGauge, offsetGauge := storeMetrics.pingSeconds.WithLabelValues(sh.name), storeMetrics.clockOffset.WithLabelValues(sh.name)
	sh.health.OnPing = func(d time.Duration) { pingGauge.Set(d.Seconds()) }
	sh.health.OnClockOffset = func(d time.Duration) { offsetGauge.Set(d.Seconds()) }
	ctx, stop := context.WithCancel(context.Background())
	sh.stop, sh.done = stop, make(chan struct{})
	goLoop(log, "the store's health check", healthEvery, ctx.Done(), sh.done, func() { sh.health.Run(ctx, healthEvery) })
	sh.series.publish(sh)
	return sh, nil
}

// HasClock reports whether the store has a clock of its own, which
// rate-limit windows follow by default.
func (sh *sharedStore) HasClock() bool { return sh.health != nil && sh.health.HasClock() }

// Now is the time by the store's clock (see store.Health.Now), or this
// process's wall clock for a store without one.
func (sh *sharedStore) Now() time.Time {
	if sh.health == nil {
		return wallClock()
	}
	return sh.health.Now()
}

// Store returns the store. For a remote one, calls fail at once with
// store.ErrUnavailable while it is down (see store.Guard).
func (sh *sharedStore) Store() store.Store { return sh.store }

// LocalFallback returns this instance's own memory, which handlers with a
// local fallback count in while the store is down; nil for the memory
// store, which has no fallback but itself.
func (sh *sharedStore) LocalFallback() store.Store { return sh.local }

// RetryIn returns how long until a down store is tried again.
func (sh *sharedStore) RetryIn() time.Duration {
	if sh.guard == nil {
		return 0
	}
	return sh.guard.RetryIn()
}

// Destruct stops the health checks and closes the store, when its last
// user lets go, and removes its series.
func (sh *sharedStore) Destruct() error {
	if sh.stop != nil {
		sh.stop()
		<-sh.done
		sh.local.Close()
	}
	sh.series.release()
	return sh.store.Close()
}

// parseHAOption parses the global option. Syntax:
//
//	ha {
//		store memory {
//			max_keys <n>
//		}
//		store redis {
//			address           <host:port...>
//			username          <name>
//			password          <password>
//			db                <n>
//			master_name       <sentinel master>
//			sentinel_username <name>
//			sentinel_password <password>
//			cluster
//			prefix            <prefix>
//			tls {
//				server_name <name>
//				ca          <pem file>
//			}
//			dial_timeout      <duration>
//			read_timeout      <duration>
//			write_timeout     <duration>
//			pool_size         <n>
//		}
//		store postgres {
//			connection_string <string>
//			table             <name>
//			prefix            <prefix>
//			pool_size         <n>
//			statement_timeout <duration>
//			dial_timeout      <duration>
//		}
//		health_interval <duration>
//	}
func parseHAOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("the ha option may appear only once")
	}
	app := new(HAApp)
	err := parseValidated(d, app, nil, func(opt string) error {
		switch opt {
		case "store":
			var err error
			app.StoreRaw, err = storeArg(d)
			return err
		case "health_interval":
			return durationArg(d, opt, &app.HealthInterval)
		}
		return d.Errf("unrecognized ha option '%s'", opt)
	})
	if err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "ha", Value: caddyconfig.JSON(app, nil)}, nil
}

// Interface guards
var (
	_ caddy.App          = (*HAApp)(nil)
	_ caddy.Provisioner  = (*HAApp)(nil)
	_ caddy.Validator    = (*HAApp)(nil)
	_ caddy.CleanerUpper = (*HAApp)(nil)
	_ caddy.Destructor   = (*sharedStore)(nil)
)
