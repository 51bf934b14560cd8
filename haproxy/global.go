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
	bindTLS         bindTLS
	maxconn         *Line  // every frontend's connections together
	gracePeriod     string // hard-stop-after, as a Caddy duration
}

// readGlobal reads the global section's lines through the registry.
func (t *translator) readGlobal() error {
	g := &t.global
	g.tag = "haproxy"
	s := t.cfg.Section("global", "")
	if s == nil {
		return nil
	}
	for _, l := range s.Lines {
		if err := g.read(l); err != nil {
			return err
		}
	}
	return nil
}

func readGlobalLog(g *global, l Line) error {
	lt, err := readLogTarget(l)
	if err != nil {
		return err
	}
	g.loggers = append(g.loggers, lt)
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
	return nil
}

func readBaseDir(g *global, l Line) error {
	if len(l.Words) != 2 || l.Words[1] == "" {
		return refuse(l, "takes one directory")
	}
	if l.Words[0] == "ca-base" {
		g.caBase = &l
	} else {
		g.crtBase = &l
	}
	return nil
}

func readBindTLS(g *global, l Line) error { return g.bindTLS.read(l) }

func readGlobalMaxconn(g *global, l Line) error {
	if _, err := readMaxconn(l, false); err != nil {
		return err
	}
	g.maxconn = &l
	return nil
}

func readHardStopAfter(g *global, l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes a time")
	}
	d, err := duration(l.Words[1], l.Pos)
	g.gracePeriod = d
	return err
}

// readNothing takes a global line that is only noted.
func readNothing(*global, Line) error { return nil }

func (t *translator) emitGlobalLog(l Line, _ []*frontend) {
	g := &t.global
	for i, lt := range g.loggers {
		if lt.line.Pos == l.Pos {
			name := ""
			if i > 0 {
				name = "haproxy_log_" + strconv.Itoa(l.Pos.Line)
			}
			lt.write(&t.out, name, g.tag, g.chroot)
		}
	}
}

func (t *translator) emitBindTLS(l Line, frontends []*frontend) {
	if anyTLS(frontends) {
		t.out.comment(l, "in the tls block of each TLS site below")
	} else {
		t.out.comment(l, "ignored: no bind has ssl, so no site takes it")
	}
}

func (t *translator) emitGlobalMaxconn(l Line, _ []*frontend) {
	t.out.comment(l, "every frontend's connections together: max_connections with group "+globalMaxconnGroup+" in each servers option below")
}

func (t *translator) emitHardStopAfter(l Line, _ []*frontend) {
	t.out.comment(l, "how long a reload or a stop waits for connections busy with a request, as HAProxy's soft-stop does")
	t.out.line("grace_period %s", t.global.gracePeriod)
}

func (t *translator) emitNotUsed(l Line, _ []*frontend) {
	t.out.comment(l, "ignored: "+notUsed)
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

// writeTLS writes a TLS site's certificates (each crt of its bind: a file
// holding a certificate and its key, or a directory of them), with the
// global section's TLS defaults. Caddy picks among them by the client's
// SNI, as HAProxy does.
func (fe *frontend) writeTLS(c *caddyfile, crt *bind) error {
	g := fe.global
	if g == nil {
		g = &global{}
	}
	c.comment(crt.line, "")
	var files, dirs []string
	for _, f := range crt.crts {
		path := resolve(g.crtBase, f)
		if path != f {
			c.comment(*g.crtBase, "crt "+f+" is "+path)
		}
		if isDir(fe.cfg.files(), path) {
			dirs = append(dirs, path)
		} else {
			files = append(files, path)
		}
	}
	if len(files) > 0 && len(dirs) > 0 {
		// Caddy's tls with a file picks among its files' certificates
		// only (a certificate_selection of their tags), which a
		// directory's do not carry.
		return refuse(crt.line, "crt %s is a directory and %s a file: one bind with both is not translated (Caddy would pick among the files' certificates only)", dirs[0], files[0])
	}
	settings, notes, err := g.bindTLS.site()
	if err != nil {
		return err
	}
	for _, n := range notes {
		c.note(n)
	}
	if len(files) > 1 {
		c.line("# %d crt files: each a tls directive; Caddy picks the certificate by the client's SNI, as HAProxy does", len(files))
	}
	if len(dirs) > 0 {
		// Every PEM bundle (certificate and key) in the directories.
		c.open("tls")
		loads := make([]string, len(dirs))
		for i, d := range dirs {
			loads[i] = c.plainIn(d, fe.lines)
		}
		c.line("load %s", strings.Join(loads, " "))
		for _, d := range settings {
			c.line("%s", d)
		}
		c.close()
		return nil
	}
	for _, path := range files {
		// HAProxy's crt file holds the certificate and its key: Caddy
		// reads each from the same file.
		if len(settings) == 0 {
			c.line("tls %s %s", c.plainIn(path, fe.lines), c.plainIn(path, fe.lines))
			continue
		}
		c.open("tls %s %s", c.plainIn(path, fe.lines), c.plainIn(path, fe.lines))
		for _, d := range settings {
			c.line("%s", d)
		}
		c.close()
	}
	return nil
}

// writeUnusedDefaults writes, as comments, each defaults section that no
// frontend or backend takes its settings from (HAProxy applies it to
// none), having checked each line as a frontend or a backend would read
// it, so that nothing is refused later only because a proxy came to take
// it.
func (t *translator) writeUnusedDefaults() error {
	used := map[*Section][]string{} // the proxies that take each
	for _, s := range t.cfg.Sections {
		if s.Kind == "defaults" {
			continue
		}
		var seen []*Section
		for d := t.cfg.DefaultsOf(s); d != nil && !slices.Contains(seen, d); d = t.cfg.DefaultsOf(d) {
			seen = append(seen, d)
			used[d] = append(used[d], s.Kind+" "+s.Name)
		}
	}
	for _, s := range t.cfg.Sections {
		if s.Kind != "defaults" {
			continue
		}
		if takers := used[s]; len(takers) > 0 {
			t.out.comment(s.line(), "taken by "+strings.Join(takers, ", ")+": each of its lines is kept where it applies")
			continue
		}
		t.out.comment(s.line(), "no frontend or backend takes these defaults: HAProxy applies them to none")
		for _, l := range s.Lines {
			// Read by the side that takes it (a backend's keyword as a
			// backend's, a frontend's as a frontend's), one of both
			// sides by either.
			fe := &frontend{section: &Section{Kind: "frontend", Name: s.Name, Pos: s.Pos}, timeouts: map[string]string{}, acls: map[string][]Line{}, usedACLs: map[Position]bool{}, global: &t.global}
			be := &backend{section: &Section{Kind: "backend", Name: s.Name, Pos: s.Pos}, timeouts: map[string]string{}}
			var err error
			switch keywordSide(l) {
			case frontendSide:
				err = fe.read(l)
			case backendSide:
				err = be.read(l)
			default:
				if err = fe.read(l); err != nil && be.read(l) == nil {
					err = nil
				}
			}
			if err != nil {
				return err
			}
			t.out.comment(l, "read, and applied to no proxy")
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return []string{s}
}
