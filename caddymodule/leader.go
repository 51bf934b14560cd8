// Package caddymodule holds caddy-ha's Caddy modules: thin adapters from
// Caddy's configuration and request flow to the domain packages.
package caddymodule

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

func init() {
	caddy.RegisterModule(new(LeaderSelection))
}

// Defaults of the leader policy.
const (
	defaultProbeURI     = "/healthz/leader"
	defaultInterval     = time.Second
	defaultFastInterval = 50 * time.Millisecond
	defaultTimeout      = 500 * time.Millisecond
	defaultFails        = 2
	defaultPasses       = 1
	defaultHold         = 15 * time.Second
	defaultRetryAfter   = 5 * time.Second
	defaultReplayBuffer = 1 << 20
	// retryInterval is the pause Caddy takes before a retry; the policy
	// itself waits for a leader, so only a token pause is needed.
	retryInterval = 5 * time.Millisecond
)

// LeaderSelection routes to the current leader of an active/passive
// cluster. It probes every upstream's leader endpoint itself, keeps the
// highest lease epoch as the only leader, holds requests while there is
// none, and replays mutating requests that a node refused because it had
// become a follower.
//
// It needs a reverse_proxy with static upstreams, and sets on it, unless
// configured there: try_duration (to hold), try_interval (5ms),
// request_buffers (to replay_buffer) and a retry_match entry for follower
// refusals.
type LeaderSelection struct {
	// Path of the leader probe. Default: /healthz/leader.
	URI string `json:"uri,omitempty"`
	// Host header of probes. Default: the upstream address.
	Host string `json:"host,omitempty"`
	// Interval between probes while a leader is known. Default: 1s.
	Interval caddy.Duration `json:"interval,omitempty"`
	// Interval between probes of all nodes while there is no leader or
	// the leader is in doubt. Default: 50ms, or interval if shorter.
	FastInterval caddy.Duration `json:"fast_interval,omitempty"`
	// Timeout of one probe. Default: 500ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Failed probes in a row before a node counts as down. One failed
	// probe already stops traffic to a leader until a probe answers.
	// Default: 2.
	Fails int `json:"fails,omitempty"`
	// Leader answers in a row before a node gets traffic. Default: 1.
	Passes int `json:"passes,omitempty"`
	// How long a request waits for a leader before it is answered with
	// 503. Default: 15s.
	Hold caddy.Duration `json:"hold,omitempty"`
	// Retry-After sent with that 503. Default: 5s.
	RetryAfter caddy.Duration `json:"retry_after,omitempty"`
	// "leader" (default) sends every request to the leader; "any" sends
	// safe methods (GET, HEAD, OPTIONS) to any node that answers probes.
	Reads string `json:"reads,omitempty"`
	// Paths that always go to the leader, even for safe methods (GET
	// endpoints that change state, such as webhook ingress). Path
	// matcher syntax: /webhooks/* .
	LeaderPaths []string `json:"leader_paths,omitempty"`
	// Largest request body that is buffered so that it can be replayed.
	// Default: 1MiB. Sets reverse_proxy's request_buffers unless set there.
	ReplayBuffer int64 `json:"replay_buffer,omitempty"`
	// Take a 200 without a parsable leader body as a leader (of unknown
	// epoch). Default: false.
	AcceptBare200 bool `json:"accept_bare_200,omitempty"`
	// TLS server name of probes, if the transport's is not right for them.
	TLSServerName string `json:"tls_server_name,omitempty"`
	// PEM file of the CA that signs the upstreams' certificates, for probes,
	// if the transport's trust pool is not right for them.
	TLSCA string `json:"tls_ca,omitempty"`

	pool        *leaderPool
	poolKey     string
	requestKey  string // the request's *leaderRequest; per instance: another proxy in the same request has its own
	timeouts    transportTimeouts
	holdFor     time.Duration // hold, or the reverse_proxy's longer try_duration
	leaderPaths caddyhttp.MatchPath
	replayLimit int64 // the handler's request_buffers; -1: unlimited
	retryAfter  string
	readsAny    bool
}

// CaddyModule returns the Caddy module information.
func (*LeaderSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.leader",
		New: func() caddy.Module { return new(LeaderSelection) },
	}
}

// leaderPools shares one prober per upstream set and probe settings
// across config reloads, so that a reload keeps the known leader.
var leaderPools = caddy.NewUsagePool()

// sharedProber looks at the running probers once. It returns the key of
// the prober to share: base, unless the running probers with these
// settings trust other CAs than this one does (a trust pool file rotated in
// place shows only in the loaded pool). It also returns the epoch floors of
// the running probers of the same nodes: a prober that replaces another (in
// a reload) must not take an older epoch for the leader while the claim
// that set the floor is valid, nor for longer.
func sharedProber(base, name string, prober *healthcheck.HTTPProber) (key string, epochFloors []healthcheck.EpochFloor) {
	same, other := "", false
	leaderPools.Range(func(k, v any) bool {
		p, ok := v.(*leaderPool)
		if !ok {
			return true
		}
		if p.mon.Name() == name {
			epochFloors = append(epochFloors, p.mon.EpochFloor())
		}
		if k, _ := k.(string); strings.HasPrefix(k, base) {
			if p.roots.Equal(rootCAs(prober)) {
				same = k
			} else {
				other = true
			}
		}
		return true
	})
	switch {
	case same != "":
		return same, epochFloors
	case other:
		return fmt.Sprintf("%s#%p", base, prober), epochFloors
	}
	return base, epochFloors
}

func rootCAs(p *healthcheck.HTTPProber) *x509.CertPool {
	if t, ok := p.Client.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		return t.TLSClientConfig.RootCAs
	}
	return nil
}

// leaderPool is a running monitor in leaderPools.
type leaderPool struct {
	mon    *healthcheck.Monitor
	obs    *leaderObserver
	prober *healthcheck.HTTPProber
	// roots are the prober's trusted CAs, taken before it first ran: its
	// transport's TLS config is the transport's own once in use.
	roots *x509.CertPool
	// holdNs is the hold of the newest config using the pool, for the
	// operator's view.
	holdNs atomic.Int64
	series *seriesHold[*leaderPool]
}

// Destruct stops the prober, when its last user lets go, and removes the
// pool's series.
func (p *leaderPool) Destruct() error {
	p.mon.Stop()
	p.prober.Client.CloseIdleConnections()
	p.obs.lookups.close()
	p.series.release()
	return nil
}

func (p *leaderPool) hold() time.Duration { return time.Duration(p.holdNs.Load()) }

func (s *LeaderSelection) setDefaults() {
	if s.URI == "" {
		s.URI = defaultProbeURI
	}
	if s.Interval == 0 {
		s.Interval = caddy.Duration(defaultInterval)
	}
	if s.FastInterval == 0 {
		s.FastInterval = caddy.Duration(min(defaultFastInterval, time.Duration(s.Interval)))
	}
	if s.Timeout == 0 {
		s.Timeout = caddy.Duration(defaultTimeout)
	}
	if s.Fails == 0 {
		s.Fails = defaultFails
	}
	if s.Passes == 0 {
		s.Passes = defaultPasses
	}
	if s.Hold == 0 {
		s.Hold = caddy.Duration(defaultHold)
	}
	if s.RetryAfter == 0 {
		s.RetryAfter = caddy.Duration(defaultRetryAfter)
	}
	if s.Reads == "" {
		s.Reads = "leader"
	}
	if s.ReplayBuffer == 0 {
		s.ReplayBuffer = defaultReplayBuffer
	}
}

func (s *LeaderSelection) healthConfig() healthcheck.Config {
	return healthcheck.Config{
		Interval:     time.Duration(s.Interval),
		FastInterval: time.Duration(s.FastInterval),
		Timeout:      time.Duration(s.Timeout),
		Fails:        s.Fails,
		Passes:       s.Passes,
	}
}

const leaderModule = "lb_policy leader"

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (s *LeaderSelection) Validate() error {
	v := *s
	v.setDefaults()
	if bad, ok := errors.AsType[*healthcheck.SettingError](v.healthConfig().Validate()); ok {
		return badSetting(leaderModule, bad.Setting, "%s", bad.Problem)
	}
	switch {
	case !strings.HasPrefix(v.URI, "/"):
		return badSetting(leaderModule, "uri", "%q must start with /", v.URI)
	case v.Hold < 0:
		return badSetting(leaderModule, "hold", "must not be negative")
	case v.RetryAfter < 0:
		return badSetting(leaderModule, "retry_after", "must not be negative")
	case v.Reads != "leader" && v.Reads != "any":
		return badSetting(leaderModule, "reads", "must be leader or any, not %q", v.Reads)
	case v.ReplayBuffer < 0:
		return badSetting(leaderModule, "replay_buffer", "must not be negative")
	}
	for _, p := range v.LeaderPaths {
		if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "*") {
			return badSetting(leaderModule, "leader_paths", "%q must start with / (or *)", p)
		}
	}
	return nil
}

// Provision sets the defaults, starts (or joins) the pool's prober and
// sets the delivery settings on the enclosing reverse_proxy.
func (s *LeaderSelection) Provision(ctx caddy.Context) error {
	s.setDefaults()
	h := enclosingProxy(ctx)
	if h == nil {
		return errors.New("lb_policy leader: must be the selection policy of a reverse_proxy")
	}
	if h.DynamicUpstreamsRaw != nil {
		return errors.New("lb_policy leader: needs static upstreams (dynamic upstreams cannot be probed ahead of requests)")
	}
	addrs := make([]string, 0, len(h.Upstreams))
	for _, u := range h.Upstreams {
		if strings.Contains(u.Dial, "{") {
			return fmt.Errorf("lb_policy leader: upstream %q: placeholders cannot be probed ahead of requests", u.Dial)
		}
		if _, _, err := net.SplitHostPort(u.Dial); err != nil {
			return fmt.Errorf("lb_policy leader: upstream %q: %v", u.Dial, err)
		}
		addrs = append(addrs, u.Dial)
	}
	if len(addrs) == 0 {
		return errors.New("lb_policy leader: reverse_proxy has no upstreams")
	}

	prober, tlsKey, err := s.prober(h)
	if err != nil {
		return err
	}
	if len(s.LeaderPaths) > 0 {
		s.leaderPaths = caddyhttp.MatchPath(s.LeaderPaths)
		if err := s.leaderPaths.Provision(ctx); err != nil {
			return fmt.Errorf("lb_policy leader: leader_paths: %v", err)
		}
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}

	name := strings.Join(addrs, ",")
	settings, _ := json.Marshal([]any{addrs, prober.Scheme, s.URI, s.Host, s.AcceptBare200, s.healthConfig(), tlsKey})
	var floors []healthcheck.EpochFloor
	s.poolKey, floors = sharedProber(string(settings), name, prober)
	// Select waits as long as Caddy's retry loop may run, or it would spin
	// (configureDelivery sets lb_try_duration to hold where it is unset).
	s.holdFor = max(time.Duration(s.Hold), time.Duration(h.LoadBalancing.TryDuration))
	val, _, err := leaderPools.LoadOrNew(s.poolKey, func() (caddy.Destructor, error) {
		p := &leaderPool{prober: prober, roots: rootCAs(prober)} // roots: before the first probe uses the transport
		p.series = leaderSeries.hold(name)                       // before the observer looks up its series
		p.obs = newLeaderObserver(name)
		var err error
		p.mon, err = healthcheck.NewMonitor(name, addrs, s.healthConfig(), prober, p.obs)
		if err != nil {
			p.series.release()
			return nil, err
		}
		for _, a := range addrs {
			p.obs.setCurrent(a, false)
		}
		p.holdNs.Store(int64(s.holdFor))
		for _, f := range floors {
			p.mon.RaiseEpochFloor(f)
		}
		p.mon.Start()
		p.series.publish(p)
		return p, nil
	})
	if err != nil {
		return fmt.Errorf("lb_policy leader: %v", err)
	}
	s.pool = val.(*leaderPool)
	s.pool.holdNs.Store(int64(s.holdFor)) // the newest config's
	s.requestKey = fmt.Sprintf("ha.leader.request.%p", s)
	s.readsAny = s.Reads == "any"
	s.retryAfter = retryAfterValue(time.Duration(s.RetryAfter))

	return s.configureDelivery(ctx, h)
}

// enclosingProxy finds the reverse_proxy handler being provisioned.
func enclosingProxy(ctx caddy.Context) *reverseproxy.Handler {
	mods := ctx.Modules()
	for i := len(mods) - 1; i >= 0; i-- {
		if h, ok := mods[i].(*reverseproxy.Handler); ok {
			return h
		}
	}
	return nil
}

// prober builds the probe client the way the proxy reaches the upstreams:
// the transport's scheme and TLS settings, with the policy's overrides. It
// also returns a key of those TLS settings, so that changing them (or the
// tls_ca file) gives a new prober.
func (s *LeaderSelection) prober(h *reverseproxy.Handler) (*healthcheck.HTTPProber, string, error) {
	scheme := "http"
	var tlsConf *tls.Config
	var tlsKey []byte
	var t *reverseproxy.HTTPTransport
	switch tr := h.Transport.(type) {
	case nil:
	case *reverseproxy.HTTPTransport:
		t = tr
	case *PinnedTransport:
		t = &tr.HTTPTransport
	default:
		return nil, "", fmt.Errorf("lb_policy leader: transport %T is not supported (probes speak HTTP)", h.Transport)
	}
	if t != nil {
		s.timeouts = transportTimeouts{responseHeader: time.Duration(t.ResponseHeaderTimeout), read: time.Duration(t.ReadTimeout)}
	}
	if t != nil && t.TLS != nil {
		scheme = "https"
		tlsKey, _ = json.Marshal(t.TLS)
		if t.Transport != nil && t.Transport.TLSClientConfig != nil {
			tlsConf = t.Transport.TLSClientConfig.Clone()
		}
	}
	if s.TLSServerName != "" || s.TLSCA != "" {
		if scheme != "https" {
			return nil, "", errors.New("lb_policy leader: tls_server_name and tls_ca need a reverse_proxy transport with tls")
		}
		if tlsConf == nil {
			tlsConf = new(tls.Config)
		}
	}
	if s.TLSServerName != "" {
		tlsConf.ServerName = s.TLSServerName
		tlsKey = append(tlsKey, "\x00server_name="+s.TLSServerName...)
	}
	if s.TLSCA != "" {
		pool, pem, err := loadCAPool(s.TLSCA, "lb_policy leader: tls_ca")
		if err != nil {
			return nil, "", err
		}
		tlsConf.RootCAs = pool
		tlsKey = append(tlsKey, "\x00ca="...)
		tlsKey = append(tlsKey, pem...)
	}
	if tlsConf != nil {
		if strings.Contains(tlsConf.ServerName, "{") {
			return nil, "", errors.New("lb_policy leader: the transport's tls_server_name has placeholders; set tls_server_name for probes")
		}
		// Probes speak HTTP/1.1: an upstream that offers h2 must not pick it.
		tlsConf.NextProtos = []string{"http/1.1"}
	}
	sum := sha256.Sum256(tlsKey)
	transport := &http.Transport{
		TLSClientConfig:     tlsConf,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &healthcheck.HTTPProber{
		Client:        &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Scheme:        scheme,
		URI:           s.URI,
		Host:          s.Host,
		AcceptBare200: s.AcceptBare200,
	}, hex.EncodeToString(sum[:]), nil
}

// configureDelivery sets what the reverse_proxy needs so that held
// requests wait and follower refusals are replayed, where the operator
// did not set it: Caddy provisions these after the selection policy.
func (s *LeaderSelection) configureDelivery(ctx caddy.Context, h *reverseproxy.Handler) error {
	lb := h.LoadBalancing
	if lb.TryDuration == 0 {
		lb.TryDuration = s.Hold
	}
	if len(lb.RetryMatchRaw) > 0 {
		ctx.Logger().Warn("lb_retry_match entries of this reverse_proxy replay what they match without lb_policy leader's follower check",
			zap.Int("entries", len(lb.RetryMatchRaw)))
	}
	if lb.TryInterval == 0 {
		lb.TryInterval = caddy.Duration(retryInterval)
	}
	if h.RequestBuffers == 0 {
		h.RequestBuffers = s.ReplayBuffer
	}
	s.replayLimit = h.RequestBuffers
	// The expression only makes Caddy evaluate this set on responses; the
	// follower check decides.
	expr := &caddyhttp.MatchExpression{Expr: "{http.reverse_proxy.status_code} == 503"}
	if err := expr.Provision(ctx); err != nil {
		return fmt.Errorf("lb_policy leader: %v", err)
	}
	lb.RetryMatch = append(lb.RetryMatch, caddyhttp.MatcherSet{expr, followerRefusal{s}}, caddyhttp.MatcherSet{plannedStopClose{s}})
	return nil
}

// Cleanup releases the pool's prober; the last user stops it.
func (s *LeaderSelection) Cleanup() error {
	if s.poolKey != "" {
		_, err := leaderPools.Delete(s.poolKey)
		return err
	}
	return nil
}

// Select returns the leader's upstream (or, with reads any, any node's for
// a safe read). Without a leader it waits up to hold; on a retry it first
// puts the node that failed in doubt.
func (s *LeaderSelection) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	ctx := r.Context()
	mon := s.pool.mon
	tried := s.requestOf(ctx).triedNode()
	if tried == nil {
		if s.readsAny && !s.changesState(r) {
			if n := mon.Readable(); n != nil {
				return s.pick(pool, n, r)
			}
		}
		if n := mon.Leader(); n != nil {
			return s.pick(pool, n, r)
		}
	}
	// The first wait starts when Caddy's retry loop does (now), so that
	// both end together. A retry's wait counts from the request's arrival
	// (Caddy's start_time), so that a failed attempt does not extend hold.
	now := time.Now()
	deadline := now.Add(s.holdFor)
	if tried != nil {
		// Caddy retries only after a dial error or a refusal that
		// followerRefusal confirmed; either way the node is in doubt.
		mon.Doubt(tried, "a request to it failed")
		deadline = s.heldUntil(r)
		if !now.Before(deadline) {
			// Spent; Caddy's loop, which started after the body was read,
			// may ask again until its own try_duration ends.
			return s.noLeader(ctx, w)
		}
	}
	obs := s.pool.obs
	obs.held.Inc()
	obs.holding.Inc()
	n := mon.WaitLeader(ctx, deadline)
	obs.holding.Dec()
	if ctx.Err() != nil {
		// The client is gone. An upstream is returned only so that Caddy
		// ends the request: its transport refuses to send on a cancelled
		// context, so nothing reaches the node.
		return pool[0]
	}
	if n == nil {
		return s.noLeader(ctx, w)
	}
	return s.pick(pool, n, r)
}

// leaderRequest is what a request's attempts through one leader policy
// share: one value of the request's vars, set at its first attempt, before
// any dial. Later attempts change its fields, never the vars map, which a
// dial of an earlier attempt may still be reading: http.Transport dials in
// a goroutine of its own that outlives a cancelled attempt, and Caddy's
// dial reads the vars (a write to the map on a retry raced with it).
type leaderRequest struct {
	tried    *healthcheck.Node // the node of the last attempt
	attempt  *attemptTrace     // a replayable request's attempts
	answered bool              // answered "no leader" once
}

// request is the request's leaderRequest, made at its first attempt.
func (s *LeaderSelection) request(ctx context.Context) *leaderRequest {
	lr := s.requestOf(ctx)
	if lr == nil {
		lr = new(leaderRequest)
		caddyhttp.SetVar(ctx, s.requestKey, lr)
	}
	return lr
}

// requestOf is the request's leaderRequest, nil before its first attempt.
func (s *LeaderSelection) requestOf(ctx context.Context) *leaderRequest {
	lr, _ := caddyhttp.GetVar(ctx, s.requestKey).(*leaderRequest)
	return lr
}

// triedNode is the node of the request's last attempt, nil before it.
func (lr *leaderRequest) triedNode() *healthcheck.Node {
	if lr == nil {
		return nil
	}
	return lr.tried
}

// noLeader makes Caddy answer 503 (no upstream) with Retry-After, counted
// and logged once per request however often Caddy's loop asks again.
func (s *LeaderSelection) noLeader(ctx context.Context, w http.ResponseWriter) *reverseproxy.Upstream {
	if lr := s.request(ctx); !lr.answered {
		lr.answered = true
		s.pool.obs.answeredNoLeader(s.holdFor)
	}
	w.Header().Set("Retry-After", s.retryAfter)
	return nil
}

// pick returns the upstream of node n and remembers it for a retry. A
// request that may be replayed has its attempts traced, for the proof that
// a closed connection did not execute it.
func (s *LeaderSelection) pick(pool reverseproxy.UpstreamPool, n *healthcheck.Node, r *http.Request) *reverseproxy.Upstream {
	for _, u := range pool {
		if u.Dial == n.Addr {
			lr := s.request(r.Context())
			lr.tried = n
			if s.isReplayable(r) {
				if lr.attempt != nil {
					lr.attempt.reset()
				} else {
					lr.attempt = new(attemptTrace)
					traceAttempts(r, lr.attempt)
				}
			}
			return u
		}
	}
	return nil
}

func isSafeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// changesState: an unsafe method, or any method on a leader path. Only
// the leader may serve it.
func (s *LeaderSelection) changesState(r *http.Request) bool {
	return !isSafeMethod(r.Method) || (s.leaderPaths != nil && s.leaderPaths.Match(r))
}

// isReplayable: a request that changes state whose body was buffered whole.
func (s *LeaderSelection) isReplayable(r *http.Request) bool {
	return s.changesState(r) && s.bodyBuffered(r)
}

// bodyBuffered: the request has no body, or Caddy buffered all of it.
func (s *LeaderSelection) bodyBuffered(r *http.Request) bool {
	switch {
	case r.ContentLength == 0:
		return true
	case r.ContentLength < 0 || caddyhttp.IsIncremental(r.Header):
		return false // streamed, never buffered whole
	case s.replayLimit < 0:
		return true
	}
	// Caddy sets ContentLength to the buffered size only when the whole
	// body fit below the limit.
	return r.ContentLength < s.replayLimit
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens. Syntax:
//
//	lb_policy leader {
//		uri             <path>
//		host            <host>
//		interval        <duration>
//		fast_interval   <duration>
//		timeout         <duration>
//		fails           <n>
//		passes          <n>
//		hold            <duration>
//		retry_after     <duration>
//		reads           leader|any
//		leader_paths    <paths...>
//		replay_buffer   <size>
//		accept_bare_200
//		tls_server_name <name>
//		tls_ca          <pem file>
//	}
func (s *LeaderSelection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, s, nil, func(opt string) error {
		var err error
		switch opt {
		case "uri":
			err = stringArg(d, &s.URI)
		case "host":
			err = stringArg(d, &s.Host)
		case "interval":
			err = durationArg(d, opt, &s.Interval)
		case "fast_interval":
			err = durationArg(d, opt, &s.FastInterval)
		case "timeout":
			err = durationArg(d, opt, &s.Timeout)
		case "hold":
			err = durationArg(d, opt, &s.Hold)
		case "retry_after":
			err = durationArg(d, opt, &s.RetryAfter)
		case "fails":
			err = countArg(d, opt, &s.Fails)
		case "passes":
			err = countArg(d, opt, &s.Passes)
		case "reads":
			err = stringArg(d, &s.Reads)
		case "leader_paths":
			s.LeaderPaths = append(s.LeaderPaths, d.RemainingArgs()...)
			if len(s.LeaderPaths) == 0 {
				err = d.ArgErr()
			}
		case "replay_buffer":
			var size string
			if err = stringArg(d, &size); err == nil {
				n, perr := humanize.ParseBytes(size)
				if perr != nil || n == 0 || n > 1<<40 {
					err = d.Errf("replay_buffer: bad size %s", size)
				}
				s.ReplayBuffer = int64(n)
			}
		case "accept_bare_200":
			if d.NextArg() {
				err = d.ArgErr()
			}
			s.AcceptBare200 = true
		case "tls_server_name":
			err = stringArg(d, &s.TLSServerName)
		case "tls_ca":
			err = stringArg(d, &s.TLSCA)
		default:
			err = d.Errf("unrecognized lb_policy leader option '%s'", opt)
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner     = (*LeaderSelection)(nil)
	_ caddy.Validator       = (*LeaderSelection)(nil)
	_ caddy.CleanerUpper    = (*LeaderSelection)(nil)
	_ reverseproxy.Selector = (*LeaderSelection)(nil)
	_ caddyfile.Unmarshaler = (*LeaderSelection)(nil)
)
