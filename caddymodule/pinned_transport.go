package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/pinning"
	"github.com/caddy-ha/caddy-ha/status"
)

func init() {
	caddy.RegisterModule(new(PinnedTransport))
}

// Defaults of the pinned transport.
const (
	defaultMaxPinned = 4096
	// defaultMaxHandshakesPerClient counts sign-ins in progress of one
	// address, never signed-in users: a browser signs in on about 6
	// connections at once, so 64 lets 10 users of a terminal server sign in
	// in the same instant (each handshake takes milliseconds), while an
	// address that begins handshakes and never ends them holds at most 64
	// pins, each for handshake_timeout.
	defaultMaxHandshakesPerClient = 64
	// defaultPinWait is the queue of HAProxy's maxconn, kept short: a
	// browser waits for its sign-in that long at most.
	defaultPinWait = 5 * time.Second
	// defaultHandshakeTimeout is far above the milliseconds an NTLM or
	// Kerberos handshake takes.
	defaultHandshakeTimeout = 10 * time.Second
	// defaultPinIdle is the cluster's HAProxy timeout http-keep-alive.
	defaultPinIdle = 60 * time.Second
	// refusalLogInterval keeps a flood of refusals to one log line each.
	refusalLogInterval = 10 * time.Second
)

// PinnedTransport is Caddy's http transport with HAProxy's http-reuse
// never for Windows SSO: each client connection that sends NTLM,
// Negotiate or Kerberos credentials gets an upstream connection of its own
// (a pin) from that request on, never used for another client, so that
// such authentication, which authenticates a connection and not a
// request, never serves one user on another's authenticated connection.
// Client connections that never sent such credentials share upstream
// connections that never carried any, as the http transport shares them.
// It takes every option of the http transport (TLS, timeouts, keep-alive)
// and speaks HTTP/1.1 to upstreams.
//
// Once a client connection's upstream connection has seen connection-based
// authentication (a request's Authorization or a response's
// WWW-Authenticate naming NTLM, Negotiate or Kerberos), that upstream
// connection is never replaced: if the upstream closes it, the client
// connection is closed too. When a request must go to another node (after
// a failover), the client connection gets a new upstream connection there
// and re-authenticates; a handshake cut in the middle is answered with 401
// and a fresh challenge, and the client connection closes.
//
// Requests over HTTP/2 and HTTP/3 cannot carry connection-based
// authentication: with such credentials they are answered 505; without,
// they are shared. Serve the site with protocols h1.
type PinnedTransport struct {
	reverseproxy.HTTPTransport

	// Most client connections pinned at once. At it a new handshake waits
	// up to pin_wait for a pin to end, then is answered 503 with
	// Retry-After: 1; it is never sent on a shared connection.
	// Default: 4096.
	MaxPinned int `json:"max_pinned,omitempty"`

	// Most handshakes in progress of one client address (IPv6: its /64)
	// at once: pins, held or waited for, whose sign-in the backend has not
	// yet accepted. At it a new handshake from that address waits up to
	// pin_wait for one of them to sign in or end, then is answered 503
	// with Retry-After: 1. Signed-in pins do not count, so a terminal
	// server's users are never refused by it. Default: 64.
	MaxHandshakesPerClient int `json:"max_handshakes_per_client,omitempty"`

	// Most pins, signed in or not, of one client address at once; beyond
	// it a new handshake from that address is answered 503 with
	// Retry-After: 1 at once. A terminal server puts hundreds of users of
	// about 6 connections each behind one address: size it for them.
	// Default: none (max_pinned bounds every address's pins together).
	MaxPinnedPerClient int `json:"max_pinned_per_client,omitempty"`

	// How long a new handshake waits for a free pin at max_pinned before
	// its 503. Default: 5s.
	PinWait caddy.Duration `json:"pin_wait,omitempty"`

	// A pin that has not signed in (the backend accepting a handshake's
	// last leg) within this time of its first credentials is ended and its
	// client connection closed. Default: 10s.
	HandshakeTimeout caddy.Duration `json:"handshake_timeout,omitempty"`

	pool     *pinning.Pool
	observer *pinObserver
	series   *seriesHold[*PinnedTransport] // of the pool, named by its upstreams
	logger   *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*PinnedTransport) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.transport.pinned",
		New: func() caddy.Module { return new(PinnedTransport) },
	}
}

// clientConnKey holds, in a request's context, the client connection it
// arrived on, as the HTTP server accepted it.
type clientConnKey struct{}

// rememberClientConn is the HTTP server's ConnContext hook of pinned
// transports: the connection itself is the identity, never its address,
// which port reuse, NAT and HTTP/2 share.
func rememberClientConn(ctx context.Context, c net.Conn) context.Context {
	if ctx.Value(clientConnKey{}) != nil {
		return ctx // another pinned transport of this server registered too
	}
	return context.WithValue(ctx, clientConnKey{}, c)
}

// pinRefusedVar marks a request the transport answered itself, so that
// lb_policy leader does not take its 503 for a follower's.
const pinRefusedVar = "ha.pinned.refused"

func (t *PinnedTransport) setDefaults() {
	if t.MaxPinned == 0 {
		t.MaxPinned = defaultMaxPinned
	}
	if t.MaxHandshakesPerClient == 0 {
		t.MaxHandshakesPerClient = defaultMaxHandshakesPerClient
	}
	if t.PinWait == 0 {
		t.PinWait = caddy.Duration(defaultPinWait)
	}
	if t.HandshakeTimeout == 0 {
		t.HandshakeTimeout = caddy.Duration(defaultHandshakeTimeout)
	}
	if t.KeepAlive == nil {
		t.KeepAlive = new(reverseproxy.KeepAlive)
	}
	if t.KeepAlive.IdleConnTimeout == 0 {
		t.KeepAlive.IdleConnTimeout = caddy.Duration(defaultPinIdle)
	}
	if t.KeepAlive.MaxIdleConnsPerHost == 0 {
		// The shared connections of clients without credentials: an idle
		// one for as many clients as may be pinned, as HAProxy's
		// http-reuse never keeps one per client. The http transport's 32
		// would close and dial again the rest of a steady load.
		t.KeepAlive.MaxIdleConnsPerHost = t.MaxPinned
	}
	if len(t.Versions) == 0 {
		t.Versions = []string{"1.1"}
	}
}

const pinnedModule = "transport pinned"

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (t *PinnedTransport) Validate() error {
	maxPinned, versions, keepAlive := t.MaxPinned, t.Versions, t.KeepAlive
	if len(versions) == 0 {
		versions = []string{"1.1"}
	}
	switch {
	case maxPinned < 0:
		return badSetting(pinnedModule, "max_pinned", "must not be negative")
	case t.MaxHandshakesPerClient < 0:
		return badSetting(pinnedModule, "max_handshakes_per_client", "must not be negative")
	case t.MaxPinnedPerClient < 0:
		return badSetting(pinnedModule, "max_pinned_per_client", "must not be negative")
	case t.PinWait < 0:
		return badSetting(pinnedModule, "pin_wait", "must not be negative")
	case t.HandshakeTimeout < 0:
		return badSetting(pinnedModule, "handshake_timeout", "must not be negative")
	case !slices.Equal(versions, []string{"1.1"}):
		return badSetting(pinnedModule, "versions", "must be 1.1, not %s: NTLM and Negotiate authenticate an HTTP/1.1 connection", strings.Join(versions, " "))
	case keepAlive != nil && keepAlive.Enabled != nil && !*keepAlive.Enabled:
		return badSetting(pinnedModule, "keep_alive", "must not be off: an authenticated connection must be kept alive")
	case keepAlive != nil && keepAlive.IdleConnTimeout < 0:
		return badSetting(pinnedModule, "keep_alive", "idle_timeout must not be negative")
	case t.ForwardProxyURL != "" || len(t.NetworkProxyRaw) != 0:
		// Pins dial the backend themselves (pinning/conn.go).
		return badSetting(pinnedModule, "network_proxy", "(or forward_proxy_url) cannot be used: a pin is a connection of its own to the backend, which a forward proxy would not keep")
	}
	return nil
}

// Provision sets the defaults, builds the http transport the pins clone
// and hooks the enclosing HTTP server's connections.
func (t *PinnedTransport) Provision(ctx caddy.Context) error {
	t.setDefaults()
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok {
		return errors.New("transport pinned: must be in an HTTP server's routes, whose connections it pins")
	}
	if err := t.HTTPTransport.Provision(ctx); err != nil {
		return fmt.Errorf("transport pinned: %v", err)
	}
	t.logger = ctx.Logger()
	if multiplexed := multiplexedProtocols(srv); len(multiplexed) > 0 {
		t.logger.Warn("transport pinned: the server also speaks "+strings.Join(multiplexed, ", ")+
			", which cannot carry NTLM or Negotiate: such requests with credentials are answered 505; serve the site with protocols h1",
			zap.Strings("listen", srv.Listen))
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	name := "unknown"
	if h := enclosingProxy(ctx); h != nil {
		addrs := make([]string, 0, len(h.Upstreams))
		for _, u := range h.Upstreams {
			addrs = append(addrs, u.Dial)
		}
		name = strings.Join(addrs, ",")
	}
	t.series = pinnedSeries.hold(name) // before its series are looked up
	t.observer = newPinObserver(name, t.logger)
	t.pool = pinning.New(t.Transport, pinning.Config{
		Max:                    t.MaxPinned,
		MaxHandshakesPerClient: t.MaxHandshakesPerClient,
		MaxPerClient:           t.MaxPinnedPerClient,
		PinWait:                time.Duration(t.PinWait),
		HandshakeTimeout:       time.Duration(t.HandshakeTimeout),
		IdleTimeout:            time.Duration(t.KeepAlive.IdleConnTimeout),
		Observer:               t.observer,
	})
	t.series.publish(t)
	srv.RegisterConnContext(rememberClientConn)
	srv.RegisterConnState(t.pool.ConnState)
	return nil
}

// multiplexedProtocols returns the protocols other than HTTP/1 that the
// server speaks on any listener.
func multiplexedProtocols(srv *caddyhttp.Server) []string {
	all := slices.Clone(srv.Protocols)
	for _, p := range srv.ListenProtocols {
		all = append(all, p...)
	}
	var out []string
	for _, p := range []string{"h2", "h2c", "h3"} {
		if slices.Contains(all, p) {
			out = append(out, p)
		}
	}
	return out
}

// RoundTrip sends the request on its client connection's pin.
func (t *PinnedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.SetScheme(req)
	client, _ := req.Context().Value(clientConnKey{}).(net.Conn)
	resp, err := t.pool.RoundTrip(client, req)
	if refusal, ok := errors.AsType[*pinning.Refusal](err); ok {
		caddyhttp.SetVar(req.Context(), pinRefusedVar, true)
		return refusal.Response(req), nil
	}
	return resp, err
}

// EnableH2C refuses h2c:// upstreams: pins speak HTTP/1.1.
func (t *PinnedTransport) EnableH2C() error {
	return errors.New("transport pinned: h2c upstreams cannot carry NTLM or Negotiate; use http:// or https://")
}

// Cleanup ends every pin and closes the transport's connections.
func (t *PinnedTransport) Cleanup() error {
	if t.pool != nil {
		t.pool.Close()
		t.observer.lookups.close()
		t.series.release()
	}
	return t.HTTPTransport.Cleanup()
}

// UnmarshalCaddyfile sets up the transport from Caddyfile tokens: every
// subdirective of the http transport, and its own. Syntax:
//
//	transport pinned {
//		max_pinned <n>
//		max_handshakes_per_client <n>
//		max_pinned_per_client <n>
//		pin_wait <duration>
//		handshake_timeout <duration>
//		<any http transport subdirective>
//	}
func (t *PinnedTransport) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the name
	if d.NextArg() {
		return d.ArgErr()
	}
	name := d.Token()
	// The http transport's own parser reads what is not ours.
	httpTokens := []caddyfile.Token{name, {File: name.File, Line: name.Line, Text: "{"}}
	lines := optionLines{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		_, seen := lines[opt]
		lines[opt] = d.Line()
		var err error
		switch opt {
		case "max_pinned":
			err = countArg(d, opt, &t.MaxPinned)
		case "max_handshakes_per_client":
			err = countArg(d, opt, &t.MaxHandshakesPerClient)
		case "max_pinned_per_client":
			err = countArg(d, opt, &t.MaxPinnedPerClient)
		case "pin_wait":
			err = durationArg(d, opt, &t.PinWait)
		case "handshake_timeout":
			err = durationArg(d, opt, &t.HandshakeTimeout)
		default:
			httpTokens = append(httpTokens, d.NextSegment()...)
			continue
		}
		if seen {
			return d.Errf("duplicate %s option", opt)
		}
		if err == nil {
			err = noMoreArgs(d, opt)
		}
		if err != nil {
			return err
		}
	}
	// The closing brace on a line of its own, so that it is nobody's argument.
	last := httpTokens[len(httpTokens)-1]
	httpTokens = append(httpTokens, caddyfile.Token{File: last.File, Line: last.Line + 1 + strings.Count(last.Text, "\n"), Text: "}"})
	if err := t.HTTPTransport.UnmarshalCaddyfile(caddyfile.NewDispenser(httpTokens)); err != nil {
		return err
	}
	return validatedAt(d, lines, map[string]string{"keep_alive": "keepalive"}, t.Validate())
}

// pinObserver turns a pool's events into metrics and logs.
type pinObserver struct {
	pool    string
	logger  *zap.Logger
	pinned  prometheus.Gauge
	pins    prometheus.Counter
	lookups seriesLookups // closed once the pool is closed

	mu       sync.Mutex
	lastWarn map[string]time.Time         // per refusal reason
	unwarned map[string]int               // refusals since that reason's last log line
	atCap    map[string]status.CapRefusal // the last refusal at each cap, by reason
}

func newPinObserver(pool string, logger *zap.Logger) *pinObserver {
	return &pinObserver{
		pool: pool, logger: logger,
		pinned:   pinnedMetrics.connections.WithLabelValues(pool),
		pins:     pinnedMetrics.pins.WithLabelValues(pool),
		lastWarn: map[string]time.Time{},
		unwarned: map[string]int{},
		atCap:    map[string]status.CapRefusal{},
	}
}

// Pinned counts a new pin.
func (o *pinObserver) Pinned() {
	o.pinned.Inc()
	o.pins.Inc()
}

// Ended counts a pin that ended, by why.
func (o *pinObserver) Ended(reason pinning.EndReason) {
	o.pinned.Dec()
	o.lookups.do(func() { pinnedMetrics.ended.WithLabelValues(o.pool, string(reason)).Inc() })
	if reason == pinning.EndFailover || reason == pinning.EndUpstreamClosed {
		o.logger.Debug("pin ended", zap.String("pool", o.pool), zap.String("reason", string(reason)))
	}
}

// capOptions names the option behind each cap refusal, for logs and the
// status page.
var capOptions = map[string]string{
	pinning.RefusedAtCap:        "max_pinned",
	pinning.RefusedHandshakeCap: "max_handshakes_per_client",
	pinning.RefusedClientCap:    "max_pinned_per_client",
}

// Refused counts every refusal and logs each reason at most once per
// refusalLogInterval, with the count since the last line (and, at a cap,
// the address and the cap); the last refusal at each cap is kept for the
// status page.
func (o *pinObserver) Refused(r *pinning.Refusal) {
	o.lookups.do(func() { pinnedMetrics.refused.WithLabelValues(o.pool, r.Reason).Inc() })
	now := time.Now()
	o.mu.Lock()
	option, atCap := capOptions[r.Reason]
	if atCap {
		hit := o.atCap[r.Reason]
		o.atCap[r.Reason] = status.CapRefusal{Cap: option, Limit: r.Limit, Client: r.Client, At: &now, Refusals: hit.Refusals + 1}
	}
	o.unwarned[r.Reason]++
	n := o.unwarned[r.Reason]
	due := now.Sub(o.lastWarn[r.Reason]) >= refusalLogInterval
	if due {
		o.lastWarn[r.Reason], o.unwarned[r.Reason] = now, 0
	}
	o.mu.Unlock()
	if !due {
		return
	}
	level := zap.InfoLevel
	if atCap || r.Reason == pinning.RefusedHTTP2 || r.Reason == pinning.RefusedNoClient {
		level = zap.WarnLevel
	}
	if ce := o.logger.Check(level, "pinned transport answered a request itself"); ce != nil {
		fields := []zap.Field{zap.String("pool", o.pool), zap.String("reason", r.Reason), zap.Int("status", r.Status),
			zap.String("detail", r.Message), zap.Int("requests", n)}
		if atCap {
			fields = append(fields, zap.String("client", r.Client), zap.String("cap", option), zap.Int("limit", r.Limit))
		}
		ce.Write(fields...)
	}
}

// capRefusals returns the last refusal at each cap, in the order of the
// caps' names.
func (o *pinObserver) capRefusals() []status.CapRefusal {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]status.CapRefusal, 0, len(o.atCap))
	for _, c := range o.atCap {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b status.CapRefusal) int { return strings.Compare(a.Cap, b.Cap) })
	return out
}

// Panicked logs a panic in a pin's timer or goroutine, with its stack.
func (o *pinObserver) Panicked(v any, stack []byte) {
	o.logger.Error("pinned transport: recovered from a panic", zap.Any("panic", v), zap.ByteString("stack", stack))
}

// Interface guards
var (
	_ caddy.Provisioner         = (*PinnedTransport)(nil)
	_ caddy.Validator           = (*PinnedTransport)(nil)
	_ caddy.CleanerUpper        = (*PinnedTransport)(nil)
	_ http.RoundTripper         = (*PinnedTransport)(nil)
	_ reverseproxy.TLSTransport = (*PinnedTransport)(nil)
	_ reverseproxy.H2CTransport = (*PinnedTransport)(nil)
	_ caddyfile.Unmarshaler     = (*PinnedTransport)(nil)
	_ pinning.Observer          = (*pinObserver)(nil)
)
