package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/httpcheck"
	"github.com/caddy-ha/caddy-ha/ratelimit"
)

// class is a kind of request of the mixed load.
type class int

const (
	classWrite      class = iota // POST through lb_policy leader
	classRead                    // GET through lb_policy leader
	classLimited                 // GET in the Redis rate-limit zone, from the fixed client
	classPGLimited               // GET in the PostgreSQL rate-limit zone, from the fixed client
	classCreate                  // an upload's creation
	classUpload                  // a request on an existing upload: a chunk, the completion
	classSSO                     // a signed-in browser's GET through transport pinned
	classCloudflare              // a GET with CF-Connecting-IP, from the Cloudflare edge or outside it
	classStatus                  // a scrape of the status page or the admin API's /ha/status
	classCanary                  // what the machine's load adds (id: which canaryKinds)
	classes                      // how many there are
)

func (c class) String() string {
	return [...]string{"write", "read", "limited", "pg limited", "create", "upload", "sso", "cloudflare", "status", "canary"}[c]
}

// bound is the longest a request of the class may take by the modules'
// own promises, plus a margin for a loaded 2-core machine.
func (c class) bound() time.Duration {
	const margin = 500 * time.Millisecond
	switch c {
	case classWrite, classRead:
		// Held for a leader, then one attempt at a node that may hang.
		return hold + responseHeaderTimeout + margin
	case classLimited:
		// A store that fails or hangs is given up after store_timeout.
		return limitStoreTimeout + margin
	case classPGLimited:
		return pgLimitStoreTimeout + margin
	case classSSO:
		// As the leader's traffic, and the handshake's two legs.
		return hold + responseHeaderTimeout + 2*margin
	case classCloudflare, classStatus, classCanary:
		// Answered by Caddy itself.
		return margin
	case classCreate, classUpload:
		// A store lookup, a search for the owner, the owner's answer.
		return uploadStoreTimeout + discoveryTimeout + margin
	}
	panic("no such class")
}

// The mixed load: rates per stream.
const (
	writeEvery  = 5 * time.Millisecond   // 200 writes/s
	readEvery   = 10 * time.Millisecond  // 100 reads/s
	uploadEvery = 100 * time.Millisecond // 10 uploads/s, 5 requests each
	// An upload's steps are this far apart, as a client sending chunks as
	// they come: about ten uploads are under way at any moment.
	uploadPace = 250 * time.Millisecond
	// The fixed client of the rate-limit zone sends limitPerWindow requests
	// a window, 100 ms apart from 100 ms after its start: well inside the
	// window (the limiter's clock decides), and more than limitEvents.
	limitPerWindow = 6
	// limitClient is who the fixed client says it is (X-Forwarded-For
	// from a trusted peer): forwarded makes it the zone's {client_ip}.
	limitClient = "198.51.100.7"

	uploadLength  = 20_000
	uploadChunk   = 8192
	uploadBudget  = 20 * time.Second // an upload retries its steps this long, then gives up
	uploadBackoff = 200 * time.Millisecond
	maxInFlight   = 2048 // per stream

	cloudflareEvery  = 100 * time.Millisecond // 10/s, half from the edge
	statusEvery      = 200 * time.Millisecond // 5/s, the page and the admin API in turn
	canaryEvery      = 20 * time.Millisecond  // 50/s
	storeCanaryEvery = 50 * time.Millisecond  // 20/s to each store
)

// result is one request as its client saw it.
type result struct {
	class  class
	id     string // writes and limited requests: X-Request-Id; creations: the idempotency key; upload requests: the upload id
	sent   time.Time
	done   time.Time
	status int   // 0 if err
	err    error // transport error or client timeout
	// wrong: answered, but not as the class's invariant says (another
	// user, a client resolved wrongly, a status that is no valid JSON).
	wrong bool
	// retryAfter: the answer's Retry-After.
	retryAfter string
	// fresh: the request went on a connection dialled for it.
	fresh bool
}

func (r result) failed() bool { return r.err != nil || r.status >= 500 }

// describe is how the result ended, for notes.
func (r result) describe() string {
	switch {
	case r.sent.IsZero():
		return "none"
	case r.wrong:
		return r.errorKind() + " (wrong)"
	default:
		return r.errorKind()
	}
}

// errorKind names a failure: its status, "timeout" or "conn".
func (r result) errorKind() string { return httpcheck.ErrorKind(r.status, r.err) }

// clients are the load's HTTP clients, kept for the whole suite so that
// their kept-alive connections live through every fault, reloads included.
type clients struct {
	pool, limited, uploads, quick *http.Client
	// Requests from the Cloudflare edge and from outside it.
	cloudflare, outside *http.Client
	browsers            []*browser
}

// clientTimeout lets a request run past its bound, to be seen doing so.
func clientTimeout(c class) time.Duration { return c.bound() + 2*time.Second }

func newClients(site string) *clients {
	client := func(c class, idle int) *http.Client {
		return &http.Client{Timeout: clientTimeout(c), Transport: &http.Transport{MaxIdleConnsPerHost: idle}}
	}
	return &clients{
		pool: client(classWrite, 256), limited: client(classLimited, 4), uploads: client(classUpload, 64), quick: client(classStatus, 8),
		cloudflare: cloudflareClient(cloudflareEdge, clientTimeout(classCloudflare)),
		outside:    cloudflareClient(cloudflareOutside, clientTimeout(classCloudflare)),
		browsers:   newBrowsers(site),
	}
}

func (c *clients) closeIdle() {
	for _, cl := range []*http.Client{c.pool, c.limited, c.uploads, c.quick, c.cloudflare, c.outside} {
		cl.CloseIdleConnections()
	}
	for _, b := range c.browsers {
		b.Close()
	}
}

// upload is one upload the load made.
type upload struct {
	key, id   string
	data      []byte
	completed bool // the client saw its completion answered 200
}

// limitSample is the counts of the zones' fallback decisions (see
// rig.limitFallbacks) between two windows: after the answers of one, before
// the requests of the next. The check makes sure of both: Caddy read the
// count between asked and answered.
type limitSample struct {
	asked, answered time.Time
	fallbacks       map[string]float64 // by zone
}

// load is the mixed traffic of one fault run: open-loop streams whose
// requests each run in a goroutine of their own, so that a stuck request
// delays no other. Every id starts with the run's name, unique in the
// suite.
type load struct {
	run     string
	rig     *rig
	clients *clients
	stop    chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex
	results []result
	uploads []*upload
	samples map[int64]limitSample // by the number of the window it precedes
	views   []scrape              // the status the scrapes read
}

func startLoad(r *rig, c *clients, run string) *load {
	l := &load{run: run, rig: r, clients: c, stop: make(chan struct{}), samples: map[int64]limitSample{}}
	start := time.Now()
	every := func(d time.Duration) func(int) time.Time {
		return func(seq int) time.Time { return start.Add(time.Duration(seq) * d) }
	}
	l.stream(every(writeEvery), l.write)
	l.stream(every(readEvery), l.read)
	l.stream(every(uploadEvery), l.upload)

	// The rate-limit zone's windows start at multiples of the window since
	// the Unix epoch; the first whole one after now is the first counted.
	first := ratelimit.WindowStart(start, limitWindow).Add(limitWindow)
	knock := func(offset time.Duration) func(int) time.Time {
		return func(seq int) time.Time {
			return first.Add(time.Duration(seq/limitPerWindow)*limitWindow + time.Duration(seq%limitPerWindow+1)*100*time.Millisecond + offset)
		}
	}
	l.stream(knock(0), func(seq int) { l.limited(seq, classLimited, "/limited/", "l") })
	l.stream(knock(50*time.Millisecond), func(seq int) { l.limited(seq, classPGLimited, "/pglimited/", "p") })
	l.stream(func(seq int) time.Time { return first.Add(time.Duration(seq)*limitWindow + 30*time.Millisecond) },
		func(int) { l.sampleLimit(windowOf(time.Now())) })

	l.stream(every(cloudflareEvery), l.cloudflare)
	l.stream(every(statusEvery), l.scrapeStatus)
	l.stream(every(canaryEvery), l.canary)
	l.stream(every(storeCanaryEvery), l.storeCanaries)
	for _, b := range c.browsers {
		l.browse(b, start)
	}
	return l
}

// stream calls fire(seq) at(seq) for seq = 0, 1, …, each in a goroutine,
// until stopLoad.
func (l *load) stream(at func(seq int) time.Time, fire func(seq int)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		inFlight := make(chan struct{}, maxInFlight)
		for seq := 0; ; seq++ {
			t := time.NewTimer(time.Until(at(seq)))
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-t.C:
			}
			select {
			case <-l.stop:
				return
			case inFlight <- struct{}{}:
			}
			l.wg.Add(1)
			go func() {
				defer func() { <-inFlight; l.wg.Done() }()
				fire(seq)
			}()
		}
	}()
}

// stopLoad stops sending and waits for every request in flight; each is
// bounded by its client's timeout, each upload by uploadBudget. Then it
// samples the zone's fallbacks after its last window, which has no
// sample of its own when the load stopped within it.
func (l *load) stopLoad() {
	close(l.stop)
	l.wg.Wait()
	var last time.Time
	for _, res := range l.results {
		if res.class == classLimited || res.class == classPGLimited {
			last = maxTime(last, res.sent)
		}
	}
	if _, sampled := l.samples[windowOf(last)+1]; !last.IsZero() && !sampled {
		l.sampleLimit(windowOf(last) + 1)
	}
}

// do sends one request and records what the client saw; status is 0 if
// the request failed in transport. judge, if set, tells whether an answer
// is wrong.
func (l *load) do(client *http.Client, c class, id string, req *http.Request, judge func(status int, body []byte) bool) (status int, header http.Header, body []byte) {
	res := result{class: c, id: id, sent: time.Now()}
	var fresh atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { fresh.Store(!info.Reused) },
	}))
	resp, err := client.Do(req)
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
		if err == nil {
			res.status, header = resp.StatusCode, resp.Header
			res.retryAfter = header.Get("Retry-After")
			res.wrong = judge != nil && judge(res.status, body)
		}
	}
	res.err, res.done, res.fresh = err, time.Now(), fresh.Load()
	l.record(res)
	return res.status, header, body
}

// maxBody is the most of an answer kept for judging it.
const maxBody = 1 << 20

func (l *load) record(res result) {
	l.mu.Lock()
	l.results = append(l.results, res)
	l.mu.Unlock()
}

func (l *load) write(seq int) {
	id := fmt.Sprintf("%s-w%d", l.run, seq)
	req, _ := http.NewRequest(http.MethodPost, l.rig.url("/api/orders"), strings.NewReader(`{"id":"`+id+`"}`))
	req.Header.Set("X-Request-Id", id)
	l.do(l.clients.pool, classWrite, id, req, nil)
}

func (l *load) read(seq int) {
	req, _ := http.NewRequest(http.MethodGet, l.rig.url("/api/items/"+strconv.Itoa(seq)), nil)
	l.do(l.clients.pool, classRead, "", req, nil)
}

// limited is a request of the fixed client of a rate-limit zone: c's, under
// path, ids marked with mark.
func (l *load) limited(seq int, c class, path, mark string) {
	id := fmt.Sprintf("%s-%s%d", l.run, mark, seq)
	req, _ := http.NewRequest(http.MethodGet, l.rig.url(path+id), nil)
	req.Header.Set("X-Request-Id", id)
	req.Header.Set("X-Forwarded-For", limitClient)
	l.do(l.clients.limited, c, id, req, nil)
}

// cloudflare sends a CF-Connecting-IP, in turn from the Cloudflare edge
// (it must be the client) and from outside it (the peer must be).
func (l *load) cloudflare(seq int) {
	claimed := fmt.Sprintf("203.0.113.%d", seq%200+1)
	client, want := l.clients.cloudflare, claimed
	if seq%2 == 1 {
		client, want = l.clients.outside, cloudflareOutside
	}
	req, _ := http.NewRequest(http.MethodGet, l.rig.url("/cf/"+strconv.Itoa(seq)), nil)
	req.Header.Set("CF-Connecting-IP", claimed)
	l.do(client, classCloudflare, want, req, func(status int, body []byte) bool {
		return status != http.StatusOK || strings.TrimSpace(string(body)) != want
	})
}

// canary sends, in turn, a request Caddy answers itself and one it
// proxies to the rate-limit zones' backend (through no module).
func (l *load) canary(seq int) {
	path, kind := "/canary", "caddy"
	if seq%2 == 1 {
		path, kind = "/canary/proxied", "proxied"
	}
	req, _ := http.NewRequest(http.MethodGet, l.rig.url(path), nil)
	l.do(l.clients.quick, classCanary, kind, req, nil)
}

// storeCanaries ask Redis and PostgreSQL the cheapest question, on
// connections of the suite's own: how long their processes wait for a CPU.
func (l *load) storeCanaries(int) {
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout(classCanary))
	defer cancel()
	for store, ask := range map[string]func() error{
		"redis":    func() error { return l.rig.redisProbe.Ping(ctx).Err() },
		"postgres": func() error { _, err := l.rig.pgProbe.Exec(ctx, "SELECT 1"); return err },
	} {
		res := result{class: classCanary, id: store, sent: time.Now()}
		res.err = ask()
		res.done = time.Now()
		l.record(res)
	}
}

// sampleLimit records the zones' fallback counts now as the sample that
// precedes the given window. A failed sample leaves windows out.
func (l *load) sampleLimit(window int64) {
	asked := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	n, err := l.rig.limitFallbacks(ctx)
	if err != nil {
		return
	}
	l.mu.Lock()
	l.samples[window] = limitSample{asked: asked, answered: time.Now(), fallbacks: n}
	l.mu.Unlock()
}

// windowOf is the number of the rate-limit window t falls in, as the
// limiter numbers it.
func windowOf(t time.Time) int64 { return t.UnixNano() / int64(limitWindow) }

// upload makes one upload as an upload client does: create it with an
// idempotency key, send its chunks (by offset and by number, in turn) and
// complete it, each step sent again after a failure until uploadBudget.
func (l *load) upload(seq int) {
	u := &upload{key: fmt.Sprintf("%s-u%d", l.run, seq), data: make([]byte, uploadLength)}
	for i := range u.data {
		u.data[i] = byte(rand.Uint32())
	}
	l.mu.Lock()
	l.uploads = append(l.uploads, u)
	l.mu.Unlock()
	deadline := time.Now().Add(uploadBudget)
	status, header := l.until(deadline, classCreate, u.key, func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, l.rig.url("/api/uploads"), nil)
		req.Header.Set("Idempotency-Key", u.key)
		req.Header.Set("Upload-Length", strconv.Itoa(uploadLength))
		return req
	})
	location := header.Get("Location")
	if (status != http.StatusCreated && status != http.StatusOK) || !strings.HasPrefix(location, "/api/uploads/") {
		return
	}
	u.id = strings.TrimPrefix(location, "/api/uploads/")
	for n, off := 0, 0; off < uploadLength; n, off = n+1, off+uploadChunk {
		time.Sleep(uploadPace)
		chunk := u.data[off:min(off+uploadChunk, uploadLength)]
		status, _ = l.until(deadline, classUpload, u.id, func() *http.Request {
			if n%2 == 0 {
				req, _ := http.NewRequest(http.MethodPatch, l.rig.url(location), bytes.NewReader(chunk))
				req.Header.Set("Upload-Offset", strconv.Itoa(off))
				return req
			}
			req, _ := http.NewRequest(http.MethodPut, l.rig.url(location+"/chunks/"+strconv.Itoa(n)), bytes.NewReader(chunk))
			req.Header.Set("Chunk-Size", strconv.Itoa(uploadChunk))
			return req
		})
		if status != http.StatusNoContent {
			return
		}
	}
	time.Sleep(uploadPace)
	status, _ = l.until(deadline, classUpload, u.id, func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, l.rig.url(location+"/complete"), nil)
		return req
	})
	u.completed = status == http.StatusOK
}

// until sends the request newRequest makes until it is not answered with
// an error (a transport error or a 5xx), or the deadline has passed.
func (l *load) until(deadline time.Time, c class, id string, newRequest func() *http.Request) (int, http.Header) {
	for {
		status, header, _ := l.do(l.clients.uploads, c, id, newRequest(), nil)
		if (status != 0 && status < 500) || time.Now().Add(uploadBackoff).After(deadline) {
			return status, header
		}
		// Stopping the load ends new uploads, not this one: it has its budget.
		time.Sleep(uploadBackoff)
	}
}
