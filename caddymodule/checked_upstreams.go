package caddymodule

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/healthcheck"
	"github.com/caddy-ha/caddy-ha/poolcount"
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
	// (option httpchk); or none, every server is up (a server without
	// check: with resolve, the names' addresses as they resolve).
	// Default: tcp.
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
	// The answer that passes an HTTP check instead of expect_status's
	// (HAProxy's other http-check expect rules): its status among codes
	// and ranges, its status or body matching a regular expression, its
	// body holding a string; negated or not. Default: none.
	Expect *healthcheck.Expect `json:"expect,omitempty"`
	// A 404 from a server that is up passes the HTTP check and takes the
	// server out of the pool until an answer that passes (HAProxy's
	// http-check disable-on-404). Default: off.
	DisableOn404 bool `json:"disable_on_404,omitempty"`
	// The checks speak TLS with these settings (HAProxy's check-ssl,
	// which a server's ssl implies): a TCP check passes once the
	// handshake completes, an HTTP check's request goes over it. The
	// settings are reverse_proxy's transport http tls ones, with their
	// names and meanings: ca (tls_trust_pool), server_name
	// (tls_server_name: the name sent as SNI and verified; default the
	// server's host), insecure_skip_verify (tls_insecure_skip_verify),
	// and in JSON the client certificate, renegotiation and curves;
	// handshake_timeout and except_ports are refused (the check's
	// timeout bounds its handshake; every server is checked alike). The
	// proxy's requests take the transport's own tls settings. Default:
	// none, plain TCP.
	TLS *reverseproxy.TLSConfig `json:"tls,omitempty"`
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

	// Resolve are servers named by DNS, instead of servers: resolved
	// when the source starts and every refresh, as HAProxy's resolvers
	// resolve a server's name (or a server-template's slots) at run
	// time; each address found is a server, checked as the others.
	Resolve []ResolvedName `json:"resolve,omitempty"`
	// The DNS servers (host:port) that resolve them, asked in turn until
	// one answers (HAProxy's nameserver lines). Default: the system's
	// resolver (/etc/resolv.conf).
	Resolvers []string `json:"resolvers,omitempty"`
	// Time between two resolutions (HAProxy's hold valid). Default: 10s.
	Refresh caddy.Duration `json:"refresh,omitempty"`
	// Bound of one name's lookups by one DNS server (HAProxy's timeout
	// resolve). Default: 1s.
	ResolveTimeout caddy.Duration `json:"resolve_timeout,omitempty"`
	// A name's IPv4 addresses, its IPv6 ones only where it has none;
	// without it the other way round (HAProxy's resolve-prefer).
	PreferIPv4 bool `json:"prefer_ipv4,omitempty"`
	// Two names may give one IP address (resolve-opts allow-dup-ip);
	// without it an address an earlier name gave is skipped.
	AllowDupIP bool `json:"allow_dup_ip,omitempty"`
	// Name publishes the count of servers up under that name, which the
	// usable_servers matcher and CEL function read (HAProxy's nbsrv of
	// the backend). Default: none, unpublished.
	Name string `json:"name,omitempty"`

	checker   *healthcheck.ServerChecker
	tls       *tls.Config // TLS's, as the checks take it
	key       string
	resolver  *healthcheck.Resolver
	stop      context.CancelFunc
	following sync.WaitGroup
	withdraw  func() // Name's publication (nil: none)
}

// ResolvedName is a server named by DNS: a host name and the port of its
// addresses, or an SRV name (_service._proto.name, no port), whose
// records give the targets and their ports; at most slots addresses.
type ResolvedName struct {
	Name  string `json:"name"`
	Port  string `json:"port,omitempty"`
	Slots int    `json:"slots,omitempty"` // default 1
}

// HAProxy 2.6's resolvers defaults (configuration.txt, 5.3.2).
const (
	defaultRefresh        = 10 * time.Second // hold valid
	defaultResolveTimeout = time.Second      // timeout resolve
)

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
	if u.Refresh == 0 {
		u.Refresh = caddy.Duration(defaultRefresh)
	}
	if u.ResolveTimeout == 0 {
		u.ResolveTimeout = caddy.Duration(defaultResolveTimeout)
	}
	for i := range u.Resolve {
		if u.Resolve[i].Slots == 0 {
			u.Resolve[i].Slots = 1
		}
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
		Off:            u.Check == "none",
		Interval:       time.Duration(u.Interval),
		FastInterval:   time.Duration(u.FastInterval),
		DownInterval:   time.Duration(u.DownInterval),
		Timeout:        time.Duration(u.Timeout),
		ConnectTimeout: time.Duration(u.ConnectTimeout),
		Fall:           u.Fall,
		Rise:           u.Rise,
	}
	if u.TLS != nil {
		c.TLS = cmp.Or(u.tls, new(tls.Config))
	}
	if u.Check == "http" {
		c.HTTP = &healthcheck.HTTPCheck{Method: u.Method, URI: u.URI, Host: u.Host, ExpectStatus: u.ExpectStatus, Expect: u.Expect, DisableOn404: u.DisableOn404}
	}
	return c
}

// Validate checks the settings, unset ones at their defaults: Caddy calls
// it after Provision, the Caddyfile adapter after the block.
func (u *CheckedUpstreams) Validate() error {
	if err := u.validateServers(); err != nil {
		return err
	}
	if err := u.validateResolve(); err != nil {
		return err
	}
	switch u.Check {
	case "", "tcp", "none":
		for _, f := range []struct {
			field string
			set   bool
		}{{"method", u.Method != ""}, {"uri", u.URI != ""}, {"host", u.Host != ""}, {"expect_status", u.ExpectStatus != 0}, {"expect", u.Expect != nil}, {"disable_on_404", u.DisableOn404}} {
			if f.set {
				return badSetting(checkedModule, f.field, "is a setting of check http, not of check %s", cmp.Or(u.Check, "tcp"))
			}
		}
	case "http":
	default:
		return badSetting(checkedModule, "check", "must be tcp, http or none, not %q", u.Check)
	}
	if err := u.validateTLS(); err != nil {
		return err
	}
	if bad, ok := errors.AsType[*healthcheck.SettingError](u.serverCheck().Validate()); ok {
		return badSetting(checkedModule, bad.Setting, "%s", bad.Problem)
	}
	return nil
}

// validateTLS refuses the checks' TLS settings that do not apply to a
// check.
func (u *CheckedUpstreams) validateTLS() error {
	switch t := u.TLS; {
	case t == nil:
	case u.Check == "none":
		return badSetting(checkedModule, "tls", "is a setting of check tcp or http, not of check none (no server is checked)")
	case t.HandshakeTimeout != 0:
		return badSetting(checkedModule, "tls", "handshake_timeout: the check's timeout bounds its handshake")
	case len(t.ExceptPorts) > 0:
		return badSetting(checkedModule, "tls", "except_ports: every server's check speaks TLS alike")
	}
	return nil
}

// validateServers checks the servers' dial addresses: some, or names to
// resolve.
func (u *CheckedUpstreams) validateServers() error {
	if len(u.Servers) == 0 && len(u.Resolve) == 0 {
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
	return nil
}

// validateResolve checks the settings of servers named by DNS.
func (u *CheckedUpstreams) validateResolve() error {
	if len(u.Resolve) > 0 && len(u.Servers) > 0 {
		return badSetting(checkedModule, "resolve", "takes the place of servers: write one of them")
	}
	for _, n := range u.Resolve {
		if err := n.validate(); err != nil {
			return err
		}
	}
	for _, ns := range u.Resolvers {
		if _, _, err := net.SplitHostPort(ns); err != nil {
			return badSetting(checkedModule, "resolvers", "%q is not a DNS server's host:port", ns)
		}
	}
	if u.Refresh < 0 || u.ResolveTimeout < 0 {
		return badSetting(checkedModule, "refresh", "refresh and resolve_timeout must be positive")
	}
	return nil
}

// validate checks a name and its port and slots.
func (n ResolvedName) validate() error {
	srv := strings.HasPrefix(n.Name, "_")
	switch port, err := strconv.Atoi(n.Port); {
	case n.Name == "" || strings.ContainsAny(n.Name, ":/{ "):
		return badSetting(checkedModule, "resolve", "%q is not a DNS name", n.Name)
	case srv && n.Port != "":
		return badSetting(checkedModule, "resolve", "%s is an SRV name, whose records give the port: write it without one", n.Name)
	case !srv && (err != nil || port < 1 || port > 65535):
		return badSetting(checkedModule, "resolve", "%s needs a port (1 to 65535), not %q", n.Name, n.Port)
	case n.Slots < 0:
		return badSetting(checkedModule, "resolve", "%s: slots must be at least 1", n.Name)
	}
	return nil
}

// resolving is how the names are resolved, as the healthcheck package
// takes it.
func (u *CheckedUpstreams) resolving() ([]healthcheck.ResolvedServer, healthcheck.Resolving) {
	names := make([]healthcheck.ResolvedServer, len(u.Resolve))
	for i, n := range u.Resolve {
		names[i] = healthcheck.ResolvedServer{Name: n.Name, Port: n.Port, Slots: n.Slots}
	}
	return names, healthcheck.Resolving{Nameservers: u.Resolvers, PreferIPv4: u.PreferIPv4, AllowDupIP: u.AllowDupIP, Timeout: time.Duration(u.ResolveTimeout)}
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
	// The key before the TLS is loaded, which empties its ca.
	key, err := json.Marshal(struct {
		Check healthcheck.ServerCheck
		TLS   *reverseproxy.TLSConfig // the check's TLS, not in its JSON
	}{u.serverCheck(), u.TLS})
	if err != nil {
		return err
	}
	u.key = string(key)
	if u.TLS != nil {
		if u.tls, err = u.TLS.MakeTLSClientConfig(ctx); err != nil {
			return badSetting(checkedModule, "tls", "cannot be loaded: %v", err)
		}
	}
	check := u.serverCheck()
	var health func(string) (int, bool)
	if last, ok := checkers.Load(u.key); ok {
		health = last.(*healthcheck.ServerChecker).Health
	}
	obs := &checkLogger{logger: ctx.Logger()}
	if u.checker, err = healthcheck.NewServerChecker(u.Servers, check, health, obs); err != nil {
		return err
	}
	obs.checker = u.checker
	u.startResolving(ctx)
	u.checker.Start()
	checkers.Store(u.key, u.checker)
	if u.Name != "" {
		u.withdraw = poolcount.Publish(u.Name, u.checker)
	}
	return nil
}

// startResolving resolves the names once before the checks start (as
// HAProxy resolves a server's name before it serves, by libc), then
// every refresh through the resolvers; a name that does not resolve is
// no server until it does (HAProxy's init-addr none).
func (u *CheckedUpstreams) startResolving(ctx caddy.Context) {
	if len(u.Resolve) == 0 {
		return
	}
	names, how := u.resolving()
	u.resolver = healthcheck.NewResolver(how)
	var follow context.Context
	follow, u.stop = context.WithCancel(context.Background())
	u.checker.SetServers(u.resolver.Resolve(ctx, names))
	u.following.Add(1)
	go func() {
		defer u.following.Done()
		u.resolver.Follow(follow, names, time.Duration(u.Refresh), u.checker.SetServers)
	}()
}

// Cleanup withdraws the published count (if any) and stops the checks.
func (u *CheckedUpstreams) Cleanup() error {
	if u.withdraw != nil {
		u.withdraw()
	}
	if u.stop != nil {
		u.stop()
		u.following.Wait()
	}
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
		msg := "server is down"
		if r.Drained {
			msg = "server is drained: its check answered 404 (disable_on_404), it gets no request until a check passes otherwise"
		}
		l.logger.Warn(msg, zap.String("server", addr), zap.Int("status", r.Status), zap.Error(r.Err),
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
//		check           tcp|http|none
//		method          <method>
//		uri             <uri>
//		host            <host>
//		expect_status   <status>
//		expect          [!] status|rstatus|string|rstring <pattern>
//		disable_on_404
//		tls
//		tls_insecure_skip_verify
//		tls_server_name <name>
//		tls_trust_pool  <module> ...
//		interval        <duration>
//		fast_interval   <duration>
//		down_interval   <duration>
//		timeout         <duration>
//		connect_timeout <duration>
//		fall            <n>
//		rise            <n>
//		resolve         <name>[:<port>] [<slots>]
//		resolvers       <host:port>...
//		refresh         <duration>
//		resolve_timeout <duration>
//		prefer_ipv4
//		allow_dup_ip
//		name            <name>
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
		case "expect", "disable_on_404":
			err = u.unmarshalExpect(d, opt)
		case "tls", "tls_insecure_skip_verify", "tls_server_name", "tls_trust_pool":
			err = u.unmarshalTLS(d, opt)
		case "interval", "fast_interval", "down_interval", "timeout", "connect_timeout", "refresh", "resolve_timeout":
			err = durationArg(d, opt, u.durations()[opt])
		case "fall":
			err = countArg(d, opt, &u.Fall)
		case "rise":
			err = countArg(d, opt, &u.Rise)
		case "resolve", "resolvers", "prefer_ipv4", "allow_dup_ip":
			err = u.unmarshalResolve(d, opt)
		case "name":
			err = stringArg(d, &u.Name)
		default:
			err = d.Errf("unrecognized dynamic checked option '%s'", opt)
		}
		return err
	})
}

// unmarshalExpect reads expect [!] <match> <pattern>, or disable_on_404.
func (u *CheckedUpstreams) unmarshalExpect(d *caddyfile.Dispenser, opt string) error {
	args := d.RemainingArgs()
	if opt == "disable_on_404" {
		u.DisableOn404 = true
		if len(args) > 0 {
			return d.ArgErr()
		}
		return nil
	}
	e := &healthcheck.Expect{}
	if len(args) > 0 && args[0] == "!" {
		e.Negate, args = true, args[1:]
	}
	if len(args) != 2 {
		return d.Errf("expect takes [!] status|rstatus|string|rstring <pattern>")
	}
	e.Match, e.Pattern = args[0], args[1]
	u.Expect = e
	return nil
}

// unmarshalTLS reads an option of the checks' TLS, as reverse_proxy's
// transport http reads it; each tls_* option after tls.
func (u *CheckedUpstreams) unmarshalTLS(d *caddyfile.Dispenser, opt string) error {
	if opt == "tls" {
		u.TLS = new(reverseproxy.TLSConfig)
		return nil
	}
	if u.TLS == nil {
		return d.Errf("%s is a setting of the checks' tls: write tls before it", opt)
	}
	switch opt {
	case "tls_insecure_skip_verify":
		u.TLS.InsecureSkipVerify = true
	case "tls_server_name":
		return stringArg(d, &u.TLS.ServerName)
	case "tls_trust_pool":
		if !d.NextArg() {
			return d.ArgErr()
		}
		stem := d.Val()
		pool, err := caddyfile.UnmarshalModule(d, "tls.ca_pool.source."+stem)
		if err != nil {
			return err
		}
		if _, ok := pool.(caddytls.CA); !ok {
			return d.Errf("module tls.ca_pool.source.%s is not a certificate pool", stem)
		}
		u.TLS.CARaw = caddyconfig.JSONModuleObject(pool, "provider", stem, nil)
	}
	return nil
}

// durations are the duration settings, by option.
func (u *CheckedUpstreams) durations() map[string]*caddy.Duration {
	return map[string]*caddy.Duration{"interval": &u.Interval, "fast_interval": &u.FastInterval, "down_interval": &u.DownInterval,
		"timeout": &u.Timeout, "connect_timeout": &u.ConnectTimeout, "refresh": &u.Refresh, "resolve_timeout": &u.ResolveTimeout}
}

// unmarshalResolve reads an option of the servers named by DNS.
func (u *CheckedUpstreams) unmarshalResolve(d *caddyfile.Dispenser, opt string) error {
	args := d.RemainingArgs()
	switch opt {
	case "resolve":
		if len(args) < 1 || len(args) > 2 {
			return d.ArgErr()
		}
		n := ResolvedName{Name: args[0]}
		if host, port, err := net.SplitHostPort(args[0]); err == nil {
			n.Name, n.Port = host, port
		}
		if len(args) == 2 {
			slots, err := strconv.Atoi(args[1])
			if err != nil || slots < 1 {
				return d.Errf("resolve: slots must be a whole number from 1, got %s", args[1])
			}
			n.Slots = slots
		}
		u.Resolve = append(u.Resolve, n)
	case "resolvers":
		if u.Resolvers = args; len(args) == 0 {
			return d.ArgErr()
		}
	case "prefer_ipv4", "allow_dup_ip":
		if len(args) != 0 {
			return d.ArgErr()
		}
		*map[string]*bool{"prefer_ipv4": &u.PreferIPv4, "allow_dup_ip": &u.AllowDupIP}[opt] = true
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*CheckedUpstreams)(nil)
	_ caddy.Validator             = (*CheckedUpstreams)(nil)
	_ caddy.CleanerUpper          = (*CheckedUpstreams)(nil)
	_ reverseproxy.UpstreamSource = (*CheckedUpstreams)(nil)
	_ caddyfile.Unmarshaler       = (*CheckedUpstreams)(nil)
)
