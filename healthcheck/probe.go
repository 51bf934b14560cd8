// Package healthcheck probes the nodes of an active/passive cluster at
// /healthz/leader and keeps a view of which node leads: per-node probes
// with thresholds, fast polling while there is no leader or the leader is
// in doubt, and the epoch guard against stale leaders. It also checks
// servers as HAProxy's "check" does (ServerChecker). It knows nothing of
// Caddy.
package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxBodyBytes bounds how much of a probe answer is read: the leader body
// is a few hundred bytes, and a node must not make the proxy read without end.
const maxBodyBytes = 64 << 10

// Result is the outcome of one probe.
type Result struct {
	// Started is when the probe was sent.
	Started time.Time
	// Duration is how long the probe took.
	Duration time.Duration
	// Answered is true if the node sent an HTTP answer at all.
	Answered bool
	// Status is the HTTP status of the answer.
	Status int
	// Leader is true for a 200 whose body says "leader" (or, if bare 200s
	// are accepted, any 200).
	Leader bool
	// Epoch is the answer's leaseEpoch (0 if unknown).
	Epoch int64
	// NodeID is the answer's nodeId.
	NodeID string
	// LeaseLeft is leaseExpiresAt − lastRenewAt from the answer: how long
	// the lease lasts after that renewal, in the cluster's own clock, so
	// that clock skew does not matter. 0 if unknown.
	LeaseLeft time.Duration
	// LastRenewAt is the answer's lastRenewAt, which tells one renewal
	// from the next.
	LastRenewAt time.Time
	// ServerTime is the answer's Date header (whole seconds), which tells
	// how old that renewal already is.
	ServerTime time.Time
	// Err says why a probe failed, or why a 200 was not taken as a leader.
	Err error
}

// Prober sends one probe to a node.
type Prober interface {
	Probe(ctx context.Context, addr string) Result
}

// HTTPProber probes GET scheme://addr/URI with a Host header.
type HTTPProber struct {
	Client *http.Client
	// Scheme is "http" or "https".
	Scheme string
	// URI is the probe path, e.g. /healthz/leader.
	URI string
	// Host, if set, is sent as the Host header (and nothing else changes:
	// TLS server names come from the client's TLS config).
	Host string
	// AcceptBare200 takes a 200 without a parsable leader body as a leader
	// of unknown epoch.
	AcceptBare200 bool
}

// leaderBody is the cluster's /healthz/leader answer on the leader.
type leaderBody struct {
	Status         string    `json:"status"`
	NodeID         string    `json:"nodeId"`
	LeaseExpiresAt time.Time `json:"leaseExpiresAt"`
	LeaseEpoch     *int64    `json:"leaseEpoch"`
	LastRenewAt    time.Time `json:"lastRenewAt"`
}

// Probe implements Prober.
func (p *HTTPProber) Probe(ctx context.Context, addr string) (res Result) {
	res = Result{Started: time.Now()}
	defer func() { res.Duration = time.Since(res.Started) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Scheme+"://"+addr+p.URI, nil)
	if err != nil {
		res.Err = err
		return res
	}
	if p.Host != "" {
		req.Host = p.Host
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		res.Err = err
		return res
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		// A node that sends headers and then stalls is as good as silent.
		res.Err = fmt.Errorf("reading probe answer: %w", err)
		return res
	}
	res.Answered, res.Status = true, resp.StatusCode
	res.ServerTime, _ = http.ParseTime(resp.Header.Get("Date"))
	if resp.StatusCode != http.StatusOK {
		return res
	}
	res.Leader, res.Epoch, res.NodeID, res.LeaseLeft, res.LastRenewAt, res.Err = parseLeaderBody(body, p.AcceptBare200)
	return res
}

// parseLeaderBody reads a 200 answer. A body that is not the cluster's leader
// JSON is a leader only if bare 200s are accepted.
func parseLeaderBody(body []byte, acceptBare bool) (leader bool, epoch int64, nodeID string, leaseLeft time.Duration, renewedAt time.Time, err error) {
	var b leaderBody
	switch {
	case len(body) > maxBodyBytes:
		err = fmt.Errorf("probe answer longer than %d bytes", maxBodyBytes)
	case json.Unmarshal(body, &b) != nil:
		err = errors.New("probe answer is not JSON")
	case b.Status != "leader":
		err = fmt.Errorf("probe answer has status %q, not \"leader\"", b.Status)
	case b.LeaseEpoch == nil:
		err = errors.New("probe answer has no leaseEpoch")
	case *b.LeaseEpoch < 0:
		err = errors.New("probe answer has a negative leaseEpoch")
	}
	if err != nil {
		return acceptBare, 0, "", 0, time.Time{}, err
	}
	if !b.LeaseExpiresAt.IsZero() && !b.LastRenewAt.IsZero() && b.LeaseExpiresAt.After(b.LastRenewAt) {
		leaseLeft = b.LeaseExpiresAt.Sub(b.LastRenewAt)
	}
	return true, *b.LeaseEpoch, b.NodeID, leaseLeft, b.LastRenewAt, nil
}
