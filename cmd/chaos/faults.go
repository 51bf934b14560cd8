package main

import (
	"errors"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
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
			return effect{end: r.redis.Resume, explains: storeBound}, r.redis.Pause()
		}},
		{slug: "rkill", name: "redis killed", inject: func(r *rig) (effect, error) {
			r.redis.Kill()
			return effect{end: r.redis.Restart, explains: storeBound}, nil
		}},
		{slug: "ukill", name: "upload server killed", inject: killUploadServer},
		{slug: "reload", name: "config reloads", planned: true, inject: reloads},
	}
}

// leaderPool: the requests that lb_policy leader routes, which a leader
// that crashes or hangs, or a cluster without a leader, may fail.
func leaderPool(r result) bool { return r.class == classWrite || r.class == classRead }

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
		return effect{end: n.Start, explains: explains}, nil
	}
}

func databaseDown(r *rig) (effect, error) {
	r.cluster.SetDatabaseDown(true)
	return effect{
		end:      func() error { r.cluster.SetDatabaseDown(false); return nil },
		explains: leaderPool,
	}, nil
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
	at := time.Now()
	victim.Kill()
	return effect{end: victim.Start, explains: func(res result) bool {
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
// duration, under the load.
func reloads(r *rig) (effect, error) {
	for i := range reloadsPerRun {
		if i > 0 {
			time.Sleep(faultFor / reloadsPerRun)
		}
		if err := r.reload(); err != nil {
			return effect{}, err
		}
	}
	return effect{}, nil
}
