package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/httpcheck"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/pgtest"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
)

// The timings of the cluster and of Caddy's modules, short so that each
// fault plays out within seconds. The bounds of the requests follow from
// them (bound in load.go).
const (
	leaseTTL   = 2 * time.Second
	leaseRenew = 500 * time.Millisecond

	// lb_policy leader: held requests wait up to hold; a request sent to a
	// node that hangs gives up after responseHeaderTimeout.
	hold                  = 5 * time.Second
	responseHeaderTimeout = 2 * time.Second

	// The rate-limit zones that the fixed clients knock on: one counted in
	// Redis (on_store_error local, the default store_timeout), one in
	// PostgreSQL (on_store_error deny). Each zone has a store of its own,
	// as docs/store.md advises for callers of different deadlines: a store's
	// circuit is shared, and three missed 50 ms deadlines in a row on a
	// loaded machine would otherwise take the upload bindings' store away
	// too (issue 20's unexplained creation 503s).
	limitZone           = "chaos"
	pgLimitZone         = "chaos-pg"
	limitEvents         = 4
	limitWindow         = time.Second
	limitStoreTimeout   = 50 * time.Millisecond
	pgLimitStoreTimeout = 500 * time.Millisecond

	// lb_policy upload_affinity: a store call gives up after
	// uploadStoreTimeout; a search for an unbound upload's owner after
	// discoveryTimeout (the policy's own, fixed).
	uploadStoreTimeout = 500 * time.Millisecond
	discoveryTimeout   = 2 * time.Second
	uploadServers      = 3
)

// rig is what the suite runs: the fake cluster, the upload servers, Redis,
// the backend of the rate-limit zone, and one Caddy in-process in front of
// them all.
type rig struct {
	dir     string // logs
	cluster *fakecluster.Cluster
	uploads []*fakecluster.UploadServer
	redis   *redistest.Process
	pg      *pgtest.Process
	limited *limitBackend
	cf      *cloudflareLists
	handoff bool

	// The store canaries' connections.
	redisProbe *redis.Client
	pgProbe    *pgxpool.Pool

	site, admin string // Caddy's listen and admin addresses
	config      []byte // the adapted Caddyfile
}

// startRig starts everything and waits until Caddy serves the leader's
// reads. On error, whatever was started is stopped.
func startRig(dir string, handoff bool) (r *rig, err error) {
	r = &rig{dir: dir, handoff: handoff}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.cluster, err = fakecluster.New(fakecluster.Config{LeaseTTL: leaseTTL, RenewInterval: leaseRenew}, 2); err != nil {
		return nil, err
	}
	if err = r.cluster.Start(); err != nil {
		return nil, err
	}
	if _, err = r.cluster.WaitLeader(5 * time.Second); err != nil {
		return nil, err
	}
	if r.uploads, err = fakecluster.StartUploadServers(uploadServers); err != nil {
		return nil, err
	}
	if r.redis, err = redistest.StartProcess(dir); err != nil {
		return nil, err
	}
	if r.pg, err = pgtest.StartProcess(); err != nil {
		return nil, err
	}
	r.redisProbe = redis.NewClient(&redis.Options{Addr: r.redis.Addr, MaxRetries: -1, PoolSize: 4})
	if r.pgProbe, err = pgxpool.New(context.Background(), r.pg.URL()+"&pool_max_conns=4"); err != nil {
		return nil, err
	}
	if r.limited, err = startLimitBackend(); err != nil {
		return nil, err
	}
	if r.cf, err = startCloudflareLists(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		// A free port can be taken before Caddy listens on it: try others.
		r.site, r.admin = loopback.FreeAddr(), loopback.FreeAddr()
		if r.config, err = r.adapt(); err != nil {
			return nil, err
		}
		if err = r.reload(); err == nil {
			break
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 4 {
			return nil, err
		}
	}
	if err = r.waitServing(10 * time.Second); err != nil {
		return nil, err
	}
	return r, r.cf.waitTrusted(r, 10*time.Second)
}

// close stops everything that was started, Caddy first.
func (r *rig) close() {
	if r.config != nil {
		_ = caddy.Stop()
	}
	if r.limited != nil {
		r.limited.close()
	}
	if r.cf != nil {
		r.cf.close()
	}
	if r.redisProbe != nil {
		r.redisProbe.Close()
	}
	if r.pgProbe != nil {
		r.pgProbe.Close()
	}
	if r.redis != nil {
		r.redis.Kill()
	}
	if r.pg != nil {
		r.pg.Stop()
	}
	for _, s := range r.uploads {
		s.Kill()
	}
	if r.cluster != nil {
		r.cluster.Close()
	}
}

// caddyfile is the one site with every module: forwarded first (with
// Cloudflare's ranges from loopback), then the rate-limit zone on Redis;
// the zone on PostgreSQL for /pglimited/; the status page; Windows SSO
// through transport pinned for /sso/; upload affinity (bindings in the ha
// store, Redis) for /api/uploads; and the leader policy for everything
// else.
func (r *rig) caddyfile() string {
	var nodes, servers []string
	for _, n := range r.cluster.Nodes() {
		nodes = append(nodes, n.Addr())
	}
	for _, s := range r.uploads {
		servers = append(servers, s.Addr())
	}
	wrappers := ""
	if r.handoff {
		wrappers = "\t\tlistener_wrappers {\n\t\t\treload_handoff\n\t\t}\n"
	}
	leader := fmt.Sprintf(`lb_policy leader {
				interval 500ms
				fast_interval 50ms
				hold %v
				retry_after 1s
			}`, hold)
	return fmt.Sprintf(`{
	admin %s
	persist_config off
	log {
		output file %s
		level WARN
	}
	ha {
		store redis {
			address %s
			prefix chaos:
		}
		# a ping's deadline is the interval, and its misses open the circuit
		# as the callers' do: no shorter than the stores' 500ms store_timeout
		health_interval 500ms
	}
	servers {
		# the fixed clients of the rate-limit zones say who they are in X-Forwarded-For
		trusted_proxies static 127.0.0.1/32
		protocols h1
%s	}
}
http://%s {
	forwarded {
		cloudflare cloudflare_ranges {
			ipv4_url http://%s/ips-v4
			ipv6_url http://%s/ips-v6
			file %s
			refresh %v
			timeout 500ms
		}
	}
	edge_rate_limit {
		zone %s {
			match {
				path /limited/*
			}
			key {client_ip}
			events %d
			window %v
		}
		store redis {
			address %s
			prefix chaos-limits:
		}
		on_store_error local
		store_timeout %v
	}
	handle /limited/* {
		reverse_proxy %s
	}
	handle /pglimited/* {
		edge_rate_limit {
			zone %s {
				key {client_ip}
				events %d
				window %v
			}
			store postgres {
				connection_string %s
				prefix chaos:
			}
			on_store_error deny
			store_timeout %v
		}
		reverse_proxy %s
	}
	handle /cf/* {
		respond "{http.forwarded.client_ip}"
	}
	handle /canary {
		respond "ok"
	}
	handle /canary/proxied {
		reverse_proxy %s
	}
	handle /ha-status {
		ha_status {
			refresh off
		}
	}
	handle /sso/* {
		reverse_proxy %s {
			%s
			transport pinned {
				response_header_timeout %v
			}
		}
	}
	handle /api/uploads* {
		reverse_proxy %s {
			lb_policy upload_affinity {
				store_timeout %v
				retry_after 1s
			}
			health_uri /healthz
			health_interval 100ms
		}
	}
	handle {
		reverse_proxy %s {
			%s
			transport http {
				response_header_timeout %v
			}
		}
	}
}
`, r.admin, filepath.Join(r.dir, "caddy.log"), r.redis.Addr, wrappers, r.site,
		r.cf.addr, r.cf.addr, filepath.Join(r.dir, "cloudflare-ranges.txt"), cloudflareRefresh,
		limitZone, limitEvents, limitWindow, r.redis.Addr, limitStoreTimeout, r.limited.addr,
		pgLimitZone, limitEvents, limitWindow, r.pg.URL(), pgLimitStoreTimeout, r.limited.addr, r.limited.addr,
		strings.Join(nodes, " "), leader, responseHeaderTimeout,
		strings.Join(servers, " "), uploadStoreTimeout,
		strings.Join(nodes, " "), leader, responseHeaderTimeout)
}

func (r *rig) adapt() ([]byte, error) {
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(r.caddyfile()), nil)
	if err != nil {
		return nil, fmt.Errorf("adapting the Caddyfile: %v", err)
	}
	return cfg, nil
}

// reload loads the config, forcing a reload although it did not change:
// every server, handler and policy is provisioned anew, as on caddy reload.
func (r *rig) reload() error {
	if err := caddy.Load(r.config, true); err != nil {
		return fmt.Errorf("loading Caddy's config: %v", err)
	}
	return nil
}

func (r *rig) url(path string) string { return "http://" + r.site + path }

// waitServing waits until the cluster has a leader and Caddy routes a
// read to it; a read held for a leader may take its whole bound.
func (r *rig) waitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if _, err := r.cluster.WaitLeader(timeout); err != nil {
		return err
	}
	return httpcheck.WaitOK(r.url("/api/ping"), time.Until(deadline), classRead.bound(), nil)
}

// limitFallbacks returns, by zone, how many decisions of the rate-limit
// zones were not the store's, from Caddy's metrics: those taken by
// on_store_error and the store calls that failed. While a zone's does not
// move, its store counted every request of the zone.
func (r *rig) limitFallbacks(ctx context.Context) (map[string]float64, error) {
	body, err := r.adminGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	sums := map[string]float64{}
	for _, zone := range []string{limitZone, pgLimitZone} {
		for _, name := range []string{"caddy_ha_rate_limit_fallback_decisions_total", "caddy_ha_rate_limit_store_errors_total"} {
			prefix := name + `{zone="` + zone + `"} `
			for line := range strings.SplitSeq(string(body), "\n") {
				if v, ok := strings.CutPrefix(line, prefix); ok {
					n, err := strconv.ParseFloat(v, 64)
					if err != nil {
						return nil, fmt.Errorf("metric %s: %v", line, err)
					}
					sums[zone] += n
				}
			}
		}
	}
	return sums, nil
}

// adminGet returns the body of a 200 from Caddy's admin API.
func (r *rig) adminGet(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	return body, nil
}

// limitBackend is the upstream of the rate-limit zone: it records the
// X-Request-Id of every request that the limit let through.
type limitBackend struct {
	addr string
	srv  *http.Server
	done chan struct{}

	mu     sync.Mutex
	passed map[string]int
}

func startLimitBackend() (*limitBackend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &limitBackend{addr: ln.Addr().String(), done: make(chan struct{}), passed: map[string]int{}}
	b.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b.mu.Lock()
		b.passed[req.Header.Get("X-Request-Id")]++
		b.mu.Unlock()
		io.WriteString(w, "passed\n")
	})}
	go func() {
		defer close(b.done)
		if err := b.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("the rate-limit backend stopped:", err)
		}
	}()
	return b, nil
}

// passedCount returns how many requests with the given id came through.
func (b *limitBackend) passedCount(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.passed[id]
}

func (b *limitBackend) close() {
	_ = b.srv.Close()
	<-b.done
}
