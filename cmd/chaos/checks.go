package main

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
)

// row is what one fault run found: what its clients saw, and the
// invariants checked on the records of the nodes, the upload servers, the
// rate-limit backend and the status.
type row struct {
	fault    fault
	took     time.Duration
	requests int
	errors   map[string]int // client errors by kind

	notes []string // what failed, in more detail

	unexplained     int                             // client errors the fault does not explain (any, for a planned event)
	loadErrors      int                             // of the others, those the machine's load explains (stalledAround)
	followerWrites  int                             // writes a node executed without holding the lease of their epoch
	writesTwice     int                             // executions of a write beyond its first
	misrouted       int                             // upload requests that changed state on a server other than the upload's owner
	uploadsBroken   int                             // uploads not completed for their client, or not complete and byte-exact on their owner
	limitWindows    [2]int                          // by zone (Redis, PostgreSQL): rate-limit windows in which the store counted every request
	limitInexact    [2]int                          // of those, windows that let more than the limit through, or refused before it
	identities      int                             // Windows SSO: identities that crossed, handshakes split
	signInsLost     int                             // browsers that lost their signed-in connection with no fault to explain it
	statusBad       int                             // status scrapes failed or wrong, and 1 if none showed the fault
	cloudflareWrong int                             // requests whose client was resolved against Cloudflare's ranges wrongly
	overBound       int                             // requests that took longer than their class's bound
	overLoad        int                             // of the others, those within it once the machine's wait (canaryWait) is taken out
	canaryMax       [len(canaryKinds)]time.Duration // the slowest canary of each kind
}

// failed reports whether any invariant failed.
func (r row) failed() bool {
	return r.unexplained+r.followerWrites+r.writesTwice+r.misrouted+r.uploadsBroken+r.limitInexact[0]+r.limitInexact[1]+
		r.identities+r.signInsLost+r.statusBad+r.cloudflareWrong+r.overBound > 0
}

// uploadMarks are how many requests each upload server had recorded: a
// run checks those after its mark.
func uploadMarks(servers []*fakecluster.UploadServer) []int {
	marks := make([]int, len(servers))
	for i, s := range servers {
		marks[i] = len(s.Requests())
	}
	return marks
}

// runMarks is what a run's checks compare with: the records as they were
// at its start.
type runMarks struct {
	start   time.Time
	leader  string         // the cluster's leader at the start
	uploads []int          // uploadMarks
	splits  map[string]int // ssoFaultMarks
}

func markRun(r *rig) runMarks {
	return runMarks{start: time.Now(), leader: r.cluster.State().Leader, uploads: uploadMarks(r.uploads), splits: ssoFaultMarks(r.cluster)}
}

// check runs every invariant over a finished run.
func check(r *rig, f fault, l *load, eff effect, m runMarks, took time.Duration) row {
	rw := row{fault: f, took: took, errors: map[string]int{}}
	unexplained, loadErrors, explained := map[string]int{}, map[string]int{}, map[string]int{} // by class and kind
	over, overLoad := map[class]int{}, map[class]int{}
	slowest, slowestWait := map[class]time.Duration{}, map[class]time.Duration{}
	canaries := canariesByKind(l.results)
	for _, res := range l.results {
		d := res.done.Sub(res.sent)
		if res.class == classCanary {
			i := slices.Index(canaryKinds[:], res.id)
			rw.canaryMax[i] = max(rw.canaryMax[i], d)
			continue
		}
		rw.requests++
		own := canaries[canaryOf(res.class)]
		if res.failed() {
			rw.errors[res.errorKind()]++
			switch {
			case eff.explains != nil && eff.explains(res):
				explained[res.class.String()+" "+res.errorKind()]++
			case stalledAround(own, res) || stalledAround(canaries[storeOf(res.class)], res):
				rw.loadErrors++
				loadErrors[res.class.String()+" "+res.errorKind()]++
			default:
				rw.unexplained++
				unexplained[res.class.String()+" "+res.errorKind()]++
			}
		}
		if res.class == classCloudflare && res.wrong {
			rw.cloudflareWrong++
		}
		if d <= res.class.bound() {
			continue
		}
		if d-canaryWait(own, res) <= res.class.bound() {
			rw.overLoad++
			overLoad[res.class]++
			continue
		}
		rw.overBound++
		over[res.class]++
		if d > slowest[res.class] {
			slowest[res.class], slowestWait[res.class] = d, canaryWait(own, res)
		}
	}
	if rw.unexplained > 0 {
		rw.notes = append(rw.notes, "unexplained errors: "+byCount(unexplained))
	}
	if eff.explained != "" && len(explained) > 0 {
		rw.notes = append(rw.notes, eff.explained+": "+byCount(explained))
	}
	if rw.loadErrors > 0 {
		rw.notes = append(rw.notes, fmt.Sprintf("errors the machine's load explains (a canary waited %v or more then): %s", stallAt, byCount(loadErrors)))
	}
	for c := range classes {
		if over[c] > 0 {
			rw.notes = append(rw.notes, fmt.Sprintf("over bound: %d %s (slowest %v while a canary waited %v, bound %v)",
				over[c], c, slowest[c].Round(time.Millisecond), slowestWait[c].Round(time.Millisecond), c.bound()))
		}
		if overLoad[c] > 0 {
			rw.notes = append(rw.notes, fmt.Sprintf("over bound by the machine's load: %d %s (a canary waited as long meanwhile)", overLoad[c], c))
		}
	}
	if rw.cloudflareWrong > 0 {
		rw.notes = append(rw.notes, fmt.Sprintf("cloudflare: %d clients resolved wrongly", rw.cloudflareWrong))
	}
	rw.followerWrites, rw.writesTwice = checkWrites(r.cluster, l.run+"-w")
	rw.misrouted = misroutedRequests(r.uploads, m.uploads)
	rw.uploadsBroken = brokenUploads(r.uploads, l.uploads)
	for i, z := range []struct {
		c    class
		zone string
	}{{classLimited, limitZone}, {classPGLimited, pgLimitZone}} {
		rw.limitWindows[i], rw.limitInexact[i] = checkLimits(l, r.limited, z.c, z.zone)
	}
	var ssoNotes []string
	rw.identities, rw.signInsLost, ssoNotes = checkSSO(r.cluster, l, m.start, m.splits, f.slug == "reload" || leaderMoved(r.cluster, m))
	rw.notes = append(rw.notes, ssoNotes...)
	bad, shown := checkStatus(l, canaries[canaryOf(classStatus)], eff.at, eff.shows)
	rw.statusBad = bad
	if bad > 0 {
		rw.notes = append(rw.notes, fmt.Sprintf("status: %d scrapes failed, were no view, or showed Cloudflare's ranges gone", bad))
	}
	if !shown {
		rw.statusBad++
		rw.notes = append(rw.notes, "status: no scrape showed the fault")
	}
	return rw
}

// leaderMoved reports whether a node other than the run's first leader
// acquired the lease during the run: pins to the old one end.
func leaderMoved(c *fakecluster.Cluster, m runMarks) bool {
	for _, a := range c.State().Acquisitions {
		if a.At.After(m.start) && a.Node != m.leader {
			return true
		}
	}
	return false
}

// The canaries, by kind (their id): a request Caddy answers itself, one
// that Caddy proxies to a trivial backend in this process (two HTTP
// exchanges to schedule, as every proxied request of the load), and the
// suite's own PING to Redis and SELECT 1 to PostgreSQL, which wait for
// those processes.
var canaryKinds = [...]string{"caddy", "proxied", "redis", "postgres"}

func canariesByKind(results []result) map[string][]result {
	byKind := map[string][]result{}
	for _, res := range results {
		if res.class == classCanary {
			byKind[res.id] = append(byKind[res.id], res)
		}
	}
	return byKind
}

// canaryOf is the canary whose wait is a class's share of the machine's.
func canaryOf(c class) string {
	if c == classCloudflare || c == classStatus {
		return "caddy"
	}
	return "proxied"
}

// storeOf is the store whose answers a class's requests wait for: its
// canary's stall explains their failure too ("" for none).
func storeOf(c class) string {
	switch c {
	case classCreate, classUpload:
		return "redis"
	case classPGLimited:
		return "postgres"
	}
	return ""
}

// A stall is a canary that waited stallAt or more: the shortest deadline
// after which a module here fails a client's request (a probe's timeout,
// the upload bindings' and the PostgreSQL zone's store_timeout) had passed
// for a request that Caddy answers itself. Its effects outlast it by up to
// stallEffect, or as long as it lasted if longer: two failed probes take
// the leader away, three missed deadlines open a store's circuit, whose
// pause doubles from 100 ms while its trials fail, so that it ends at most
// about as long after the stall as the stall lasted.
const (
	stallAt     = 500 * time.Millisecond
	stallEffect = time.Second
)

// stalledAround reports whether a stall of canaries overlapped the
// request or ended, before it was sent, within its effect: the machine's
// load explains its failure.
func stalledAround(canaries []result, res result) bool {
	for _, c := range canaries {
		stall := c.done.Sub(c.sent)
		if stall >= stallAt && c.sent.Before(res.done) && c.done.After(res.sent.Add(-max(stallEffect, stall))) {
			return true
		}
	}
	return false
}

// canaryWait is the machine's share of a request's time: the longest that
// a canary — a request Caddy answers itself, through no module but
// forwarded — waited while the request was under way. A request that
// takes longer than its bound only because every request waited as long
// meanwhile is not over the bound of its module.
func canaryWait(canaries []result, res result) time.Duration {
	var wait time.Duration
	for _, c := range canaries {
		from, to := maxTime(c.sent, res.sent), minTime(c.done, res.done)
		wait = max(wait, to.Sub(from))
	}
	return wait
}

// checkWrites goes through the writes the nodes executed (those whose id
// starts with prefix). A write is a follower's unless the node held the
// lease of the write's epoch, acquired by it (the cluster's acquisitions)
// and not yet taken over by the next epoch. A write executed more than
// once counts once per extra execution.
func checkWrites(c *fakecluster.Cluster, prefix string) (followerWrites, twice int) {
	acquisitions := c.State().Acquisitions
	seen := map[string]bool{}
	for _, n := range c.Nodes() {
		for _, e := range n.Executed() {
			if !strings.HasPrefix(e.RequestID, prefix) {
				continue
			}
			if seen[e.RequestID] {
				twice++
			}
			seen[e.RequestID] = true
			if !heldLease(acquisitions, e) {
				followerWrites++
			}
		}
	}
	return followerWrites, twice
}

func heldLease(acquisitions []fakecluster.Acquisition, e fakecluster.Execution) bool {
	for i, a := range acquisitions {
		if a.Epoch == e.Epoch {
			next := i + 1
			return a.Node == e.Node && !e.At.Before(a.At) && (next == len(acquisitions) || e.At.Before(acquisitions[next].At))
		}
	}
	return false
}

// misroutedRequests counts the requests on an upload (its chunks, its
// completion, its abort) that reached a server other than its owner, from
// every server's own record since its mark. Status requests (HEAD, GET)
// are left out: the policy's search for the owner of an unbound upload
// asks every server, by design.
func misroutedRequests(servers []*fakecluster.UploadServer, marks []int) int {
	owner := map[string]string{}
	for _, s := range servers {
		for _, u := range s.Uploads() {
			owner[u.ID] = s.ID()
		}
	}
	n := 0
	for i, s := range servers {
		reqs := s.Requests()
		for _, q := range reqs[min(marks[i], len(reqs)):] {
			if q.UploadID != "" && q.Method != http.MethodGet && q.Method != http.MethodHead && owner[q.UploadID] != s.ID() {
				n++
			}
		}
	}
	return n
}

// brokenUploads counts the uploads that their client could not complete
// within its budget (it sends failed steps again, so a fault that ends
// costs none), and those it completed whose owner does not hold them
// complete, byte for byte.
func brokenUploads(servers []*fakecluster.UploadServer, uploads []*upload) int {
	n := 0
	for _, u := range uploads {
		if !u.completed {
			n++
			continue
		}
		intact := false
		for _, s := range servers {
			if rec, ok := s.Upload(u.id); ok {
				intact = rec.Completed && bytes.Equal(rec.Data, u.data)
				break
			}
		}
		if !intact {
			n++
		}
	}
	return n
}

// checkLimits checks every window of a zone (its requests of class c) in
// which its store counted every request: the window let exactly
// limitEvents through to the backend (its record) once more were sent —
// never more, and none refused before limitEvents had passed, counting the
// requests that failed (in transport, or 5xx on the way to the backend) as
// possibly passed. The store counted every request when the zone's
// fallback count did not move from the sample before the window's first
// request to the one after its last answer.
func checkLimits(l *load, backend *limitBackend, c class, zone string) (windows, inexact int) {
	type window struct {
		passed, refused, failed int
		first, last             time.Time // the first request sent, the last answered
	}
	byWindow := map[int64]*window{}
	for _, res := range l.results {
		if res.class != c {
			continue
		}
		n := windowOf(res.sent)
		w := byWindow[n]
		if w == nil {
			w = &window{first: res.sent}
			byWindow[n] = w
		}
		w.first = minTime(w.first, res.sent)
		w.last = maxTime(w.last, res.done)
		w.passed += backend.passedCount(res.id)
		switch {
		case res.status == http.StatusTooManyRequests:
			w.refused++
		case res.failed():
			w.failed++
		}
	}
	for n, w := range byWindow {
		before, okBefore := l.samples[n]
		after, okAfter := l.samples[n+1]
		if !okBefore || !okAfter || before.fallbacks[zone] != after.fallbacks[zone] ||
			!before.answered.Before(w.first) || !after.asked.After(w.last) {
			continue
		}
		windows++
		if w.passed > limitEvents || (w.refused > 0 && w.passed+w.failed < limitEvents) {
			inexact++
		}
	}
	return windows, inexact
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
