package caddymodule

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/forwarded"
)

func init() {
	caddy.RegisterModule(Forwarded{})
	httpcaddyfile.RegisterHandlerDirective("forwarded", parseForwarded)
	httpcaddyfile.RegisterDirectiveOrder("forwarded", httpcaddyfile.Before, "tracing")
}

// Forwarded makes the forwarded headers trustworthy. From a peer that is
// not a trusted proxy, every inbound Forwarded, X-Forwarded-For, -Proto
// and -Host is removed before anything later in the route reads it, and
// so is every other header a widely used framework or proxy reads as the
// client's address, scheme, host, path or certificate (forwarded.Claims:
// X-Real-IP, True-Client-IP, X-Forwarded-Ssl, X-Original-URL,
// X-Forwarded-Client-Cert and dozens more); the address, scheme and host
// ones from every peer, since the set sent says those. From a trusted
// peer, the client is found by walking
// the chain right to left through trusted hops, strictly: a malformed value
// is believed not at all. Upstream then gets one consistent set, which
// reverse_proxy completes and does not undo.
//
// Trusted are the server's trusted_proxies (the same ranges, not a copy),
// the handler's own trusted_proxies, and the cloudflare ranges, whose
// CF-Connecting-IP is believed too, and only theirs.
//
// The resolved client is in {http.forwarded.client_ip},
// {http.forwarded.proto} and {http.forwarded.host}, and becomes Caddy's
// client IP ({client_ip}, the client_ip matcher, access logs).
type Forwarded struct {
	// Proxies to trust besides the server's trusted_proxies: an IP source
	// such as `{"source": "static", "ranges": [...]}`.
	TrustedProxiesRaw json.RawMessage `json:"trusted_proxies,omitempty" caddy:"namespace=http.ip_sources inline_key=source"`

	// Cloudflare's ranges, usually `{"source": "cloudflare_ranges"}`:
	// trusted as proxies, and the only peers whose CF-Connecting-IP is
	// believed.
	CloudflareRaw json.RawMessage `json:"cloudflare,omitempty" caddy:"namespace=http.ip_sources inline_key=source"`

	// Which headers the trusted proxies write: "x-forwarded" (the
	// default: X-Forwarded-For, -Proto, -Host) or "forwarded" (RFC 7239).
	// The other kind is not read, so a client cannot choose which one is
	// believed.
	Inbound string `json:"inbound,omitempty"`

	// Send this as the client's scheme (X-Forwarded-Proto, and proto= in
	// Forwarded), e.g. "https" where TLS ends in front of Caddy. Default:
	// what a trusted proxy said, else the connection's.
	Proto string `json:"proto,omitempty"`

	// Also send an RFC 7239 Forwarded header.
	EmitForwarded bool `json:"emit_forwarded,omitempty"`

	// This proxy's by= in the Forwarded header it sends: an IP, "unknown"
	// or an obfuscated "_name". Default: none.
	By string `json:"by,omitempty"`

	// Pass the trusted part of the incoming chain on (X-Forwarded-For
	// "client, proxy…, peer"). Default: the chain starts afresh at the
	// client, as HAProxy's del-header plus forwardfor does, which is what
	// a backend trusting only this proxy reads correctly.
	KeepChain bool `json:"keep_chain,omitempty"`

	// Headers, of those the handler strips (docs/forwarded.md lists them),
	// to pass on from a trusted peer, e.g. X-Real-IP where the backend
	// reads the client there and the proxy in front sets it. From any
	// other peer they are still removed.
	PassFromTrusted []string `json:"pass_from_trusted,omitempty"`

	// Remove method overrides (X-HTTP-Method-Override, X-HTTP-Method,
	// X-Method-Override, X-Forwarded-Method) from every request: an app
	// that honours them would run a GET that an edge rate limit or a
	// method matcher saw as a GET as the method the client named.
	// Default: passed, as HAProxy passes them.
	StripMethodOverrides bool `json:"strip_method_overrides,omitempty"`

	own, cloudflare caddyhttp.IPRangeSource
	proxy           forwarded.Proxy // its Trusted is set per request
	stripper        *forwarded.Stripper
	servers         *sync.Map // *caddyhttp.Server → caddyhttp.IPRangeSource (may be nil)
	logger          *zap.Logger
}

const (
	inboundXForwarded = "x-forwarded"
	inboundForwarded  = "forwarded"
)

// CaddyModule returns the Caddy module information.
func (Forwarded) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.forwarded", New: func() caddy.Module { return new(Forwarded) }}
}

// Provision loads the trusted sources and readies the proxy's settings.
func (h *Forwarded) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.servers = new(sync.Map)
	if h.TrustedProxiesRaw != nil {
		mod, err := ctx.LoadModule(h, "TrustedProxiesRaw")
		if err != nil {
			return fmt.Errorf("forwarded: loading trusted_proxies: %v", err)
		}
		h.own = mod.(caddyhttp.IPRangeSource)
	}
	if h.CloudflareRaw != nil {
		mod, err := ctx.LoadModule(h, "CloudflareRaw")
		if err != nil {
			return fmt.Errorf("forwarded: loading cloudflare: %v", err)
		}
		h.cloudflare = mod.(caddyhttp.IPRangeSource)
	}
	h.stripper, _ = forwarded.NewStripper(h.PassFromTrusted, h.StripMethodOverrides) // Validate refuses bad names
	h.proxy = forwarded.Proxy{KeepChain: h.KeepChain, ForceProto: h.Proto, EmitForwarded: h.EmitForwarded}
	if h.Inbound == inboundForwarded {
		h.proxy.Format = forwarded.RFC7239
	}
	if h.By != "" {
		h.proxy.Self, _ = forwarded.ParseNode(h.By) // Validate refuses a bad one
	}
	return nil
}

const forwardedModule = "forwarded"

// Validate checks the settings: Caddy calls it after Provision, the
// Caddyfile adapter after the block.
func (h *Forwarded) Validate() error {
	switch h.Inbound {
	case "", inboundXForwarded, inboundForwarded:
	default:
		return badSetting(forwardedModule, "inbound", "must be x-forwarded or forwarded, got %q", h.Inbound)
	}
	switch h.Proto {
	case "", "http", "https":
	default:
		return badSetting(forwardedModule, "proto", "must be http or https, got %q", h.Proto)
	}
	if h.By != "" {
		if _, err := forwarded.ParseNode(h.By); err != nil {
			return badSetting(forwardedModule, "by", "%q: want an IP, unknown or _name", h.By)
		}
	}
	if _, err := forwarded.NewStripper(h.PassFromTrusted, h.StripMethodOverrides); err != nil {
		return badSetting(forwardedModule, "pass_from_trusted", "%v", err)
	}
	return nil
}

// headerCFConnecting is Cloudflare's client address, read from its ranges
// before the claims are stripped.
const headerCFConnecting = "Cf-Connecting-Ip"

// ServeHTTP resolves the client, strips what an untrusted peer sent and
// sets the forwarded headers upstream gets.
func (h *Forwarded) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	peer, peerPort := remoteAddr(r.RemoteAddr)
	serverRanges := h.serverRanges(r)
	trusted := func(a netip.Addr) bool {
		return inRanges(a, serverRanges, r) || inRanges(a, h.own, r) || inRanges(a, h.cloudflare, r)
	}
	proxy := h.proxy
	proxy.Trusted = trusted
	if v, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); v {
		// The server's own verdict on the peer (it covers unix sockets too).
		proxy.Trusted = func(a netip.Addr) bool { return a == peer || trusted(a) }
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}

	var client forwarded.Client
	var out forwarded.Outgoing
	var err error
	if cf, ok := h.cloudflareClient(r, peer); ok {
		client = cf
		own := forwarded.Element{For: client.Node, By: proxy.Self, Proto: cmp.Or(h.Proto, client.Proto, scheme), Host: r.Host}
		chain := []forwarded.Element{own}
		if h.KeepChain {
			chain = []forwarded.Element{{For: client.Node}, {For: forwarded.Node{Addr: peer}, By: proxy.Self, Proto: own.Proto, Host: r.Host}}
		}
		out = forwarded.Emit(chain, own.Proto, r.Host, h.EmitForwarded)
	} else {
		client, out, err = proxy.Forward(r.Header, peer, scheme, r.Host)
		if err != nil {
			h.logger.Debug("forwarded headers from a trusted proxy are malformed: none believed",
				zap.String("peer", peer.String()), zap.Error(err))
		}
	}
	h.stripper.Strip(r.Header, proxy.Trusted(peer))

	clientIP := client.Node.Addr
	if !clientIP.IsValid() {
		// A client that is not an IP is the proxy that reported it, as
		// Forward sends it: the nearest address anyone vouches for.
		clientIP = client.ReportedBy
	}
	clientIPText := clientIP.String()
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl != nil {
		repl.Set("http.forwarded.client_ip", clientIPText)
		repl.Set("http.forwarded.proto", out.XForwardedProto)
		repl.Set("http.forwarded.host", out.XForwardedHost)
	}
	if clientIP.IsValid() {
		caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, clientIPText)
	}

	// reverse_proxy appends the remote address to X-Forwarded-For and,
	// for a trusted peer, keeps X-Forwarded-Proto and -Host. So the last
	// entry of the chain becomes the remote address, the header keeps the
	// rest, and the peer is marked trusted: reverse_proxy then sends
	// exactly out.
	out.Set(r.Header)
	if xff := out.XForwardedFor; xff != "" {
		rest, last := "", xff
		if i := strings.LastIndex(xff, ", "); i >= 0 {
			rest, last = xff[:i], xff[i+2:]
		}
		if rest == "" {
			r.Header.Del("X-Forwarded-For")
		} else {
			r.Header["X-Forwarded-For"] = []string{rest}
		}
		// Only an IP can be the remote address: behind a unix socket,
		// whose peer has none, the client may have none either.
		if lastIP, err := netip.ParseAddr(last); err == nil && lastIP != peer {
			r = r.WithContext(r.Context()) // a shallow copy: the server's own request keeps the peer for its logs
			r.RemoteAddr = net.JoinHostPort(last, peerPort)
		}
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, true)
	return next.ServeHTTP(w, r)
}

// cloudflareClient returns the client Cloudflare names in CF-Connecting-IP,
// if the peer is one of its ranges and the header is one valid address.
func (h *Forwarded) cloudflareClient(r *http.Request, peer netip.Addr) (forwarded.Client, bool) {
	values := r.Header[headerCFConnecting]
	if h.cloudflare == nil || len(values) != 1 || !inRanges(peer, h.cloudflare, r) {
		return forwarded.Client{}, false
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(values[0]))
	if err != nil || addr.Zone() != "" {
		return forwarded.Client{}, false
	}
	proto, _ := forwarded.ParseXForwardedProto(r.Header["X-Forwarded-Proto"])
	return forwarded.Client{Node: forwarded.Node{Addr: addr.Unmap()}, Proto: proto, Host: r.Host, ReportedBy: peer}, true
}

// serverRanges returns the server's trusted_proxies source: the same
// instance the server uses, read once per server. Caddy keeps it
// unexported; if a Caddy version renames it, only the server's verdict on
// the peer is used, and that is logged once.
func (h *Forwarded) serverRanges(r *http.Request) caddyhttp.IPRangeSource {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil {
		return nil
	}
	if v, ok := h.servers.Load(srv); ok {
		src, _ := v.(caddyhttp.IPRangeSource)
		return src
	}
	src, ok := trustedProxiesOf(srv)
	if !ok {
		h.logger.Warn("cannot read the server's trusted_proxies (another Caddy version?): only its verdict on the peer is used; list further proxies in forwarded's own trusted_proxies")
	}
	v, _ := h.servers.LoadOrStore(srv, src)
	src, _ = v.(caddyhttp.IPRangeSource)
	return src
}

var ipRangeSourceType = reflect.TypeOf((*caddyhttp.IPRangeSource)(nil)).Elem()

// trustedProxiesOf reads Server.trustedProxies.
func trustedProxiesOf(srv *caddyhttp.Server) (caddyhttp.IPRangeSource, bool) {
	f := reflect.ValueOf(srv).Elem().FieldByName("trustedProxies")
	if !f.IsValid() || f.Type() != ipRangeSourceType {
		return nil, false
	}
	return *(*caddyhttp.IPRangeSource)(unsafe.Pointer(f.UnsafeAddr())), true
}

func inRanges(a netip.Addr, src caddyhttp.IPRangeSource, r *http.Request) bool {
	if src == nil || !a.IsValid() {
		return false
	}
	for _, p := range src.GetIPRanges(r) {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteAddr splits a request's remote address into the peer (unmapped,
// without zone; invalid for a unix socket) and its port.
func remoteAddr(s string) (netip.Addr, string) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, "0"
	}
	host, _, _ = strings.Cut(host, "%")
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, port
	}
	return a.Unmap(), port
}

// parseForwarded parses the directive. Syntax:
//
//	forwarded [<matcher>] {
//		trusted_proxies <source> [<args...>]
//		cloudflare      <source> [<args...>]
//		inbound         x-forwarded|forwarded
//		proto           http|https
//		emit_forwarded
//		by              <ip|unknown|_name>
//		keep_chain
//		pass_from_trusted <header...>
//		strip_method_overrides
//	}
//
// <source> is an IP source module, as in the servers option's
// trusted_proxies: static <ranges...>, or cloudflare_ranges { … }.
func parseForwarded(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	f := new(Forwarded)
	return f, f.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile sets up the handler; see parseForwarded for the
// syntax.
func (h *Forwarded) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, h, nil, func(opt string) error {
		var err error
		switch opt {
		case "trusted_proxies":
			h.TrustedProxiesRaw, err = moduleArg(d, "http.ip_sources", "source")
		case "cloudflare":
			h.CloudflareRaw, err = moduleArg(d, "http.ip_sources", "source")
		case "inbound":
			err = stringArg(d, &h.Inbound)
		case "proto":
			err = stringArg(d, &h.Proto)
		case "emit_forwarded":
			h.EmitForwarded = true
		case "by":
			err = stringArg(d, &h.By)
		case "keep_chain":
			h.KeepChain = true
		case "pass_from_trusted":
			if h.PassFromTrusted = d.RemainingArgs(); len(h.PassFromTrusted) == 0 {
				err = d.ArgErr()
			}
		case "strip_method_overrides":
			h.StripMethodOverrides = true
		default:
			err = d.Errf("unrecognized forwarded option '%s'", opt)
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Forwarded)(nil)
	_ caddy.Validator             = (*Forwarded)(nil)
	_ caddyhttp.MiddlewareHandler = (*Forwarded)(nil)
	_ caddyfile.Unmarshaler       = (*Forwarded)(nil)
)
