package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/affinity"
	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// discoverer finds the owner of an upload whose binding is unknown by
// asking every available server (HEAD of the upload, with the client's
// credentials). It is bounded: one search per id at a time (others wait
// for it), at most maxDiscoveries at once, and an id every server said it
// does not have is remembered for notFoundFor so random ids cannot make
// every server work.
type discoverer struct {
	inner   *reverseproxy.HTTPTransport
	pattern *affinity.Pattern
	logger  *zap.Logger
	slots   chan struct{}

	mu       sync.Mutex
	running  map[string]*discovery
	notFound map[string]time.Time
}

// discovery is one search in progress; owner and err are set when done
// closes.
type discovery struct {
	done  chan struct{}
	owner string
	err   error
}

var (
	errTooManyDiscoveries = errors.New("too many unknown uploads being looked for")
	// A server that is down, or that answers neither yes nor no (429, 401,
	// 3xx, 5xx…), may well be the owner: "no server has it" would make the
	// client give up an upload it can finish later.
	errNotAllAnswered = errors.New("a server that may have this upload did not say whether it has it")
)

const (
	maxDiscoveries  = 8
	discoveryWait   = 2 * time.Second
	notFoundFor     = 10 * time.Second
	maxNotFoundKept = 10_000
)

// credentialHeaders go with a discovery, so servers that authorise a
// status request answer it as they would the client's.
var credentialHeaders = []string{"Authorization", "Cookie"}

func newDiscoverer(inner *reverseproxy.HTTPTransport, pattern *affinity.Pattern, logger *zap.Logger) *discoverer {
	return &discoverer{inner: inner, pattern: pattern, logger: logger, slots: make(chan struct{}, maxDiscoveries),
		running: map[string]*discovery{}, notFound: map[string]time.Time{}}
}

// find returns the owner's dial address, or "" when every server that
// could be asked said it does not have the upload; errTooManyDiscoveries
// when too many searches are running, errNotAllAnswered when no server
// has it but some did not say.
func (d *discoverer) find(r *http.Request, pool reverseproxy.UpstreamPool, id string) (string, error) {
	d.mu.Lock()
	if until, ok := d.notFound[id]; ok && time.Now().Before(until) {
		d.mu.Unlock()
		return "", nil
	}
	if run, ok := d.running[id]; ok {
		d.mu.Unlock()
		select {
		case <-run.done:
			return run.owner, run.err
		case <-r.Context().Done():
			return "", r.Context().Err()
		}
	}
	select {
	case d.slots <- struct{}{}:
	default:
		d.mu.Unlock()
		return "", errTooManyDiscoveries
	}
	run := &discovery{done: make(chan struct{})}
	d.running[id] = run
	d.mu.Unlock()

	run.owner, run.err = d.ask(r, pool, id)
	<-d.slots
	d.mu.Lock()
	delete(d.running, id)
	if run.owner == "" && run.err == nil {
		if len(d.notFound) >= maxNotFoundKept {
			now := time.Now()
			for k, until := range d.notFound {
				if now.After(until) {
					delete(d.notFound, k)
				}
			}
		}
		if len(d.notFound) < maxNotFoundKept {
			d.notFound[id] = time.Now().Add(notFoundFor)
		}
	}
	d.mu.Unlock()
	close(run.done)
	return run.owner, run.err
}

// ask sends HEAD of the upload to every available server and returns the
// dial address of the first that answers 2xx; errNotAllAnswered if none
// does but one is down, does not answer, or answers anything but 404 or
// 410, the only answers that say "not here". Servers reached through a
// unix socket are not asked.
func (d *discoverer) ask(r *http.Request, pool reverseproxy.UpstreamPool, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), discoveryWait)
	defer cancel()
	scheme := "http"
	if d.inner.TLSEnabled() {
		scheme = "https"
	}
	repl := caddy.NewReplacer()
	found := make(chan string, len(pool))
	var unanswered atomic.Bool
	var wg sync.WaitGroup
	for _, u := range pool {
		addr, err := caddy.ParseNetworkAddress(repl.ReplaceAll(u.Dial, ""))
		if err != nil || addr.IsUnixNetwork() || addr.PortRangeSize() != 1 {
			continue
		}
		if !u.Available() {
			unanswered.Store(true)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !recovered.Call(panicLogger(d.logger, "upload_affinity: asking a server for an upload"), func() { d.askOne(ctx, r, u, addr, scheme, id, found, &unanswered) }) {
				unanswered.Store(true)
			}
		}()
	}
	go func() { wg.Wait(); close(found) }()
	if owner := <-found; owner != "" {
		return owner, nil
	}
	if unanswered.Load() { // read after every asker is done: found is closed
		return "", errNotAllAnswered
	}
	return "", nil
}

// askOne asks the server u at addr whether it has upload id (HEAD, with
// the client's credentials): it sends u's address to found if it does, and
// sets unanswered if it may.
func (d *discoverer) askOne(ctx context.Context, r *http.Request, u *reverseproxy.Upstream, addr caddy.NetworkAddress, scheme, id string, found chan<- string, unanswered *atomic.Bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, scheme+"://"+addr.JoinHostPort(0)+d.pattern.Path(id), nil)
	if err != nil {
		unanswered.Store(true)
		return
	}
	req.Host = r.Host
	for _, h := range credentialHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	resp, err := d.inner.Transport.RoundTrip(req)
	if err != nil {
		unanswered.Store(true)
		return
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 2:
		found <- u.Dial
	case resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusGone:
		// Throttled, wanting other credentials, redirecting, failing: it
		// may have the upload.
		unanswered.Store(true)
	}
}
