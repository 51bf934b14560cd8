package caddymodule

import (
	"net"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-ha/caddy-ha/connlimit"
)

func init() {
	caddy.RegisterModule(MaxConnections{})
}

// MaxConnections is a listener wrapper that bounds the connections a
// server has open at once, as HAProxy's maxconn does: while Max are open
// the server does not accept, so the next connection waits in the
// kernel's listen backlog, and it is accepted once one of them closes. A
// connection counts from its accept until it closes, idle kept-alive ones
// included; an HTTP/2 connection counts once. Put it before the tls
// placeholder: it counts TCP connections, before any TLS handshake.
type MaxConnections struct {
	// Most connections open at once, across the server's listeners (and
	// those of the group). Required, at least 1.
	Max int `json:"max,omitempty"`

	// Wrappers that name one group, in any server of the configuration,
	// share one count: HAProxy's global maxconn across every frontend, a
	// frontend's across its binds. They must give the same max. A reload
	// that keeps a group's max keeps counting the connections the old
	// configuration has open until they close. Default: none (the
	// wrapper's own count, across its server's listeners).
	Group string `json:"group,omitempty"`

	limit *connlimit.Limit
	owner any // the configuration that uses Group
}

// maxConnectionGroups are the groups of every configuration in the
// process: a reload's new one finds the old one's there.
var maxConnectionGroups connlimit.Groups

// CaddyModule returns the Caddy module information.
func (MaxConnections) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.max_connections",
		New: func() caddy.Module { return new(MaxConnections) },
	}
}

const maxConnectionsModule = "max_connections"

// Validate checks the settings.
func (m *MaxConnections) Validate() error {
	if m.Max < 1 {
		return badSetting(maxConnectionsModule, "max", "must be at least 1, got %d", m.Max)
	}
	return nil
}

// Provision sets up the count, or joins the group's.
func (m *MaxConnections) Provision(ctx caddy.Context) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Group == "" {
		m.limit = connlimit.New(m.Max)
		return nil
	}
	// A configuration's context is done when it is unloaded: its channel
	// names the configuration.
	m.owner = ctx.Done()
	if m.owner == (<-chan struct{})(nil) {
		m.owner = new(byte) // a context that is never done: one of its own
	}
	limit, err := maxConnectionGroups.Use(m.Group, m.Max, m.owner)
	if err != nil {
		return badSetting(maxConnectionsModule, "group", "%v", err)
	}
	m.limit = limit
	return nil
}

// Cleanup leaves the group; the connections still open keep counting.
func (m *MaxConnections) Cleanup() error {
	if m.Group != "" && m.limit != nil {
		maxConnectionGroups.Release(m.Group, m.limit, m.owner)
	}
	return nil
}

// WrapListener wraps one of the server's listeners.
func (m *MaxConnections) WrapListener(ln net.Listener) net.Listener {
	return m.limit.Wrap(ln)
}

// UnmarshalCaddyfile sets up the wrapper from Caddyfile tokens. Syntax:
//
//	servers {
//		listener_wrappers {
//			max_connections <max> {
//				group <name>
//			}
//			tls
//		}
//	}
func (m *MaxConnections) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the wrapper's name
	if err := countArg(d, "max", &m.Max); err != nil {
		return err
	}
	if err := noMoreArgs(d, maxConnectionsModule); err != nil {
		return err
	}
	lines, err := parseOptions(d, func(opt string) error {
		switch opt {
		case "group":
			return stringArg(d, &m.Group)
		default:
			return d.Errf("unrecognized max_connections option '%s'", opt)
		}
	})
	if err != nil {
		return err
	}
	return validatedAt(d, lines, nil, m.Validate())
}

// Interface guards
var (
	_ caddy.Provisioner     = (*MaxConnections)(nil)
	_ caddy.Validator       = (*MaxConnections)(nil)
	_ caddy.CleanerUpper    = (*MaxConnections)(nil)
	_ caddy.ListenerWrapper = (*MaxConnections)(nil)
	_ caddyfile.Unmarshaler = (*MaxConnections)(nil)
)
