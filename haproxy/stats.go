package haproxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// statsPage is HAProxy's stats page of a frontend or listen section, as
// caddy-ha's ha_status page: at the stats uri (a prefix of the path and
// query as sent, for GET, HEAD and POST, as HAProxy tests it), behind
// basic_auth with the stats auth users, after the http-request rules and
// before the redirect and use_backend rules, where HAProxy looks for it.
type statsPage struct {
	from    *Section // the section whose stats lines these are
	lines   []note   // each stats line, and what became of it
	uri     string
	realm   string
	refresh string // a Caddy duration, or off
	users   []statsUser
}

type statsUser struct {
	line       Line
	name, hash string
}

// statsPageDiffers is how ha_status differs from HAProxy's stats page.
const statsPageDiffers = "ha_status shows caddy-ha's view (leader pools, rate-limit zones, stores, pins), not HAProxy's proxies and servers, and answers a POST 405, where HAProxy's page takes it as an admin action (without stats admin, a redirect to ;st=DENY)"

// HAProxy's defaults (stats enable).
const (
	defaultStatsURI   = "/haproxy?stats"
	defaultStatsRealm = "HAProxy Statistics"
)

// statsMatcher names the page's matcher in the site; a backend's page's
// is named after its section's line (see matcher).
const statsMatcher = "@haproxy_stats"

// matcher is the name of the page's matcher: a site may have its
// frontend's page and its backends'.
func (p *statsPage) matcher() string {
	if p.from.Kind == "backend" {
		return statsMatcher + "_" + strconv.Itoa(p.from.Pos.Line)
	}
	return statsMatcher
}

// statsLines are the stats lines written in s itself.
func statsLines(s *Section) []Line {
	var lines []Line
	for _, l := range s.Lines {
		if l.Words[0] == "stats" {
			lines = append(lines, l)
		}
	}
	return lines
}

// chain is s and the defaults it takes its settings from, nearest first.
func (t *translator) chain(s *Section) []*Section {
	var chain []*Section
	for d := s; d != nil && !slices.Contains(chain, d); d = t.cfg.DefaultsOf(d) {
		chain = append(chain, d)
	}
	return chain
}

// statsSource is the section whose stats lines make s's page: s itself if
// it has any (HAProxy then drops those of its defaults), else the nearest
// defaults with some; nil without a page. A defaults section's own lines
// add to those of the defaults it takes from (HAProxy shares one page
// between them), which is refused.
func (t *translator) statsSource(s *Section) (*Section, error) {
	var from *Section
	for _, sec := range t.chain(s) {
		if len(statsLines(sec)) == 0 {
			continue
		}
		if from == nil {
			from = sec
			continue
		}
		if from.Kind == "defaults" {
			return nil, refuse(statsLines(from)[0], "stats lines in defaults %s and in the defaults it takes from (%s) are not translated: HAProxy makes one page of both", from.Name, sec.Name)
		}
		break
	}
	return from, nil
}

// readStats reads the stats page of the frontend or listen section s, nil
// if it has none; notes are the stats lines of its defaults that its own
// replace.
func (t *translator) readStats(s *Section) (*statsPage, []note, error) {
	from, err := t.statsSource(s)
	if err != nil || from == nil {
		return nil, nil, err
	}
	var replaced []note
	if from == s {
		for _, d := range t.chain(s)[1:] {
			for _, l := range statsLines(d) {
				replaced = append(replaced, note{line: l, what: fmt.Sprintf("ignored: %s %s has stats lines of its own, which replace its defaults', as in HAProxy", s.Kind, s.Name)})
			}
		}
	}
	p := &statsPage{from: from, uri: defaultStatsURI, realm: defaultStatsRealm, refresh: "off"}
	for _, l := range statsLines(from) {
		if err := p.read(l, s); err != nil {
			return nil, nil, err
		}
	}
	if len(p.users) == 0 {
		for i, n := range p.lines {
			if arg(n.line, 1) == "realm" {
				p.lines[i].what = "no stats auth: the page asks for no credentials, as in HAProxy"
			}
		}
	}
	// The page's first line says how it differs: a Warning.
	first := &p.lines[0]
	first.what = joinNote(first.what, statsPageDiffers)
	first.approximated = true
	return p, replaced, nil
}

// read takes one stats line of the page of proxy s, through the
// registry (its entry's page reader).
func (p *statsPage) read(l Line, s *Section) error {
	k := keywordAt(l)
	if k == nil {
		return refuse(l, "stats %s is not translated yet", arg(l, 1))
	}
	if k.page == nil {
		return notTranslated(k, l)
	}
	what, err := k.page(p, l, s)
	if err != nil {
		return err
	}
	p.lines = append(p.lines, note{line: l, what: what, approximated: k.status == approximated})
	return nil
}

// statsKeyword reads a stats line of the page of proxy s: what became of
// the line, or its refusal.
type statsKeyword func(p *statsPage, l Line, s *Section) (string, error)

// statsArgument reads a keyword of one argument, v, with read.
func statsArgument(read func(p *statsPage, l Line, v string, s *Section) (string, error)) statsKeyword {
	return func(p *statsPage, l Line, s *Section) (string, error) {
		if len(l.Words) != 3 {
			return "", refuse(l, "takes one argument")
		}
		return read(p, l, l.Words[2], s)
	}
}

// statsNote takes a keyword, whatever its arguments, as what.
func statsNote(what string) statsKeyword {
	return func(*statsPage, Line, *Section) (string, error) { return what, nil }
}

func (p *statsPage) readURI(l Line, v string, _ *Section) (string, error) {
	if !strings.HasPrefix(v, "/") {
		return "", refuse(l, "a uri that does not begin with / (HAProxy compares it with the absolute URI) is not translated")
	}
	if strings.ContainsAny(v, "{}`") || strings.ContainsFunc(v, isControlOrSpace) {
		return "", refuse(l, "a uri with braces, a backquote, a space or a control character is not translated")
	}
	p.uri = v
	return "", nil
}

func (p *statsPage) readRealm(l Line, v string, _ *Section) (string, error) {
	if v == "" || strings.ContainsAny(v, "\"\\{}") || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", refuse(l, "a realm that is empty or has a quote, a backslash, braces or a control character is not translated")
	}
	p.realm = v
	return "", nil
}

// readAuth adds the user of v (<user>:<password>), unless the page has
// that user already: HAProxy checks the password of its first line.
func (p *statsPage) readAuth(l Line, v string, s *Section) (string, error) {
	user, password, ok := strings.Cut(v, ":")
	switch {
	case !ok:
		return "", refuse(l, "takes <user>:<password>")
	case user == "" || password == "":
		return "", refuse(l, "an empty user or password is not translated (basic_auth wants both)")
	case strings.ContainsAny(user, "{}") || strings.ContainsFunc(user, isControlOrSpace):
		return "", refuse(l, "a user with braces, a space or a control character is not translated")
	case len(password) > statsMaxPassword:
		return "", refuse(l, "a password longer than %d bytes is not translated: bcrypt reads %d, and would take any password that begins with these", statsMaxPassword, statsMaxPassword)
	}
	if i := slices.IndexFunc(p.users, func(u statsUser) bool { return u.name == user }); i >= 0 {
		return fmt.Sprintf("ignored, as HAProxy does: user %s is at line %d, whose password counts", user, p.users[i].line.Pos.Line), nil
	}
	p.users = append(p.users, statsUser{line: l, name: user, hash: statsPasswordHash(s.Kind+" "+s.Name, user, password)})
	return "its password as a bcrypt hash in basic_auth below", nil
}

func (p *statsPage) readRefresh(l Line, v string, _ *Section) (string, error) {
	var err error
	if p.refresh, err = statsRefresh(v, l); err != nil {
		return "", err
	}
	what := "ha_status's refresh " + p.refresh
	if p.refresh != "off" && p.refresh != v {
		what += ": whole seconds, rounded up as HAProxy sends them"
	}
	return what, nil
}

func isControlOrSpace(r rune) bool { return r <= ' ' || r == 0x7f }

// statsRefresh reads stats refresh's delay (seconds without a unit) as
// ha_status's refresh: whole seconds, rounded up as HAProxy sends them;
// 0, which HAProxy sends no refresh for, is off.
func statsRefresh(v string, l Line) (string, error) {
	if v != "" && strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		v += "s"
	}
	d, err := duration(v, l.Pos)
	if err != nil {
		return "", err
	}
	parsed, err := time.ParseDuration(d)
	if err != nil || parsed < 0 {
		return "", refuse(l, "%q is not a delay", v)
	}
	if parsed == 0 {
		return "off", nil
	}
	secs := (parsed + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(secs), 10) + "s", nil
}

// frontendSetting takes a stats or maxconn line in a backend. HAProxy
// uses a defaults' maxconn in frontends only, and ignores a backend's own
// (with a warning); a backend's stats page from its defaults is the
// frontend's, which answers first (readFrontend checks that the frontend
// serves that same page); a backend's own page is its own (readBackend).
func (be *backend) frontendSetting(l Line) error {
	own := ownLine(be.section, l)
	switch {
	case l.Words[0] == "stats" && len(statsLines(be.section)) > 0:
		// The backend's own page (readBackend reads it), whose lines
		// replace its defaults'.
	case l.Words[0] == "stats":
		be.notes = append(be.notes, note{line: l, what: "the frontend's stats page, which answers first"})
	case own:
		be.notes = append(be.notes, note{line: l, what: "ignored, as HAProxy does: a backend has no maxconn (a server's maxconn limits its requests)"})
	default:
		be.notes = append(be.notes, note{line: l, what: "a frontend's: see the servers option"})
	}
	return nil
}

// checkBackendStats refuses a backend whose defaults give it a stats page
// the frontend does not serve: HAProxy would answer that page for the
// requests it routes there.
func (t *translator) checkBackendStats(fe *frontend, be *backend) error {
	from, err := t.statsSource(be.section)
	if err != nil || from == nil || from == be.section {
		return err
	}
	if fe.stats == nil || fe.stats.from != from {
		return refuse(statsLines(from)[0], "backend %s takes this stats page from its defaults, which %s %s does not serve: a backend's stats page is not translated yet",
			be.section.Name, fe.section.Kind, fe.section.Name)
	}
	return nil
}

// statsAdminDoc is what becomes of stats admin.
const statsAdminDoc = "the page without admin actions: ha_status has no admin level, so nothing on it sets a server up, down, to drain or to maintenance as HAProxy's admin form does for the requests the condition takes"

// readStatsAdmin reads stats admin { if | unless } <condition>: the page
// without its admin form. What was an operator's way to change servers'
// state is gone, and nothing is exposed that was not: the safe way to
// approximate it.
func readStatsAdmin(_ *statsPage, l Line, _ *Section) (string, error) {
	if w := arg(l, 2); (w != "if" && w != "unless") || len(l.Words) < 4 {
		return "", refuse(l, "takes if or unless and a condition")
	}
	return statsAdminDoc, nil
}

func readStatsEnable(_ *statsPage, l Line, _ *Section) (string, error) {
	if len(l.Words) != 2 {
		return "", refuse(l, "takes no argument")
	}
	return "", nil
}
