package haproxy

import "slices"

// HAProxy's proxies have a frontend side (the clients': bind, the client
// timeouts, use_backend), a backend side (the servers': balance, checks,
// the server timeouts), or both (listen). A defaults section holds
// settings of both sides, and each proxy that takes it applies those of
// its own side (the keyword matrix, section 4.1 of HAProxy's
// configuration manual): a frontend skips the backend keywords of its
// defaults, a backend the frontend keywords. A proxy's own line of the
// other side is one HAProxy ignores with a warning: refused here.

// side is the proxies HAProxy takes a keyword in.
type side int

const (
	bothSides side = iota
	frontendSide
	backendSide
)

// ownLine tells whether l is written in s itself, not in its defaults.
func ownLine(s *Section, l Line) bool {
	return s.cfg != nil && s.cfg.sectionOf[l.Pos] == s
}

// fromDefaultsNote is what becomes of a defaults line of the other side:
// HAProxy applies it to the proxies of that side that take the defaults.
func fromDefaultsNote(l Line, kind string) string {
	switch {
	case keywordSide(l) == backendSide && kind == "listen":
		return "a backend's: this listen section has no server"
	case keywordSide(l) == backendSide:
		return "a backend's: see its reverse_proxy"
	case isLogLine(l):
		return "a frontend's: see the site's log"
	case l.Words[0] == "timeout" || l.Words[0] == "maxconn":
		return "a frontend's: see the servers option"
	}
	return "a frontend's: see the site"
}

// checkDefaults refuses what HAProxy refuses in a defaults section: a
// keyword it does not take there, rules in an anonymous one, and a
// defaults section with rules that frontends and backends both take.
func (c *Config) checkDefaults() error {
	for _, s := range c.Sections {
		if s.Kind != "defaults" {
			continue
		}
		for _, l := range s.Lines {
			k := keywordAt(l)
			if k != nil && !k.in.has(inDefaults) {
				return refuse(l, "HAProxy does not take %s in a defaults section", k.name)
			}
			if k != nil && (k.rules || k.name == "acl") && s.Name == "" {
				return refuse(l, "HAProxy takes %s only in a named defaults section, not in an anonymous one", k.name)
			}
		}
	}
	// A defaults section with rules: the first proxy that takes it.
	takenBy := map[*Section]*Section{}
	for _, s := range c.Sections {
		if s.Kind != "frontend" && s.Kind != "backend" && s.Kind != "listen" {
			continue
		}
		var seen []*Section
		for d := c.DefaultsOf(s); d != nil && !slices.Contains(seen, d); d = c.DefaultsOf(d) {
			seen = append(seen, d)
			if !slices.ContainsFunc(d.Lines, isRule) {
				continue
			}
			if first, ok := takenBy[d]; s.Kind == "listen" || ok && first.Kind != s.Kind {
				return errAt(s.Pos, "%s %s: frontends and backends cannot take one defaults section with rules (defaults %s at %s): HAProxy refuses it too", s.Kind, s.Name, d.Name, d.Pos)
			}
			takenBy[d] = s
		}
	}
	return nil
}

// isRule tells whether l is a rule HAProxy takes only in a named defaults
// section (see keyword.rules).
func isRule(l Line) bool {
	k := keywordAt(l)
	return k != nil && k.rules
}
