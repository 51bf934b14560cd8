package caddymodule

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-ha/caddy-ha/inflight"
)

func init() {
	caddy.RegisterModule(InFlight{})
	httpcaddyfile.RegisterHandlerDirective(inFlightModule, parseInFlight)
	httpcaddyfile.RegisterDirectiveOrder(inFlightModule, httpcaddyfile.After, "tracing")
}

// InFlight counts, per client address, the requests in progress at once,
// as HAProxy's conn_cur of a stick table that http-request track-sc<n>
// src fills: a request counts from this handler until the rest of the
// route has answered it (a WebSocket's until its tunnel closes), the
// request itself included. The count of the request's client is in
// {http.in_flight.count}, for a later matcher, e.g.
// expression `{http.in_flight.count} > 20`.
//
// The client is the connection's peer (r.RemoteAddr), HAProxy's src:
// behind the proxy_protocol listener wrapper, the address of its header.
// The count is this Caddy instance's, as HAProxy's table is its process's.
type InFlight struct {
	// Most client addresses counted at once (HAProxy's stick-table size).
	// An address with nothing in progress holds no place; a client the
	// full table has no place for is not counted: its count is 0, as a
	// full HAProxy table does not track it. Required, at least 1.
	Size int `json:"size,omitempty"`

	table *inflight.Table
}

// CaddyModule returns the Caddy module information.
func (InFlight) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.in_flight", New: func() caddy.Module { return new(InFlight) }}
}

const inFlightModule = "in_flight"

// inFlightCount is the placeholder of the request's client's count.
const inFlightCount = "http.in_flight.count"

// Validate checks the settings.
func (h *InFlight) Validate() error {
	if h.Size < 1 {
		return badSetting(inFlightModule, "size", "must be at least 1, got %d", h.Size)
	}
	return nil
}

// Provision sets up the table: a configuration counts afresh, as a
// reloaded HAProxy does, and the old one's requests still in progress end
// in the old table (there is nothing to clean up: no goroutine, no file).
func (h *InFlight) Provision(caddy.Context) error {
	if err := h.Validate(); err != nil {
		return err
	}
	h.table = inflight.New(h.Size)
	return nil
}

// ServeHTTP counts the request against its client until the rest of the
// route returns.
func (h *InFlight) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	count, end := 0, func() {}
	if addr, ok := clientAddr(r.RemoteAddr); ok {
		count, end = h.table.Enter(addr)
	}
	defer end()
	r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Set(inFlightCount, count)
	return next.ServeHTTP(w, r)
}

// clientAddr is the IP address of a connection's peer, host:port; a peer
// without one (a Unix socket) is not counted, as HAProxy's src has no IP
// address there to track.
func clientAddr(remote string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	addr, err := netip.ParseAddr(host)
	return addr.WithZone(""), err == nil
}

func parseInFlight(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	f := new(InFlight)
	return f, f.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	in_flight {
//		size <addresses>
//	}
func (h *InFlight) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, h, nil, func(opt string) error {
		switch opt {
		case "size":
			return countArg(d, "size", &h.Size)
		default:
			return d.Errf("unrecognized %s option '%s'", inFlightModule, opt)
		}
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*InFlight)(nil)
	_ caddy.Validator             = (*InFlight)(nil)
	_ caddyhttp.MiddlewareHandler = (*InFlight)(nil)
	_ caddyfile.Unmarshaler       = (*InFlight)(nil)
)
