package haproxy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// resolvers is a resolvers section: the DNS servers through which the
// servers that name it resolve their names at run time, which dynamic
// checked's resolve does in Caddy.
type resolvers struct {
	section     *Section
	nameservers []string // host:port, asked in turn
	system      *Line    // parse-resolv-conf: the system's resolver
	holdValid   string   // hold valid: the refresh ("": HAProxy's 10s)
	timeout     string   // timeout resolve: one lookup's bound ("": 1s)
	notes       []note
	// lines are the section's, where its values come from.
	lines []Line
}

// readResolvers reads every resolvers section, each refused line recorded.
func (t *translator) readResolvers() {
	t.resolvers = map[string]*resolvers{}
	for _, s := range t.cfg.Sections {
		if s.Kind != "resolvers" {
			continue
		}
		r := &resolvers{section: s, lines: s.Lines}
		t.resolvers[s.Name] = r
		for _, l := range s.Lines {
			t.reach(l.Pos)
			k := keywordAt(l)
			if k == nil || !k.in.has(inResolvers) {
				t.refused.add(refuse(l, "not translated yet in a resolvers section"))
				continue
			}
			if k.resolvers == nil {
				t.refused.add(notTranslated(k, l))
				continue
			}
			t.refused.add(k.resolvers(r, l))
		}
		if r.system != nil && len(r.nameservers) > 0 {
			t.refused.add(refuse(*r.system, "parse-resolv-conf with nameserver lines is not translated: Caddy asks either the system's resolver or the listed servers (write the system's nameservers as nameserver lines)"))
		}
	}
}

// resolversInOrder are the resolvers sections, in the order written.
func (t *translator) resolversInOrder() []*resolvers {
	var out []*resolvers
	for _, s := range t.cfg.Sections {
		if r := t.resolvers[s.Name]; s.Kind == "resolvers" && r != nil {
			out = append(out, r)
		}
	}
	return out
}

// readNameserver reads nameserver <name> <address>[:<port>]: a DNS server
// asked over UDP (port 53 by default), as HAProxy asks it.
func (r *resolvers) readNameserver(l Line) error {
	if len(l.Words) != 3 {
		return refuse(l, "takes a name and an address")
	}
	a := strings.TrimPrefix(l.Words[2], "udp@")
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		host, port = a, "53"
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return refuse(l, "%s: only an IP address (udp@ or none, and a port) is translated", l.Words[2])
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return refuse(l, "%s: want a port from 1 to 65535", l.Words[2])
	}
	r.nameservers = append(r.nameservers, net.JoinHostPort(host, port))
	r.notes = append(r.notes, note{line: l, what: "dynamic checked's resolvers"})
	return nil
}

func (r *resolvers) readParseResolvConf(l Line) error {
	if len(l.Words) != 1 {
		return refuse(l, "takes no value")
	}
	r.system = &l
	r.notes = append(r.notes, note{line: l, what: "the system's resolver (Go's reads /etc/resolv.conf): dynamic checked without resolvers"})
	return nil
}

// readHold reads hold <status> <period>: valid is the refresh; the
// others keep a server after an answer without it, or a failed one, for
// that long, which Caddy does not (see their entries).
func (r *resolvers) readHold(l Line) error {
	if len(l.Words) != 3 {
		return refuse(l, "takes a status and a period")
	}
	d, err := duration(l.Words[2], l.Pos)
	if err != nil {
		return err
	}
	switch k := keywordAt(l); {
	case l.Words[1] == "valid" && !positive(d):
		return refuse(l, "hold valid %s: a refresh above 0 is translated", l.Words[2])
	case l.Words[1] == "valid":
		r.holdValid = d
		r.notes = append(r.notes, note{line: l, what: "dynamic checked's refresh: the names resolved again that often"})
	case k.status == ignored:
		r.notes = append(r.notes, note{line: l, what: "ignored: " + k.doc})
	default:
		r.notes = append(r.notes, note{line: l, approximated: true, what: k.doc})
	}
	return nil
}

// readTimeout reads timeout resolve (the bound of one lookup) and timeout
// retry (ignored: Go's resolver retries on its own).
func (r *resolvers) readTimeout(l Line) error {
	if len(l.Words) != 3 {
		return refuse(l, "takes a duration")
	}
	d, err := duration(l.Words[2], l.Pos)
	if err != nil {
		return err
	}
	if l.Words[1] == "resolve" {
		if !positive(d) {
			return refuse(l, "timeout resolve %s: a bound above 0 is translated", l.Words[2])
		}
		r.timeout = d
		r.notes = append(r.notes, note{line: l, what: "dynamic checked's resolve_timeout"})
		return nil
	}
	r.notes = append(r.notes, note{line: l, what: "ignored: " + keywordAt(l).doc})
	return nil
}

// positive tells whether a Caddy duration is above 0.
func positive(d string) bool {
	p, err := time.ParseDuration(d)
	return err == nil && p > 0
}

// readIgnored notes a line of the section that changes nothing Caddy
// does: its entry's doc.
func (r *resolvers) readIgnored(l Line) error {
	r.notes = append(r.notes, note{line: l, what: "ignored: " + keywordAt(l).doc})
	return nil
}

// resolveOptions are what a server's options say about resolving its
// name at run time: alike for every server of a backend (one dynamic
// checked).
type resolveOptions struct {
	resolvers       *resolvers
	preferIPv4      bool
	allowDupIP      bool
	ignoreSRVWeight bool
}

// resolvedBy reads a server's resolvers option.
func (r *serverReading) resolvedBy(v string, at Line) error {
	res := r.be.resolversSections[v]
	if res == nil {
		return refuse(at, "resolvers %s: no resolvers section of that name", v)
	}
	r.resolving.resolvers = res
	return nil
}

func (r *serverReading) resolvePrefer(v string, at Line) error {
	switch v {
	case "ipv4":
		r.resolving.preferIPv4 = true
	case "ipv6":
		r.resolving.preferIPv4 = false
	default:
		return refuse(at, "resolve-prefer takes ipv4 or ipv6")
	}
	return nil
}

// resolveOpts reads resolve-opts <opt>[,<opt>…].
func (r *serverReading) resolveOpts(v string, at Line) error {
	for _, o := range strings.Split(v, ",") {
		switch o {
		case "allow-dup-ip":
			r.resolving.allowDupIP = true
		case "prevent-dup-ip":
			r.resolving.allowDupIP = false
		case "ignore-weight":
			r.resolving.ignoreSRVWeight = true
		default:
			return refuse(at, "resolve-opts %s is not translated (allow-dup-ip, prevent-dup-ip and ignore-weight are)", o)
		}
	}
	return nil
}

// initAddr reads init-addr <method>[,<method>…]: how HAProxy finds a
// server's first address. dynamic checked resolves its names through the
// resolvers as it starts, before it checks; a name that does not resolve
// then is no server until it does, as with none. An address written
// there, which HAProxy uses until the name resolves, is refused.
func (r *serverReading) initAddr(v string, at Line) error {
	for _, m := range strings.Split(v, ",") {
		switch m {
		case "last", "libc", "none":
		default:
			return refuse(at, "init-addr %s: an address used until the name resolves is not translated (dynamic checked has no server for the name until it resolves): write init-addr none, or a server line with that address", m)
		}
	}
	r.initAddrAt = &at
	return nil
}

// checkResolved refuses a server whose name cannot be resolved as HAProxy
// does, and notes how its first address is found.
func (r *serverReading) checkResolved() error {
	s := r.srv
	if r.resolving.resolvers == nil {
		if s.slots > 0 {
			return refuse(s.line, "server-template without resolvers: HAProxy resolves the name once, as it starts (not translated; add resolvers <section>)")
		}
		return nil
	}
	if r.be.isBackup(s) {
		return refuse(s.line, "backup with resolvers is not translated: lb_policy backup names its backups by address")
	}
	how := "init-addr last,libc (HAProxy's default)"
	if r.initAddrAt != nil {
		how = "init-addr"
	}
	r.notes = append(r.notes, how+": dynamic checked resolves the name through the resolvers as it starts, and a name that does not resolve is no server until it does (HAProxy resolves it by libc, and without none refuses to start)")
	return nil
}

// readServerTemplate reads server-template <prefix> <count>|<low>-<high>
// <fqdn>[:<port>] [<options>]: that many servers whose addresses the
// name's answer gives.
func (be *backend) readServerTemplate(l Line) error {
	if len(l.Words) < 4 {
		return refuse(l, "takes a prefix, a count or range, and a name")
	}
	slots, err := templateSlots(l.Words[2])
	if err != nil {
		return refuse(l, "%s", err)
	}
	addr := l.Words[3]
	if strings.HasPrefix(addr, "_") {
		if strings.Contains(addr, ":") {
			return refuse(l, "%s: an SRV name's records give the port: write it without one", addr)
		}
	} else if addr, err = hostPort(addr, l.Pos); err != nil {
		return err
	}
	be.servers = append(be.servers, server{line: l, name: l.Words[1], addr: addr, opts: optionsOf(l, 4), slots: slots})
	return nil
}

// templateSlots reads a server-template's <count> or <low>-<high>.
func templateSlots(v string) (int, error) {
	low, high, isRange := strings.Cut(v, "-")
	if !isRange {
		low, high = "1", v
	}
	lo, errLow := strconv.Atoi(low)
	hi, errHigh := strconv.Atoi(high)
	if errLow != nil || errHigh != nil || lo < 0 || hi < lo || hi-lo >= maxTemplateSlots {
		return 0, fmt.Errorf("%s: want a count or a range <low>-<high> of at most %d servers", v, maxTemplateSlots)
	}
	return hi - lo + 1, nil
}

// maxTemplateSlots bounds a template's servers, each checked.
const maxTemplateSlots = 1024

// settleResolved settles a backend whose servers' names are resolved at
// run time: dynamic checked's, which resolves them and checks what it
// finds with the backend's check (Caddy's active health checks never
// run on dynamic upstreams, so http-check expect status is dynamic
// checked's expect_status too), or without checks, check none. Caddy's
// dynamic a and srv are not: they use every address a name has where
// HAProxy fills its slots, restrict to a family where HAProxy prefers
// one, ask one nameserver at random, resolve at a request, and dial an
// SRV target by name through the system's resolver.
func (be *backend) settleResolved() error {
	if be.resolving.resolvers == nil {
		return nil
	}
	first := be.servers[0].line
	if be.leader {
		return refuse(first, "resolvers in the leader's pool are not translated: lb_policy leader names its nodes by address")
	}
	switch {
	case !be.active: // HAProxy's servers without check are up while they have an address
		be.checked = "none"
	case be.checked == "":
		be.checked = "http"
		if be.tls.ssl {
			return refuse(first, "ssl with resolvers and an HTTP check: dynamic checked's HTTP check speaks plain HTTP (not translated)")
		}
	}
	what := srvOrder
	if !be.resolving.ignoreSRVWeight {
		what = srvWeight + "; " + srvOrder
	}
	for _, s := range be.servers {
		if strings.HasPrefix(s.addr, "_") {
			be.notes = append(be.notes, note{line: s.line, approximated: true, what: what})
		}
	}
	return nil
}

const (
	srvWeight = "HAProxy gives each server the weight of its SRV record, dynamic checked balances them alike (resolve-opts ignore-weight says so)"
	srvOrder  = "with more records than servers, HAProxy fills its servers in the answer's order, dynamic checked in Go's (by priority, then at random by weight); each keeps its record while answers have it, in both"
)
