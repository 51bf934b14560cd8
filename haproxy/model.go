package haproxy

import "slices"

// model is what a configuration says in Caddy's terms, read and resolved:
// the stage between HAProxy's lines and the Caddyfile's text. Writing it
// (emit) refuses nothing but a value no token carries exactly.
type model struct {
	cfg       *Config
	global    *global
	frontends []*frontend // each with the backends it sends to
	defaults  []defaultsUse
	sni       []sniNote    // HAProxy's default certificate, as Caddy's default_sni
	resolvers []*resolvers // the resolvers sections, in the order written
	caches    []*cacheSection
	fcgiApps  []*fcgiApp // the fcgi-app sections, in the order written
}

// Beyond is what a configuration asks for that a Caddyfile cannot say and
// Caddy's JSON can: the haproxy adapter sets it in the JSON it makes of
// the Caddyfile, whose first lines say so.
type Beyond struct {
	// SessionTicketsOff is where ssl-default-bind-options no-tls-tickets
	// is, with TLS 1.2 on (nil: not asked): Caddy's TLS app with session
	// tickets off (apps.tls.session_tickets.disabled).
	SessionTicketsOff *Position
}

// beyond is what the model asks for beyond the Caddyfile.
func (m *model) beyond() Beyond {
	var b Beyond
	for _, fe := range m.frontends {
		if l := fe.certs.ticketsOff; l != nil {
			b.SessionTicketsOff = &l.Pos
		}
	}
	return b
}

// defaultsUse is a defaults section and the proxies that take it (none:
// its lines were read, and apply to no proxy).
type defaultsUse struct {
	section *Section
	takers  []string
}

// translator reads a configuration into its model: it holds what the
// reading has found so far, and the lines it refused.
type translator struct {
	cfg     *Config
	global  global
	refused refusals
	// userlists are the userlist sections, by name.
	userlists map[string]*userlist
	// resolvers are the resolvers sections, by name.
	resolvers map[string]*resolvers
	// fcgiApps are the fcgi-app sections, by name.
	fcgiApps map[string]*fcgiApp
	// counted are the proxies an nbsrv names (countedBackends).
	counted map[string]bool
	// takers are the proxies that take each defaults section's settings.
	takers map[*Section][]string
	// reached are the lines read (a refused configuration's report says
	// which were not).
	reached map[Position]bool
}

// reach records that the line at pos is read.
func (t *translator) reach(pos Position) {
	if t.reached == nil {
		t.reached = map[Position]bool{}
	}
	t.reached[pos] = true
}

// read reads every section into the model, recording each refused line
// and going on: the refusals are the error.
func (t *translator) read() (*model, error) {
	t.readGlobal()
	t.readUserlists()
	t.readResolvers()
	caches := t.readCaches()
	t.readFcgiApps()
	for _, err := range t.cfg.checkDefaults() {
		t.refused.add(err)
	}
	frontends := t.readFrontends()
	t.readUnusedDefaults()
	if t.refused.count() == 0 { // what follows checks frontends read whole
		t.checkTogether(frontends)
	}
	t.refused.add(t.global.settleServerTLS(frontends))
	if t.refused.count() > 0 {
		return nil, t.refused.err()
	}
	t.global.settleTLSNotes(frontends)
	settleSessionTickets(frontends)
	m := &model{cfg: t.cfg, global: &t.global, frontends: frontends, sni: t.readDefaultSNI(frontends), resolvers: t.resolversInOrder(), caches: caches, fcgiApps: t.fcgiAppsInOrder()}
	for _, s := range t.cfg.Sections {
		if s.Kind == "defaults" {
			m.defaults = append(m.defaults, defaultsUse{s, t.takers[s]})
		}
	}
	return m, nil
}

// readFrontends reads each frontend and listen section, with the backends
// they send to (a backend is read where it is used).
func (t *translator) readFrontends() []*frontend {
	var frontends []*frontend
	for _, s := range t.cfg.Sections {
		switch s.Kind {
		case "global", "defaults", "backend", "userlist", "resolvers", "cache", "fcgi-app":
		case "frontend", "listen":
			// A listen section is translated as a frontend, with its own
			// servers (if any) as its backend.
			fe, err := t.readFrontend(s)
			t.refused.add(err)
			if err == nil {
				frontends = append(frontends, fe)
			}
		default:
			t.refused.add(refuseSection(s))
		}
	}
	return frontends
}

// checkTogether refuses what the frontends say together: an address bound
// twice, a server maxconn counted apart, a backend no frontend sends to.
func (t *translator) checkTogether(frontends []*frontend) {
	t.refused.add(checkListeners(frontends))
	t.refused.add(checkServerMaxconnUses(frontends))
	for _, s := range t.cfg.Sections {
		if s.Kind == "backend" && !slices.ContainsFunc(frontends, func(fe *frontend) bool { return fe.sendsTo(s) }) {
			t.refused.add(errAt(s.Pos, "backend %s: no frontend sends to it (a default_backend or use_backend names it)", s.Name))
		}
	}
}

// checkListeners refuses an address bound twice: Caddy's servers option
// names each once, where HAProxy would bind the address twice (with
// SO_REUSEPORT, the kernel sharing connections between the two).
func checkListeners(frontends []*frontend) error {
	bound := map[string]Line{}
	for _, fe := range frontends {
		for _, b := range fe.binds {
			if first, ok := bound[b.addr]; ok {
				return refuse(b.line, "%s is bound at %s too: one address, one listener", b.addr, first.Pos)
			}
			bound[b.addr] = b.line
		}
	}
	return nil
}
