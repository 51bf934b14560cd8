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

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/httpcheck"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
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

	// The rate-limit zone that the fixed client knocks on.
	limitZone         = "chaos"
	limitEvents       = 4
	limitWindow       = time.Second
	limitStoreTimeout = 50 * time.Millisecond

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
	limited *limitBackend
	handoff bool

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
	if r.limited, err = startLimitBackend(); err != nil {
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
	return r, r.waitServing(10 * time.Second)
}

// close stops everything that was started, Caddy first.
func (r *rig) close() {
	if r.config != nil {
		_ = caddy.Stop()
	}
	if r.limited != nil {
		r.limited.close()
	}
	if r.redis != nil {
		r.redis.Kill()
	}
	for _, s := range r.uploads {
		s.Kill()
	}
	if r.cluster != nil {
		r.cluster.Close()
	}
}

// caddyfile is the one site with every module: forwarded first, then the
// rate-limit zone on Redis, upload affinity (bindings on the same Redis)
// for /api/uploads, and the leader policy for everything else.
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
		health_interval 100ms
	}
	servers {
		# the fixed client of the rate-limit zone says who it is in X-Forwarded-For
		trusted_proxies static 127.0.0.1/32
%s	}
}
http://%s {
	forwarded
	edge_rate_limit {
		zone %s {
			match {
				path /limited/*
			}
			key {client_ip}
			events %d
			window %v
		}
		on_store_error local
		store_timeout %v
	}
	handle /limited/* {
		reverse_proxy %s
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
			lb_policy leader {
				interval 500ms
				fast_interval 50ms
				hold %v
				retry_after 1s
			}
			transport http {
				response_header_timeout %v
			}
		}
	}
}
`, r.admin, filepath.Join(r.dir, "caddy.log"), r.redis.Addr, wrappers, r.site,
		limitZone, limitEvents, limitWindow, limitStoreTimeout, r.limited.addr,
		strings.Join(servers, " "), uploadStoreTimeout,
		strings.Join(nodes, " "), hold, responseHeaderTimeout)
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
// read to it.
func (r *rig) waitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if _, err := r.cluster.WaitLeader(timeout); err != nil {
		return err
	}
	return httpcheck.WaitOK(r.url("/api/ping"), time.Until(deadline), nil)
}

// limitFallbacks returns how many decisions of the rate-limit zone were not
// the store's, from Caddy's metrics: those taken by on_store_error and the
// store calls that failed. While it does not move, Redis counted every
// request of the zone.
func (r *rig) limitFallbacks(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: status %d", resp.StatusCode)
	}
	var sum float64
	for _, name := range []string{"caddy_ha_rate_limit_fallback_decisions_total", "caddy_ha_rate_limit_store_errors_total"} {
		prefix := name + `{zone="` + limitZone + `"} `
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("metric %s: %v", line, err)
				}
				sum += n
			}
		}
	}
	return sum, nil
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
