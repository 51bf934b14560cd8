package haproxy

import (
	"fmt"
	"slices"
	"strings"
)

// bindTLS are the global section's ssl-default-bind-ciphers,
// -ciphersuites and -options lines, which HAProxy applies to every bind
// with ssl (a bind's own TLS options are refused), and which become the
// tls block of each TLS site.
type bindTLS struct {
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

func (b *bindTLS) any() bool { return b.ciphers != nil || b.ciphersuites != nil || len(b.options) > 0 }

// read takes one of the global lines.
func (b *bindTLS) read(l Line) error {
	if len(l.Words) < 2 {
		return refuse(l, "takes a value")
	}
	switch l.Words[0] {
	case "ssl-default-bind-ciphers":
		b.ciphers = &l
	case "ssl-default-bind-ciphersuites":
		b.ciphersuites = &l
	default:
		b.options = append(b.options, l)
	}
	if l.Words[0] != "ssl-default-bind-options" && len(l.Words) != 2 {
		return refuse(l, "takes one list")
	}
	return nil
}

// lines are the global lines, in their order.
func (b *bindTLS) lines() []Line {
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

// site is what the defaults make of a TLS site: the subdirectives of its
// tls block, and each global line with what became of it. A value Caddy
// cannot honour is refused at its line.
func (b *bindTLS) site() ([]string, []note, error) {
	var dirs []string
	notes := map[Position]string{}
	// HAProxy's versions for a bind: ssl-min-ver TLSv1.2 by default (since
	// HAProxy 2.2), up to TLS 1.3, without those a no-<version> turns off.
	lo, hi, forced := tls12, tls13, -1
	off := map[int]bool{}
	var tickets *Line
	var versionLines []Line
	for _, l := range b.options {
		var what []string
		for i := 1; i < len(l.Words); i++ {
			o := l.Words[i]
			switch {
			case o == "ssl-min-ver" || o == "ssl-max-ver":
				v := slices.Index(tlsVersions, arg(l, i+1))
				if v < 0 {
					return nil, nil, tlsRefuse(l, "%s takes one of %s", o, strings.Join(tlsVersions, ", "))
				}
				i++
				if o == "ssl-min-ver" {
					lo = v
				} else {
					hi = v
				}
				versionLines = append(versionLines, l)
			case strings.HasPrefix(o, "no-") && versionOption(o[3:]) >= 0:
				off[versionOption(o[3:])] = true
				versionLines = append(versionLines, l)
			case strings.HasPrefix(o, "force-") && versionOption(o[6:]) >= 0:
				forced = versionOption(o[6:])
				versionLines = append(versionLines, l)
			case o == "no-tls-tickets":
				tickets = &l
			case o == "prefer-client-ciphers":
				what = append(what, "prefer-client-ciphers ignored: Go orders the suites itself, in neither HAProxy's order nor the client's")
			default:
				return nil, nil, tlsRefuse(l, "%s is not translated yet", o)
			}
		}
		notes[l.Pos] = strings.Join(what, "; ")
	}
	if forced >= 0 {
		lo, hi = forced, forced
	}
	var on []int
	for v := lo; v <= hi; v++ {
		if !off[v] {
			on = append(on, v)
		}
	}
	var at Line
	if len(versionLines) > 0 {
		at = versionLines[len(versionLines)-1]
	}
	switch {
	case len(on) == 0:
		return nil, nil, tlsRefuse(at, "no TLS version is left on")
	case on[0] < tls12:
		return nil, nil, tlsRefuse(at, "%s is on: Caddy speaks TLS 1.2 and 1.3 only (a client HAProxy serves with %s would be refused)", tlsVersions[on[0]], tlsVersions[on[0]])
	case on[len(on)-1]-on[0] != len(on)-1:
		return nil, nil, tlsRefuse(at, "a hole between the versions on is not translated")
	}
	has12, has13 := on[0] == tls12, on[len(on)-1] == tls13
	if len(versionLines) > 0 {
		switch {
		case has12 && has13:
			dirs = append(dirs, "protocols tls1.2")
		case has12:
			dirs = append(dirs, "protocols tls1.2 tls1.2")
		default:
			dirs = append(dirs, "protocols tls1.3")
		}
	}
	// Each line's refusal, the first line's returned.
	var refusals []*Error
	if tickets != nil {
		if has12 {
			refusals = append(refusals, tlsRefuse(*tickets, "no-tls-tickets: Caddy resumes TLS 1.2 sessions with session tickets (their keys rotated every 12 hours), and a Caddyfile cannot turn them off"))
		}
		notes[tickets.Pos] = joinNote(notes[tickets.Pos], "no-tls-tickets ignored: HAProxy's applies up to TLS 1.2, which is off")
	}
	if l := b.ciphers; l != nil && !has12 {
		notes[l.Pos] = "ignored: TLS 1.2 is off, and these are TLS 1.2's suites"
	} else if l != nil {
		names, err := goCiphers(*l)
		if err != nil {
			refusals = append(refusals, err)
		}
		dirs = append(dirs, "ciphers "+strings.Join(names, " "))
		notes[l.Pos] = "ciphers, by Go's names; Go orders them itself, AES-GCM first where both ends have AES hardware"
	}
	if l := b.ciphersuites; l != nil && !has13 {
		notes[l.Pos] = "ignored: TLS 1.3 is off"
	} else if l != nil {
		if err := checkTLS13Suites(*l); err != nil {
			refusals = append(refusals, err)
		}
		notes[l.Pos] = "ignored: Go's TLS 1.3 suites are these three, always on, in Go's order"
	}
	if len(refusals) > 0 {
		return nil, nil, slices.MinFunc(refusals, func(a, b *Error) int { return a.Pos.Line - b.Pos.Line })
	}
	var out []note
	for _, l := range b.lines() {
		out = append(out, note{line: l, what: notes[l.Pos]})
	}
	return dirs, out, nil
}

// goCiphers are Go's names of the suites of ssl-default-bind-ciphers, in
// its order; a name Caddy's ciphers cannot take is refused.
func goCiphers(l Line) ([]string, *Error) {
	var names []string
	for _, n := range strings.FieldsFunc(l.Words[1], func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		goName, ok := goCipherSuites[n]
		switch {
		case ok:
			if !slices.Contains(names, goName) {
				names = append(names, goName)
			}
		case goInsecureSuites[n]:
			return nil, tlsRefuse(l, "%s: Go has it only among its insecure suites, which Caddy's ciphers does not take", n)
		case strings.HasPrefix(n, "DHE-") || strings.HasPrefix(n, "EDH-"):
			return nil, tlsRefuse(l, "%s: Go's TLS has no finite-field Diffie-Hellman (a client offering only DHE suites, which HAProxy serves, would be refused)", n)
		case !strings.Contains(n, "-") || strings.ContainsAny(n, "!+@") || n[0] == '-':
			return nil, tlsRefuse(l, "%s: OpenSSL's cipher string keywords and operators are not translated (list the suites by name)", n)
		default:
			return nil, tlsRefuse(l, "%s: no suite of Go's TLS 1.2 has that OpenSSL name", n)
		}
	}
	return names, nil
}

// checkTLS13Suites refuses ssl-default-bind-ciphersuites unless it lists
// Go's three TLS 1.3 suites, which Go always offers.
func checkTLS13Suites(l Line) *Error {
	listed := strings.Split(l.Words[1], ":")
	for _, n := range listed {
		if !slices.Contains(goTLS13Suites, n) {
			return tlsRefuse(l, "%s: Go's TLS 1.3 has no such suite (it has %s)", n, strings.Join(goTLS13Suites, ", "))
		}
	}
	for _, n := range goTLS13Suites {
		if !slices.Contains(listed, n) {
			return tlsRefuse(l, "%s is left out, but Go's TLS 1.3 always offers it (its TLS 1.3 suites are not configurable)", n)
		}
	}
	return nil
}

// versionOption is the version of a no-/force- option's suffix (sslv3,
// tlsv10 … tlsv13), -1 if none.
func versionOption(s string) int {
	return slices.Index([]string{"sslv3", "tlsv10", "tlsv11", "tlsv12", "tlsv13"}, s)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
