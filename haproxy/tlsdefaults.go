package haproxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// defaultTLS are the global section's ssl-default-bind-ciphers,
// -ciphersuites and -options lines, which HAProxy applies to every bind
// with ssl (under the bind's own options) and which become the tls block
// of each TLS site; or its ssl-default-server- lines, which it applies to
// every server with ssl (see transport).
type defaultTLS struct {
	ciphers, ciphersuites *Line // the last of each: it is the one HAProxy keeps
	options               []Line
}

// tlsVersions are HAProxy's names of the versions, lowest first.
var tlsVersions = []string{"SSLv3", "TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3"}

const (
	tls12 = 3
	tls13 = 4
)

// goCipherSuites are the OpenSSL names of the TLS 1.2 suites Caddy's
// ciphers takes (Go's secure suites), with Go's names.
var goCipherSuites = map[string]string{
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
}

// goInsecureSuites are suites Go has only among its insecure ones, which
// Caddy's ciphers does not take.
var goInsecureSuites = map[string]bool{
	"AES128-GCM-SHA256": true, "AES256-GCM-SHA384": true, "AES128-SHA": true, "AES256-SHA": true, "AES128-SHA256": true,
	"DES-CBC3-SHA": true, "ECDHE-RSA-DES-CBC3-SHA": true, "RC4-SHA": true, "ECDHE-RSA-RC4-SHA": true, "ECDHE-ECDSA-RC4-SHA": true,
	"ECDHE-ECDSA-AES128-SHA256": true, "ECDHE-RSA-AES128-SHA256": true,
}

// goTLS13Suites are Go's TLS 1.3 suites: always all three, in Go's order
// (crypto/tls does not configure them).
var goTLS13Suites = []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}

// read takes one of the global lines.
func (b *defaultTLS) read(l Line) error {
	if len(l.Words) < 2 {
		return refuse(l, "takes a value")
	}
	options := strings.HasSuffix(l.Words[0], "-options")
	switch {
	case strings.HasSuffix(l.Words[0], "-ciphers"):
		b.ciphers = &l
	case strings.HasSuffix(l.Words[0], "-ciphersuites"):
		b.ciphersuites = &l
	default:
		b.options = append(b.options, l)
	}
	if !options && len(l.Words) != 2 {
		return refuse(l, "takes one list")
	}
	return nil
}

// lines are the global lines, in their order.
func (b *defaultTLS) lines() []Line {
	ls := slices.Clone(b.options)
	for _, l := range []*Line{b.ciphers, b.ciphersuites} {
		if l != nil {
			ls = append(ls, *l)
		}
	}
	slices.SortFunc(ls, func(x, y Line) int { return x.Pos.Line - y.Pos.Line })
	return ls
}

func tlsRefuse(l Line, why string, args ...any) *Error {
	return errAt(l.Pos, "%s: %s", l.Words[0], fmt.Sprintf(why, args...))
}

// tlsDefaults are what the global lines make of each TLS site.
type tlsDefaults struct {
	dirs  []string // the subdirectives of its tls block
	notes []note   // each global line, and what became of it
	// ticketsOff is the ssl-default-bind-options line with no-tls-tickets,
	// TLS 1.2 on (nil if none): session tickets off in Caddy's TLS app,
	// which the Caddyfile cannot say (see Translation.Beyond).
	ticketsOff *Line
}

// site is what the defaults and the TLS options of its bind (own) make
// of a TLS site. A value Caddy cannot honour is refused at its line.
func (b *defaultTLS) site(own *bind) (tlsDefaults, error) {
	t := newTLSSite()
	for _, l := range b.options {
		if err := t.readOptions(l); err != nil {
			return tlsDefaults{}, err
		}
	}
	// The bind's own after the defaults: its no- options add to theirs,
	// its bounds replace theirs, as in HAProxy.
	if len(own.tlsOptions) > 0 {
		if err := t.readOptions(Line{Pos: own.line.Pos, Words: append([]string{"bind"}, own.tlsOptions...), Source: own.line.Source}); err != nil {
			return tlsDefaults{}, err
		}
	}
	on, err := t.versionsOn()
	if err != nil {
		return tlsDefaults{}, err
	}
	has12, has13 := on[0] == tls12, on[len(on)-1] == tls13
	t.protocols(has12, has13)
	t.noTLSTickets(has12)
	t.ciphers(b.ciphers, has12)
	t.ciphersuites(b.ciphersuites, has13)
	if len(t.refusals) > 0 {
		return tlsDefaults{}, slices.MinFunc(t.refusals, func(a, b *Error) int { return a.Pos.Line - b.Pos.Line })
	}
	d := tlsDefaults{dirs: t.dirs, ticketsOff: t.ticketsOff}
	for _, l := range b.lines() {
		d.notes = append(d.notes, note{line: l, what: t.notes[l.Pos], approximated: t.approximated[l.Pos]})
	}
	if what := t.notes[own.line.Pos]; what != "" {
		d.notes = append(d.notes, note{line: own.line, what: what, approximated: t.approximated[own.line.Pos]})
	}
	return d, nil
}

// tlsSite is what site makes of the global lines so far.
type tlsSite struct {
	// HAProxy's versions for a bind: ssl-min-ver TLSv1.2 by default (since
	// HAProxy 2.2), up to TLS 1.3, without those a no-<version> turns off;
	// a force-<version> (forced, -1 if none) overrides the bounds.
	lo, hi, forced int
	off            map[int]bool
	versionLines   []Line   // the options lines that set a version
	tickets        *Line    // the options line with no-tls-tickets
	ticketsOff     *Line    // tickets, with TLS 1.2 on: off in Caddy's TLS app
	what           []string // what became of the options line being read

	dirs         []string
	notes        map[Position]string
	approximated map[Position]bool // the lines whose note is a Warning's
	refusals     []*Error          // each line's refusal: site returns the first line's
}

func newTLSSite() *tlsSite {
	return &tlsSite{lo: tls12, hi: tls13, forced: -1, off: map[int]bool{}, notes: map[Position]string{}, approximated: map[Position]bool{}}
}

// readOptions reads an ssl-default-bind-options line, each option by its
// reader in defaultBindOptions.
func (t *tlsSite) readOptions(l Line) error {
	t.what = nil
	for i := 1; i < len(l.Words); i++ {
		o := l.Words[i]
		read, ok := defaultBindOptions[o]
		if !ok {
			return tlsRefuse(l, "%s is not translated yet", o)
		}
		took, err := read(t, l, i)
		if err != nil {
			return err
		}
		i += took
	}
	t.notes[l.Pos] = strings.Join(t.what, "; ")
	return nil
}

// defaultBindOption reads the option at l.Words[i] of an
// ssl-default-bind-options line, and returns how many words after it it
// took.
type defaultBindOption func(t *tlsSite, l Line, i int) (int, error)

// defaultBindOptions are the options of ssl-default-bind-options that are
// translated, each with its reader; any other is refused.
var defaultBindOptions = func() map[string]defaultBindOption {
	options := map[string]defaultBindOption{
		"ssl-min-ver":           (*tlsSite).versionBound,
		"ssl-max-ver":           (*tlsSite).versionBound,
		"no-tls-tickets":        (*tlsSite).readNoTLSTickets,
		"prefer-client-ciphers": (*tlsSite).preferClientCiphers,
	}
	for v, name := range versionOptions {
		options["no-"+name] = versionOff(v)
		options["force-"+name] = versionForced(v)
	}
	return options
}()

// versionOptions are the suffixes of the no- and force- options, in the
// order of tlsVersions.
var versionOptions = []string{"sslv3", "tlsv10", "tlsv11", "tlsv12", "tlsv13"}

// versionOff reads no-<version> of version v.
func versionOff(v int) defaultBindOption {
	return func(t *tlsSite, l Line, _ int) (int, error) {
		t.off[v] = true
		t.versionLines = append(t.versionLines, l)
		return 0, nil
	}
}

// versionForced reads force-<version> of version v.
func versionForced(v int) defaultBindOption {
	return func(t *tlsSite, l Line, _ int) (int, error) {
		t.forced = v
		t.versionLines = append(t.versionLines, l)
		return 0, nil
	}
}

// readNoTLSTickets reads no-tls-tickets, which noTLSTickets judges once the
// versions are known.
func (t *tlsSite) readNoTLSTickets(l Line, _ int) (int, error) {
	t.tickets = &l
	return 0, nil
}

func (t *tlsSite) preferClientCiphers(Line, int) (int, error) {
	t.what = append(t.what, "prefer-client-ciphers ignored: Go orders the suites itself, in neither HAProxy's order nor the client's")
	return 0, nil
}

// versionBound reads ssl-min-ver or ssl-max-ver, and the version after it.
func (t *tlsSite) versionBound(l Line, i int) (int, error) {
	o := l.Words[i]
	v := slices.Index(tlsVersions, arg(l, i+1))
	if v < 0 {
		return 0, tlsRefuse(l, "%s takes one of %s", o, strings.Join(tlsVersions, ", "))
	}
	if o == "ssl-min-ver" {
		t.lo = v
	} else {
		t.hi = v
	}
	t.versionLines = append(t.versionLines, l)
	return 1, nil
}

// versions are the versions HAProxy offers, lowest first, and the last
// line that set a version.
func (t *tlsSite) versions() (on []int, at Line) {
	lo, hi := t.lo, t.hi
	if t.forced >= 0 {
		lo, hi = t.forced, t.forced
	}
	for v := lo; v <= hi; v++ {
		if !t.off[v] {
			on = append(on, v)
		}
	}
	if len(t.versionLines) > 0 {
		at = t.versionLines[len(t.versionLines)-1]
	}
	return on, at
}

// versionsOn are the versions HAProxy offers a client, lowest first; a
// set Caddy cannot offer is refused at the last line that set a version.
func (t *tlsSite) versionsOn() ([]int, error) {
	on, at := t.versions()
	switch {
	case len(on) == 0:
		return nil, tlsRefuse(at, "no TLS version is left on")
	case on[0] < tls12:
		return nil, tlsRefuse(at, "%s is on: Caddy speaks TLS 1.2 and 1.3 only (a client HAProxy serves with %s would be refused)", tlsVersions[on[0]], tlsVersions[on[0]])
	case on[len(on)-1]-on[0] != len(on)-1:
		return nil, tlsRefuse(at, "a hole between the versions on is not translated")
	}
	return on, nil
}

// protocols writes the protocols subdirective, if a line set a version.
func (t *tlsSite) protocols(has12, has13 bool) {
	if len(t.versionLines) == 0 {
		return
	}
	switch {
	case has12 && has13:
		t.dirs = append(t.dirs, "protocols tls1.2")
	case has12:
		t.dirs = append(t.dirs, "protocols tls1.2 tls1.2")
	default:
		t.dirs = append(t.dirs, "protocols tls1.3")
	}
}

// noTLSTickets reads no-tls-tickets: with TLS 1.2 on, session tickets
// off in Caddy's TLS app. Go's server then resumes no session, where
// HAProxy resumes TLS 1.2 sessions by their ID from its cache, and TLS
// 1.3's with tickets it keeps (OpenSSL's stateful ones): full handshakes,
// no session to steal a ticket key for.
func (t *tlsSite) noTLSTickets(has12 bool) {
	if t.tickets == nil {
		return
	}
	if !has12 {
		t.notes[t.tickets.Pos] = joinNote(t.notes[t.tickets.Pos], "no-tls-tickets ignored: HAProxy's applies up to TLS 1.2, which is off")
		return
	}
	t.ticketsOff = t.tickets
	t.approximated[t.tickets.Pos] = true
	t.notes[t.tickets.Pos] = joinNote(t.notes[t.tickets.Pos], ticketsOffNote)
}

// settleSessionTickets notes, on each TLS site whose binds HAProxy issues
// session tickets on, that a bind's no-tls-tickets turns Caddy's off for
// it too: they are one setting of Caddy's TLS app, for every site.
func settleSessionTickets(frontends []*frontend) {
	var off *Line
	for _, fe := range frontends {
		if fe.certs.ticketsOff != nil {
			off = fe.certs.ticketsOff
		}
	}
	if off == nil {
		return
	}
	for _, fe := range frontends {
		if fe.certs.bind != nil && fe.certs.ticketsOff == nil {
			fe.certs.notes = append(fe.certs.notes, note{line: fe.certs.bind.line, approximated: true,
				what: fmt.Sprintf("session tickets off here too: line %d's no-tls-tickets turns Caddy's off for every site (one setting of its TLS app), where HAProxy issues them on this bind", off.Pos.Line)})
		}
	}
}

// ticketsOffNote says what becomes of no-tls-tickets with TLS 1.2 on.
const ticketsOffNote = "no-tls-tickets: session tickets off in the JSON caddy adapt --adapter haproxy makes (apps.tls.session_tickets.disabled), which a Caddyfile cannot say; Go's TLS then resumes no session (full handshakes), where HAProxy resumes TLS 1.2 sessions by their ID from its cache and TLS 1.3 sessions with tickets it keeps"

// ciphers writes ssl-default-bind-ciphers (l, if any) as the ciphers
// subdirective, with TLS 1.2 on.
func (t *tlsSite) ciphers(l *Line, has12 bool) {
	switch {
	case l == nil:
	case !has12:
		t.notes[l.Pos] = "ignored: TLS 1.2 is off, and these are TLS 1.2's suites"
	default:
		names, left := goCiphers(*l)
		what := "ciphers, by Go's names; Go orders them itself, AES-GCM first where both ends have AES hardware"
		if len(names) > 0 {
			t.dirs = append(t.dirs, "ciphers "+strings.Join(names, " "))
		} else {
			what = "Go's own secure TLS 1.2 suites (no ciphers line): the list names none of them by its OpenSSL name"
		}
		if len(left) > 0 {
			t.approximated[l.Pos] = true
			what += "; Go's nearest secure set, without " + strings.Join(left, "; ")
		}
		t.notes[l.Pos] = what
	}
}

// ciphersuites notes ssl-default-bind-ciphersuites (l, if any), and
// refuses it with TLS 1.3 on unless it lists Go's three suites.
func (t *tlsSite) ciphersuites(l *Line, has13 bool) {
	switch {
	case l == nil:
	case !has13:
		t.notes[l.Pos] = "ignored: TLS 1.3 is off"
	default:
		t.notes[l.Pos] = "ignored: Go's TLS 1.3 suites are these three, always on, in Go's order"
		if differs := tls13Differences(*l); differs != "" {
			t.notes[l.Pos] = "Go's TLS 1.3 suites, always all three in Go's order: " + differs
			t.approximated[l.Pos] = true
		}
	}
}

// goCiphers are Go's names of the suites of ssl-default-bind-ciphers, in
// its order; a name Caddy's ciphers cannot take is refused.
func goCiphers(l Line) (names, left []string) {
	for _, n := range strings.FieldsFunc(l.Words[1], func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		goName, ok := goCipherSuites[n]
		switch {
		case ok:
			if !slices.Contains(names, goName) {
				names = append(names, goName)
			}
		case goInsecureSuites[n]:
			left = append(left, n+" (Go has it only among its insecure suites)")
		case strings.HasPrefix(n, "DHE-") || strings.HasPrefix(n, "EDH-"):
			left = append(left, n+" (Go's TLS has no finite-field Diffie-Hellman: a client offering only DHE suites is refused)")
		case !strings.Contains(n, "-") || strings.ContainsAny(n, "!+@") || n[0] == '-':
			left = append(left, n+" (an OpenSSL keyword or operator)")
		default:
			left = append(left, n+" (no suite of Go's TLS 1.2 has that OpenSSL name)")
		}
	}
	return names, left
}

// tls13Differences says how ssl-default-bind-ciphersuites differs from
// Go's three TLS 1.3 suites, which Go always offers ("" if it lists
// them).
func tls13Differences(l Line) string {
	var d []string
	listed := strings.Split(l.Words[1], ":")
	for _, n := range listed {
		if !slices.Contains(goTLS13Suites, n) {
			d = append(d, n+" is not one of Go's")
		}
	}
	for _, n := range goTLS13Suites {
		if !slices.Contains(listed, n) {
			d = append(d, n+", left out, is offered")
		}
	}
	return strings.Join(d, "; ")
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// transport is what the server defaults make of the reverse_proxy
// transport's TLS to the servers with ssl (server, the first's line): each
// line's note. Caddy's transport takes no TLS versions nor suites: Go's
// client offers TLS 1.2 and 1.3, its default suites, and keeps no session
// to resume. Versions it cannot offer as HAProxy would are refused; suites
// are approximated, with a warning naming what differs.
func (b *defaultTLS) transport(server Line) ([]note, error) {
	t := newTLSSite()
	for _, l := range b.options {
		if err := t.readOptions(l); err != nil {
			return nil, err
		}
		t.notes[l.Pos] = joinNote(t.notes[l.Pos], "Go's client, the transport's TLS, offers TLS 1.2 and 1.3, as these leave on")
		if slices.Contains(l.Words, "no-tls-tickets") {
			t.notes[l.Pos] += "; no-tls-tickets: the transport keeps no TLS session, so it resumes none with a ticket"
		}
	}
	if on, at := t.versions(); !slices.Equal(on, []int{tls12, tls13}) {
		names := "none"
		for i, v := range on {
			if i == 0 {
				names = tlsVersions[v]
			} else {
				names += ", " + tlsVersions[v]
			}
		}
		return nil, tlsRefuse(at, "the versions on for servers are %s, where Go's client, reverse_proxy's transport (for server %s, line %d), offers TLS 1.2 and 1.3 and takes no versions: not translated",
			names, arg(server, 1), server.Pos.Line)
	}
	if l := b.ciphers; l != nil {
		t.notes[l.Pos], t.approximated[l.Pos] = clientCiphers(*l)
	}
	if l := b.ciphersuites; l != nil {
		t.notes[l.Pos] = "ignored: Go's TLS 1.3 suites are these three, always offered"
		if differs := tls13Differences(*l); differs != "" {
			t.notes[l.Pos] = "Go's TLS 1.3 suites, always all three: " + differs
			t.approximated[l.Pos] = true
		}
	}
	var out []note
	for _, l := range b.lines() {
		out = append(out, note{line: l, what: t.notes[l.Pos], approximated: t.approximated[l.Pos]})
	}
	return out, nil
}

// clientCiphers is what becomes of ssl-default-server-ciphers: Go's
// client offers its default TLS 1.2 suites (every one of goCipherSuites),
// which reverse_proxy's transport takes no list of; approximated unless
// the list names them all and nothing else.
func clientCiphers(l Line) (string, bool) {
	names, left := goCiphers(l)
	var extra []string
	for _, n := range slices.Sorted(maps.Values(goCipherSuites)) {
		if !slices.Contains(names, n) {
			extra = append(extra, n)
		}
	}
	if len(extra)+len(left) == 0 {
		return "ignored: Go's client offers these suites, and no other", false
	}
	what := "reverse_proxy's transport takes no suites: Go's client offers its own TLS 1.2 suites"
	if len(extra) > 0 {
		what += ", also " + strings.Join(extra, ", ")
	}
	if len(left) > 0 {
		what += "; not " + strings.Join(left, "; ")
	}
	return what, true
}
