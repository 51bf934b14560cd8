package haproxy

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// HAProxy's FastCGI (2.1 and later): a fcgi-app section says how a request
// becomes FastCGI params, a backend names it (use-fcgi-app) and its
// servers speak FastCGI (proto fcgi). Caddy's counterpart is
// reverse_proxy's transport fastcgi: docroot its root, path-info its
// split, set-param its env; index a rewrite of a path ending in /, as
// HAProxy appends the index to such a script name.

// fcgiApp is a fcgi-app section, read.
type fcgiApp struct {
	section *Section
	docroot string
	index   string // appended to a script name ending in / ("": none)
	// pathInfo is path-info's expression, split the suffix Caddy splits
	// the path at ("": no path-info).
	pathInfo, split string
	// stderr is log-stderr global: the transport's capture_stderr.
	stderr bool
	params []fcgiParam
	// passAuthorization: pass-header Authorization, which HAProxy
	// otherwise leaves out of the params.
	passAuthorization bool
	lines             []Line // its lines, kept as comments in the transport
	notes             map[Position]note
	// used: a backend names it (else its lines are noted as unused).
	used bool
}

// fcgiParam is a set-param line: a param the app gets, its value a
// log-format string.
type fcgiParam struct {
	line  Line
	name  string
	value logFormat
}

// fcgiParamsDiffer is how the params Caddy's transport sends differ from
// HAProxy's: a warning at use-fcgi-app. Each row of docs/haproxy.md's
// Known differences of field "fastcgi param <name>" names the part of it
// about that param; TestHAProxyDifferentialFastCGI excuses a param's
// difference only by its row, and only in the shape the part says.
const fcgiParamsDiffer = "Caddy's transport fastcgi also sends params HAProxy leaves out: DOCUMENT_URI, REQUEST_SCHEME, REMOTE_HOST, REMOTE_IDENT and SERVER_ADDR; " +
	"HTTP_CONTENT_LENGTH and HTTP_CONTENT_TYPE, copies of CONTENT_LENGTH and CONTENT_TYPE; PATH_INFO and QUERY_STRING when empty; " +
	"CONTENT_TYPE of a request without one: empty, or application/x-www-form-urlencoded for a method other than GET, HEAD and OPTIONS; " +
	"AUTH_TYPE and REMOTE_USER are empty, where HAProxy sends the Authorization header's scheme and Basic user (and leaves them out without one); " +
	"SERVER_SOFTWARE is Caddy's"

// fcgiSplitShape is the path-info expressions whose split Caddy's split
// approximates: a script name ending in .<ext>, then an optional /… as
// the path info.
var fcgiSplitShape = regexp.MustCompile(`^\^\((/?\.[+*])\\(\.[A-Za-z0-9]+)\)\(/\.\*\)\??\$$`)

// fcgiSplitDiffers is how split differs from such an expression: a
// warning at path-info.
const fcgiSplitDiffers = "Caddy splits the path after the first .php (any case, also inside a name: /a.phpx/b), HAProxy's expression after the last .php followed by / or the end (case as written): a path with .php twice, or inside a name, gets another SCRIPT_NAME and PATH_INFO"

// fcgiIndexName is an index HAProxy appends that a rewrite's replacement
// carries as it is.
var fcgiIndexName = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

// readFcgiApps reads every fcgi-app section, each refused line recorded.
func (t *translator) readFcgiApps() {
	t.fcgiApps = map[string]*fcgiApp{}
	for _, s := range t.cfg.Sections {
		if s.Kind != "fcgi-app" {
			continue
		}
		a := &fcgiApp{section: s, notes: map[Position]note{}}
		t.fcgiApps[s.Name] = a
		for _, l := range s.Lines {
			t.reach(l.Pos)
			a.lines = append(a.lines, l)
			k := keywordAt(l)
			if k == nil || k.fcgiApp == nil {
				t.refused.add(notTranslated(k, l))
				continue
			}
			t.refused.add(k.fcgiApp(a, l))
		}
		if !slices.ContainsFunc(a.lines, func(l Line) bool { return keywordOf(l) == "docroot" }) {
			t.refused.add(errAt(s.Pos, "fcgi-app %s has no docroot: HAProxy refuses it too", s.Name))
		}
		t.refused.add(a.checkMaxReqs())
	}
}

func (a *fcgiApp) readDocroot(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes one directory")
	}
	d := l.Words[1]
	if !path.IsAbs(d) || path.Clean(d) != d {
		return refuse(l, "Caddy's root makes a relative directory absolute and cleans it, where HAProxy sends it as written: write it absolute and clean (%s)", path.Clean("/"+d))
	}
	a.docroot = d
	return nil
}

func (a *fcgiApp) readIndex(l Line) error {
	if len(l.Words) != 2 || !fcgiIndexName.MatchString(l.Words[1]) {
		return refuse(l, "takes one file name (letters, digits, ., _, ~ and -)")
	}
	a.index = l.Words[1]
	return nil
}

func (a *fcgiApp) readPathInfo(l Line) error {
	m := fcgiSplitShape.FindStringSubmatch(arg(l, 1))
	if len(l.Words) != 2 || m == nil {
		return refuse(l, "only ^(/.+\\.php)(/.*)?$ and its like (a script name ending in .<ext>, then /…) are translated, as Caddy's split: Caddy splits the path after a suffix, not by an expression")
	}
	a.pathInfo, a.split = l.Words[1], m[2]
	a.notes[l.Pos] = note{line: l, what: "split " + m[2] + ": " + fcgiSplitDiffers, approximated: true}
	return nil
}

func (a *fcgiApp) readLogStderr(l Line) error {
	if len(l.Words) != 2 || l.Words[1] != "global" {
		return refuse(l, "only log-stderr global is translated: the app's stderr in Caddy's log (capture_stderr), which the global log lines write")
	}
	a.stderr = true
	a.notes[l.Pos] = note{line: l, what: "capture_stderr: what the app writes to stderr, in Caddy's log"}
	return nil
}

// readSetParam reads set-param <name> <format>: the transport's env, the
// value a log-format string as Caddy's placeholders.
func (a *fcgiApp) readSetParam(l Line) error {
	if len(l.Words) != 3 {
		return refuse(l, "takes a name and a value; a condition is not translated (transport fastcgi's env holds for every request)")
	}
	if !isHTTPName(l.Words[1]) {
		return refuse(l, "%q is not a param name this translation carries", l.Words[1])
	}
	f, err := readLogFormat(l.Words[2], l)
	if err != nil {
		return err
	}
	a.params = append(a.params, fcgiParam{line: l, name: strings.ToUpper(l.Words[1]), value: f})
	return nil
}

// readPassHeader reads pass-header <name>: HAProxy passes every header as
// an HTTP_ param but Authorization, Proxy-Authorization and the hop-by-hop
// ones, as Caddy does but for Authorization (which header_up removes
// unless it is passed).
func (a *fcgiApp) readPassHeader(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes a header's name; a condition is not translated")
	}
	switch name := strings.ToLower(l.Words[1]); {
	case name == "authorization":
		a.passAuthorization = true
		a.notes[l.Pos] = note{line: l, what: "the Authorization header reaches the app as HTTP_AUTHORIZATION"}
	case slices.Contains([]string{"proxy-authorization", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "proxy-connection"}, name):
		return refuse(l, "Caddy's reverse_proxy passes no %s on: not translated", l.Words[1])
	default:
		a.notes[l.Pos] = note{line: l, what: "Caddy passes every header as an HTTP_ param already"}
	}
	return nil
}

// readIgnored reads the options of HAProxy's connections to the app.
func (a *fcgiApp) readIgnored(l Line) error {
	k := keywordAt(l)
	if (k.name == "option max-reqs") != (len(l.Words) == 3) || len(l.Words) > 3 {
		return refuse(l, "not translated in this form")
	}
	a.notes[l.Pos] = note{line: l, what: "ignored: " + k.doc}
	return nil
}

// checkMaxReqs refuses option max-reqs without option mpxs-conns, as
// HAProxy 2.6 does (it has no multiplexing to bound).
func (a *fcgiApp) checkMaxReqs() error {
	hasOption := func(name string) func(Line) bool {
		return func(l Line) bool { return keywordOf(l) == name }
	}
	i := slices.IndexFunc(a.lines, hasOption("option max-reqs"))
	if i >= 0 && !slices.ContainsFunc(a.lines, hasOption("option mpxs-conns")) {
		return refuse(a.lines[i], "without option mpxs-conns: HAProxy 2.6 refuses it too")
	}
	return nil
}

// readACL refuses a fcgi-app's acl: the conditions of set-param and
// pass-header are not translated.
func (a *fcgiApp) readACL(l Line) error {
	return refuse(l, "a fcgi-app's ACLs serve set-param and pass-header conditions, which are not translated")
}

// readUseFcgiApp reads use-fcgi-app <name>.
func (be *backend) readUseFcgiApp(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes a fcgi-app's name")
	}
	a := be.fcgiApps[l.Words[1]]
	if a == nil {
		return refuse(l, "no fcgi-app section %s (HAProxy refuses it too)", l.Words[1])
	}
	a.used = true
	be.fcgi, be.fcgiAt = a, &l
	return nil
}

// readProto reads a server's proto: fcgi (FastCGI) or h2 (HTTP/2 in
// clear, settleH2C).
func (r *serverReading) proto(v string, at Line) error {
	if v != "fcgi" && v != "h2" {
		return refuse(at, "proto %s is not translated (proto fcgi and proto h2 are)", v)
	}
	r.tls.proto = v
	return nil
}

// settleFastCGI settles a backend's FastCGI: its servers speak it where
// it names a fcgi-app, and the transport, fastcgi, has none of the http
// transport's TLS, connection limits or PROXY header.
func (be *backend) settleFastCGI() error {
	switch {
	case be.fcgi == nil && be.tls.proto == "fcgi":
		return refuse(be.servers[0].line, "proto fcgi without use-fcgi-app: HAProxy refuses it too")
	case be.fcgi == nil:
		return nil
	case be.tls.proto != "fcgi":
		return refuse(*be.fcgiAt, "its servers do not speak FastCGI (proto fcgi on each): HAProxy refuses it too")
	case be.tls.ssl, be.tls.maxConn != "", be.tls.proxyProtocol != "", be.tls.alpn != "":
		return refuse(be.servers[0].line, "ssl, maxconn, send-proxy and alpn of a FastCGI server are not translated: transport fastcgi has none")
	case be.transport == "pinned":
		return refuse(*be.reuse, "http-reuse never with FastCGI servers is not translated: transport fastcgi opens a connection per request")
	case len(be.check) > 0:
		return refuse(be.check[0], "an HTTP check of a FastCGI server is not translated (check alone is a TCP connect check, which is)")
	}
	be.transport = "fastcgi"
	be.notes = append(be.notes, note{line: *be.fcgiAt, what: fcgiParamsDiffer, approximated: true})
	return nil
}

// fcgiAppsInOrder are the fcgi-app sections read, in the order written.
func (t *translator) fcgiAppsInOrder() []*fcgiApp {
	var out []*fcgiApp
	for _, s := range t.cfg.Sections {
		if a := t.fcgiApps[s.Name]; s.Kind == "fcgi-app" && a != nil {
			out = append(out, a)
		}
	}
	return out
}
