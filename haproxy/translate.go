package haproxy

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Translate turns cfg into a Caddyfile for the custom Caddy with caddy-ha's
// modules. Every line is translated, or ignored for a stated reason, or
// refused: the first refusal is the error, naming the file, the line, the
// keyword and why, so that nothing the configuration asked for is lost
// without a word. Each line is kept as a comment above what it became.
// Lines translated close to but not exactly as HAProxy runs them are
// the Translation's Warnings, each with its line, as well as comments.
func Translate(cfg *Config) (Translation, error) {
	t := &translator{cfg: cfg}
	if err := t.translate(); err != nil {
		return Translation{}, cfg.redacted(cfg.named(err))
	}
	if t.out.err != nil {
		return Translation{}, cfg.redacted(cfg.named(t.out.err))
	}
	out := t.out.b.String()
	if err := cfg.checkNoEnvValue(out); err != nil {
		return Translation{}, err
	}
	warnings := append(cfg.modernizedLines(), t.out.warnings...)
	slices.SortStableFunc(warnings, func(a, b Warning) int {
		return cmp.Or(strings.Compare(a.Pos.File, b.Pos.File), cmp.Compare(a.Pos.Line, b.Pos.Line))
	})
	return Translation{Caddyfile: out, Warnings: warnings}, nil
}

// modernizedLines are the warnings of the 1.x lines read as their 2.x
// replacements (see modernized).
func (c *Config) modernizedLines() []Warning {
	var out []Warning
	for _, s := range c.Sections {
		for _, l := range s.Lines {
			if l.modernized != "" {
				out = append(out, Warning{Pos: l.Pos, Msg: strings.Join(l.Source[:1], "") + ": " + l.modernized})
			}
		}
	}
	return out
}

// Translation is what Translate makes of a configuration.
type Translation struct {
	// Caddyfile is the translation, each HAProxy line kept as a comment.
	Caddyfile string
	// Warnings are the lines translated close to, but not exactly as,
	// HAProxy runs them, in the order written.
	Warnings []Warning
}

// Warning is a line translated with a difference from HAProxy: its
// position, and what differs.
type Warning struct {
	Pos Position
	Msg string
}

// named makes a refusal name the keyword of its line: one whose text
// begins otherwise (a time or an address that is wrong, a condition's
// mistake) gets the line's first words before it, as refuse writes them.
func (c *Config) named(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	l, ok := c.lineAt(e.Pos)
	if !ok || namesKeyword(e.Msg, l.Words[0]) {
		return err
	}
	return refuse(l, "%s", e.Msg)
}

// lineAt is the line (a setting, or a section's first line) at pos.
// redacted is err with the values of the environment its line read
// written as the line wrote them (${NAME}).
func (c *Config) redacted(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if l, ok := c.lineAt(e.Pos); ok && len(l.envs) > 0 {
		return &Error{Pos: e.Pos, Msg: l.redactEnv(e.Msg)}
	}
	return err
}

// minCheckedEnvValue is the shortest value of the environment that
// checkNoEnvValue looks for: shorter ones (a port, a count) are found by
// chance in any Caddyfile, and are not secrets.
const minCheckedEnvValue = 6

// checkNoEnvValue refuses a translation that holds a value of the
// environment as it is: every one the translation needs is written as
// Caddy's {$NAME} (withEnv), so one found is a value that went out some
// other way, and would be in a file people commit.
func (c *Config) checkNoEnvValue(out string) error {
	for _, s := range c.Sections {
		for _, l := range append([]Line{s.head}, s.Lines...) {
			for _, u := range l.envs {
				if len(u.value) >= minCheckedEnvValue && strings.Contains(out, u.value) {
					return refuse(l, "the value of %s would be in the translation as it is: this use of the environment is not translated (write the value, or ask for it in the Caddyfile as {$NAME})", u.haproxy)
				}
			}
		}
	}
	return nil
}

func (c *Config) lineAt(pos Position) (Line, bool) {
	for _, s := range c.Sections {
		if s.Pos == pos {
			return Line{Pos: s.Pos, Words: append([]string{s.Kind}, s.Name)}, true
		}
		for _, l := range s.Lines {
			if l.Pos == pos {
				return l, true
			}
		}
	}
	return Line{}, false
}

// sectionAt is the section that holds the setting at pos (nil: none).
// Looked up once per rule and ACL line, it is a map, so that adapting is
// linear in the lines (a scan made a block list of 20,000 lines
// quadratic).
func (c *Config) sectionAt(pos Position) *Section { return c.sectionOf[pos] }

// namesKeyword tells whether an error's text (after its file and line)
// names the keyword: its first word is the keyword (quoted or not, a
// colon after it or not), or it is "global <keyword>".
func namesKeyword(msg, keyword string) bool {
	w := strings.Fields(msg)
	if len(w) == 0 {
		return false
	}
	first := strings.TrimSuffix(w[0], ":")
	if unq, err := strconv.Unquote(first); err == nil && first[0] == '"' {
		first = unq
	}
	return first == keyword || first == "global" && len(w) > 1 && strings.TrimSuffix(w[1], ":") == keyword
}

type translator struct {
	cfg    *Config
	out    caddyfile
	global global
}

// LeaderPath is the path whose health check marks a backend as the
// cluster's leader pool: it becomes lb_policy leader. A backend checking
// another path is marked so by "description caddy-ha:leader".
const LeaderPath = "/healthz/leader"

// leaderMark in a backend's description makes it a leader pool whatever
// its check's path.
const leaderMark = "caddy-ha:leader"

// translate writes the Caddyfile: the global options (process keywords,
// the servers' timeouts and protocols), then a site per frontend with the
// backends it sends to.
func (t *translator) translate() error {
	if err := t.readGlobal(); err != nil {
		return err
	}
	if err := t.cfg.checkDefaults(); err != nil {
		return err
	}
	var frontends []*frontend
	for _, s := range t.cfg.Sections {
		switch s.Kind {
		case "global", "defaults", "backend":
			// Read where they are used: global first, defaults and
			// backends through the frontends.
		case "frontend", "listen":
			// A listen section is translated as a frontend, with its own
			// servers (if any) as its backend.
			fe, err := t.readFrontend(s)
			if err != nil {
				return err
			}
			frontends = append(frontends, fe)
		default:
			return errAt(s.Pos, "%s sections are not translated yet", s.Kind)
		}
	}
	// One listener per address: Caddy's servers option names each once,
	// where HAProxy would bind the address twice (with SO_REUSEPORT, the
	// kernel sharing connections between the two).
	bound := map[string]Line{}
	for _, fe := range frontends {
		for _, b := range fe.binds {
			if first, ok := bound[b.addr]; ok {
				return refuse(b.line, "%s is bound at %s too: one address, one listener", b.addr, first.Pos)
			}
			bound[b.addr] = b.line
		}
	}
	if err := checkServerMaxconnUses(frontends); err != nil {
		return err
	}
	for _, s := range t.cfg.Sections {
		if s.Kind == "backend" && !slices.ContainsFunc(frontends, func(fe *frontend) bool { return fe.sendsTo(s) }) {
			return errAt(s.Pos, "backend %s: no frontend sends to it (a default_backend or use_backend names it)", s.Name)
		}
	}
	t.out.line("# Written by caddy ha migrate from the HAProxy configuration %s: each of", t.cfg.file())
	t.out.line("# its lines is kept as a comment above what it became.")
	t.out.open("")
	t.out.line("# HAProxy listens only where a bind says: no redirects from port 80")
	t.out.line("auto_https disable_redirects")
	if g := t.cfg.Section("global", ""); g != nil {
		t.out.comment(Line{Pos: g.Pos, Words: []string{"global"}}, "")
		for _, l := range g.Lines {
			t.emitGlobal(l, frontends)
		}
	}
	if err := t.writeUnusedDefaults(); err != nil {
		return err
	}
	t.writeDefaultSNI(frontends)
	for _, fe := range frontends {
		fe.writeServers(&t.out, t.global.maxconn)
	}
	t.out.close()
	for _, fe := range frontends {
		if err := fe.writeSite(&t.out); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) file() string {
	if len(c.Sections) == 0 {
		return ""
	}
	return c.Sections[0].Pos.File
}

// settings are a proxy's lines, those of the defaults it takes first, in
// the order HAProxy applies them (a later line of a keyword wins).
type settings []Line

func (t *translator) settingsOf(s *Section) settings {
	var chain []*Section
	for d := t.cfg.DefaultsOf(s); d != nil && !slices.Contains(chain, d); d = t.cfg.DefaultsOf(d) {
		chain = append(chain, d)
	}
	var st settings
	for i := len(chain) - 1; i >= 0; i-- {
		st = append(st, chain[i].Lines...)
	}
	return append(st, s.Lines...)
}

// arg is the word after the keyword's own words, "" if none.
func arg(l Line, at int) string {
	if at < len(l.Words) {
		return l.Words[at]
	}
	return ""
}

// hostPort checks an address HAProxy listens on or connects to.
func hostPort(a string, pos Position) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil || port == "" {
		return "", errAt(pos, "%q: want host:port", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", errAt(pos, "%q: want a port from 1 to 65535 (no name, range or offset)", a)
	}
	if host == "*" {
		host = ""
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() != "" || err != nil && strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != "" {
		return "", errAt(pos, "%q: want an IP address (without a zone) or a host name (letters, digits, '.', '-' and '_') before the port", a)
	}
	return net.JoinHostPort(host, port), nil
}

func refuse(l Line, why string, args ...any) error {
	return errAt(l.Pos, "%s: %s", l.shownKeyword(), fmt.Sprintf(why, args...))
}

// refuseValue refuses l because no Caddyfile token carries v, the value of
// what, exactly; a line that took a value from the environment is not
// quoted, so that no message shows it.
func refuseValue(l Line, what, v string, err error) error {
	if l.usesEnv() {
		return refuse(l, "%s (a value from the environment) cannot be carried by a Caddyfile exactly: %v", what, err)
	}
	return refuse(l, "%s %s cannot be carried by a Caddyfile exactly: %v", what, quotedValue(v), err)
}
