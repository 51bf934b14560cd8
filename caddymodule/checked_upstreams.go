package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

func init() {
	caddy.RegisterModule(new(CheckedUpstreams))
}

// CheckedUpstreams is HAProxy's server checks for reverse_proxy: a
// dynamic upstream source that checks each of its servers as HAProxy's
// "check" does (a TCP connect check, or with check http HAProxy's option
// httpchk) and gives the proxy the servers that are up, in the order
// written. A server goes down after fall failed checks in a row and comes
// back after rise passed ones; it starts up and goes down at its first
// failed check, as in HAProxy. With none up the pool is empty and the
// proxy answers 503, as HAProxy does (after lb_try_duration, during which
// a server that comes up is used). Documented in docs/server-checks.md.
type CheckedUpstreams struct {
	// The servers, by dial address (host:port), in the order given to
	// the load balancing (lb_policy backup's first backup up is the first
	// written). Required.
	Servers []string `json:"servers,omitempty"`
	// How a server is checked: tcp, a connection established passes
	// (HAProxy's check without option httpchk); or http, a request on
	// that connection whose answer must be 2xx or 3xx, or expect_status
	// (option httpchk). Default: tcp.
	Check string `json:"check,omitempty"`
	// The HTTP check's method. Default: OPTIONS, as HAProxy's.
	Method string `json:"method,omitempty"`
	// The HTTP check's URI (path and query, or *). Default: /.
	URI string `json:"uri,omitempty"`
	// The HTTP check's Host header. Default: the server's address.
	Host string `json:"host,omitempty"`
	// The one status that passes an HTTP check (http-check expect
	// status). Default: any 2xx or 3xx.
	ExpectStatus int `json:"expect_status,omitempty"`
	// Time from the end of a server's check to its next (HAProxy's
	// inter). Default: 2s.
	Interval caddy.Duration `json:"interval,omitempty"`
	// The interval while a server is going up or down, or not checked
	// yet (fastinter). Default: interval.
	FastInterval caddy.Duration `json:"fast_interval,omitempty"`
	// The interval while a server is down (downinter). Default: interval.
	DownInterval caddy.Duration `json:"down_interval,omitempty"`
	// Bound of a check, connection and answer; with connect_timeout, of
	// the answer from the connection on (HAProxy's timeout check).
	// Default: interval, as HAProxy without timeout check.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Bound of a check's connection alone. Default: none, timeout
	// bounds it.
	ConnectTimeout caddy.Duration `json:"connect_timeout,omitempty"`
	// Failed checks in a row that take an up server down. Default: 3.
	Fall int `json:"fall,omitempty"`
	// Passed checks in a row that bring a down server up. Default: 2.
	Rise int `json:"rise,omitempty"`

	checker *healthcheck.ServerChecker
	key     string
}

// CaddyModule returns the Caddy module information.
func (*CheckedUpstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.upstreams.checked", New: func() caddy.Module { return new(CheckedUpstreams) }}
}

const checkedModule = "dynamic checked"

// setDefaults fills in HAProxy's defaults.
func (u *CheckedUpstreams) setDefaults() {
	if u.Check == "" {
		u.Check = "tcp"
	}
	c := u.serverCheck().WithDefaults()
	u.Interval, u.Timeout, u.Fall, u.Rise = caddy.Duration(c.Interval), caddy.Duration(c.Timeout), c.Fall, c.Rise
	if c.HTTP != nil {
		u.Method, u.URI = c.HTTP.Method, c.HTTP.URI
	}
}

// serverCheck is the check as the healthcheck package takes it.
func (u *CheckedUpstreams) serverCheck() healthcheck.ServerCheck {
	c := healthcheck.ServerCheck{
		Interval:       time.Duration(u.Interval),
		FastInterval:   time.Duration(u.FastInterval),
		DownInterval:   time.Duration(u.DownInterval),
		Timeout:        time.Duration(u.Timeout),
		ConnectTimeout: time.Duration(u.ConnectTimeout),
		Fall:           u.Fall,
		Rise:           u.Rise,
	}
	if u.Check == "http" {
		c.HTTP = &healthcheck.HTTPCheck{Method: u.Method, URI: u.URI, Host: u.Host, ExpectStatus: u.ExpectStatus}
	}
	return c
}

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (u *CheckedUpstreams) Validate() error {
	if len(u.Servers) == 0 {
		return badSetting(checkedModule, "servers", "names no server")
	}
	seen := map[string]bool{}
	for _, s := range u.Servers {
		if seen[s] {
			return badSetting(checkedModule, "servers", "names %s twice", s)
		}
		seen[s] = true
		addr, err := caddy.ParseNetworkAddress(s)
		if err != nil || strings.ContainsAny(s, "/{") || addr.Network != "tcp" || addr.StartPort == 0 || addr.PortRangeSize() != 1 {
			return badSetting(checkedModule, "servers", "%q is not a server's host:port (no scheme, network or placeholder: the checks dial it ahead of requests)", s)
		}
	}
	switch u.Check {
	case "", "tcp":
		for _, f := range []struct {
			field string
			set   bool
		}{{"method", u.Method != ""}, {"uri", u.URI != ""}, {"host", u.Host != ""}, {"expect_status", u.ExpectStatus != 0}} {
			if f.set {
				return badSetting(checkedModule, f.field, "is a setting of check http, not of check tcp")
			}
		}
	case "http":
	default:
		return badSetting(checkedModule, "check", "must be tcp or http, not %q", u.Check)
	}
	if bad, ok := errors.AsType[*healthcheck.SettingError](u.serverCheck().Validate()); ok {
		return badSetting(checkedModule, bad.Setting, "%s", bad.Problem)
	}
	return nil
}

// checkers holds, per check (its settings, whatever the servers), the
// newest config's checker: a reload's new checker starts each server it
// shares with the last one in the state the last one's checks gave it,
// rather than up at once, as HAProxy's load-server-state-from-file does.
var checkers sync.Map // check key → *healthcheck.ServerChecker

// Provision starts the checks, one loop per server; Cleanup stops them.
func (u *CheckedUpstreams) Provision(ctx caddy.Context) error {
	u.setDefaults()
	if err := u.Validate(); err != nil {
		return err
	}
	if h := enclosingProxy(ctx); h != nil && h.HealthChecks != nil && h.HealthChecks.Active != nil {
		return errors.New("dynamic checked: the reverse_proxy's active health checks (health_uri, health_port, …) never run on dynamic upstreams: set the check in dynamic checked instead")
	}
	check := u.serverCheck()
	key, err := json.Marshal(check)
	if err != nil {
		return err
	}
	u.key = string(key)
	var health func(string) (int, bool)
	if last, ok := checkers.Load(u.key); ok {
		health = last.(*healthcheck.ServerChecker).Health
	}
	obs := &checkLogger{logger: ctx.Logger()}
	if u.checker, err = healthcheck.NewServerChecker(u.Servers, check, health, obs); err != nil {
		return err
	}
	obs.checker = u.checker
	u.checker.Start()
	checkers.Store(u.key, u.checker)
	return nil
}

// Cleanup stops the checks.
func (u *CheckedUpstreams) Cleanup() error {
	if u.checker != nil {
		u.checker.Close()
		checkers.CompareAndDelete(u.key, u.checker)
	}
	return nil
}

// GetUpstreams returns the servers that are up, in the order written;
// none when none is up.
func (u *CheckedUpstreams) GetUpstreams(*http.Request) ([]*reverseproxy.Upstream, error) {
	up := u.checker.Up()
	upstreams := make([]*reverseproxy.Upstream, len(up))
	for i, addr := range up {
		upstreams[i] = &reverseproxy.Upstream{Dial: addr}
	}
	return upstreams, nil
}

// checkLogger logs a checker's events as HAProxy does: a server that goes
// down or up, and a pool left with no server up.
type checkLogger struct {
	logger  *zap.Logger
	checker *healthcheck.ServerChecker
}

func (l *checkLogger) Checked(addr string, r healthcheck.CheckResult, up, changed bool) {
	switch {
	case !changed:
	case up:
		l.logger.Info("server is up", zap.String("server", addr), zap.Duration("check_duration", r.Duration))
	default:
		l.logger.Warn("server is down", zap.String("server", addr), zap.Int("status", r.Status), zap.Error(r.Err),
			zap.Int("servers_up", len(l.checker.Up())))
		if len(l.checker.Up()) == 0 {
			l.logger.Error("no server is up: requests are answered 503")
		}
	}
}

func (l *checkLogger) Panicked(addr string, v any, stack []byte) {
	panicLogger(l.logger, "check of "+addr)(v, stack)
}

// checkedServers returns the servers of a reverse_proxy's dynamic
// upstreams if they are dynamic checked ones.
func checkedServers(raw json.RawMessage) ([]string, bool) {
	var src struct {
		Source  string   `json:"source"`
		Servers []string `json:"servers"`
	}
	if json.Unmarshal(raw, &src) != nil || src.Source != "checked" {
		return nil, false
	}
	return src.Servers, true
}

// UnmarshalCaddyfile sets up the source. Syntax:
//
//	dynamic checked {
//		servers         <host:port>...
//		check           tcp|http
//		method          <method>
//		uri             <uri>
//		host            <host>
//		expect_status   <status>
//		interval        <duration>
//		fast_interval   <duration>
//		down_interval   <duration>
//		timeout         <duration>
//		connect_timeout <duration>
//		fall            <n>
//		rise            <n>
//	}
func (u *CheckedUpstreams) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, u, nil, func(opt string) error {
		var err error
		switch opt {
		case "servers":
			if u.Servers = d.RemainingArgs(); len(u.Servers) == 0 {
				err = d.ArgErr()
			}
		case "check":
			err = stringArg(d, &u.Check)
		case "method":
			err = stringArg(d, &u.Method)
		case "uri":
			err = stringArg(d, &u.URI)
		case "host":
			err = stringArg(d, &u.Host)
		case "expect_status":
			var s string
			if err = stringArg(d, &s); err == nil {
				if u.ExpectStatus, err = strconv.Atoi(s); err != nil {
					err = d.Errf("expect_status must be an HTTP status, got %s", s)
				}
			}
		case "interval":
			err = durationArg(d, opt, &u.Interval)
		case "fast_interval":
			err = durationArg(d, opt, &u.FastInterval)
		case "down_interval":
			err = durationArg(d, opt, &u.DownInterval)
		case "timeout":
			err = durationArg(d, opt, &u.Timeout)
		case "connect_timeout":
			err = durationArg(d, opt, &u.ConnectTimeout)
		case "fall":
			err = countArg(d, opt, &u.Fall)
		case "rise":
			err = countArg(d, opt, &u.Rise)
		default:
			err = d.Errf("unrecognized dynamic checked option '%s'", opt)
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*CheckedUpstreams)(nil)
	_ caddy.Validator             = (*CheckedUpstreams)(nil)
	_ caddy.CleanerUpper          = (*CheckedUpstreams)(nil)
	_ reverseproxy.UpstreamSource = (*CheckedUpstreams)(nil)
	_ caddyfile.Unmarshaler       = (*CheckedUpstreams)(nil)
)
