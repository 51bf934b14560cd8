package caddymodule

import (
	"net"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/handoff"
)

func init() {
	caddy.RegisterModule(ReloadHandoff{})
}

// ReloadHandoff is a listener wrapper that makes a config reload cost no
// request on kept-alive HTTP/1 connections. When a reload stops the old
// server, Go closes its idle kept-alive connections at once, while their
// clients may be sending the next request on them (HAProxy's answer is
// idle-close-on-response). With this wrapper the old server hands each such
// connection to the new config's server on the same address instead, with
// any request it read but dropped, and the new server answers it. A
// connection is handed off only while the old server holds none of its
// requests unanswered, and never one whose client pipelines (the old
// server may hold its next request in its read buffer) or that was told
// Connection: close: those close as before. The old config's connections
// leave it at once, so a reload never waits on an idle client.
//
// It hands off HTTP/1 connections, plain or over TLS: after the tls
// placeholder, where Caddy puts it by default, it wraps each *tls.Conn in
// a connection that gives the server its ConnectionState, and the TLS
// session moves with it. HTTP/2 and upgraded connections close as before.
type ReloadHandoff struct{}

// CaddyModule returns the Caddy module information.
func (ReloadHandoff) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.reload_handoff",
		New: func() caddy.Module { return new(ReloadHandoff) },
	}
}

// reloadHandoffs knows every wrapped listener of the process, across
// configs: a closing one finds its successor there.
var reloadHandoffs = handoff.NewRegistry()

func init() {
	reloadHandoffs.HandedOff = handedOffConns.Inc
	reloadHandoffs.Closed = reloadClosedConns.Inc
	reloadHandoffs.Panicked = func(v any, stack []byte) {
		caddy.Log().Named("reload_handoff").Error("accept loop panicked", zap.Any("error", v), zap.ByteString("stack", stack))
	}
	reloadHandoffs.Drained = logDrain
}

// logDrain tells, once per listener a reload (or a stop) closed, what
// became of its connections: a reload's cost, in one line.
func logDrain(d handoff.Drain) {
	caddy.Log().Named("reload_handoff").Info("replaced server's connections are gone",
		zap.String("address", d.Addr.String()),
		zap.Int64("open_at_close", d.OpenAtClose),
		zap.Int64("handed_off", d.HandedOff),
		zap.Int64("closed", d.Closed),
		zap.Duration("took", d.Took))
}

// Provision registers the wrapper's metric.
func (*ReloadHandoff) Provision(ctx caddy.Context) error {
	return registerMetrics(ctx.GetMetricsRegistry())
}

// WrapListener wraps a server's listener.
func (*ReloadHandoff) WrapListener(ln net.Listener) net.Listener {
	return reloadHandoffs.Wrap(ln)
}

// UnmarshalCaddyfile sets up the wrapper; it has no options. Syntax:
//
//	servers {
//		listener_wrappers {
//			reload_handoff
//		}
//	}
func (*ReloadHandoff) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the wrapper's name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("reload_handoff takes no options, got '%s'", d.Val())
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner     = (*ReloadHandoff)(nil)
	_ caddy.ListenerWrapper = (*ReloadHandoff)(nil)
	_ caddyfile.Unmarshaler = (*ReloadHandoff)(nil)
)
