package haproxy

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

// What a frontend's site is, settled by resolve once its lines are read,
// and how it is written.

// siteCerts are a TLS site's certificates (each crt of its first TLS
// bind: a file holding a certificate and its key, or a directory of them)
// with the global section's TLS defaults.
type siteCerts struct {
	bind        *bind
	files, dirs []string // each crt's path, crt-base joined
	based       []string // the crt-base notes: "crt <f> is <path>"
	settings    []string // the tls block's subdirectives
	notes       []note   // the TLS defaults' notes
	ticketsOff  *Line    // the TLS defaults' no-tls-tickets, TLS 1.2 on
}

// forwarding is what the frontend's option forwardfor and header rules
// make of the forwarded headers.
type forwarding struct {
	handler bool   // the forwarded handler: the client's chain deleted, then the client appended
	proto   string // the forwarded handler's proto, set by a set-header
	used    []Line // the header rules the forwarded handler does
	rest    []headerRule
	// What the rest make of each forwarding header no handler writes:
	// ruled, their value sent; removed, as the client sent it; mayLack,
	// ruled but maybe left out of the request by rules with a condition.
	ruled            map[string]bool
	removed, mayLack []string
}

// resolve checks what the frontend's lines say together and settles its
// site: its binds' sites, certificates, conditions and forwarded headers.
func (fe *frontend) resolve() error {
	if err := fe.resolveBinds(); err != nil {
		return err
	}
	if _, ok := fe.errorPages["429"]; ok && fe.rateLimited != nil {
		return refuse(*fe.rateLimited, "edge_rate_limit answers 429 itself: not translated with an errorfile 429")
	}
	if err := fe.resolveConditions(); err != nil {
		return err
	}
	if err := fe.checkVariableSources(); err != nil {
		return err
	}
	if err := fe.resolvePathRewrites(); err != nil {
		return err
	}
	if err := fe.resolveTrackers(); err != nil {
		return err
	}
	if err := fe.resolveConnectionRules(); err != nil {
		return err
	}
	fe.resolveForwarding()
	fe.resolveForwardingRules()
	fe.resolveFormatMaps()
	fe.resolvePages()
	fe.notes = append(fe.notes, fe.uniqueID.notes()...)
	return fe.resolveCerts()
}

// resolveBinds splits the binds into a site without TLS and one with.
// HAProxy's bind address is where it listens, never a Host to match: a
// site is every host on the port, bound to the address's host.
func (fe *frontend) resolveBinds() error {
	var hosts []string
	for i, b := range fe.binds {
		if b.isTLS {
			if fe.certs.bind != nil && !slices.Equal(fe.certs.bind.crts, b.crts) {
				return refuse(b.line, "one frontend with two certificates is not translated yet")
			}
			if fe.certs.bind != nil && !slices.Equal(fe.certs.bind.tlsOptions, b.tlsOptions) {
				return refuse(b.line, "TLS options other than line %d's: one frontend is one TLS site in Caddy, with one tls block", fe.certs.bind.line.Pos.Line)
			}
			if fe.certs.bind == nil {
				fe.certs.bind = &fe.binds[i]
			}
		}
		host, port, _ := net.SplitHostPort(b.addr)
		if !b.isTLS && port == "443" {
			// Caddy's Caddyfile refuses http://:443 ("scheme and port
			// violate convention"), which HAProxy serves.
			return refuse(b.line, "plain HTTP on port 443 (no ssl on this bind) is not translated: a Caddyfile site cannot serve http:// on port 443; bind another port, or add ssl crt")
		}
		if host != "" {
			hosts = append(hosts, host)
		} else if len(hosts) > 0 {
			return refuse(b.line, "binds on every address and on %s in one frontend are not translated yet", hosts[0])
		}
	}
	return nil
}

// resolveConditions settles each rule's matcher: its condition's ACLs,
// as the rule's section sees them.
func (fe *frontend) resolveConditions() error {
	for _, rules := range [][]answerRule{fe.answers, fe.redirects} {
		for i, a := range rules {
			if a.cond == nil || a.inFlight != 0 { // in_flight's: readInFlightDeny
				continue
			}
			var err error
			if rules[i].when, err = fe.conditionMatcher(a.cond, a.line); err != nil {
				return err
			}
		}
	}
	if err := fe.resolveHeaderConditions(); err != nil {
		return err
	}
	if err := fe.resolveMonitorFails(); err != nil {
		return err
	}
	if err := fe.resolveLogSkips(); err != nil {
		return err
	}
	return fe.resolveBackendRules()
}

// resolveLogSkips settles the matchers of the set-log-level silent rules
// with a condition.
func (fe *frontend) resolveLogSkips() error {
	for i, s := range fe.logSkips {
		if s.cond == nil {
			continue
		}
		var err error
		if fe.logSkips[i].when, err = fe.conditionMatcher(s.cond, s.line); err != nil {
			return err
		}
	}
	return nil
}

// resolveBackendRules settles the use_backend rules' matchers.
func (fe *frontend) resolveBackendRules() error {
	for i, r := range fe.rules {
		// A use_backend without a condition always holds: HAProxy runs
		// no rule after it, nor the default_backend.
		if r.cond == nil {
			fe.rules[i].when = matcher{always: true}
			if i < len(fe.rules)-1 || fe.backendLine.Words != nil {
				fe.rules[i].note = "without a condition: every request that reaches it, so what follows is never used, as in HAProxy"
			}
			continue
		}
		var err error
		if fe.rules[i].when, err = fe.conditionMatcher(r.cond, r.line); err != nil {
			return err
		}
	}
	return nil
}

// resolveMonitorFails settles the matchers of the monitor fail rules.
func (fe *frontend) resolveMonitorFails() error {
	for i, f := range fe.monitorFails {
		var err error
		if fe.monitorFails[i].when, err = fe.conditionMatcher(f.cond, f.line); err != nil {
			return err
		}
	}
	return nil
}

// resolveHeaderConditions settles the matchers of the header rules with a
// condition, and checks that the http-response ones run as in HAProxy.
func (fe *frontend) resolveHeaderConditions() error {
	for _, headers := range [][]headerRule{fe.headers, fe.responseHeaders} {
		for i, h := range headers {
			if h.cond == nil {
				continue
			}
			var err error
			if headers[i].when, err = fe.conditionMatcher(h.cond, h.line); err != nil {
				return err
			}
		}
	}
	for i := range fe.responseHeaders {
		if n := neverInResponse(fe.responseHeaders[i].line, &fe.responseHeaders[i].when); n != nil {
			fe.notes = append(fe.notes, *n)
		}
	}
	return checkDeferredOrder(fe.responseHeaders)
}

// responseFetches are the ACL fetches HAProxy reads in an http-response
// rule (of the connection and the transaction); those of the request's
// line and headers it cannot, and their ACLs never match there.
var responseFetches = map[string]bool{"src": true, "method": true, "ssl_fc": true}

// neverInResponse marks the ACLs of an http-response rule's condition
// (when) that test a fetch HAProxy cannot read there: HAProxy never
// matches them (haproxy -c warns), so each is false, where Caddy's
// matcher, run with the request, would read it. It returns the note of
// the rule's line l, if any ACL is so.
func neverInResponse(l Line, when *matcher) *note {
	var never []string
	for _, terms := range when.any {
		for _, t := range terms {
			for k, a := range t.alts {
				if !responseFetches[a.fetch] && a.counted == "" { // nbsrv reads no request
					t.alts[k].never = true
					never = append(never, fmt.Sprintf("%s (line %d)", a.fetch, a.line.Pos.Line))
				}
			}
		}
	}
	if len(never) == 0 {
		return nil
	}
	return &note{line: l, what: "HAProxy never matches " + strings.Join(never, ", ") + " in an http-response rule (haproxy -c warns): false here too"}
}

// checkDeferredOrder refuses an http-response rule with a condition
// before one without on the same header: Caddy applies those with a
// condition (deferred header directives) after every header_down.
func checkDeferredOrder(rules []headerRule) error {
	for i, h := range rules {
		if h.cond == nil {
			continue
		}
		for _, later := range rules[i+1:] {
			if later.cond == nil && strings.EqualFold(later.name, h.name) {
				return refuse(h.line, "a rule with a condition before one without on %s (line %d) is not translated: Caddy applies the rules with a condition after the others", h.name, later.line.Pos.Line)
			}
		}
	}
	return nil
}

// resolveForwarding settles what the header rules and option forwardfor
// make of the forwarded headers: with X-Forwarded-For, the forwarded
// handler where the client's chain is deleted first, else reverse_proxy's
// own X-Forwarded-For after the client's (plainForwardFor).
func (fe *frontend) resolveForwarding() {
	fe.forwarding.rest = fe.headers
	if !sendsXFF(fe.forwardFor) {
		return
	}
	f := forwarding{}
	deleted := false
	for _, h := range fe.headers {
		name := strings.ToLower(h.name)
		switch {
		case h.op == "del-header" && forwardedHeaders[name] && h.cond == nil:
			deleted = deleted || name == "x-forwarded-for"
			f.used = append(f.used, h.line)
		case h.op == "set-header" && name == "x-forwarded-proto" && h.cond == nil && isProto(h.v):
			f.proto, _ = h.v.text()
			f.used = append(f.used, h.line)
		default:
			f.rest = append(f.rest, h)
		}
	}
	if deleted {
		f.handler = true
		fe.forwarding = f
	} else {
		fe.plainForwardFor = true
	}
}

// isProto tells whether a value is the forwarded handler's proto.
func isProto(v logFormat) bool {
	s, ok := v.text()
	return ok && (s == "https" || s == "http")
}

// forwardingHeaders are the headers reverse_proxy writes itself, which
// the translation sends as the header rules make them, or removes.
var forwardingHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}

// resolveForwardingRules settles, for each forwarding header that no
// forwarded handler or option forwardfor writes, what the header rules
// (in order) leave of it: set or added (ruled: their value reaches the
// servers), deleted, or as the client sent it (removed: caddy-ha does
// not pass a client's forwarding claims).
func (fe *frontend) resolveForwardingRules() {
	f := &fe.forwarding
	f.ruled = map[string]bool{}
	deleted := map[string]bool{}
	for _, h := range f.rest {
		name := http.CanonicalHeaderKey(h.name)
		// A rule with a condition may leave the header as the client
		// sent it: what the request holds is sent.
		f.ruled[name] = h.op != "del-header" || h.cond != nil
		deleted[name] = h.op == "del-header" && h.cond == nil
	}
	mayLack := mayLeaveOut(f.rest)
	for _, name := range forwardingHeaders {
		switch {
		case f.handler, fe.plainForwardFor && name == "X-Forwarded-For":
			// the forwarded handler's set, or reverse_proxy's after the client's
		case !f.ruled[name] && !deleted[name]:
			f.removed = append(f.removed, name)
		case f.ruled[name] && mayLack[name]:
			f.mayLack = append(f.mayLack, name)
		}
	}
}

// mayLeaveOut are the forwarding headers that rules with a condition may
// leave out of a request: a set-header's or add-header's condition false
// where no rule without one set it before and the client sent none, or a
// del-header's true.
func mayLeaveOut(rules []headerRule) map[string]bool {
	present := map[string]bool{} // set or added by a rule without a condition
	out := map[string]bool{}
	for _, h := range rules {
		name := http.CanonicalHeaderKey(h.name)
		switch {
		case h.cond == nil:
			present[name] = h.op != "del-header"
			out[name] = false
		case h.op == "del-header" || !present[name]:
			out[name] = true
		}
	}
	return out
}

// resolveFormatMaps settles the map-made placeholders (formatMaps) that
// the log-format values of the site's rules and its backends' use, and
// its rate limits' keys.
func (fe *frontend) resolveFormatMaps() {
	headers := slices.Concat(fe.headers, fe.responseHeaders)
	var names []string
	for _, be := range fe.backends() {
		for _, r := range slices.Concat(be.requestRules, be.responseActions) {
			if r.header != nil {
				headers = append(headers, *r.header)
			}
			if r.answer != nil {
				for _, f := range r.answer.formats() {
					names = append(names, f.maps()...)
				}
			}
		}
	}
	for _, h := range headers {
		names = append(names, h.v.maps()...)
	}
	for _, a := range slices.Concat(fe.answers, fe.redirects) {
		for _, f := range a.answer.formats() {
			names = append(names, f.maps()...)
		}
	}
	for _, tr := range fe.trackers {
		if tr != nil && tr.used && tr.key.kind == "header" {
			if p := headerPlaceholder(tr.key.name); strings.HasPrefix(p, headerMapPrefix) {
				names = append(names, p) // the rate limit's key (rateZone.writeKey)
			}
		}
	}
	slices.Sort(names)
	fe.formatMaps = slices.Compact(names)
}

// resolveCerts settles the TLS site's certificates: files, or
// directories (Caddy picks among them by the client's SNI, as HAProxy
// does), and the global section's TLS defaults.
func (fe *frontend) resolveCerts() error {
	crt := fe.certs.bind
	if crt == nil {
		return nil
	}
	g := fe.global
	for _, f := range crt.crts {
		path := resolve(g.crtBase, f)
		if path != f {
			fe.certs.based = append(fe.certs.based, "crt "+f+" is "+path)
		}
		if isDir(fe.cfg.files(), path) {
			fe.certs.dirs = append(fe.certs.dirs, path)
		} else {
			fe.certs.files = append(fe.certs.files, path)
		}
	}
	if c := fe.certs; len(c.files) > 0 && len(c.dirs) > 0 {
		// Caddy's tls with a file picks among its files' certificates
		// only (a certificate_selection of their tags), which a
		// directory's do not carry.
		return refuse(crt.line, "crt %s is a directory and %s a file: one bind with both is not translated (Caddy would pick among the files' certificates only)", c.dirs[0], c.files[0])
	}
	d, err := g.bindTLS.site(crt)
	fe.certs.settings, fe.certs.notes, fe.certs.ticketsOff = d.dirs, d.notes, d.ticketsOff
	return err
}
