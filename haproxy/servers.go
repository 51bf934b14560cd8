package haproxy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The bind and server options' registries: each option of a server (or
// default-server) line the adapter knows, once, with what it becomes and
// the code that reads it. An option not in it is refused.

// lineOption is an entry of the bind or server options' registry, whose
// reader takes T (a bind, or a server's options as they are read).
type lineOption[T any] struct {
	name   string
	value  bool // it takes a value: the next word
	status status
	doc    string
	read   func(into T, v string, at Line) error
}

type serverOption = lineOption[*serverReading]

var (
	serverOptions = indexOptions(serverOptionTable)
	bindOptions   = indexOptions(slices.Concat(bindOptionTable, bindTLSOptions))
)

func indexOptions[T any](table []lineOption[T]) map[string]*lineOption[T] {
	m := make(map[string]*lineOption[T], len(table))
	for i := range table {
		m[table[i].name] = &table[i]
	}
	return m
}

var bindOptionTable = []lineOption[*bind]{
	{name: "ssl", status: translated, doc: "an `https://` site", read: func(b *bind, _ string, _ Line) error { b.isTLS = true; return nil }},
	{name: "crt", value: true, status: translated, doc: "`tls <pem> <pem>` (a directory: `tls { load }`)", read: func(b *bind, v string, _ Line) error { b.crts = append(b.crts, v); return nil }},
	{name: "crt-list", value: true, status: translated, doc: crtListDoc, read: func(b *bind, v string, _ Line) error {
		b.crtLists = append(b.crtLists, crtListRef{path: v, at: len(b.crts)})
		return nil
	}},
	{name: "alpn", value: true, status: translated, doc: "`servers { protocols h1 [h2] }`: http/1.1 and h2 only", read: readBindALPN},
	{name: "accept-proxy", status: translated, doc: "the `proxy_protocol` listener wrapper (before `tls`) with `fallback_policy require`: the PROXY header (v1 or v2) from any peer, a connection without one closed, as HAProxy does; HAProxy waits `timeout client` for it, Caddy 5s", read: func(b *bind, _ string, _ Line) error { b.acceptProxy = true; return nil }},
	{name: "transparent", status: refused, doc: transparentRefusal, read: func(_ *bind, _ string, l Line) error { return refuse(l, "transparent: %s", transparentRefusal) }},
	// A label for HAProxy's stats and logs: Caddy's listeners have none.
	{name: "id", value: true, status: ignored, doc: "the number HAProxy's stats and runtime API give the listener: Caddy's listeners have none; no request changes", read: func(*bind, string, Line) error { return nil }},
	{name: "name", value: true, status: ignored, doc: "a label of HAProxy's stats and logs: Caddy's listeners have none", read: func(*bind, string, Line) error { return nil }},
}

// crtListDoc says what becomes of a crt-list.
const crtListDoc = "each line's certificate as a `crt` of its own (read when adapting, as HAProxy reads the list when it starts; `#` comments and empty lines skipped), Caddy picking among them by the names each holds: SNI filters that name exactly the certificate's names are translated, those that leave some of its names out (or `!<name>` of a wildcard) a warning (Caddy serves it for them too), a filter of a name it does not hold refused; `[ssl options]` for one certificate refused (Caddy's are the site's)"

// transparentRefusal says why bind … transparent (IP_TRANSPARENT: an
// address the host may not have, keepalived's virtual one) is refused.
const transparentRefusal = "Caddy's listeners bind only an address the host has; for a virtual address that keepalived moves, set the sysctl net.ipv4.ip_nonlocal_bind=1 (net.ipv6.ip_nonlocal_bind for IPv6) and drop transparent, or bind the port on every address"

// bindTLSOptions are the bind's own TLS options, each an option of
// ssl-default-bind-options: the site's tls block reads them after the
// global section's, as HAProxy applies them over its defaults (see
// tlsdefaults.go).
var bindTLSOptions = func() []lineOption[*bind] {
	var table []lineOption[*bind]
	for _, name := range slices.Sorted(maps.Keys(defaultBindOptions)) {
		valued := name == "ssl-min-ver" || name == "ssl-max-ver"
		table = append(table, lineOption[*bind]{name: name, value: valued, status: translated,
			doc: "as in `ssl-default-bind-options`, over the global section's (see below)",
			read: func(b *bind, v string, _ Line) error {
				b.tlsOptions = append(b.tlsOptions, name)
				if valued {
					b.tlsOptions = append(b.tlsOptions, v)
				}
				return nil
			}})
	}
	return table
}()

func readBindALPN(b *bind, v string, l Line) error {
	b.alpn = strings.Split(v, ",")
	for _, p := range b.alpn {
		if p != "http/1.1" && p != "h2" {
			return refuse(l, "alpn %q: Caddy speaks http/1.1 and h2 over TLS", p)
		}
	}
	return nil
}

var serverOptionTable = []serverOption{
	{name: "check", status: translated, doc: "the backend's health check (see `option httpchk`)", read: func(*serverReading, string, Line) error { return nil }},
	{name: "ssl", status: translated, doc: "the transport's `tls`, and dynamic checked's checks' `tls` with the same settings (HAProxy checks an `ssl` server over TLS)", read: (*serverReading).ssl},
	{name: "backup", status: translated, doc: "`lb_policy backup`: used when no other server is up (with checks only)", read: (*serverReading).backup},
	{name: "inter", value: true, status: translated, doc: "the check's interval", read: (*serverReading).inter},
	{name: "fastinter", value: true, status: translated, doc: "dynamic checked's `fast_interval` (a TCP check, or an HTTP check other than `http-check expect status <code>`)", read: (*serverReading).fastinter},
	{name: "downinter", value: true, status: translated, doc: "dynamic checked's `down_interval` (likewise)", read: (*serverReading).downinter},
	{name: "port", value: true, status: translated, doc: "the check's port: `health_port` of Caddy's active health checks (`option httpchk` with `http-check expect status`); with dynamic checked's checks or the leader's, refused", read: (*serverReading).checkPort},
	{name: "fall", value: true, status: translated, doc: "failed checks before a server is down", read: (*serverReading).fall},
	{name: "rise", value: true, status: translated, doc: "passed checks before a server is up", read: (*serverReading).rise},
	{name: "verify", value: true, status: translated, doc: "`none`: `tls_insecure_skip_verify`; `required` (HAProxy's default) needs a `ca-file` and a name to verify", read: (*serverReading).verify},
	{name: "ca-file", value: true, status: translated, doc: "`tls_trust_pool file`", read: (*serverReading).caFile},
	{name: "sni", value: true, status: translated, doc: "`str(<name>)`: `tls_server_name`", read: (*serverReading).sni},
	{name: "check-sni", value: true, status: translated, doc: "`tls_server_name` (one name with sni and verifyhost), of the transport and of dynamic checked's checks; without it, HAProxy's checks send no SNI, dynamic checked's the name of sni or verifyhost (a warning)", read: (*serverReading).checkSNI},
	{name: "verifyhost", value: true, status: translated, doc: "`tls_server_name` (one name with sni and check-sni)", read: (*serverReading).serverName},
	{name: "alpn", value: true, status: translated, doc: "the transport's `versions`: `http/1.1`, `h2,http/1.1`", read: (*serverReading).alpn},
	{name: "weight", value: true, status: translated, doc: "`weighted_round_robin`'s weights (with roundrobin or static-rr)", read: (*serverReading).weight},
	{name: "cookie", value: true, status: translated, doc: "the server's value of `lb_policy cookie` (Caddy's hashes the address instead)", read: (*serverReading).cookie},
	{name: "maxconn", value: true, status: translated, doc: "the transport's `max_conns_per_host`", read: (*serverReading).maxconn},
	{name: "resolvers", value: true, status: translated, doc: "the server's name resolved at run time through that section: `dynamic checked`'s `resolve` (see Resolvers)", read: (*serverReading).resolvedBy},
	{name: "resolve-prefer", value: true, status: translated, doc: "`ipv4`: `prefer_ipv4` (a name's IPv4 addresses, its IPv6 ones where it has none); `ipv6`, HAProxy's default, the other way round", read: (*serverReading).resolvePrefer},
	{name: "resolve-opts", value: true, status: translated, doc: "`allow-dup-ip`: `allow_dup_ip`; `prevent-dup-ip` (the default); `ignore-weight`: SRV records' weights unused, as Caddy never uses them", read: (*serverReading).resolveOpts},
	{name: "init-addr", value: true, status: translated, doc: "`last`, `libc`, `none`: dynamic checked resolves the names through the resolvers as it starts, and a name that does not resolve is no server until it does (`none`); an address is refused", read: (*serverReading).initAddr},
	{name: "disabled", status: translated, doc: "the server left out of the upstreams, as HAProxy starts it in maintenance (no request, no check); a backend whose servers all are answers 503 to what its rules leave", read: func(*serverReading, string, Line) error { return nil }},
	{name: "enabled", status: translated, doc: "undoes a `disabled` before it (default-server's)", read: func(*serverReading, string, Line) error { return nil }},
	{name: "id", value: true, status: ignored, doc: numericID, read: func(*serverReading, string, Line) error { return nil }},
	{name: "check-ssl", status: translated, doc: "with `ssl`, what it implies: the checks go over the server's TLS, as its requests do; without, refused (checks over TLS to a server reached in plain HTTP: Caddy's checks speak as its transport does)", read: (*serverReading).checkSSLOn},
	{name: "no-check-ssl", status: ignored, doc: "without `ssl`, the default (plain checks); with it, refused (plain checks of a server reached over TLS: Caddy's checks speak as its transport does)", read: (*serverReading).checkSSLOff},
	{name: "slowstart", value: true, status: approximated, doc: slowstartDoc, read: noteOption(slowstartDoc)},
	{name: "observe", value: true, status: approximated, doc: observeDoc, read: noteOption(observeDoc)},
	{name: "on-error", value: true, status: approximated, doc: observeDoc, read: noteOption(observeDoc)},
	{name: "error-limit", value: true, status: approximated, doc: observeDoc, read: noteOption(observeDoc)},
	{name: "on-marked-down", value: true, status: approximated, doc: markedDoc, read: noteOption(markedDoc)},
	{name: "on-marked-up", value: true, status: approximated, doc: markedDoc, read: noteOption(markedDoc)},
	{name: "tfo", status: ignored, doc: "TCP Fast Open to the server, a property of the connection: the requests and answers are the same without it", read: ignoredOption},
	{name: "pool-max-conn", value: true, status: ignored, doc: poolDoc, read: ignoredOption},
	{name: "pool-low-conn", value: true, status: ignored, doc: poolDoc, read: ignoredOption},
	{name: "pool-purge-delay", value: true, status: ignored, doc: poolDoc, read: ignoredOption},
	{name: "agent-check", status: refused, doc: agentRefusal, read: func(_ *serverReading, _ string, at Line) error { return refuse(at, "agent-check: %s", agentRefusal) }},
	{name: "agent-port", value: true, status: ignored, doc: agentSetting, read: ignoredOption},
	{name: "agent-inter", value: true, status: ignored, doc: agentSetting, read: ignoredOption},
	{name: "agent-addr", value: true, status: ignored, doc: agentSetting, read: ignoredOption},
	{name: "agent-send", value: true, status: ignored, doc: agentSetting, read: ignoredOption},
	{name: "track", value: true, status: refused, doc: trackRefusal, read: refusedOption("track", trackRefusal)},
	{name: "redir", value: true, status: refused, doc: redirRefusal, read: refusedOption("redir", redirRefusal)},
	{name: "resolve-net", value: true, status: refused, doc: resolveNetRefusal, read: refusedOption("resolve-net", resolveNetRefusal)},
	{name: "namespace", value: true, status: refused, doc: namespaceRefusal, read: refusedOption("namespace", namespaceRefusal)},
	{name: "addr", value: true, status: refused, doc: addrRefusal, read: refusedOption("addr", addrRefusal)},
	{name: "source", value: true, status: refused, doc: sourceRefusal, read: refusedOption("source", sourceRefusal)},
	{name: "proto", value: true, status: translated, doc: "`fcgi`: the servers of a backend with `use-fcgi-app` speak FastCGI (`transport fastcgi`, see `fcgi-app`); `h2`: HTTP/2 in clear by prior knowledge (gRPC), the transport's `versions h2c`, every server of the backend alike, without `ssl`, `maxconn`, `http-reuse never` or an HTTP check of dynamic checked (which checks over HTTP/1.1); another protocol is refused", read: (*serverReading).proto},
	{name: "send-proxy", status: approximated, doc: sendProxyDoc + "v1`" + sendProxyDiffers, read: (*serverReading).sendProxy},
	{name: "send-proxy-v2", status: approximated, doc: sendProxyDoc + "v2`" + sendProxyDiffers, read: (*serverReading).sendProxy},
}

// What the server options that change no request, or that have no
// counterpart, become, and why.
const (
	slowstartDoc      = "Caddy sends a server that comes up its full share at once, where HAProxy raises its weight over this time"
	observeDoc        = "HAProxy also marks the server down by the errors of its live traffic (observe, error-limit, on-error); Caddy by its checks alone"
	markedDoc         = "the requests in progress on a server marked down (or on the backups, when a server comes up) go on to their end, where HAProxy closes them (shutdown-sessions, shutdown-backup-sessions)"
	poolDoc           = "how many idle connections HAProxy keeps to the server, and how long: Caddy's transport keeps its own (keepalive); the requests and answers are the same"
	agentRefusal      = "an agent on the server that sets its weight and state (up, down, drain) has no counterpart in Caddy (not translated; drop agent-check and its settings: the server's own check stays)"
	agentSetting      = "a setting of agent-check, which is refused where a server has it: without it, nothing"
	trackRefusal      = "a server's state taken from another server's checks: Caddy checks each upstream itself (not translated; drop track and give the server check)"
	redirRefusal      = "HAProxy answers the server's GET and HEAD requests with a 302 to this prefix instead of proxying them (not translated; write redirect prefix <prefix> code 302 if { method GET HEAD } in the backend, with the server's weight or cookie as its condition)"
	resolveNetRefusal = "HAProxy prefers a name's addresses in these networks; dynamic checked's resolve does not (not translated; drop it if the name's addresses are all in them)"
	namespaceRefusal  = "Caddy dials from its own network namespace (not translated; run Caddy in that namespace)"
	addrRefusal       = "the checks at another address than the server's: Caddy checks the server's own address (port changes the port alone; not translated)"
	sourceRefusal     = "the address HAProxy connects to the server from is not translated: drop it (the system picks one), or write the transport's local_address by hand for one address without usesrc"
)

// noteOption reads an approximated option: a Warning at its line, once.
func noteOption(what string) func(*serverReading, string, Line) error {
	return func(r *serverReading, _ string, at Line) error {
		if !slices.ContainsFunc(r.be.notes, func(n note) bool { return n.line.Pos == at.Pos && n.what == what }) {
			r.be.notes = append(r.be.notes, note{line: at, what: what, approximated: true})
		}
		return nil
	}
}

// ignoredOption reads an option that changes no request or answer.
func ignoredOption(*serverReading, string, Line) error { return nil }

// refusedOption refuses an option that has no counterpart in Caddy.
func refusedOption(name, why string) func(*serverReading, string, Line) error {
	return func(_ *serverReading, _ string, at Line) error { return refuse(at, "%s: %s", name, why) }
}

// checkSSLOn and checkSSLOff read check-ssl and no-check-ssl: the checks
// speak TLS or not, which Caddy's do as the transport does
// (checkCheckSSL); the later line or option stands.
func (r *serverReading) checkSSLOn(_ string, at Line) error {
	r.checkTLSAt, r.checkTLS = &at, true
	return nil
}

func (r *serverReading) checkSSLOff(_ string, at Line) error {
	r.checkTLSAt, r.checkTLS = &at, false
	return nil
}

// checkCheckSSL refuses checks that speak otherwise than the transport:
// check-ssl without ssl, no-check-ssl with it.
func (r *serverReading) checkCheckSSL() error {
	if r.checkTLSAt == nil || r.checkTLS == r.tls.ssl {
		return nil
	}
	if r.checkTLS {
		return refuse(*r.checkTLSAt, "check-ssl without ssl: checks over TLS of a server reached in plain HTTP are not translated (Caddy's checks speak as its transport does)")
	}
	return refuse(*r.checkTLSAt, "no-check-ssl with ssl: plain checks of a server reached over TLS are not translated (Caddy's checks speak as its transport does)")
}

const (
	sendProxyDoc     = "the transport's `proxy_protocol "
	sendProxyDiffers = " (a PROXY header with the client's address on each connection, which serves that client only): its source port is 0, where HAProxy sends the client's port"
)

// sendProxy reads send-proxy or send-proxy-v2: the transport's
// proxy_protocol, which Caddy's pinned transport has not.
func (r *serverReading) sendProxy(_ string, at Line) error {
	version := "v1"
	if slices.Contains(at.Words, "send-proxy-v2") {
		version = "v2"
	}
	if slices.Contains(at.Words, "send-proxy") && slices.Contains(at.Words, "send-proxy-v2") {
		return refuse(at, "send-proxy and send-proxy-v2 on one line: write one")
	}
	if r.be.reuse != nil && arg(*r.be.reuse, 1) == "never" {
		return refuse(at, "send-proxy with http-reuse never: transport pinned sends no PROXY header (not translated)")
	}
	r.tls.proxyProtocol = version
	what := sendProxyDoc + version + "`" + sendProxyDiffers
	if !slices.ContainsFunc(r.be.notes, func(n note) bool { return n.line.Pos == at.Pos && n.what == what }) {
		r.be.notes = append(r.be.notes, note{line: at, what: what, approximated: true})
	}
	return nil
}

// tlsOptions are a server's TLS settings as the transport takes them.
type tlsOptions struct {
	ssl        bool
	skipVerify bool
	ca         string
	serverName string
	alpn       string
	maxConn    string // maxconn: the transport's max_conns_per_host
	// proxyProtocol is send-proxy's (v1) or send-proxy-v2's (v2): the
	// transport's proxy_protocol.
	proxyProtocol string
	proto         string // proto fcgi: the servers speak FastCGI; proto h2: HTTP/2 in clear
}

// leaderOptions are the check settings of lb_policy leader (and of the
// other checks: fastinter and downinter of dynamic checked's only).
type leaderOptions struct {
	interval, fastInterval, downInterval, fails, passes string
	port                                                string // the check's port ("": the server's)
}

// serverReading is one server's options as they are read.
type serverReading struct {
	be        *backend
	srv       server
	tls       tlsOptions
	check     leaderOptions
	resolving resolveOptions
	notes     []string
	sslAt     Line // the line that says ssl
	// checkTLSAt is the last line that says check-ssl or no-check-ssl;
	// checkTLS, what it says: checks over TLS.
	checkTLSAt *Line
	checkTLS   bool
	checkSNIAt *Line // the line that says check-sni
	initAddrAt *Line // the line that says init-addr
}

// readServers reads every server's options (default-server's first):
// one reverse_proxy has one transport and one policy, so they must agree.
func (be *backend) readServers() error {
	for i, s := range be.servers {
		r, err := be.readServerOptions(s)
		if err != nil {
			return err
		}
		if i > 0 && r.tls.maxConn != be.tls.maxConn {
			return refuse(s.line, "maxconn %q, where %s has %q: one transport limits every server alike", r.tls.maxConn, be.servers[0].name, be.tls.maxConn)
		}
		if i > 0 && r.tls.proto != be.tls.proto {
			return refuse(s.line, "%s, where %s has %s: HAProxy speaks each server's own protocol, but one reverse_proxy has one transport for every server", protoName(r.tls.proto), be.servers[0].name, protoName(be.tls.proto))
		}
		if i > 0 && (r.tls != be.tls || r.check != be.checkOpts) {
			return refuse(s.line, "its TLS or check options differ from %s's: one reverse_proxy has one transport and one policy", be.servers[0].name)
		}
		if i > 0 && r.resolving != be.resolving {
			return refuse(s.line, "its resolvers or resolve options differ from %s's: one dynamic checked resolves every name alike", be.servers[0].name)
		}
		if err := r.checkResolved(); err != nil {
			return err
		}
		be.tls, be.checkOpts, be.resolving = r.tls, r.check, r.resolving
		be.serverNotes = append(be.serverNotes, r.notes)
	}
	return nil
}

// readServerOptions reads a server's options through the registry.
func (be *backend) readServerOptions(s server) (*serverReading, error) {
	r := &serverReading{be: be, srv: s}
	opts := append(append([]option{}, be.defaults...), s.opts...)
	for i := 0; i < len(opts); i++ {
		o, at := opts[i].word, opts[i].line
		so := serverOptions[o]
		if so == nil {
			return nil, refuse(at, "server option %q is not translated yet", o)
		}
		v := ""
		if so.value {
			if i+1 >= len(opts) || opts[i+1].line.Pos != at.Pos {
				return nil, refuse(at, "%s needs a value", o)
			}
			i++
			v = opts[i].word
		}
		if err := so.read(r, v, at); err != nil {
			return nil, err
		}
	}
	if err := r.checkCheckSSL(); err != nil {
		return nil, err
	}
	r.noteCheckSNI()
	return r, r.checkVerify()
}

// noteCheckSNI notes the SNI of dynamic checked's checks over TLS where
// the server has no check-sni: HAProxy's checks send none, dynamic
// checked's the one name the transport verifies.
func (r *serverReading) noteCheckSNI() {
	if r.checkSNIAt != nil || r.tls.serverName == "" || !r.tls.ssl || r.be.checked == "" || r.be.checked == "none" {
		return
	}
	what := "HAProxy's checks send no SNI without check-sni; dynamic checked's send " + r.tls.serverName + ", the name sni or verifyhost gives the transport"
	r.be.notes = append(r.be.notes, note{line: r.srv.line, what: what, approximated: true})
}

// checkVerify refuses what the transport cannot verify as HAProxy does:
// HAProxy verifies a server's certificate by default; without a name
// (verifyhost, sni) it checks the chain alone, where the transport checks
// a name too: the server's address, which no option turns off.
func (r *serverReading) checkVerify() error {
	if !r.tls.ssl || r.tls.skipVerify {
		return nil
	}
	if r.tls.ca == "" {
		return refuse(r.sslAt, "ssl with verify required (HAProxy's default) and no ca-file: HAProxy refuses it too (write a ca-file, or verify none)")
	}
	if r.tls.serverName == "" {
		return refuse(r.sslAt, "verify required without verifyhost or sni: HAProxy checks the certificate's chain alone, Caddy's transport its name too, against the server's address %s (it cannot check the chain alone): write verifyhost <the certificate's name>, or verify none", r.srv.addr)
	}
	return nil
}

func (r *serverReading) ssl(_ string, at Line) error {
	r.tls.ssl = true
	r.sslAt = at
	return nil
}

func (r *serverReading) backup(_ string, at Line) error {
	switch be := r.be; {
	case be.leader:
		r.notes = append(r.notes, "backup: the leader is whichever node holds the lease")
	case !be.active:
		return refuse(at, "backup without checks is never used")
	case be.allBackups != nil:
		r.notes = append(r.notes, "backup: lb_policy backup balances the backups that are up when no other server is")
	default:
		r.notes = append(r.notes, "backup: lb_policy backup sends to the first backup up when no other server is")
	}
	return nil
}

// checkPort reads port <n>: the port HAProxy checks the server on.
func (r *serverReading) checkPort(v string, at Line) error {
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
		return refuse(at, "port %s: want a port from 1 to 65535", v)
	}
	r.check.port = v
	return nil
}

func (r *serverReading) inter(v string, at Line) error {
	var err error
	r.check.interval, err = duration(v, at.Pos)
	if d, _ := time.ParseDuration(r.check.interval); err == nil && d <= 0 {
		return refuse(at, "inter %s: HAProxy wants a check interval above 0", v)
	}
	return err
}

func (r *serverReading) fastinter(v string, at Line) error {
	var err error
	r.check.fastInterval, err = r.checkedInterval(v, at)
	return err
}

func (r *serverReading) downinter(v string, at Line) error {
	var err error
	r.check.downInterval, err = r.checkedInterval(v, at)
	return err
}

// checkedInterval reads fastinter's or downinter's time, which dynamic
// checked takes (Caddy's active health checks and lb_policy leader have
// one interval).
func (r *serverReading) checkedInterval(v string, at Line) (string, error) {
	if r.be.checked == "" {
		return "", refuse(at, "%s is translated for dynamic checked's checks only (a TCP check, or an HTTP check other than http-check expect status <code>): Caddy's active health checks and lb_policy leader check at one interval", at.Words[slices.Index(at.Words, v)-1])
	}
	d, err := duration(v, at.Pos)
	if p, _ := time.ParseDuration(d); err == nil && p <= 0 {
		return "", refuse(at, "%s: HAProxy wants a check interval above 0", v)
	}
	return d, err
}

func (r *serverReading) fall(v string, at Line) error {
	var err error
	r.check.fails, err = checkCount("fall", v, at)
	return err
}

func (r *serverReading) rise(v string, at Line) error {
	var err error
	r.check.passes, err = checkCount("rise", v, at)
	return err
}

// checkCount reads fall's or rise's count of checks.
func checkCount(o, v string, at Line) (string, error) {
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		return "", refuse(at, "%s %s: HAProxy wants a whole number from 1", o, v)
	}
	return v, nil
}

func (r *serverReading) verify(v string, at Line) error {
	switch v {
	case "required":
	case "none":
		r.tls.skipVerify = true
	default:
		return refuse(at, "verify takes required or none")
	}
	return nil
}

func (r *serverReading) caFile(v string, _ Line) error {
	if r.tls.ca = resolve(r.be.caBase, v); r.tls.ca != v {
		r.notes = append(r.notes, "ca-base: ca-file "+v+" is "+r.tls.ca)
	}
	return nil
}

func (r *serverReading) sni(v string, at Line) error {
	if !strings.HasPrefix(v, "str(") || !strings.HasSuffix(v, ")") {
		return refuse(at, "only sni str(<name>) is translated")
	}
	return r.serverName(v[4:len(v)-1], at)
}

// serverName is the one name the transport verifies: sni, check-sni and
// verifyhost must agree.
func (r *serverReading) serverName(v string, at Line) error {
	switch {
	case r.tls.serverName == "":
		r.tls.serverName = v
	case r.tls.serverName != v:
		return refuse(at, "sni, check-sni and verifyhost name %s and %s: the transport verifies one name", r.tls.serverName, v)
	}
	return nil
}

// checkSNI reads check-sni: the name of the checks' SNI, which is the
// transport's too.
func (r *serverReading) checkSNI(v string, at Line) error {
	r.checkSNIAt = &at
	return r.serverName(v, at)
}

// protoName names a server's proto as its line says it ("": none).
func protoName(proto string) string {
	if proto == "" {
		return "no proto (HTTP/1.1)"
	}
	return "proto " + proto
}

func (r *serverReading) alpn(v string, _ Line) error {
	r.tls.alpn = v
	return nil
}

func (r *serverReading) maxconn(v string, at Line) error {
	var err error
	r.tls.maxConn, err = serverMaxconn(v, at)
	return err
}

func (r *serverReading) cookie(_ string, at Line) error {
	if r.be.cookie == nil || r.be.leader {
		return refuse(at, "a server's cookie without the backend's cookie <name> insert (outside the leader's pool) is not translated")
	}
	return nil
}

func (r *serverReading) weight(v string, at Line) error {
	be := r.be
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 0 || n > 256:
		return refuse(at, "weight takes a whole number from 0 to 256")
	case be.leader:
		r.notes = append(r.notes, "weight: the leader gets every request")
		return nil
	}
	if be.weights == nil {
		be.weights = map[Position]weighting{}
	}
	be.weights[r.srv.line.Pos] = weighting{n, at}
	if be.balance != nil && arg(*be.balance, 1) == "first" && n > 0 {
		r.notes = append(r.notes, "weight: balance first ignores weights")
	}
	return nil
}

// optionsTable is docs/haproxy.md's table of a line's options registry.
func optionsTable[T any](m map[string]*lineOption[T]) string {
	var b strings.Builder
	b.WriteString("| option | status | becomes, or why |\n|---|---|---|\n")
	for _, name := range slices.Sorted(maps.Keys(m)) {
		o := m[name]
		shown := name
		if o.value {
			shown += " <value>"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", shown, o.status, strings.ReplaceAll(o.doc, "|", `\|`))
	}
	return b.String()
}
