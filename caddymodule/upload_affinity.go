package caddymodule

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/affinity"
	"github.com/caddy-ha/caddy-ha/store"
)

func init() {
	caddy.RegisterModule(UploadAffinity{})
}

// UploadAffinity routes every request of a chunked upload to the server
// that created it, for active/active servers that keep their uploads to
// themselves. It learns each upload's owner from the creation response,
// keeps the binding in the ha app's store (shared by every Caddy instance
// with Redis), and sends the upload's requests there and nowhere else: if
// the owner is down or gone from the pool they are answered 503 with
// Retry-After. Creations are spread by rendezvous hashing of their
// idempotency key, so a retried creation reaches the same server from every
// instance. A creation that cannot connect to its server goes to the key's
// next one at once, and that server gets no creations until it accepts
// connections again. Other requests are balanced by the fallback policy.
//
// It wraps its reverse_proxy's HTTP transport to see the responses, and
// sets lb_retries to the number of upstreams unless lb_retries or
// lb_try_duration is set, so that Caddy sends such a creation again.
type UploadAffinity struct {
	// The path of an upload and everything under it; {id} is the upload id,
	// one path segment. Creations are POSTed to the part before /{id}.
	// Default: /api/uploads/{id}.
	Path string `json:"path,omitempty"`
	// Where a creation response names the new upload: "location" (the
	// Location header, the default) or "json:<field>" (a field of the JSON
	// body, e.g. json:id or json:data.id).
	LearnFrom string `json:"learn_from,omitempty"`
	// The header that carries a creation's idempotency key. Default:
	// Idempotency-Key.
	IdempotencyHeader string `json:"idempotency_header,omitempty"`
	// The path under an upload that completes it (a successful request to
	// it, or a DELETE of the upload, removes the binding). Default:
	// /complete.
	CompletePath string `json:"complete_path,omitempty"`
	// How long a binding lives after the upload's last request. Default: 24h.
	TTL caddy.Duration `json:"ttl,omitempty"`
	// What to do with an upload whose binding is unknown (e.g. created
	// before this proxy started, with a memory store): "discover" asks
	// every server (HEAD of the upload) and binds the one that has it (2xx),
	// answers 404 when all say they do not (404 or 410), or 503 while one
	// that may have it does not say; "reject" answers 404. Default: discover.
	Unknown string `json:"unknown,omitempty"`
	// Retry-After of the 503 answered while an upload's owner is down.
	// Default: 5s.
	RetryAfter caddy.Duration `json:"retry_after,omitempty"`
	// The store the bindings live in, a module of ha.stores (e.g.
	// `{"backend": "redis", …}`). Default: the ha app's store.
	StoreRaw json.RawMessage `json:"store,omitempty" caddy:"namespace=ha.stores inline_key=backend"`
	// How long a request waits for the store. Default: 1s.
	StoreTimeout caddy.Duration `json:"store_timeout,omitempty"`
	// The policy for requests that are not part of an upload, and
	// creations without an idempotency key. Default: random.
	FallbackRaw json.RawMessage `json:"fallback,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`

	pattern    *affinity.Pattern
	jsonField  string
	bindings   *affinity.Bindings
	fallback   reverseproxy.Selector
	varKey     string
	retryAfter string
	inner      *reverseproxy.HTTPTransport
	ownInner   bool // we made the transport, so we clean it up
	discoverer *discoverer
	// callTimeout bounds each store call: store_timeout, or 0 for the
	// memory store, which cannot hang.
	callTimeout time.Duration
	storeRef    *storeRef // the policy's own store
	logger      *zap.Logger
	// unreachable are the servers creations could not connect to; a
	// goroutine rechecks them until stopRecheck.
	unreachable *affinity.Unreachable
	stopRecheck context.CancelFunc
	recheckDone chan struct{}
	counted     bool // in uploadAffinityPolicies
}

// CaddyModule returns the Caddy module information.
func (UploadAffinity) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.selection_policies.upload_affinity", New: func() caddy.Module { return new(UploadAffinity) }}
}

const (
	// unreachableRecheck is how often a server that creations could not
	// connect to is tried again, each try bounded by unreachableDialTimeout.
	unreachableRecheck     = 500 * time.Millisecond
	unreachableDialTimeout = time.Second
)

const (
	unknownDiscover = "discover"
	unknownReject   = "reject"
	learnLocation   = "location"
	learnJSONPrefix = "json:"
)

// Defaults of upload_affinity.
const (
	defaultUploadPath        = "/api/uploads/{id}"
	defaultIdempotencyHeader = "Idempotency-Key"
	defaultCompletePath      = "/complete"
	defaultBindingTTL        = 24 * time.Hour
	defaultOwnerRetryAfter   = 5 * time.Second
	defaultBindingTimeout    = time.Second
)

func (s *UploadAffinity) setDefaults() {
	s.Path = cmp.Or(s.Path, defaultUploadPath)
	s.LearnFrom = cmp.Or(s.LearnFrom, learnLocation)
	s.IdempotencyHeader = cmp.Or(s.IdempotencyHeader, defaultIdempotencyHeader)
	s.CompletePath = cmp.Or(s.CompletePath, defaultCompletePath)
	s.Unknown = cmp.Or(s.Unknown, unknownDiscover)
	s.TTL = cmp.Or(s.TTL, caddy.Duration(defaultBindingTTL))
	s.RetryAfter = cmp.Or(s.RetryAfter, caddy.Duration(defaultOwnerRetryAfter))
	s.StoreTimeout = cmp.Or(s.StoreTimeout, caddy.Duration(defaultBindingTimeout))
}

const affinityModule = "lb_policy upload_affinity"

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (s *UploadAffinity) Validate() error {
	v := *s
	v.setDefaults()
	if _, err := affinity.CompilePattern(v.Path); err != nil {
		return badSetting(affinityModule, "path", "%q is not an upload pattern: %v", v.Path, err)
	}
	switch {
	case v.LearnFrom == learnLocation:
	case strings.HasPrefix(v.LearnFrom, learnJSONPrefix) && len(v.LearnFrom) > len(learnJSONPrefix):
	default:
		return badSetting(affinityModule, "learn_from", "must be location or json:<field> (Caddyfile: learn location|json <field>), got %q", v.LearnFrom)
	}
	switch v.Unknown {
	case unknownDiscover, unknownReject:
	default:
		return badSetting(affinityModule, "unknown", "must be discover or reject, got %q", v.Unknown)
	}
	switch {
	case !strings.HasPrefix(v.CompletePath, "/"):
		return badSetting(affinityModule, "complete_path", "must start with /, got %q", v.CompletePath)
	case v.TTL < 0:
		return badSetting(affinityModule, "ttl", "must not be negative")
	case v.RetryAfter < 0:
		return badSetting(affinityModule, "retry_after", "must not be negative")
	case v.StoreTimeout < 0:
		return badSetting(affinityModule, "store_timeout", "must not be negative")
	}
	return nil
}

// Provision sets the defaults, opens the bindings' store and wraps the
// enclosing reverse_proxy's transport.
func (s *UploadAffinity) Provision(ctx caddy.Context) error {
	s.logger = ctx.Logger()
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	uploadAffinityPolicies.Add(1)
	s.counted = true
	s.setDefaults()
	var err error
	if s.pattern, err = affinity.CompilePattern(s.Path); err != nil {
		return s.Validate()
	}
	s.jsonField = strings.TrimPrefix(s.LearnFrom, learnJSONPrefix)
	if s.LearnFrom == learnLocation {
		s.jsonField = ""
	}
	s.varKey = fmt.Sprintf("ha.upload_affinity.%p", s)
	s.retryAfter = retryAfterValue(time.Duration(s.RetryAfter))

	if s.FallbackRaw != nil {
		mod, err := ctx.LoadModule(s, "FallbackRaw")
		if err != nil {
			return fmt.Errorf("upload_affinity: loading fallback: %v", err)
		}
		s.fallback = mod.(reverseproxy.Selector)
	} else {
		s.fallback = reverseproxy.RandomSelection{}
	}

	shared, ref, err := handlerStore(ctx, s, "StoreRaw", s.StoreRaw)
	if err != nil {
		return fmt.Errorf("upload_affinity: %v", err)
	}
	s.storeRef = ref
	s.bindings = &affinity.Bindings{Store: shared.Store(), Prefix: "ua:", TTL: time.Duration(s.TTL)}
	if !store.IsLocal(shared.Store()) {
		s.callTimeout = time.Duration(s.StoreTimeout)
	}

	// The transport: its responses teach us the bindings.
	h := enclosingProxy(ctx)
	if h == nil {
		return errors.New("upload_affinity: must be the lb_policy of a reverse_proxy")
	}
	switch t := h.Transport.(type) {
	case nil:
		s.inner, s.ownInner = new(reverseproxy.HTTPTransport), true
		if err := s.inner.Provision(ctx); err != nil {
			return fmt.Errorf("upload_affinity: provisioning the transport: %v", err)
		}
	case *reverseproxy.HTTPTransport:
		s.inner = t
	default:
		return fmt.Errorf("upload_affinity: needs reverse_proxy's http transport, not %T", h.Transport)
	}
	h.Transport = &affinityTransport{HTTPTransport: s.inner, policy: s}
	s.discoverer = newDiscoverer(s.inner, s.pattern, s.logger)
	if lb := h.LoadBalancing; lb.Retries == 0 && lb.TryDuration == 0 {
		lb.Retries = max(len(h.Upstreams), 1)
	}
	s.unreachable = new(affinity.Unreachable)
	ctx2, cancel := context.WithCancel(context.Background())
	s.stopRecheck, s.recheckDone = cancel, make(chan struct{})
	goLoop(s.logger, "upload_affinity: the recheck of unreachable servers", unreachableRecheck, ctx2.Done(), s.recheckDone,
		func() { s.recheckUnreachable(ctx2) })
	return nil
}

// recheckUnreachable tries the servers that creations could not connect
// to, every unreachableRecheck, and puts back those that accept, until ctx
// ends.
func (s *UploadAffinity) recheckUnreachable(ctx context.Context) {
	tick := time.NewTicker(unreachableRecheck)
	defer tick.Stop()
	connect := func(ctx context.Context, server string) error {
		ctx, cancel := context.WithTimeout(ctx, unreachableDialTimeout)
		defer cancel()
		conn, err := s.inner.Transport.DialContext(ctx, "tcp", server)
		if err == nil {
			conn.Close()
		}
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s.unreachable.Len() == 0 {
			continue
		}
		for _, server := range s.unreachable.Recheck(ctx, connect) {
			s.logger.Info("an upload server accepts connections again: it gets creations again", zap.String("server", server))
		}
	}
}

// markUnreachable takes a server a creation could not connect to out of
// creation hashing.
func (s *UploadAffinity) markUnreachable(server string, err error) {
	if s.unreachable.Mark(server) {
		affinityMetrics.unreachable.Inc()
		s.logger.Warn("a creation could not connect to its upload server: creations go to the next server until it accepts connections again",
			zap.String("server", server), zap.Error(err))
	}
}

// Cleanup cleans up the transport this policy created and lets go of its
// own store.
func (s *UploadAffinity) Cleanup() error {
	if s.counted {
		uploadAffinityPolicies.Add(-1)
	}
	if s.stopRecheck != nil {
		s.stopRecheck()
		<-s.recheckDone
	}
	err := s.storeRef.release()
	if s.ownInner && s.inner != nil {
		err = errors.Join(err, s.inner.Cleanup())
	}
	return err
}

// uploadRoute is what Select decided, for the transport. The routes of
// requests that go on are shared values, so that routing a chunk allocates
// nothing; the transport reads the upload's id from the path again.
type uploadRoute struct {
	kind     int
	status   int    // routeRefuse: the answer
	message  string // routeRefuse: its body
	complete bool   // routeUpload: a success removes the binding
}

const (
	routeUpload = iota + 1
	routeCreate
	routeRefuse
)

var (
	toOwner           = &uploadRoute{kind: routeUpload}
	toOwnerCompleting = &uploadRoute{kind: routeUpload, complete: true}
	toCreation        = &uploadRoute{kind: routeCreate}
)

// Select routes an upload's request to its owner, a creation by its
// idempotency key, and anything else by the fallback policy.
func (s *UploadAffinity) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	if len(pool) == 0 {
		return nil
	}
	path := r.URL.EscapedPath()
	if !s.pattern.Unambiguous(path, r.URL.Path) {
		// Routed by its escaped form, a server that decodes it, or ignores
		// case, could take it for an upload it does not have.
		return s.refuse(pool, r, http.StatusBadRequest, affinityMetrics.refused, "the path names an upload differently once decoded or case-folded")
	}
	switch target := s.pattern.Target(path); {
	case target.Kind == affinity.TargetUpload:
		return s.selectOwner(pool, r, target.ID, path)
	case target.Kind == affinity.TargetInvalid:
		// Under the uploads, but not a valid id: never a store key.
		return s.refuse(pool, r, http.StatusBadRequest, affinityMetrics.refused, "invalid upload id")
	case target.Kind == affinity.TargetCollection && r.Method == http.MethodPost:
		caddyhttp.SetVar(r.Context(), s.varKey, toCreation)
		servers := s.creationServers(pool)
		if key := r.Header.Get(s.IdempotencyHeader); key != "" {
			if len(servers) == 0 {
				return nil
			}
			dials := make([]string, len(servers))
			for i, u := range servers {
				dials[i] = u.Dial
			}
			return servers[affinity.Rendezvous(key, dials)]
		}
		return s.fallback.Select(servers, r, w)
	}
	return s.fallback.Select(pool, r, w)
}

// creationServers are the servers a creation may go to: those available
// and not known to be unreachable, or, if every available one is, all of
// them, as one may be back.
func (s *UploadAffinity) creationServers(pool reverseproxy.UpstreamPool) reverseproxy.UpstreamPool {
	avail := availableUpstreams(pool)
	if s.unreachable.Len() == 0 {
		return avail
	}
	reachable := make(reverseproxy.UpstreamPool, 0, len(avail))
	for _, u := range avail {
		if !s.unreachable.Has(u.Dial) {
			reachable = append(reachable, u)
		}
	}
	if len(reachable) == 0 {
		return avail
	}
	return reachable
}

// selectOwner routes a request of upload id to its owner, or to a refusal
// the transport answers without sending anything anywhere.
func (s *UploadAffinity) selectOwner(pool reverseproxy.UpstreamPool, r *http.Request, id, path string) *reverseproxy.Upstream {
	refuse := func(status int, event prometheus.Counter, msg string) *reverseproxy.Upstream {
		return s.refuse(pool, r, status, event, msg)
	}
	ctx, cancel := withStoreTimeout(r.Context(), s.callTimeout)
	owner, found, err := s.bindings.Owner(ctx, id)
	cancel()
	if err != nil {
		s.logger.Warn("upload bindings unavailable", zap.Error(err))
		return refuse(http.StatusServiceUnavailable, affinityMetrics.storeError, "upload bindings unavailable")
	}
	if found {
		affinityMetrics.hit.Inc()
	} else {
		affinityMetrics.miss.Inc()
		if s.Unknown == unknownReject {
			return refuse(http.StatusNotFound, affinityMetrics.refused, "unknown upload")
		}
		owner, err = s.discoverer.find(r, pool, id)
		switch {
		case errors.Is(err, errTooManyDiscoveries):
			return refuse(http.StatusServiceUnavailable, affinityMetrics.refused, err.Error())
		case err != nil: // the owner may be a server that did not answer
			return refuse(http.StatusServiceUnavailable, affinityMetrics.ownerDown, err.Error())
		case owner == "":
			return refuse(http.StatusNotFound, affinityMetrics.refused, "no server has this upload")
		}
		affinityMetrics.discovered.Inc()
		ctx, cancel := withStoreTimeout(r.Context(), s.callTimeout)
		if err := s.bindings.Bind(ctx, id, owner); err != nil {
			s.logger.Warn("binding a discovered upload failed", zap.String("upload", id), zap.Error(err))
		}
		cancel()
	}
	for _, u := range pool {
		if u.Dial == owner {
			if !u.Available() || s.unreachable.Has(owner) {
				return refuse(http.StatusServiceUnavailable, affinityMetrics.ownerDown, "the upload's server is down")
			}
			under, _ := s.pattern.Under(path)
			route := toOwner
			if r.Method == http.MethodDelete && (under == "" || under == "/") || under == s.CompletePath {
				route = toOwnerCompleting
			}
			caddyhttp.SetVar(r.Context(), s.varKey, route)
			return u
		}
	}
	return refuse(http.StatusServiceUnavailable, affinityMetrics.ownerDown, "the upload's server is not in the pool")
}

// refuse routes r to an answer the transport makes itself. The upstream
// returned is not contacted and is none of the pool's, so the refusal
// counts against no server's health or request counts.
func (s *UploadAffinity) refuse(pool reverseproxy.UpstreamPool, r *http.Request, status int, event prometheus.Counter, msg string) *reverseproxy.Upstream {
	event.Inc()
	caddyhttp.SetVar(r.Context(), s.varKey, &uploadRoute{kind: routeRefuse, status: status, message: msg})
	return &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: pool[0].Dial}
}

func availableUpstreams(pool reverseproxy.UpstreamPool) []*reverseproxy.Upstream {
	var out []*reverseproxy.Upstream
	for _, u := range pool {
		if u.Available() {
			out = append(out, u)
		}
	}
	return out
}

// affinityTransport is reverse_proxy's HTTP transport, seeing the answers
// to upload requests: it learns bindings from creations, removes them on
// completion, answers refusals itself, and turns a failure to reach an
// upload's owner into 503 with Retry-After.
type affinityTransport struct {
	*reverseproxy.HTTPTransport
	policy *UploadAffinity
}

// RoundTrip sends the request as Select routed it and learns from the
// answer.
func (t *affinityTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.policy
	route, _ := caddyhttp.GetVar(req.Context(), s.varKey).(*uploadRoute)
	if route == nil {
		return t.HTTPTransport.RoundTrip(req)
	}
	switch route.kind {
	case routeRefuse:
		return s.answer(req, route.status, route.message), nil
	case routeUpload:
		resp, err := t.HTTPTransport.RoundTrip(req)
		// The owner unreachable (refused, or a kept-alive connection it
		// dropped): the client can send the request again later. A client
		// that left gets the error as it is.
		if err != nil && req.Context().Err() == nil {
			affinityMetrics.ownerDown.Inc()
			s.logger.Debug("an upload's server did not answer", zap.String("upload", s.uploadID(req)), zap.Error(err))
			return s.answer(req, http.StatusServiceUnavailable, "the upload's server is down"), nil
		}
		if err != nil {
			return nil, err
		}
		if route.complete && resp.StatusCode/100 == 2 {
			ctx, cancel := withStoreTimeout(context.WithoutCancel(req.Context()), s.callTimeout)
			defer cancel()
			if err := s.bindings.Unbind(ctx, s.uploadID(req)); err == nil {
				affinityMetrics.removed.Inc()
			}
		}
		return resp, nil
	}
	resp, err := t.HTTPTransport.RoundTrip(req) // a creation
	if di, ok := reverseproxy.GetDialInfo(req.Context()); ok && di.Upstream != nil && errors.As(err, new(reverseproxy.DialError)) {
		// Nothing was sent: Caddy's retry sends it to the key's next server.
		s.markUnreachable(di.Upstream.Dial, err)
	}
	if err != nil || resp.StatusCode/100 != 2 {
		return resp, err
	}
	id, ok := "", false
	if s.jsonField == "" {
		id, ok = affinity.IDFromLocation(resp.Header.Get("Location"), s.pattern)
	} else {
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, affinity.MaxJSONBody))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		if rerr == nil {
			id, ok = affinity.IDFromJSON(body, s.jsonField)
		}
	}
	di, _ := reverseproxy.GetDialInfo(req.Context())
	if !ok || di.Upstream == nil {
		s.logger.Warn("a creation response names no valid upload id: its requests will be discovered", zap.Int("status", resp.StatusCode))
		return resp, nil
	}
	ctx, cancel := withStoreTimeout(context.WithoutCancel(req.Context()), s.callTimeout)
	defer cancel()
	// The dial address as the pool writes it, which Select compares.
	err = s.bindings.Bind(ctx, id, di.Upstream.Dial)
	if errors.Is(err, affinity.ErrAlreadyBound) {
		// Two servers name the same upload: no retry can route it.
		affinityMetrics.refused.Inc()
		s.logger.Error("a creation response names an upload another server owns",
			zap.String("upload", id), zap.String("server", di.Upstream.Dial), zap.Error(err))
		resp.Body.Close()
		return s.answer(req, http.StatusBadGateway, "the server named an upload that another server owns"), nil
	}
	if err != nil {
		// Told 201, the client would send chunks nothing routes. Told 503,
		// it retries with the same idempotency key, which rendezvous
		// hashing takes to the same server, which returns the same upload,
		// bound then.
		affinityMetrics.storeError.Inc()
		s.logger.Warn("storing an upload binding failed: the creation is answered 503, for the client to retry",
			zap.String("upload", id), zap.String("server", di.Upstream.Dial), zap.Error(err))
		resp.Body.Close()
		return s.answer(req, http.StatusServiceUnavailable, "the upload's binding could not be stored"), nil
	}
	affinityMetrics.learned.Inc()
	return resp, nil
}

// uploadID is the id of the upload req is about, which Select checked.
func (s *UploadAffinity) uploadID(req *http.Request) string {
	id, _ := s.pattern.ID(req.URL.EscapedPath())
	return id
}

// answer is a response made here, for a request that must not go on.
func (s *UploadAffinity) answer(req *http.Request, status int, msg string) *http.Response {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", s.retryAfter)
	}
	body := fmt.Sprintf("%d %s: %s\n", status, http.StatusText(status), msg)
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
}

// uploadAffinityPolicies counts the policies provisioned and not yet
// cleaned up, for the status view: its events show while one is in use.
var uploadAffinityPolicies atomic.Int64

// affinityMetrics are the counters of affinityEvents, one per event,
// resolved once rather than per request.
var affinityMetrics struct {
	learned, hit, miss, discovered, removed, ownerDown, storeError, refused, unreachable prometheus.Counter
}

func init() {
	m := &affinityMetrics
	for counter, event := range map[*prometheus.Counter]string{&m.learned: "learned", &m.hit: "hit", &m.miss: "miss",
		&m.discovered: "discovered", &m.removed: "removed", &m.ownerDown: "owner_down", &m.storeError: "store_error", &m.refused: "refused", &m.unreachable: "unreachable"} {
		*counter = affinityEvents.WithLabelValues(event)
	}
}

// UnmarshalCaddyfile sets up the policy. Syntax:
//
//	lb_policy upload_affinity {
//		path               <pattern with {id}>
//		learn              location|json <field>
//		idempotency_header <header>
//		complete           <path under the upload>
//		ttl                <duration>
//		unknown            discover|reject
//		retry_after        <duration>
//		store              memory|redis|postgres { … }
//		store_timeout      <duration>
//		fallback           <policy> [<args...>]
//	}
func (s *UploadAffinity) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, s, map[string]string{"learn_from": "learn", "complete_path": "complete"}, func(opt string) error {
		var err error
		switch opt {
		case "path":
			err = stringArg(d, &s.Path)
		case "learn":
			var from string
			if err = stringArg(d, &from); err == nil {
				s.LearnFrom = from
				if from == "json" {
					var field string
					if err = stringArg(d, &field); err == nil {
						s.LearnFrom = learnJSONPrefix + field
					}
				}
			}
		case "idempotency_header":
			err = stringArg(d, &s.IdempotencyHeader)
		case "complete":
			err = stringArg(d, &s.CompletePath)
		case "ttl":
			err = durationArg(d, opt, &s.TTL)
		case "unknown":
			err = stringArg(d, &s.Unknown)
		case "retry_after":
			err = durationArg(d, opt, &s.RetryAfter)
		case "store":
			s.StoreRaw, err = storeArg(d)
		case "store_timeout":
			err = durationArg(d, opt, &s.StoreTimeout)
		case "fallback":
			s.FallbackRaw, err = moduleArg(d, "http.reverse_proxy.selection_policies", "policy")
		default:
			err = d.Errf("unrecognized lb_policy upload_affinity option '%s'", opt)
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner     = (*UploadAffinity)(nil)
	_ caddy.Validator       = (*UploadAffinity)(nil)
	_ caddy.CleanerUpper    = (*UploadAffinity)(nil)
	_ reverseproxy.Selector = (*UploadAffinity)(nil)
	_ caddyfile.Unmarshaler = (*UploadAffinity)(nil)
	_ http.RoundTripper     = (*affinityTransport)(nil)
)
