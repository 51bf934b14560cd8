// Package fakecluster simulates the active/passive cluster that caddy-ha
// fronts: nodes on loopback sharing one lease with the semantics of NodePilot's HA
// documentation
// (TTL, renew ticks, an epoch per acquisition), followers that refuse
// mutating requests with 503 and Retry-After: 30, and a control API to
// crash, hang, stop and start nodes, and Windows SSO bound to each TCP
// connection as Kestrel's Negotiate handler does it (ntlm.go). Tests start
// it in-process; the
// fakecluster command serves it for demos and benchmarks.
//
// It also simulates the active/active mode (uploads.go): upload servers,
// each with chunked uploads of its own and no shared store, so that every
// request of an upload must reach the server that created it; any other
// answers 404. Each server records every request it received, and its
// uploads byte for byte, for tests to check that no chunk went astray.
package fakecluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Config sets the lease timing. Zero values take the cluster's defaults.
type Config struct {
	// LeaseTTL is how long a lease lasts without a renew (the cluster's: 30 s).
	LeaseTTL time.Duration
	// RenewInterval is each node's renew tick (the cluster's: 10 s).
	RenewInterval time.Duration
	// BasePort, if set, puts node i on 127.0.0.1:BasePort+i; otherwise
	// each node gets a free port.
	BasePort int
	// TLS, if set, makes the nodes serve HTTPS with it.
	TLS *tls.Config
	// StopDrain is how long a planned stop keeps serving, as a follower,
	// between releasing the lease and closing its port: an ASP.NET Core
	// node releases it in a hosted service before Kestrel stops. 0: none.
	StopDrain time.Duration
	// RefusalDelay is how long a follower takes to answer a write it
	// refuses, as a busy host's node may: with a StopDrain shorter than
	// it, a planned stop's refusals reach the proxy after its port closed.
	// 0: none.
	RefusalDelay time.Duration
}

// Acquisition records one lease acquisition: the moment a node became leader.
type Acquisition struct {
	Node  string    `json:"node"`
	Epoch int64     `json:"epoch"`
	At    time.Time `json:"at"`
}

// lease is the cluster's single-row ClusterLeader table.
type lease struct {
	owner       string
	epoch       int64
	expiresAt   time.Time
	lastRenewAt time.Time
	acquiredAt  time.Time
}

// Cluster is a set of nodes sharing one lease.
type Cluster struct {
	cfg Config

	mu           sync.Mutex
	lease        lease
	dbDown       bool
	acquisitions []Acquisition
	nodes        []*Node
}

// New creates a cluster with n nodes named node-a, node-b, … on loopback.
// Nodes are created stopped; call Start, or Start on each node.
func New(cfg Config, n int) (*Cluster, error) {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = 10 * time.Second
	}
	if cfg.RenewInterval >= cfg.LeaseTTL {
		return nil, fmt.Errorf("renew interval %v must be shorter than the lease TTL %v", cfg.RenewInterval, cfg.LeaseTTL)
	}
	c := &Cluster{cfg: cfg}
	for i := range n {
		addr := fmt.Sprintf("127.0.0.1:%d", cfg.BasePort+i)
		if cfg.BasePort == 0 {
			// Pick the port now so that a node keeps its address across restarts.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			addr = ln.Addr().String()
			ln.Close()
		}
		c.nodes = append(c.nodes, newNode(c, fmt.Sprintf("node-%c", 'a'+i), addr))
	}
	return c, nil
}

// Start starts every node, the first one first so that it becomes leader.
func (c *Cluster) Start() error {
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every node without releasing the lease.
func (c *Cluster) Close() {
	for _, n := range c.nodes {
		n.halt(stateKilled)
	}
}

// Nodes returns the nodes in creation order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// SetDatabaseDown makes the database unreachable (true) or reachable again:
// while it is down no node can renew or acquire, so every node is a follower.
func (c *Cluster) SetDatabaseDown(down bool) {
	c.mu.Lock()
	c.dbDown = down
	c.mu.Unlock()
}

// Reseed re-creates the ClusterLeader row, as a re-seeded or restored
// database does: the lease is gone and epochs start again, so the next
// acquisition, at a node's next renew tick, is epoch 1. Acquisitions keep
// the epochs from before too.
func (c *Cluster) Reseed() {
	c.mu.Lock()
	c.lease = lease{}
	c.mu.Unlock()
}

// State is the control API's view of the cluster.
type State struct {
	Leader       string        `json:"leader"`
	Epoch        int64         `json:"epoch"`
	AcquiredAt   time.Time     `json:"acquiredAt"`
	ExpiresAt    time.Time     `json:"expiresAt"`
	DatabaseDown bool          `json:"databaseDown"`
	Acquisitions []Acquisition `json:"acquisitions"`
	Nodes        []NodeState   `json:"nodes"`
}

// State returns a snapshot of the lease, the acquisitions and the nodes.
func (c *Cluster) State() State {
	c.mu.Lock()
	now := time.Now()
	s := State{
		Epoch:        c.lease.epoch,
		AcquiredAt:   c.lease.acquiredAt,
		ExpiresAt:    c.lease.expiresAt,
		DatabaseDown: c.dbDown,
		Acquisitions: append([]Acquisition(nil), c.acquisitions...),
	}
	if c.leaderLocked(c.lease.owner, now) {
		s.Leader = c.lease.owner
	}
	c.mu.Unlock()
	for _, n := range c.nodes {
		s.Nodes = append(s.Nodes, n.State())
	}
	return s
}

// AcquisitionOf returns when the lease of the given epoch was acquired.
func (c *Cluster) AcquisitionOf(epoch int64) (Acquisition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.acquisitions {
		if a.Epoch == epoch {
			return a, true
		}
	}
	return Acquisition{}, false
}

// leaderLocked reports whether node id holds a live lease. c.mu must be held.
func (c *Cluster) leaderLocked(id string, now time.Time) bool {
	return !c.dbDown && id != "" && c.lease.owner == id && now.Before(c.lease.expiresAt)
}

// renew is a node's renew tick: an atomic renew of its own lease, or an
// acquisition of an expired or released one (the cluster's UPDATE … WHERE).
func (c *Cluster) renew(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dbDown {
		return
	}
	now := time.Now()
	switch {
	case c.lease.owner == id && now.Before(c.lease.expiresAt):
		c.lease.expiresAt = now.Add(c.cfg.LeaseTTL)
		c.lease.lastRenewAt = now
	case c.lease.owner == "" || !now.Before(c.lease.expiresAt):
		c.acquireLocked(id, now)
	}
}

// acquireLocked gives node id the lease of the next epoch. c.mu must be held.
func (c *Cluster) acquireLocked(id string, now time.Time) {
	c.lease = lease{
		owner:       id,
		epoch:       c.lease.epoch + 1,
		expiresAt:   now.Add(c.cfg.LeaseTTL),
		lastRenewAt: now,
		acquiredAt:  now,
	}
	c.acquisitions = append(c.acquisitions, Acquisition{Node: id, Epoch: c.lease.epoch, At: now})
}

// Reset brings the cluster to a known state, for demos: the database up,
// every node running as itself (started again if stopped, killed or hung;
// stale and forged claims ended), and leader holding the lease. If it did
// not hold a live one, it acquires the next epoch at once, as if the last
// leader had released it.
func (c *Cluster) Reset(leader string) error {
	if c.Node(leader) == nil {
		return fmt.Errorf("fakecluster: no node %q", leader)
	}
	c.mu.Lock()
	c.dbDown = false
	if now := time.Now(); !c.leaderLocked(leader, now) {
		c.acquireLocked(leader, now)
	}
	c.mu.Unlock()
	for _, n := range c.nodes {
		if err := n.reset(); err != nil {
			return err
		}
	}
	return nil
}

// release gives up node id's lease, as the cluster's leader does at shutdown.
func (c *Cluster) release(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease.owner == id && !c.dbDown {
		c.lease.owner = ""
		c.lease.expiresAt = time.Now()
	}
}

// leaseView is what a node sees of the lease when it answers a request.
type leaseView struct {
	leader      bool
	epoch       int64
	expiresAt   time.Time
	lastRenewAt time.Time
}

func (c *Cluster) view(id string) leaseView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return leaseView{
		leader:      c.leaderLocked(id, time.Now()),
		epoch:       c.lease.epoch,
		expiresAt:   c.lease.expiresAt,
		lastRenewAt: c.lease.lastRenewAt,
	}
}

// WaitLeader polls until some node leads, for at most timeout.
func (c *Cluster) WaitLeader(timeout time.Duration) (State, error) {
	deadline := time.Now().Add(timeout)
	for {
		s := c.State()
		if s.Leader != "" {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, errors.New("fakecluster: no leader within " + timeout.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ControlHandler serves the control API:
//
//	GET  /state
//	POST /nodes/{id}/kill?mode=refuse|hang
//	POST /nodes/{id}/stop
//	POST /nodes/{id}/start
//	POST /nodes/{id}/claim?epoch=N   (answer as a stale leader of epoch N)
//	POST /nodes/{id}/forge?epoch=N&lease=D   (answer as leader of epoch N with a lease of D from now; epoch=0 ends it)
//	GET  /nodes/{id}/executed
//	POST /database/down, POST /database/up, POST /database/reseed
//	POST /reset?leader=ID   (Reset; the first node if no leader is given)
func (c *Cluster) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.State())
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		leader := r.URL.Query().Get("leader")
		if leader == "" && len(c.nodes) > 0 {
			leader = c.nodes[0].id
		}
		if err := c.Reset(leader); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, c.State())
	})
	mux.HandleFunc("POST /database/{updown}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("updown") {
		case "down":
			c.SetDatabaseDown(true)
		case "up":
			c.SetDatabaseDown(false)
		case "reseed":
			c.Reseed()
		default:
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, c.State())
	})
	mux.HandleFunc("/nodes/{id}/{action}", func(w http.ResponseWriter, r *http.Request) {
		n := c.Node(r.PathValue("id"))
		if n == nil {
			http.Error(w, "no such node", http.StatusNotFound)
			return
		}
		var err error
		switch action := r.PathValue("action"); {
		case action == "executed" && r.Method == http.MethodGet:
			writeJSON(w, http.StatusOK, n.Executed())
			return
		case r.Method != http.MethodPost:
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		case action == "kill":
			mode := KillRefuse
			if r.URL.Query().Get("mode") == "hang" {
				mode = KillHang
			}
			n.Kill(mode)
		case action == "stop":
			n.Stop()
		case action == "start":
			err = n.Start()
		case action == "claim":
			var epoch int64
			if _, err = fmt.Sscan(r.URL.Query().Get("epoch"), &epoch); err == nil {
				n.ClaimStale(epoch)
			}
		case action == "forge":
			var epoch int64
			var lease time.Duration
			if _, err = fmt.Sscan(r.URL.Query().Get("epoch"), &epoch); err == nil && epoch != 0 {
				lease, err = time.ParseDuration(r.URL.Query().Get("lease"))
			}
			if err == nil {
				n.Forge(epoch, lease)
			}
		default:
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, n.State())
	})
	return mux
}
