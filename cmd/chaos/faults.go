package main

import (
	"errors"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/httpcheck"
	"github.com/caddy-ha/caddy-ha/status"
)

// fault is one event the suite injects under load.
type fault struct {
	slug string // its name for -only, and the prefix of its run's ids
	name string // its name in the table
	// planned: an operator's event, which may cost no client error at all.
	planned bool
	// inject starts the fault. What it returns ends it and tells which
	// failed requests the fault explains (none for a planned event).
	inject func(r *rig) (effect, error)
}

type effect struct {
	end      func() error      // nil: nothing to end
	explains func(result) bool // nil: no failure is explained
	// explained, if set, says why in the notes, with the count: for a
	// planned event's errors that the host explains, not the event.
	explained string
	// shows tells whether a status view shows the fault; nil: nothing to
	// show.
	shows func(status.View) bool
	at    time.Time // when it was injected
}

// reloadsPerRun config reloads are spread over the fault's duration.
const reloadsPerRun = 6

func faults() []fault {
	return []fault{
		{slug: "steady", name: "none (steady load)", planned: true, inject: func(*rig) (effect, error) { return effect{}, nil }},
		{slug: "stop", name: "leader planned stop", planned: true, inject: onLeader(func(n *fakecluster.Node) { n.Stop() }, nil)},
		{slug: "kill", name: "leader kill", inject: onLeader(func(n *fakecluster.Node) { n.Kill(fakecluster.KillRefuse) }, leaderPool)},
		{slug: "hang", name: "leader hang", inject: onLeader(func(n *fakecluster.Node) { n.Kill(fakecluster.KillHang) }, leaderPool)},
		{slug: "db", name: "database down", inject: databaseDown},
		{slug: "rpause", name: "redis paused", inject: func(r *rig) (effect, error) {
			return effect{end: r.redis.Resume, explains: storeBound, shows: storeDown("redis")}, r.redis.Pause()
		}},
		{slug: "rkill", name: "redis killed", inject: func(r *rig) (effect, error) {
			r.redis.Kill()
			return effect{end: r.redis.Restart, explains: storeBound, shows: storeDown("redis")}, nil
		}},
		{slug: "pgpause", name: "postgres paused", inject: func(r *rig) (effect, error) {
			return effect{end: r.pg.Resume, explains: pgDenied, shows: storeDown("postgres")}, r.pg.Pause()
		}},
		{slug: "pgkill", name: "postgres killed", inject: func(r *rig) (effect, error) {
			r.pg.Kill()
			return effect{end: r.pg.Restart, explains: pgDenied, shows: storeDown("postgres")}, nil
		}},
		{slug: "ukill", name: "upload server killed", inject: killUploadServer},
		{slug: "cf", name: "cloudflare lists failing", inject: cloudflareFailing},
		{slug: "reload", name: "config reloads", planned: true, inject: reloads},
	}
}

// leaderPool: the requests that lb_policy leader routes, which a leader
// that crashes or hangs, or a cluster without a leader, may fail.
func leaderPool(r result) bool {
	return r.class == classWrite || r.class == classRead || r.class == classSSO
}

// pgDenied: the PostgreSQL zone's requests answered as on_store_error deny
// says, 503 with Retry-After (a timeout or another error is not).
func pgDenied(r result) bool {
	return r.class == classPGLimited && r.err == nil && r.status == http.StatusServiceUnavailable && r.retryAfter != ""
}

// storeBound: the upload requests, which need their binding from the store
// (or to store it): 503 while it is down.
func storeBound(r result) bool { return r.class == classCreate || r.class == classUpload }

// onLeader does act to the node that leads now, and starts it again (as a
// follower) to end the fault.
func onLeader(act func(*fakecluster.Node), explains func(result) bool) func(*rig) (effect, error) {
	return func(r *rig) (effect, error) {
		n := r.cluster.Node(r.cluster.State().Leader)
		if n == nil {
			return effect{}, errors.New("no leader to act on")
		}
		act(n)
		return effect{end: n.Start, explains: explains, shows: leaderNot(n.Addr())}, nil
	}
}

func databaseDown(r *rig) (effect, error) {
	leader := r.cluster.Node(r.cluster.State().Leader)
	if leader == nil {
		return effect{}, errors.New("no leader before the database goes down")
	}
	r.cluster.SetDatabaseDown(true)
	return effect{
		end:      func() error { r.cluster.SetDatabaseDown(false); return nil },
		explains: leaderPool,
		shows:    leaderNot(leader.Addr()),
	}, nil
}

// cloudflareFailing makes every download of Cloudflare's lists fail: the
// loaded ranges must stay (the status scrapes and the edge's requests
// check it), and the status must count the failed refreshes.
func cloudflareFailing(r *rig) (effect, error) {
	before, err := r.statusView()
	if err != nil {
		return effect{}, err
	}
	r.cf.failing.Store(true)
	return effect{
		end: func() error { r.cf.failing.Store(false); return nil },
		shows: func(v status.View) bool {
			return cloudflareFailures(v) > cloudflareFailures(before)
		},
	}, nil
}

func cloudflareFailures(v status.View) float64 {
	var n float64
	for _, set := range v.CloudflareRanges {
		n += set.Failures
	}
	return n
}

// killUploadServer crashes the upload server with the most unfinished
// uploads and starts it again (with its uploads) to end the fault. It
// explains the failures of its own uploads' requests, and of any upload
// request in flight when it died. A creation sent later has two servers
// left to take it: its failure is not explained.
func killUploadServer(r *rig) (effect, error) {
	victim, most := r.uploads[0], -1
	for _, s := range r.uploads {
		unfinished := 0
		for _, u := range s.Uploads() {
			if !u.Completed && !u.Aborted {
				unfinished++
			}
		}
		if unfinished > most {
			victim, most = s, unfinished
		}
	}
	before, err := r.statusView()
	if err != nil {
		return effect{}, err
	}
	at := time.Now()
	victim.Kill()
	ownerDown := func(v status.View) float64 { return v.UploadAffinity.Events["owner_down"] }
	return effect{end: victim.Start, shows: func(v status.View) bool { return ownerDown(v) > ownerDown(before) }, explains: func(res result) bool {
		if !storeBound(res) {
			return false
		}
		if res.sent.Before(at) && res.done.After(at) {
			return true
		}
		_, owned := victim.Upload(res.id)
		return res.class == classUpload && owned
	}}, nil
}

// reloads reloads Caddy's config reloadsPerRun times over the fault's
// duration, under the load. Caddy listens with SO_REUSEPORT, a socket per
// config, and closing the old one resets the connections still in its
// accept queue, unless the host moves them to the new socket
// (net.ipv4.tcp_migrate_req=1, docs/reload-handoff.md): with the sysctl
// off, a reset of a connection dialled for its request is the host's.
func reloads(r *rig) (effect, error) {
	for i := range reloadsPerRun {
		if i > 0 {
			time.Sleep(faultFor / reloadsPerRun)
		}
		if err := r.reload(); err != nil {
			return effect{}, err
		}
	}
	if httpcheck.MigratesAcceptQueue() {
		return effect{}, nil
	}
	return effect{
		explains: func(res result) bool {
			return res.fresh && res.status == 0 && (errors.Is(res.err, syscall.ECONNRESET) || errors.Is(res.err, io.EOF) || errors.Is(res.err, io.ErrUnexpectedEOF))
		},
		explained: "new connections reset in the old socket's accept queue (net.ipv4.tcp_migrate_req=0)",
	}, nil
}
