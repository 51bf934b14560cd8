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
func (c *Config) checkDefaults() []error {
	var errs []error
	for _, s := range c.Sections {
		if s.Kind != "defaults" {
			continue
		}
		for _, l := range s.Lines {
			if err := checkDefaultsLine(s, l); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return append(errs, c.checkDefaultsWithRules()...)
}

func checkDefaultsLine(s *Section, l Line) error {
	k := keywordAt(l)
	switch {
	case k == nil:
		return nil
	case !k.in.has(inDefaults):
		return refuse(l, "HAProxy does not take %s in a defaults section", k.name)
	case (k.rules || k.name == "acl") && s.Name == "":
		return refuse(l, "HAProxy takes %s only in a named defaults section, not in an anonymous one", k.name)
	}
	return nil
}

// checkDefaultsWithRules refuses a defaults section with rules that a
// frontend and a backend (or a listen) take: the first proxy that takes
// it sets which side may.
func (c *Config) checkDefaultsWithRules() []error {
	var errs []error
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
				errs = append(errs, errAt(s.Pos, "%s %s: frontends and backends cannot take one defaults section with rules (defaults %s at %s): HAProxy refuses it too", s.Kind, s.Name, d.Name, d.Pos))
				break
			}
			takenBy[d] = s
		}
	}
	return errs
}

// isRule tells whether l is a rule HAProxy takes only in a named defaults
// section (see keyword.rules).
func isRule(l Line) bool {
	k := keywordAt(l)
	return k != nil && k.rules
}

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

// settings are a proxy's lines, those of the defaults it takes first, in
// the order HAProxy applies them (a later line of a keyword wins).
type settings []Line
