package haproxy

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// global is what the global section sets for the proxies: where logs go,
// the directories relative TLS paths resolve against, and the binds' TLS
// defaults.
type global struct {
	loggers         []logTarget
	tag             string // log-tag: the syslog tag, HAProxy's program name by default
	crtBase, caBase *Line
	chroot          *Line
	bindTLS         defaultTLS // ssl-default-bind- lines
	serverTLS       defaultTLS // ssl-default-server- lines
	maxconn         *Line      // every frontend's connections together
	bufsize         int        // tune.bufsize, 0 if unset
	gracePeriod     string     // hard-stop-after, as a Caddy duration
	gracePeriodAt   Position   // its line
	// notes are the section's lines, each with what became of it, in
	// the order written (a log line's logger is written in its place).
	notes []note
}

func (g *global) note(l Line, what string) { g.notes = append(g.notes, note{line: l, what: what}) }

// readGlobal reads the global section's lines through the registry.
func (t *translator) readGlobal() {
	g := &t.global
	g.tag = "haproxy"
	s := t.cfg.Section("global", "")
	if s == nil {
		return
	}
	for _, l := range s.Lines {
		t.reach(l.Pos)
		t.refused.add(g.read(l))
	}
}

// settleTLSNotes says of the TLS defaults whether a site takes them, once
// the frontends are read.
func (g *global) settleTLSNotes(frontends []*frontend) {
	what := "ignored: no bind has ssl, so no site takes it"
	if anyTLS(frontends) {
		what = "in the tls block of each TLS site below"
	}
	for i, n := range g.notes {
		if strings.HasPrefix(n.line.Words[0], "ssl-default-bind-") {
			g.notes[i].what = what
		}
	}
}

// loggerAt is the logger of the log line at pos, and its name: none for
// the first, which is Caddy's default logger's.
func (g *global) loggerAt(pos Position) (logTarget, string, bool) {
	for i, lt := range g.loggers {
		if lt.line.Pos == pos {
			name := ""
			if i > 0 {
				name = "haproxy_log_" + strconv.Itoa(pos.Line)
			}
			return lt, name, true
		}
	}
	return logTarget{}, "", false
}

func readGlobalLog(g *global, l Line) error {
	lt, err := readLogTarget(l)
	if err != nil {
		return err
	}
	g.loggers = append(g.loggers, lt)
	g.note(l, "")
	return nil
}

func readChroot(g *global, l Line) error {
	g.chroot = &l
	return nil
}

func readLogTag(g *global, l Line) error {
	if len(l.Words) != 2 || l.Words[1] == "" {
		return refuse(l, "takes one tag")
	}
	g.tag = l.Words[1]
	g.note(l, "the tag of each format syslog")
	return nil
}

func readBaseDir(g *global, l Line) error {
	if len(l.Words) != 2 || l.Words[1] == "" {
		return refuse(l, "takes one directory")
	}
	if l.Words[0] == "ca-base" {
		g.caBase = &l
		g.note(l, "a relative ca-file resolves against it, as in HAProxy")
	} else {
		g.crtBase = &l
		g.note(l, "a relative crt resolves against it, as in HAProxy")
	}
	return nil
}

func readBindTLS(g *global, l Line) error {
	g.note(l, "") // settleTLSNotes
	return g.bindTLS.read(l)
}

func readServerTLS(g *global, l Line) error {
	g.note(l, "") // settleServerTLS
	return g.serverTLS.read(l)
}

// settleServerTLS says what becomes of the ssl-default-server- lines,
// once the backends are read: nothing without a server with ssl, else
// the transport's TLS (defaultTLS.transport), which may refuse them.
func (g *global) settleServerTLS(frontends []*frontend) error {
	lines := g.serverTLS.lines()
	if len(lines) == 0 {
		return nil
	}
	var notes []note
	if server := sslServer(frontends); server == nil {
		for _, l := range lines {
			notes = append(notes, note{line: l, what: "ignored: no server has ssl, so nothing takes it"})
		}
	} else {
		var err error
		if notes, err = g.serverTLS.transport(*server); err != nil {
			return err
		}
	}
	for _, n := range notes {
		for i := range g.notes {
			if g.notes[i].line.Pos == n.line.Pos {
				g.notes[i] = n
			}
		}
	}
	return nil
}

// sslServer is the line of the first server with ssl a frontend sends
// to, nil if none.
func sslServer(frontends []*frontend) *Line {
	for _, fe := range frontends {
		for _, be := range fe.backends() {
			if be.tls.ssl && len(be.servers) > 0 {
				return &be.servers[0].line
			}
		}
	}
	return nil
}

func readGlobalMaxconn(g *global, l Line) error {
	if _, err := readMaxconn(l, false); err != nil {
		return err
	}
	g.maxconn = &l
	g.note(l, "every frontend's connections together: max_connections with group "+globalMaxconnGroup+" in each servers option below")
	return nil
}

func readHardStopAfter(g *global, l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes a time")
	}
	d, err := duration(l.Words[1], l.Pos)
	g.gracePeriod, g.gracePeriodAt = d, l.Pos
	g.note(l, "how long a reload or a stop waits for connections busy with a request, as HAProxy's soft-stop does")
	return err
}

// readUnusedGlobal takes a global line Caddy has no use for.
// ignoredGlobal reads a global line that Caddy takes no setting for: why.
func ignoredGlobal(why string) func(*global, Line) error {
	return func(g *global, l Line) error {
		g.note(l, "ignored: "+why)
		return nil
	}
}

func readUnusedGlobal(g *global, l Line) error {
	g.note(l, "ignored: "+notUsed)
	return nil
}

func anyTLS(frontends []*frontend) bool {
	for _, fe := range frontends {
		for _, b := range fe.binds {
			if b.isTLS {
				return true
			}
		}
	}
	return false
}

// resolve is a relative path of a crt or ca-file joined to its base
// directory (HAProxy's crt-base, ca-base); an absolute one, or one
// without a base, as it is.
func resolve(base *Line, path string) string {
	if base == nil || path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(base.Words[1], path)
}

// readUnusedDefaults reads each line of a defaults section that no
// frontend or backend takes its settings from (HAProxy applies it to
// none) as a frontend or a backend would read it, so that nothing is
// refused later only because a proxy came to take it.
func (t *translator) readUnusedDefaults() {
	t.takers = map[*Section][]string{}
	for _, s := range t.cfg.Sections {
		if s.Kind == "defaults" {
			continue
		}
		var seen []*Section
		for d := t.cfg.DefaultsOf(s); d != nil && !slices.Contains(seen, d); d = t.cfg.DefaultsOf(d) {
			seen = append(seen, d)
			t.takers[d] = append(t.takers[d], s.Kind+" "+s.Name)
		}
	}
	for _, s := range t.cfg.Sections {
		if s.Kind != "defaults" || len(t.takers[s]) > 0 {
			continue
		}
		fe, be := t.unusedDefaultSides(s)
		for _, l := range s.Lines {
			t.reach(l.Pos)
			t.refused.add(readUnusedDefault(fe, be, l))
		}
	}
}

// unusedDefaultSides are the frontend and the backend that read a
// defaults section no proxy takes: its rules see its own ACLs.
func (t *translator) unusedDefaultSides(s *Section) (*frontend, *backend) {
	fe := &frontend{section: &Section{Kind: "frontend", Name: s.Name, Pos: s.Pos}, timeouts: map[string]string{}, aclScope: newACLScope(t.cfg), global: &t.global, userlists: t.userlists}
	be := &backend{section: &Section{Kind: "backend", Name: s.Name, Pos: s.Pos}, timeouts: map[string]string{}, aclScope: newACLScope(t.cfg), resolversSections: t.resolvers, userlists: t.userlists}
	return fe, be
}

// readUnusedDefault reads a line by the side that takes it (a backend's
// keyword as a backend's, a frontend's as a frontend's), one of both
// sides by either.
func readUnusedDefault(fe *frontend, be *backend, l Line) error {
	switch keywordSide(l) {
	case frontendSide:
		return fe.read(l)
	case backendSide:
		return be.read(l)
	}
	if err := fe.read(l); err != nil && be.read(l) != nil {
		return err
	}
	return nil
}
