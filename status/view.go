// Package status is the operator's view of caddy-ha: one snapshot of every
// capability's state (View), rendered as the status page (HTML), as JSON for
// the admin API and as a terminal table for `caddy ha status`. It knows
// nothing of Caddy: the adapter gathers the snapshot.
package status

import (
	"time"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

// View is the state of every capability at one moment. The JSON is what
// the admin API's /ha/status and the page's ?format=json return.
type View struct {
	GeneratedAt      time.Time       `json:"generated_at"`
	LeaderPools      []LeaderPool    `json:"leader_pools"`
	RateLimitZones   []RateLimitZone `json:"rate_limit_zones"`
	Stores           []Store         `json:"stores"`
	UploadAffinity   UploadAffinity  `json:"upload_affinity"`
	CloudflareRanges []CloudflareSet `json:"cloudflare_ranges"`
	PinnedPools      []PinnedPool    `json:"pinned_pools"`
}

// LeaderPool is a leader pool's probe view, the last changes of leader and
// its requests' counts.
type LeaderPool struct {
	healthcheck.PoolView
	// HoldSeconds is how long a request waits for a leader before its 503.
	HoldSeconds float64 `json:"hold_seconds"`
	// LastChanges are the latest changes of leader, newest first.
	LastChanges       []LeaderChange `json:"last_changes"`
	Failovers         float64        `json:"failovers"`
	HoldingRequests   float64        `json:"holding_requests"`
	HeldRequests      float64        `json:"held_requests"`
	ReplayedRequests  float64        `json:"replayed_requests"`
	NoLeaderResponses float64        `json:"no_leader_responses"`
}

// LeaderChange is one change of a pool's leader; To is "" when it lost
// its leader.
type LeaderChange struct {
	At       time.Time `json:"at"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	Epoch    int64     `json:"epoch,omitempty"`
	Failover bool      `json:"failover"`
	Reason   string    `json:"reason"`
}

// InProgress reports whether the pool is between leaders: it has none now,
// had one, and requests still wait for the next (no longer than hold).
func (p LeaderPool) InProgress(now time.Time) bool {
	return p.Leader == "" && len(p.LastChanges) > 0 && p.Leaderless(now) <= time.Duration(p.HoldSeconds*float64(time.Second))
}

// NeverLed reports whether the pool has had no leader since it started:
// every node down or a follower since the first probes.
func (p LeaderPool) NeverLed() bool { return p.Leader == "" && len(p.LastChanges) == 0 }

// RateLimitZone is a zone's settings and decisions.
type RateLimitZone struct {
	Zone              string  `json:"zone"`
	Events            int64   `json:"events"`
	WindowSeconds     float64 `json:"window_seconds"`
	Sliding           bool    `json:"sliding"`
	Store             string  `json:"store"`
	OnStoreError      string  `json:"on_store_error"`
	Allowed           float64 `json:"allowed"`
	Limited           float64 `json:"limited"`
	Denied            float64 `json:"denied"`
	StoreErrors       float64 `json:"store_errors"`
	FallbackDecisions float64 `json:"fallback_decisions"`
}

// Store is a store's health.
type Store struct {
	Store string `json:"store"`
	Up    bool   `json:"up"`
	// RetryInSeconds is how long until a down store is tried again.
	RetryInSeconds float64 `json:"retry_in_seconds,omitempty"`
	// PingMillis is the last answered health check's duration; none for
	// a store in this process's memory.
	PingMillis         float64 `json:"ping_ms,omitempty"`
	ClockOffsetSeconds float64 `json:"clock_offset_seconds"`
	// Degraded is set while a bounded store (memory) refuses new keys for
	// lack of room; Evictions and Refusals count how it made room, or not.
	Degraded  bool    `json:"degraded,omitempty"`
	Evictions float64 `json:"evictions,omitempty"`
	Refusals  float64 `json:"refusals,omitempty"`
}

// UploadAffinity counts upload affinity's events, by event; no events
// while no lb_policy upload_affinity is in use.
type UploadAffinity struct {
	Events map[string]float64 `json:"events,omitempty"`
}

// Happened returns the events that occurred at least once: the page and
// the table show those, not a heading over zeros.
func (u UploadAffinity) Happened() map[string]float64 {
	happened := map[string]float64{}
	for e, n := range u.Events {
		if n > 0 {
			happened[e] = n
		}
	}
	return happened
}

// CloudflareSet is a set of Cloudflare's ranges.
type CloudflareSet struct {
	File string `json:"file"`
	// From is where the ranges come from: the download URLs, or the file.
	From        string     `json:"from"`
	Ranges      int        `json:"ranges"`
	RefreshedAt *time.Time `json:"refreshed_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	FailedAt    *time.Time `json:"failed_at,omitempty"`
	Failures    float64    `json:"failures"`
}

// PinnedPool is a pinned transport's connections.
type PinnedPool struct {
	Pool        string             `json:"pool"`
	Connections float64            `json:"connections"`
	Max         int                `json:"max"`
	Pins        float64            `json:"pins"`
	Ended       map[string]float64 `json:"ended"`
	Refused     map[string]float64 `json:"refused"`
	// AtCap is the last refusal at each of the pool's caps, if any.
	AtCap []CapRefusal `json:"at_cap,omitempty"`
}

// CapRefusal is the last request a pinned pool refused at one of its caps.
type CapRefusal struct {
	Cap      string     `json:"cap"`    // the option: max_pinned, max_handshakes_per_client, max_pinned_per_client
	Limit    int        `json:"limit"`  // its value
	Client   string     `json:"client"` // the address refused (IPv6: its /64)
	At       *time.Time `json:"at"`
	Refusals float64    `json:"refusals"` // at this cap since the pool began
}
