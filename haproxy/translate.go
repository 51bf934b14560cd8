package haproxy

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// Translate turns cfg into a Caddyfile for the custom Caddy with caddy-ha's
// modules. Every line is translated, or ignored for a stated reason, or
// refused: the first refusal is the error, naming the file, the line, the
// keyword and why, so that nothing the configuration asked for is lost
// without a word. Each line is kept as a comment above what it became.
func Translate(cfg *Config) (string, error) {
	t := &translator{cfg: cfg}
	if err := t.translate(); err != nil {
		return "", err
	}
	return t.out.b.String(), nil
}

type translator struct {
	cfg *Config
	out caddyfile
}

// LeaderPath is the path whose health check marks a backend as the
// cluster's leader pool: it becomes lb_policy leader. A backend checking
// another path is marked so by "description caddy-ha:leader".
const LeaderPath = "/healthz/leader"

// leaderMark in a backend's description makes it a leader pool whatever
// its check's path.
const leaderMark = "caddy-ha:leader"

// ignoredGlobal are the process keywords of the global section, which
// Caddy has its own ways for, with why each is not translated.
var ignoredGlobal = map[string]string{
	"daemon":        "Caddy runs in the foreground; its service manager daemonizes it",
	"master-worker": "Caddy is one process; reloads go through its admin API",
	"chroot":        "not a Caddy setting: confine the process with its service manager",
	"user":          "run Caddy as that user from its service manager",
	"group":         "run Caddy as that group from its service manager",
	"uid":           "run Caddy as that user from its service manager",
	"gid":           "run Caddy as that group from its service manager",
	"nbthread":      "Go schedules Caddy on every CPU (GOMAXPROCS)",
	"nbproc":        "Caddy is one process",
	"cpu-map":       "Go schedules Caddy on every CPU (GOMAXPROCS)",
	"pidfile":       "caddy run --pidfile",
	"ulimit-n":      "set the open-files limit in the service manager",
	"stats":         "the runtime API is Caddy's admin API (and caddy ha status)",
	"log":           "Caddy logs to stderr unless its log option says otherwise",
	"node":          "not used by Caddy",
	"description":   "not used by Caddy",
}

// translate writes the Caddyfile: the global options (process keywords,
// the servers' timeouts and protocols), then a site per frontend with the
// backends it sends to.
func (t *translator) translate() error {
	var frontends []*frontend
	for _, s := range t.cfg.Sections {
		switch s.Kind {
		case "global", "defaults", "backend":
			// Read where they are used: global first, defaults and
			// backends through the frontends.
		case "frontend":
			fe, err := t.readFrontend(s)
			if err != nil {
				return err
			}
			frontends = append(frontends, fe)
		default:
			return errAt(s.Pos, "%s sections are not translated yet", s.Kind)
		}
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
			reason, ok := ignoredGlobal[l.Words[0]]
			if !ok {
				return errAt(l.Pos, "global %s is not translated yet", l.Words[0])
			}
			t.out.comment(l, "ignored: "+reason)
		}
	}
	for _, fe := range frontends {
		fe.writeServers(&t.out)
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
	if host == "*" {
		host = ""
	}
	return net.JoinHostPort(host, port), nil
}

func refuse(l Line, why string, args ...any) error {
	return errAt(l.Pos, "%s: %s", strings.Join(l.Words[:min(2, len(l.Words))], " "), fmt.Sprintf(why, args...))
}
