package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-ha/caddy-ha/ratelimit"
	"github.com/caddy-ha/caddy-ha/status"
	"github.com/caddy-ha/caddy-ha/store"
)

func init() {
	caddy.RegisterModule(EdgeRateLimit{})
	httpcaddyfile.RegisterHandlerDirective("edge_rate_limit", parseEdgeRateLimit)
	httpcaddyfile.RegisterDirectiveOrder("edge_rate_limit", httpcaddyfile.Before, "basic_auth")
}

// EdgeRateLimit limits requests per key in zones counted in the ha app's
// store, so the limits hold exactly across every Caddy instance sharing a
// Redis. Windows are aligned to the clock (a window's start is in its
// counter's key), so instances and the cluster's app agree on them.
//
// Over a limit a request is answered 429 with Retry-After and the IETF
// RateLimit-Policy and RateLimit fields; under it, the request goes on
// with those fields on its response.
type EdgeRateLimit struct {
	// The limits. A request counts in every zone it matches, and is refused
	// if any of them is over its limit.
	Zones []*RateLimitZone `json:"zones,omitempty"`

	// What to do when the store does not answer within store_timeout (or
	// is known to be down): "local" counts in this instance's memory until
	// the store is back (the limit then holds per instance), "allow" lets
	// requests through, "deny" answers 503 with Retry-After. Default: local.
	OnStoreError string `json:"on_store_error,omitempty"`

	// The store the zones count in, a module of ha.stores (e.g.
	// `{"backend": "redis", …}`), for limits counted apart from the rest.
	// Default: the ha app's store.
	StoreRaw json.RawMessage `json:"store,omitempty" caddy:"namespace=ha.stores inline_key=backend"`

	// How long a request waits for the store before on_store_error
	// decides. Default: 50ms.
	StoreTimeout caddy.Duration `json:"store_timeout,omitempty"`

	// Leave the RateLimit-Policy and RateLimit fields off responses under
	// the limit (refusals always carry them).
	HideHeaders bool `json:"hide_headers,omitempty"`

	// How many keys over the limit each zone remembers, so a flood from
	// them is answered here without asking the store; as many keys may
	// hold a lease (see lease_parts). Default: 100000.
	RememberLimited int `json:"remember_limited,omitempty"`

	// Count every request in a shared store (Redis, PostgreSQL) rather
	// than leasing quota from it (see lease_parts).
	NoLeases bool `json:"no_leases,omitempty"`

	// A key's request that finds no lease here takes, in one store call,
	// a part of what is left of the key's limit in its window, at most
	// 1/lease_parts of it, and this instance spends it on the key's next
	// requests without asking the store. Parts never add up to more than
	// the limit; none is taken below 2, so a limit under 2*lease_parts is
	// counted request by request. At least 2. Default: 16.
	LeaseParts int `json:"lease_parts,omitempty"`

	// Whose clock numbers the windows: "store" (the store's own, Redis
	// TIME or the database's now(), measured as an offset at every health
	// check, so that every instance numbers windows alike whatever its own
	// clock says) or "local" (this Caddy's). Default: store, for a store
	// with a clock; local for the memory store.
	Clock string `json:"clock,omitempty"`

	zones    []*rateZone
	storeRef *storeRef // the handler's own store
	store    store.Store
	local    store.Store // on_store_error local; nil for the memory store
	// callTimeout bounds a request's store calls: store_timeout, or 0
	// for the memory store, which cannot hang.
	callTimeout time.Duration
	retryIn     func() time.Duration
	now         func() time.Time // the clock windows follow
}

// RateLimitZone is one limit: events requests per window for each key.
type RateLimitZone struct {
	// The zone's name: letters, digits, '_' and '-'. Zones of the same
	// name share their counts, in every site and instance.
	Name string `json:"name,omitempty"`
	// Which requests count in the zone; all when empty.
	MatcherSetsRaw caddyhttp.RawMatcherSets `json:"match,omitempty" caddy:"namespace=http.matchers"`
	// What a count is kept per: any placeholder, typically the client IP
	// ({http.vars.client_ip}, resolved through trusted_proxies) or
	// {http.request.remote.host}. Requests whose key is empty share one
	// count. Keys over 256 bytes are counted by their SHA-256.
	Key string `json:"key,omitempty"`
	// Count a key that is an IPv6 address by its first ipv6_prefix bits:
	// with 64, every address of a /64 (which a client usually gets whole)
	// shares one count. 0 (the default) keeps the whole address.
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`
	// Requests allowed per window and key.
	Events int64 `json:"events,omitempty"`
	// The window: windows start at multiples of it since the Unix epoch.
	Window caddy.Duration `json:"window,omitempty"`
	// Limit any window-long span instead of the clock's windows: counted
	// in tenths of the window, the oldest tenth in whole, so never more
	// than events pass in any window-long span (no 2x bursts at window
	// edges). Costs a read of ten counters in the same round trip.
	Sliding bool `json:"sliding,omitempty"`
}

// rateZone is a zone ready to decide.
type rateZone struct {
	name     string
	matchers caddyhttp.MatcherSets
	key      keyTemplate
	limiter  *ratelimit.Limiter
	// limiterKey is its limiter's in limiterPools, "" until held.
	limiterKey string
	policy     string // its RateLimit-Policy item
	metrics    zoneMetrics
	settings   status.RateLimitZone // for the status view, without counts
	series     *seriesHold[*rateZone]
}

const (
	onStoreErrorLocal   = "local"
	onStoreErrorAllow   = "allow"
	onStoreErrorDeny    = "deny"
	defaultStoreTimeout = 50 * time.Millisecond
	clockStore          = "store"
	clockLocal          = "local"
	defaultRemembered   = 100_000
	defaultLeaseParts   = 16
)

// CaddyModule returns the Caddy module information.
func (EdgeRateLimit) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.edge_rate_limit", New: func() caddy.Module { return new(EdgeRateLimit) }}
}

func (h *EdgeRateLimit) setDefaults() {
	h.OnStoreError = cmp.Or(h.OnStoreError, onStoreErrorLocal)
	h.RememberLimited = cmp.Or(h.RememberLimited, defaultRemembered)
	h.LeaseParts = cmp.Or(h.LeaseParts, defaultLeaseParts)
	h.StoreTimeout = cmp.Or(h.StoreTimeout, caddy.Duration(defaultStoreTimeout))
}

// Provision sets the defaults and readies the zones on the store.
func (h *EdgeRateLimit) Provision(ctx caddy.Context) error {
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	h.setDefaults()
	shared, ref, err := handlerStore(ctx, h, "StoreRaw", h.StoreRaw)
	if err != nil {
		return err
	}
	h.storeRef = ref
	return h.provisionZones(ctx, shared)
}

// Cleanup lets go of the zones' limiters and the handler's own store, if
// it has one.
func (h *EdgeRateLimit) Cleanup() error {
	for _, z := range h.zones {
		z.series.release()
		if z.limiterKey != "" {
			_, _ = limiterPools.Delete(z.limiterKey)
		}
	}
	return h.storeRef.release()
}

// provisionZones readies the zones on shared.
func (h *EdgeRateLimit) provisionZones(ctx caddy.Context, shared *sharedStore) error {
	h.store, h.retryIn = shared.Store(), shared.RetryIn
	h.now = wallClock
	switch {
	case h.Clock == clockStore && !shared.HasClock():
		return badSetting(rateLimitModule, "clock", "store: the %s store has no clock of its own", shared.name)
	case h.Clock == clockStore, h.Clock == "" && shared.HasClock():
		h.now = shared.Now
	}
	if !store.IsLocal(h.store) {
		h.callTimeout = time.Duration(h.StoreTimeout)
	}
	h.local = shared.LocalFallback()
	for i, zc := range h.Zones {
		z := &rateZone{name: zc.Name, key: compileKey(zc.Key, zc.IPv6Prefix)}
		matchers, err := ctx.LoadModule(zc, "MatcherSetsRaw")
		if err != nil {
			return fmt.Errorf("zone %s: loading matchers: %v", zc.Name, err)
		}
		if err := z.matchers.FromInterface(matchers); err != nil {
			return fmt.Errorf("zone %s: %v", zc.Name, err)
		}
		if err := h.holdLimiter(z, shared, ratelimit.Zone{Name: zc.Name, Events: zc.Events,
			Window: time.Duration(zc.Window), Sliding: zc.Sliding}); err != nil {
			return fmt.Errorf("zone %d: %v", i, err)
		}
		z.policy = fmt.Sprintf("%q;q=%d;w=%d", zc.Name, zc.Events, ceilSeconds(time.Duration(zc.Window)))
		z.settings = status.RateLimitZone{Zone: zc.Name, Events: zc.Events, WindowSeconds: time.Duration(zc.Window).Seconds(),
			Sliding: zc.Sliding, Store: shared.name, OnStoreError: h.OnStoreError}
		z.series = zoneSeries.hold(zc.Name) // before its series are looked up
		z.metrics = newZoneMetrics(zc.Name)
		z.series.publish(z)
		h.zones = append(h.zones, z)
	}
	return nil
}

const rateLimitModule = "edge_rate_limit"

// limiterPools shares each zone's limiter, with its leases and the keys it
// remembers over the limit, across config reloads and among the handlers
// that count the same zone alike in the same store: a reload strands no
// lease, and a flood stays off the store through it. The store is an open
// store of storePools, itself shared across reloads by its settings.
var limiterPools = caddy.NewUsagePool()

// pooledLimiter is a limiter in limiterPools.
type pooledLimiter struct{ *ratelimit.Limiter }

func (pooledLimiter) Destruct() error { return nil }

// holdLimiter gives z the limiter of zone in shared's store with the
// handler's settings, the one already held if any (Cleanup lets go of it).
func (h *EdgeRateLimit) holdLimiter(z *rateZone, shared *sharedStore, zone ratelimit.Zone) error {
	leasing := h.leasing()
	key := fmt.Sprintf("%p %+v %d %+v", shared, zone, h.RememberLimited, leasing)
	val, _, err := limiterPools.LoadOrNew(key, func() (caddy.Destructor, error) {
		l, err := ratelimit.NewLimiter(zone, h.RememberLimited, leasing)
		return pooledLimiter{l}, err
	})
	if err != nil {
		return err
	}
	z.limiter, z.limiterKey = val.(pooledLimiter).Limiter, key
	return nil
}

// leasing is how the zones lease from the store: from a shared one
// unless leases are off; never from the memory store, nor from the local
// fallback (the limiter leases from no local store).
func (h *EdgeRateLimit) leasing() ratelimit.Leasing {
	if h.NoLeases || store.IsLocal(h.store) {
		return ratelimit.Leasing{}
	}
	return ratelimit.Leasing{Parts: int64(h.LeaseParts), MaxKeys: h.RememberLimited}
}

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (h *EdgeRateLimit) Validate() error {
	v := *h
	v.setDefaults()
	if len(v.Zones) == 0 {
		return badSetting(rateLimitModule, "zones", "must hold at least one zone")
	}
	seen := map[string]bool{}
	for _, z := range v.Zones {
		if err := (ratelimit.Zone{Name: z.Name, Events: z.Events, Window: time.Duration(z.Window), Sliding: z.Sliding}).Validate(); err != nil {
			return badSetting(rateLimitModule, "zones", "%v", err)
		}
		if seen[z.Name] {
			return badSetting(rateLimitModule, "zones", "zone %s is defined twice", z.Name)
		}
		seen[z.Name] = true
		if z.Key == "" {
			return badSetting(rateLimitModule, "zones", "zone %s needs a key, e.g. {http.vars.client_ip}", z.Name)
		}
		if z.IPv6Prefix < 0 || z.IPv6Prefix > 128 {
			return badSetting(rateLimitModule, "zones", "zone %s: ipv6_prefix must be 1 to 128 bits, got %d", z.Name, z.IPv6Prefix)
		}
	}
	switch v.Clock {
	case "", clockStore, clockLocal:
	default:
		return badSetting(rateLimitModule, "clock", "must be store or local, got %q", v.Clock)
	}
	switch v.OnStoreError {
	case onStoreErrorLocal, onStoreErrorAllow, onStoreErrorDeny:
	default:
		return badSetting(rateLimitModule, "on_store_error", "must be local, allow or deny, got %q", v.OnStoreError)
	}
	switch {
	case v.StoreTimeout < 0:
		return badSetting(rateLimitModule, "store_timeout", "must not be negative")
	case v.RememberLimited < 0:
		return badSetting(rateLimitModule, "remember_limited", "must not be negative")
	case v.LeaseParts < 2:
		return badSetting(rateLimitModule, "lease_parts", "must be at least 2 (leases off turns leasing off), got %d", v.LeaseParts)
	}
	return nil
}

// zoneDecision is one zone's decision for a request.
type zoneDecision struct {
	zone *rateZone
	key  string
	ratelimit.Decision
	// unknown: the store failed and on_store_error allow or deny decided,
	// so there is no count to report.
	unknown bool
}

// ServeHTTP decides the request in the steps of docs/edge-rate-limit.md: the zones it
// matches, each key remembered over its limit refusing it without the
// store, else a count in every zone within one store_timeout; then the
// answer: 429 over a limit, 503 when on_store_error deny decided, else on
// to the next handler, with the RateLimit fields.
func (h *EdgeRateLimit) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	now := h.now()
	var buf [4]zoneDecision
	decisions, remembered, err := h.matchZones(r, now, buf[:0])
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	if len(decisions) == 0 {
		return next.ServeHTTP(w, r)
	}
	limited, denied := remembered, false
	if remembered {
		decisions = refuseRemembered(decisions)
	} else {
		limited, denied = h.count(r, decisions, now)
	}
	if limited || !h.HideHeaders {
		h.setFields(w.Header(), decisions)
	}
	switch {
	case limited:
		wait, zone := longestWait(decisions)
		return refuse(w, r, http.StatusTooManyRequests, wait,
			fmt.Sprintf("429 Too Many Requests: the rate limit of zone %q is reached; retry in %d s", zone, ceilSeconds(wait)))
	case denied:
		wait := h.retryIn()
		return refuse(w, r, http.StatusServiceUnavailable, wait,
			fmt.Sprintf("503 Service Unavailable: the rate limit store does not answer; retry in %d s", ceilSeconds(wait)))
	}
	return next.ServeHTTP(w, r)
}

// matchZones appends to decisions one for each zone r matches, with its
// key and, for a key remembered over the limit, its refusal; remembered
// reports whether any is.
func (h *EdgeRateLimit) matchZones(r *http.Request, now time.Time, decisions []zoneDecision) (_ []zoneDecision, remembered bool, err error) {
	for _, z := range h.zones {
		match, err := z.matchers.AnyMatchWithError(r)
		if err != nil {
			return nil, false, err
		}
		if !match {
			continue
		}
		// Bounded once here: the limiter's calls then need not hash a long key again.
		d := zoneDecision{zone: z, key: ratelimit.BoundedKey(z.key.resolve(r))}
		d.Decision, _ = z.limiter.Remembered(d.key, now)
		remembered = remembered || d.Cached
		decisions = append(decisions, d)
	}
	return decisions, remembered, nil
}

// refuseRemembered keeps the decisions of keys remembered over the limit:
// such a request is refused without asking the store for the other zones,
// so a flood never reaches it.
func refuseRemembered(decisions []zoneDecision) []zoneDecision {
	kept := decisions[:0]
	for _, d := range decisions {
		if d.Cached {
			d.zone.metrics.limited.Inc()
			kept = append(kept, d)
		}
	}
	return kept
}

// count counts the request in every zone of decisions, all within one
// store_timeout however many zones there are, and reports whether a zone
// is over its limit or on_store_error deny refused it. A zone that holds a
// lease for the key decides without the store; the deadline is made only
// for the zones that ask it.
func (h *EdgeRateLimit) count(r *http.Request, decisions []zoneDecision, now time.Time) (limited, denied bool) {
	var ctx context.Context
	for i := range decisions {
		d := &decisions[i]
		if leased, ok := d.zone.limiter.Leased(d.key, now); ok {
			d.Decision = leased
		} else {
			if ctx == nil {
				var cancel context.CancelFunc
				ctx, cancel = withStoreTimeout(r.Context(), h.callTimeout)
				defer cancel()
			}
			*d = h.decide(ctx, r, d.zone, d.key, now)
		}
		switch {
		case d.unknown && !d.Allowed:
			denied = true
			d.zone.metrics.denied.Inc()
		case d.Allowed:
			d.zone.metrics.allowed.Inc()
		default:
			limited = true
			d.zone.metrics.limited.Inc()
		}
	}
	return limited, denied
}

// longestWait returns the longest Retry-After of the zones over their
// limit, and the zone it is.
func longestWait(decisions []zoneDecision) (wait time.Duration, zone string) {
	for _, d := range decisions {
		if !d.Allowed && !d.unknown && d.RetryAfter >= wait {
			wait, zone = d.RetryAfter, d.zone.name
		}
	}
	return wait, zone
}

// decide counts a request of a key not remembered over the limit in the
// store within ctx's deadline, and asks the fallback policy when it does
// not answer.
func (h *EdgeRateLimit) decide(ctx context.Context, r *http.Request, z *rateZone, key string, now time.Time) zoneDecision {
	start := time.Now()
	d, err := z.limiter.Count(ctx, h.store, key, now)
	if err == nil {
		if !d.Leased {
			z.metrics.latency.Observe(time.Since(start).Seconds())
		}
		return zoneDecision{zone: z, key: key, Decision: d}
	}
	if !errors.Is(err, store.ErrUnavailable) {
		z.metrics.storeErrors.Inc()
	}
	z.metrics.fallback.Inc()
	if h.OnStoreError == onStoreErrorLocal && h.local != nil {
		if d, err := z.limiter.Count(r.Context(), h.local, key, now); err == nil {
			return zoneDecision{zone: z, key: key, Decision: d}
		}
	}
	// allow, deny, or local without room to count: no count to tell.
	return zoneDecision{zone: z, key: key, Decision: ratelimit.Decision{Allowed: h.OnStoreError != onStoreErrorDeny}, unknown: true}
}

// setFields sets the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers) of the zones with a count.
func (h *EdgeRateLimit) setFields(hdr http.Header, decisions []zoneDecision) {
	// Built on the stack: one string each, and one slice for both fields'
	// values (each capped, so that an append to one copies it).
	var policyBuf, stateBuf [128]byte
	policy, state := policyBuf[:0], stateBuf[:0]
	for _, d := range decisions {
		if d.unknown {
			continue
		}
		if len(policy) > 0 {
			policy, state = append(policy, ", "...), append(state, ", "...)
		}
		policy = append(policy, d.zone.policy...)
		state = strconv.AppendQuote(state, d.zone.name)
		state = append(state, ";r="...)
		state = strconv.AppendInt(state, d.Remaining, 10)
		state = append(state, ";t="...)
		state = strconv.AppendInt(state, ceilSeconds(d.Reset), 10)
	}
	if len(policy) > 0 {
		values := []string{string(policy), string(state)}
		hdr["Ratelimit-Policy"] = values[0:1:1]
		hdr["Ratelimit"] = values[1:2:2]
	}
}

// refuse answers status with Retry-After and a body that says why, or,
// when the server has error routes, leaves the answer to them.
func refuse(w http.ResponseWriter, r *http.Request, status int, wait time.Duration, msg string) error {
	w.Header().Set("Retry-After", retryAfterValue(wait))
	if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv.Errors != nil && len(srv.Errors.Routes) > 0 {
		return caddyhttp.Error(status, errors.New(msg))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, err := io.WriteString(w, msg+"\n")
	return err
}

// retryAfterValue is d as a Retry-After value: whole seconds, rounded up,
// at least 1.
func retryAfterValue(d time.Duration) string {
	return strconv.FormatInt(max(ceilSeconds(d), 1), 10)
}

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// keyTemplate is a zone's key: the client-address placeholders are read
// straight from the request (no allocation); others go through the
// replacer. An IPv6 address is then cut to ipv6Prefix bits, if set.
type keyTemplate struct {
	text       string
	kind       int
	ipv6Prefix int
}

const (
	keyPlaceholders = iota
	keyRemoteHost
	keyClientIP
)

func compileKey(text string, ipv6Prefix int) keyTemplate {
	k := keyTemplate{text: text, kind: keyPlaceholders, ipv6Prefix: ipv6Prefix}
	switch text {
	case "{http.request.remote.host}":
		k.kind = keyRemoteHost
	case "{http.vars.client_ip}":
		k.kind = keyClientIP
	}
	return k
}

func (k keyTemplate) resolve(r *http.Request) string {
	key := k.resolveText(r)
	if k.ipv6Prefix == 0 || strings.IndexByte(key, ':') < 0 {
		return key // not IPv6: no parsing on the hot path
	}
	return ipv6Network(key, k.ipv6Prefix)
}

// ipv6Network is key's network of bits bits (e.g. 2001:db8:1:2::/64) when
// key is an IPv6 address, else key; an IPv4-mapped address is IPv4.
func ipv6Network(key string, bits int) string {
	addr, err := netip.ParseAddr(key)
	if err != nil || !addr.Is6() || addr.Is4In6() {
		return key
	}
	p, err := addr.WithZone("").Prefix(bits)
	if err != nil {
		return key
	}
	return p.String()
}

func (k keyTemplate) resolveText(r *http.Request) string {
	switch k.kind {
	case keyRemoteHost:
		if r.TLS != nil && !r.TLS.HandshakeComplete {
			return "" // as Caddy's placeholder: early data cannot be trusted
		}
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		return host
	case keyClientIP:
		if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok {
			return ip
		}
		return ""
	}
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return k.text
	}
	return repl.ReplaceKnown(k.text, "")
}

// zoneMetrics are a zone's metrics, looked up once.
type zoneMetrics struct {
	allowed, limited, denied, storeErrors, fallback prometheus.Counter
	latency                                         prometheus.Observer
}

func newZoneMetrics(zone string) zoneMetrics {
	m := &rateLimitMetrics
	return zoneMetrics{
		allowed:     m.requests.WithLabelValues(zone, "allowed"),
		limited:     m.requests.WithLabelValues(zone, "limited"),
		denied:      m.requests.WithLabelValues(zone, "denied"),
		storeErrors: m.storeErrors.WithLabelValues(zone),
		fallback:    m.fallback.WithLabelValues(zone),
		latency:     m.latency.WithLabelValues(zone),
	}
}

// parseEdgeRateLimit parses the directive. Syntax:
//
//	edge_rate_limit [<matcher>] {
//		zone <name> {
//			match {
//				<matchers>
//			}
//			key         <placeholder>
//			ipv6_prefix <bits>
//			events      <n>
//			window      <duration>
//			sliding
//		}
//		store            memory|redis|postgres { … }
//		on_store_error   local|allow|deny
//		store_timeout    <duration>
//		headers          on|off
//		remember_limited <n>
//		leases           on|off
//		lease_parts      <n>
//		clock            store|local
//	}
func parseEdgeRateLimit(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rl := new(EdgeRateLimit)
	return rl, rl.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile sets up the handler; see parseEdgeRateLimit for the
// syntax.
func (h *EdgeRateLimit) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, h, map[string]string{"zones": "zone", "hide_headers": "headers", "no_leases": "leases"}, func(opt string) error {
		var err error
		switch opt {
		case "zone":
			err = h.unmarshalZone(d)
		case "on_store_error":
			err = stringArg(d, &h.OnStoreError)
		case "store":
			h.StoreRaw, err = storeArg(d)
		case "store_timeout":
			err = durationArg(d, opt, &h.StoreTimeout)
		case "headers":
			var on bool
			on, err = onOffArg(d, opt)
			h.HideHeaders = !on
		case "remember_limited":
			err = countArg(d, opt, &h.RememberLimited)
		case "leases":
			var on bool
			on, err = onOffArg(d, opt)
			h.NoLeases = !on
		case "lease_parts":
			err = countArg(d, opt, &h.LeaseParts)
		case "clock":
			err = stringArg(d, &h.Clock)
		default:
			err = d.Errf("unrecognized edge_rate_limit option '%s'", opt)
		}
		return err
	})
}

func (h *EdgeRateLimit) unmarshalZone(d *caddyfile.Dispenser) error {
	z := new(RateLimitZone)
	if err := stringArg(d, &z.Name); err != nil {
		return err
	}
	if err := noMoreArgs(d, "zone"); err != nil {
		return err
	}
	if _, err := parseOptions(d, func(opt string) error {
		var err error
		switch opt {
		case "match":
			var set caddy.ModuleMap
			if set, err = caddyhttp.ParseCaddyfileNestedMatcherSet(d); err == nil {
				z.MatcherSetsRaw = append(z.MatcherSetsRaw, set)
			}
		case "key":
			err = stringArg(d, &z.Key)
		case "ipv6_prefix":
			err = countArg(d, opt, &z.IPv6Prefix)
		case "events":
			var n int
			if err = countArg(d, opt, &n); err == nil {
				z.Events = int64(n)
			}
		case "window":
			err = durationArg(d, opt, &z.Window)
		case "sliding":
			z.Sliding = true
		default:
			err = d.Errf("unrecognized zone option '%s'", opt)
		}
		return err
	}); err != nil {
		return err
	}
	h.Zones = append(h.Zones, z)
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*EdgeRateLimit)(nil)
	_ caddy.Validator             = (*EdgeRateLimit)(nil)
	_ caddy.CleanerUpper          = (*EdgeRateLimit)(nil)
	_ caddyhttp.MiddlewareHandler = (*EdgeRateLimit)(nil)
	_ caddyfile.Unmarshaler       = (*EdgeRateLimit)(nil)
)
