// Package hadiff runs one HAProxy configuration through HAProxy and
// through caddy-ha's adaptation of it side by side, and compares what each
// does with the same requests (issue 28, "prove the meaning"): it moves
// the configuration's binds to loopback ports and its servers to recording
// backends (Inspect, Rewrite, Backends), derives requests from the
// configuration itself (Derive), and compares what the client got and what
// the server saw (Compare), each difference checked against the known ones
// that docs/haproxy.md lists (ParseKnown).
package hadiff

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

// Bind is a bind line of a frontend or listen section.
type Bind struct {
	Line    int    // its line in the file (the first, if continued)
	Section string // the frontend or listen it is in
	TLS     bool   // it has ssl
	Words   []string
}

// Server is a server (or server-template) line of a backend or listen
// section.
type Server struct {
	Line    int
	Section string // the backend or listen it is in
	Name    string // a template's prefix
	Words   []string
	// Resolved is the DNS name that HAProxy's resolvers (and caddy-ha's
	// dynamic checked) resolve at run time ("": none, the server is
	// moved to its backend's address): a host name, whose A record the
	// harness's DNS gives as loopback, the port the backend's; or an SRV
	// name (_service._proto.name), whose record gives a target on
	// loopback with the backend's port.
	Resolved string
}

// addressWord is the index of the server's address among its words.
func (s Server) addressWord() int {
	if s.Words[0] == "server-template" {
		return 3
	}
	return 2
}

// ID is how the server names itself to the harness: section/name.
func (s Server) ID() string { return s.Section + "/" + s.Name }

// Layout is what the rewrite changes in a configuration: its binds, its
// servers, and the process-level lines of its global section that would
// stop HAProxy from running in a test (a chroot, a user, a stats socket
// under /run); those are left as comments, which the translation ignores
// anyway (docs/haproxy.md, "Ignored, with why").
type Layout struct {
	Binds     []Bind
	Servers   []Server
	Commented []int // lines written as comments
	// Outbound are the lines of a log server's, resolver's, peer's or
	// mailer's network address, by number, their words as written anew:
	// that address Elsewhere (a nameserver's, the harness's DNS server);
	// and the default-server lines with init-addr, written with
	// init-addr none (see withoutLibc).
	Outbound map[int][]string
	// Balanced are the backends whose server for a request depends on
	// the balance's state (several servers, a balance other than first):
	// which of their servers answered is not compared, only the backend.
	Balanced map[string]bool
}

// processOnly are global keywords about HAProxy's process, not about what
// it does with a request; the test's HAProxy runs without them. The global
// maxconn is one: HAProxy raises its open-files limit to twice it, which a
// test machine's limit can refuse ("Cannot raise FD limit"), and the
// harness's requests never reach it.
var processOnly = map[string]bool{
	"chroot": true, "user": true, "group": true, "uid": true, "gid": true, "daemon": true,
	"master-worker": true, "pidfile": true, "stats": true, "nbproc": true, "cpu-map": true,
	"ulimit-n": true, "maxconn": true,
}

// Elsewhere is where the lines that would send off the machine send
// instead (a log server, a resolver's or a peer's address): the discard
// port of loopback, where nothing answers. What they send is not compared.
const Elsewhere = "127.0.0.1:9"

// outbound are the keywords whose address argument (by index) is another
// machine's, when it is a network address.
var outbound = map[string]int{"log": 1, "nameserver": 2, "peer": 2, "mailer": 2}

// Inspect finds what Rewrite changes in cfg. It refuses, with the line, what
// the harness cannot move to loopback faithfully.
func Inspect(cfg *haproxy.Config) (Layout, error) {
	l := Layout{Balanced: map[string]bool{}, Outbound: map[int][]string{}}
	resolvedByDefault := defaultServersResolved(cfg)
	for _, s := range cfg.Sections {
		for _, line := range s.Lines {
			if err := l.inspectLine(s, line, resolvedByDefault[s]); err != nil {
				return l, err
			}
		}
		l.Balanced[s.Name] = balanced(s)
	}
	return l, nil
}

// inspectLine takes in one line of section s: a network address sent
// to, a process-only global line, or a line of layoutKeywords.
// resolvedByDefault: the section's default-server names a resolvers
// section.
func (l *Layout) inspectLine(s *haproxy.Section, line haproxy.Line, resolvedByDefault bool) error {
	w := line.Words
	if i, ok := outbound[w[0]]; ok && i < len(w) && isNetworkAddress(w[i]) {
		l.Outbound[line.Pos.Line] = slices.Concat(w[:i], []string{Elsewhere}, w[i+1:])
	}
	if s.Kind == "global" && processOnly[w[0]] {
		l.Commented = append(l.Commented, line.Pos.Line)
		return nil
	}
	k, ok := layoutKeywords[w[0]]
	if !ok || k.kinds != nil && !slices.Contains(k.kinds, s.Kind) {
		return nil
	}
	return k.take(l, s.Name, line, resolvedByDefault)
}

// layoutKeyword is how Inspect takes in a line of a keyword: in the
// sections of kinds (nil: any), by take (in: the section's name).
type layoutKeyword struct {
	kinds []string
	take  func(l *Layout, in string, line haproxy.Line, resolvedByDefault bool) error
}

// layoutKeywords are the lines Inspect takes in, by keyword.
var layoutKeywords = map[string]layoutKeyword{
	"bind":              {[]string{"frontend", "listen"}, (*Layout).addBind},
	"server":            {[]string{"backend", "listen"}, (*Layout).addServer},
	"server-template":   {[]string{"backend", "listen"}, (*Layout).addServer},
	"default-server":    {nil, (*Layout).addDefaultServer},
	"parse-resolv-conf": {nil, refuseResolvConf},
}

// refuseResolvConf refuses parse-resolv-conf: its nameservers are the
// system's, which the harness cannot answer for.
func refuseResolvConf(_ *Layout, _ string, line haproxy.Line, _ bool) error {
	return fmt.Errorf("line %d: parse-resolv-conf: the harness's DNS server answers only the resolvers' nameserver lines", line.Pos.Line)
}

// balanced reports whether which server of section s answers a request
// depends on the balance's state: several servers, a balance other than
// first.
func balanced(s *haproxy.Section) bool {
	servers, first := 0, false
	for _, line := range s.Lines {
		w := line.Words
		switch {
		case (w[0] == "server" || w[0] == "server-template") && (s.Kind == "backend" || s.Kind == "listen"):
			servers++
		case w[0] == "balance" && len(w) > 1 && w[1] == "first":
			first = true
		}
	}
	return servers > 1 && !first
}

// addBind adds a bind line of the frontend or listen section named in.
func (l *Layout) addBind(in string, line haproxy.Line, _ bool) error {
	w := line.Words
	if len(w) < 2 {
		return fmt.Errorf("line %d: bind without an address", line.Pos.Line)
	}
	for _, unsupported := range []string{"crt-list", "crl-file", "accept-proxy", "quic"} {
		if slices.Contains(w, unsupported) {
			return fmt.Errorf("line %d: bind … %s: not moved to loopback by the harness", line.Pos.Line, unsupported)
		}
	}
	l.Binds = append(l.Binds, Bind{Line: line.Pos.Line, Section: in, TLS: slices.Contains(w, "ssl"), Words: w})
	return nil
}

// addServer adds a server or server-template line of the backend or
// listen section named in; resolved: its options or (resolvedByDefault)
// its default-server's name a resolvers section.
func (l *Layout) addServer(in string, line haproxy.Line, resolvedByDefault bool) error {
	s := Server{Line: line.Pos.Line, Section: in, Words: line.Words}
	resolved := resolvedByDefault || slices.Contains(s.Words, "resolvers")
	if len(s.Words) <= s.addressWord() {
		return fmt.Errorf("line %d: %s without an address", line.Pos.Line, s.Words[0])
	}
	s.Name = s.Words[1]
	if slices.ContainsFunc(s.Words, notPlainHTTP) {
		return fmt.Errorf("line %d: server %s with ssl, check-ssl, send-proxy, proto or agent-check: the recording backends speak plain HTTP/1.1", line.Pos.Line, s.Name)
	}
	host := s.Words[s.addressWord()]
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if _, err := netip.ParseAddr(host); resolved && err != nil {
		s.Resolved = host
	}
	l.Servers = append(l.Servers, s)
	return nil
}

// addDefaultServer refuses a default-server line that asks a server for
// more than plain HTTP, and writes one with init-addr anew (withoutLibc).
func (l *Layout) addDefaultServer(_ string, line haproxy.Line, _ bool) error {
	w := line.Words
	if slices.ContainsFunc(w, notPlainHTTP) {
		return fmt.Errorf("line %d: default-server with ssl, check-ssl, send-proxy, proto or agent-check: the recording backends speak plain HTTP/1.1", line.Pos.Line)
	}
	if slices.Contains(w, "init-addr") {
		l.Outbound[line.Pos.Line] = withoutLibc(w)
	}
	return nil
}

// defaultServersResolved are the backend and listen sections whose
// default-server (their own, or their defaults section's) names a
// resolvers section.
func defaultServersResolved(cfg *haproxy.Config) map[*haproxy.Section]bool {
	out := map[*haproxy.Section]bool{}
	var defaults bool // the last defaults section's
	for _, s := range cfg.Sections {
		own := slices.ContainsFunc(s.Lines, func(l haproxy.Line) bool {
			return l.Words[0] == "default-server" && slices.Contains(l.Words, "resolvers")
		})
		if s.Kind == "defaults" {
			defaults = own
		}
		out[s] = own || defaults
	}
	return out
}

// notPlainHTTP are the server keywords that ask a server for more than
// plain HTTP/1.1 and its checks (proto: FastCGI or HTTP/2, which
// TestHAProxyDifferentialFastCGI compares for FastCGI).
func notPlainHTTP(w string) bool {
	switch w {
	case "ssl", "check-ssl", "send-proxy", "send-proxy-v2", "check-send-proxy", "agent-check", "proto":
		return true
	}
	return false
}

// isNetworkAddress reports whether an address word names a host and a
// port (or an IP address) rather than a socket path, a file descriptor
// or a keyword.
func isNetworkAddress(w string) bool {
	if strings.HasPrefix(w, "/") || strings.HasPrefix(w, "unix@") || strings.HasPrefix(w, "fd@") ||
		strings.HasPrefix(w, "stdout") || strings.HasPrefix(w, "stderr") || strings.HasPrefix(w, "ring@") || w == "global" {
		return false
	}
	if _, after, ok := strings.Cut(w, "@"); ok {
		w = after
	}
	return strings.Contains(w, ":") || strings.Count(w, ".") == 3
}

// Addresses are what one proxy's copy of the configuration listens on and
// sends to: a loopback address for each bind line and each server line
// (by line), and the file each crt (and a bind's ca-file) names, by the
// path written.
type Addresses struct {
	Bind   map[int]string
	Server map[int]string
	File   map[string]string
	// Lines are other lines written anew, by number: for HAProxy's copy,
	// the 1.x lines the reader takes as their 2.x replacements (Modern),
	// which HAProxy 2.6 refuses.
	Lines map[int][]string
	// Nameserver is the address of the harness's DNS server (DNS),
	// which every nameserver line names ("": Elsewhere).
	Nameserver string
}

// Modern are the lines of text that cfg's reader took as other words
// than written (HAProxy 1.x keywords, read as the 2.x lines that
// replaced them: reqadd as http-request add-header), by number, as read.
// HAProxy 2.6 runs those where the file has the 1.x lines, so that a
// configuration caddy-ha translates with them is compared too.
func Modern(text []byte, cfg *haproxy.Config) map[int][]string {
	lines := strings.Split(string(text), "\n")
	out := map[int][]string{}
	for _, s := range cfg.Sections {
		for _, l := range s.Lines {
			if n := l.Pos.Line; n <= len(lines) {
				if f := strings.Fields(lines[n-1]); len(f) > 0 && f[0] != l.Words[0] && !strings.ContainsAny(f[0], "\"'$\\") {
					out[n] = l.Words
				}
			}
		}
	}
	return out
}

// Rewrite is text (the configuration cfg was parsed from) with each bind
// and server line of l written anew by its line number: the bind on its
// loopback address (its v4v6, v6only, interface and namespace dropped,
// which name the old address's family and device; its crt and ca-file
// mapped), the server on its backend's (port and addr, the check's own
// address, dropped: the check goes to the backend); the process-only
// global lines are comments. Every other line is kept as written, and
// every line keeps its number (a log server's, resolver's, peer's or
// mailer's network address is Elsewhere), so that the translation's warnings name
// the file's lines.
func Rewrite(text []byte, l Layout, a Addresses) ([]byte, error) {
	f := newConfigLines(text)
	for _, n := range l.Commented {
		f.lines[n-1] = "# hadiff: " + f.lines[n-1]
	}
	for n, words := range a.Lines {
		if err := f.replace(n, words); err != nil {
			return nil, err
		}
	}
	for n, words := range l.Outbound {
		if err := f.replace(n, withNameserver(words, a.Nameserver)); err != nil {
			return nil, err
		}
	}
	for _, b := range l.Binds {
		addr, ok := a.Bind[b.Line]
		if !ok {
			return nil, fmt.Errorf("line %d: no address for the bind", b.Line)
		}
		words, err := b.movedTo(addr, a.File)
		if err != nil {
			return nil, err
		}
		if err := f.replace(b.Line, words); err != nil {
			return nil, err
		}
	}
	for _, s := range l.Servers {
		addr, ok := a.Server[s.Line]
		if !ok {
			return nil, fmt.Errorf("line %d: no address for server %s", s.Line, s.Name)
		}
		if err := f.replace(s.Line, s.movedTo(addr)); err != nil {
			return nil, err
		}
	}
	return []byte(strings.Join(f.lines, "\n")), nil
}

// configLines are a configuration's lines as written anew, and as they
// were (orig), which say where a line continues.
type configLines struct {
	lines, orig []string
}

func newConfigLines(text []byte) configLines {
	lines := strings.Split(string(text), "\n")
	return configLines{lines: lines, orig: slices.Clone(lines)}
}

// replace writes line n anew as words, at its indent, each quoted.
func (c configLines) replace(n int, words []string) error {
	if n < 1 || n > len(c.lines) {
		return fmt.Errorf("line %d is not in the file", n)
	}
	line := c.lines[n-1]
	indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = Quote(w)
	}
	c.lines[n-1] = indent + strings.Join(quoted, " ")
	// A line continued by a final backslash: its other lines emptied.
	for i := n - 1; i+1 < len(c.lines) && continued(strings.TrimSuffix(c.orig[i], "\r")); i++ {
		c.lines[i+1] = ""
	}
	return nil
}

// withNameserver is an outbound line's words, a nameserver's with the
// harness's DNS server's address (nameserver; "": as they are).
func withNameserver(words []string, nameserver string) []string {
	if words[0] == "nameserver" && nameserver != "" {
		return slices.Concat(words[:2], []string{nameserver}, words[3:])
	}
	return words
}

// movedTo is the bind's line on addr (loopback): v4v6 and v6only, and
// interface and namespace with their argument, dropped (they name the
// old address's family and device); each crt and ca-file the file that
// files maps it to.
func (b Bind) movedTo(addr string, files map[string]string) ([]string, error) {
	words := []string{"bind", addr}
	for i := 2; i < len(b.Words); i++ {
		switch w := b.Words[i]; w {
		case "v4v6", "v6only":
		case "interface", "namespace":
			i++
		case "crt", "ca-file":
			words = append(words, w)
			if i+1 < len(b.Words) {
				i++
				to, ok := files[b.Words[i]]
				if !ok {
					return nil, fmt.Errorf("line %d: no file for %s %s", b.Line, w, b.Words[i])
				}
				words = append(words, to)
			}
		default:
			words = append(words, w)
		}
	}
	return words, nil
}

// movedTo is the server's line with its address the backend's addr
// (loopback): a resolved host name keeps its name, with addr's port (the
// harness's DNS gives the name loopback's address), an SRV name stays as
// written (its record gives addr's port); port and addr, the check's own
// address, are dropped: the check goes to the backend.
func (s Server) movedTo(addr string) []string {
	at := s.addressWord()
	if _, port, err := net.SplitHostPort(addr); err == nil && s.Resolved != "" {
		addr = net.JoinHostPort(s.Resolved, port)
		if strings.HasPrefix(s.Resolved, "_") {
			addr = s.Resolved
		}
	}
	words := slices.Concat(s.Words[:at], []string{addr})
	for i := at + 1; i < len(s.Words); i++ {
		switch w := s.Words[i]; w {
		case "port", "addr":
			i++
		default:
			words = append(words, w)
		}
	}
	return withoutLibc(words)
}

// withoutLibc is a server's (or default-server's) words with init-addr
// none: the names the harness's DNS server gives are no other resolver's,
// so HAProxy's libc lookup at start (the system's resolver) finds none,
// after the system's timeouts, then takes none anyway.
func withoutLibc(words []string) []string {
	out := slices.Clone(words)
	if i := slices.Index(out, "init-addr"); i >= 0 && i+1 < len(out) {
		out[i+1] = "none"
	}
	return out
}

// Serve has the harness's DNS server answer each resolved server's name
// with its backend's address (by line, as in Addresses.Server): a host
// name loopback, an SRV name a target on loopback with the backend's port.
func (l Layout) Serve(d *DNS, backends map[int]string) error {
	for _, s := range l.Servers {
		if s.Resolved == "" {
			continue
		}
		_, port, err := net.SplitHostPort(backends[s.Line])
		if err != nil {
			return fmt.Errorf("line %d: no address for server %s", s.Line, s.Name)
		}
		if !strings.HasPrefix(s.Resolved, "_") {
			d.SetA(s.Resolved, net.IPv4(127, 0, 0, 1))
			continue
		}
		p, _ := strconv.Atoi(port)
		d.SetSRV(s.Resolved, SRVTarget{Host: strings.Trim(s.Name, "-_.") + ".hadiff.test", Port: uint16(p)})
	}
	return nil
}

// continued reports whether a physical line ends in an unescaped
// backslash, which continues it on the next, as HAProxy reads it.
func continued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// Quote writes a word so that HAProxy reads it back as it is: bare where
// nothing in it is syntax, else in single quotes (nothing inside is
// interpreted), else in double quotes with escapes.
func Quote(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t#\\'\"$\r\n") {
		return w
	}
	if !strings.ContainsAny(w, "'\r\n") {
		return "'" + w + "'"
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "\n", `\n`, "\r", `\r`).Replace(w) + `"`
}
