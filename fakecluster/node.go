package fakecluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// KillMode is how a killed node looks from the network.
type KillMode int

const (
	// KillRefuse closes the node's port: connections are refused, as after a crash.
	KillRefuse KillMode = iota
	// KillHang keeps the port open but never answers, as a hung process does.
	KillHang
)

type nodeState string

const (
	stateStopped nodeState = "stopped"
	stateRunning nodeState = "running"
	stateKilled  nodeState = "killed"
	stateHung    nodeState = "hung"
)

// Execution is one mutating request that a node executed as leader.
type Execution struct {
	Node      string    `json:"node"`
	Epoch     int64     `json:"epoch"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	RequestID string    `json:"requestId"`
	Proto     string    `json:"proto"`
	BodyBytes int       `json:"bodyBytes"`
	At        time.Time `json:"at"`
}

// NodeState is the control API's view of one node.
type NodeState struct {
	ID         string `json:"id"`
	Addr       string `json:"addr"`
	State      string `json:"state"`
	Leader     bool   `json:"leader"`
	StaleEpoch int64  `json:"staleEpoch,omitempty"`
	Executed   int    `json:"executed"`
	Received   int    `json:"received"`
}

// Node is one server of the cluster.
type Node struct {
	cluster *Cluster
	id      string
	addr    string

	mu         sync.Mutex
	state      nodeState
	server     *http.Server
	stopRenew  chan struct{}
	renewDone  chan struct{}
	unhang     chan struct{} // closed when a hung node is started or halted again
	staleEpoch int64         // > 0: answers as a leader of this epoch whatever the lease says
	forged     *leaseView    // answers as a leader with this lease, whatever the cluster's
	executed   []Execution
	received   int    // requests other than probes, whatever the answer
	probeHost  string // Host header of the last leader probe
	heard      []Heard
	sso        ssoLog
}

// Heard is one request other than a probe as the node received it, for
// tests that compare what two proxies sent.
type Heard struct {
	Conn         string // the upstream connection (node/number)
	Client       string // the request's X-Client header
	Method, Path string
	Host         string
	Header       http.Header // as received (Host apart, as net/http keeps it)
}

// maxHeard bounds the record of heard requests: the oldest go first.
const maxHeard = 1024

func newNode(c *Cluster, id, addr string) *Node {
	return &Node{cluster: c, id: id, addr: addr, state: stateStopped, unhang: make(chan struct{})}
}

// ID returns the node's id (node-a, node-b, …).
func (n *Node) ID() string { return n.id }

// Addr returns the node's host:port on loopback.
func (n *Node) Addr() string { return n.addr }

// URL returns the node's base URL.
func (n *Node) URL() string {
	if n.cluster.cfg.TLS != nil {
		return "https://" + n.addr
	}
	return "http://" + n.addr
}

// ProbeHost returns the Host header of the last /healthz/leader request.
func (n *Node) ProbeHost() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.probeHost
}

// Start starts a stopped or killed node: it listens again and takes part
// in the lease from its first renew tick, which runs at once.
func (n *Node) Start() error { return n.start() }

func (n *Node) start() error {
	n.halt(stateStopped)
	ln, err := listen(n.addr)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.id, err)
	}
	if n.cluster.cfg.TLS != nil {
		ln = tls.NewListener(ln, n.cluster.cfg.TLS)
	}
	srv := &http.Server{Handler: n, ReadHeaderTimeout: 10 * time.Second,
		ConnContext: n.sso.connContext(n.id), ConnState: n.sso.connState}
	stop, done := make(chan struct{}), make(chan struct{})
	n.mu.Lock()
	n.state, n.server, n.stopRenew, n.renewDone = stateRunning, srv, stop, done
	n.unhang = make(chan struct{})
	n.mu.Unlock()
	n.cluster.renew(n.id)
	go n.renewLoop(stop, done)
	go srv.Serve(ln) //nolint:errcheck // returns when the node is halted
	return nil
}

// listen listens on addr, retrying for about a second: the port of a
// server that was just closed can take a moment to free up. A free port
// (":0") is not retried, as waiting cannot help it.
func listen(addr string) (ln net.Listener, err error) {
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil || strings.HasSuffix(addr, ":0") {
			return ln, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

func (n *Node) renewLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(n.cluster.cfg.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			n.cluster.renew(n.id)
		}
	}
}

// reset starts the node unless it is running, and ends its stale or
// forged claim.
func (n *Node) reset() error {
	n.mu.Lock()
	running := n.state == stateRunning
	n.staleEpoch, n.forged = 0, nil
	n.mu.Unlock()
	if running {
		return nil
	}
	return n.start()
}

// Kill stops the node's renewals without releasing its lease, which runs
// out after the TTL. KillRefuse closes its port; KillHang leaves it open
// and never answers.
func (n *Node) Kill(mode KillMode) {
	if mode == KillHang {
		n.stopRenewing()
		n.mu.Lock()
		if n.state == stateRunning {
			n.state = stateHung
		}
		n.mu.Unlock()
		return
	}
	n.halt(stateKilled)
}

// Stop is a planned stop: the node releases its lease, serves as a
// follower for the cluster's StopDrain, then shuts down.
func (n *Node) Stop() {
	n.stopRenewing()
	n.cluster.release(n.id)
	time.Sleep(n.cluster.cfg.StopDrain)
	n.halt(stateStopped)
}

// ClaimStale makes the node answer as the leader of the given (old) epoch,
// as a process that has not noticed its step-down would.
func (n *Node) ClaimStale(epoch int64) {
	n.mu.Lock()
	n.staleEpoch = epoch
	n.mu.Unlock()
}

// Forge makes the node answer as the leader of epoch with a lease of its
// own, renewed now and never again, as a hostile or broken node would;
// epoch 0 ends it.
func (n *Node) Forge(epoch int64, lease time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if epoch == 0 {
		n.forged = nil
		return
	}
	now := time.Now()
	n.forged = &leaseView{leader: true, epoch: epoch, lastRenewAt: now, expiresAt: now.Add(lease)}
}

func (n *Node) stopRenewing() {
	n.mu.Lock()
	stop, done := n.stopRenew, n.renewDone
	n.stopRenew, n.renewDone = nil, nil
	n.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// halt closes the node's server and ends any hang.
func (n *Node) halt(to nodeState) {
	n.stopRenewing()
	n.mu.Lock()
	srv := n.server
	n.server = nil
	n.state = to
	n.staleEpoch, n.forged = 0, nil
	select {
	case <-n.unhang:
	default:
		close(n.unhang)
	}
	n.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if to == stateStopped {
			_ = srv.Shutdown(ctx)
		}
		_ = srv.Close()
	}
}

// State returns the node's view for the control API.
func (n *Node) State() NodeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return NodeState{
		ID: n.id, Addr: n.addr, State: string(n.state),
		Leader:     n.state == stateRunning && n.cluster.view(n.id).leader,
		StaleEpoch: n.staleEpoch, Executed: len(n.executed), Received: n.received,
	}
}

// Received returns how many requests other than probes reached the node.
func (n *Node) Received() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.received
}

// Heard returns the latest requests other than probes that reached the
// node (up to maxHeard of them), oldest first.
func (n *Node) Heard() []Heard {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Heard(nil), n.heard...)
}

// Executed returns the mutating requests this node executed as leader.
func (n *Node) Executed() []Execution {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Execution(nil), n.executed...)
}

// role tells how the node answers right now: as leader (and of which epoch)
// or as follower.
func (n *Node) role() (leader bool, lv leaseView) {
	lv = n.cluster.view(n.id)
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.forged != nil:
		return true, *n.forged
	case n.staleEpoch > 0:
		lv.epoch = n.staleEpoch
		return true, lv
	}
	return lv.leader, lv
}

// isMutating reports whether a request changes state: every unsafe method,
// and the webhook ingress, which changes state through GET.
func isMutating(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return strings.HasPrefix(r.URL.Path, "/webhooks/")
	}
	return true
}

func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	hung, unhang := n.state == stateHung, n.unhang
	n.mu.Unlock()
	if hung {
		select {
		case <-unhang:
		case <-r.Context().Done():
		}
		return
	}

	n.mu.Lock()
	switch {
	case r.URL.Path == "/healthz/leader":
		n.probeHost = r.Host
	case !strings.HasPrefix(r.URL.Path, "/healthz/"):
		n.received++
		if len(n.heard) == 2*maxHeard {
			n.heard = append(n.heard[:0], n.heard[maxHeard:]...)
		}
		h := Heard{Client: r.Header.Get("X-Client"), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Host: r.Host}
		if sc, _ := r.Context().Value(ssoConnKey{}).(*ssoConn); sc != nil {
			h.Conn = sc.id
		}
		n.heard = append(n.heard, h)
	}
	n.mu.Unlock()
	leader, lv := n.role()
	w.Header().Set("X-Node-Id", n.id)
	w.Header().Set("X-Lease-Epoch", strconv.FormatInt(lv.epoch, 10))
	role := "follower"
	if leader {
		role = "leader"
	}
	w.Header().Set("X-Node-Role", role)
	if sc, _ := r.Context().Value(ssoConnKey{}).(*ssoConn); sc != nil && !strings.HasPrefix(r.URL.Path, "/healthz/") {
		if n.serveSSO(w, r, sc) {
			return
		}
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			n.serveWebSocket(w, r, sc)
			return
		}
		n.identify(w, r, sc)
	}

	switch {
	case r.URL.Path == "/healthz/leader":
		if !leader {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "follower", "nodeId": n.id})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"status":         "leader",
			"nodeId":         n.id,
			"leaseExpiresAt": lv.expiresAt.UTC().Format(time.RFC3339Nano),
			"leaseEpoch":     lv.epoch,
			"lastRenewAt":    lv.lastRenewAt.UTC().Format(time.RFC3339Nano),
		})
	case strings.HasPrefix(r.URL.Path, "/healthz/"):
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "nodeId": n.id})
	case isMutating(r):
		if !leader {
			// The cluster's LeaderRequiredMiddleware: refuse before doing anything.
			if d := n.cluster.cfg.RefusalDelay; d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
				}
			}
			w.Header().Set("Retry-After", "30")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "not the leader", "nodeId": n.id})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": "body too large"})
			}
			return // a client that went away mid-body: nothing executed
		}
		ex := Execution{
			Node: n.id, Epoch: lv.epoch, Method: r.Method, Path: r.URL.Path,
			RequestID: r.Header.Get("X-Request-Id"), Proto: r.Proto, BodyBytes: len(body), At: time.Now(),
		}
		n.mu.Lock()
		n.executed = append(n.executed, ex)
		n.mu.Unlock()
		writeJSON(w, http.StatusOK, ex)
	default:
		// The forwarding headers as the node got them, for the demo to
		// show what a proxy passed on.
		writeJSON(w, http.StatusOK, map[string]any{"node": n.id, "epoch": lv.epoch, "role": role, "path": r.URL.Path,
			"forwarded": r.Header.Get("Forwarded"), "xForwardedFor": r.Header.Get("X-Forwarded-For"), "xForwardedProto": r.Header.Get("X-Forwarded-Proto")})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
