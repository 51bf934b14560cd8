package haproxy

import (
	"slices"
	"strings"
)

// Split is a configuration divided between Caddy and HAProxy, for a file
// that puts mode tcp proxies (a database, a mail port) beside HTTP ones:
// HAProxy keeps serving the tcp ones from the residual configuration
// (TCP) while Caddy takes the rest (HTTP).
type Split struct {
	// HTTP are the proxies in mode http, the defaults sections they take
	// or that no proxy takes, the global section and the other sections.
	HTTP *Config
	// TCP are the proxies in mode tcp (HAProxy's default), the defaults
	// they take (a defaults section both sides take is in both), the
	// global section (HAProxy's process settings) and the other sections
	// (resolvers, peers, userlist …), each part keeping what it may name.
	TCP *Config
	// HTTPProxies and TCPProxies are the proxies of each part, as
	// "frontend ssh_in".
	HTTPProxies, TCPProxies []string
}

// SplitTCP divides c into its HTTP part and its TCP part. A proxy's mode
// is its own last mode line, else that of the defaults it takes (the
// nearest that has one), else tcp, as in HAProxy; a backend is in the
// mode of the proxies that send to it, which HAProxy checks.
func (c *Config) SplitTCP() Split {
	tcp := map[*Section]bool{}
	takenBy := map[*Section]map[bool]bool{} // defaults: taken by tcp or http proxies
	var out Split
	for _, s := range c.Sections {
		if !proxyKinds[s.Kind] || s.Kind == "defaults" {
			continue
		}
		tcp[s] = c.modeOf(s) != "http"
		if tcp[s] {
			out.TCPProxies = append(out.TCPProxies, s.Kind+" "+s.Name)
		} else {
			out.HTTPProxies = append(out.HTTPProxies, s.Kind+" "+s.Name)
		}
		for _, d := range c.defaultsChain(s) {
			if takenBy[d] == nil {
				takenBy[d] = map[bool]bool{}
			}
			takenBy[d][tcp[s]] = true
		}
	}
	out.HTTP, out.TCP = c.part(), c.part()
	for _, s := range c.Sections {
		inHTTP, inTCP := true, true
		switch {
		case s.Kind == "defaults":
			inHTTP, inTCP = takenBy[s][false] || !takenBy[s][true], takenBy[s][true]
		case proxyKinds[s.Kind]:
			inHTTP, inTCP = !tcp[s], tcp[s]
		}
		if inHTTP {
			out.HTTP.Sections = append(out.HTTP.Sections, s)
		}
		if inTCP {
			out.TCP.Sections = append(out.TCP.Sections, s)
		}
	}
	return out
}

// part is an empty configuration of c's sections (their lines are where
// c's index says), with c's conditional blocks, which were read for the
// whole file.
func (c *Config) part() *Config {
	return &Config{Files: c.Files, sectionOf: c.sectionOf, directives: c.directives}
}

// defaultsChain are the defaults sections s takes its settings from,
// nearest first.
func (c *Config) defaultsChain(s *Section) []*Section {
	var chain []*Section
	for d := c.DefaultsOf(s); d != nil && !slices.Contains(chain, d); d = c.DefaultsOf(d) {
		chain = append(chain, d)
	}
	return chain
}

// modeOf is the mode of proxy s: its last mode line's, else the nearest
// defaults', else HAProxy's default, tcp.
func (c *Config) modeOf(s *Section) string {
	for _, sec := range append([]*Section{s}, c.defaultsChain(s)...) {
		for i := len(sec.Lines) - 1; i >= 0; i-- {
			if l := sec.Lines[i]; l.Words[0] == "mode" && len(l.Words) > 1 {
				return l.Words[1]
			}
		}
	}
	return "tcp"
}

// HAProxyText is c as an HAProxy configuration: header (comment lines),
// then each section's lines as written (quotes, escapes and ${NAME} as
// they are: HAProxy reads them as it read the file), each with its
// position in that file in a comment.
func (c *Config) HAProxyText(header string) string {
	var b strings.Builder
	b.WriteString(header)
	for _, d := range c.directives {
		if d.approximated { // a .if: its branch taken is here, not the block
			b.WriteString("# " + d.line.Pos.String() + ": " + d.line.source() + ": read with the environment that split the file; only the branch it took is here\n")
		}
	}
	for _, s := range c.Sections {
		b.WriteString("\n" + strings.Join(s.line().Source, " ") + "  # " + s.Pos.String() + "\n")
		for _, l := range s.Lines {
			b.WriteString("    " + strings.Join(l.Source, " ") + "  # " + l.Pos.String() + "\n")
		}
	}
	return b.String()
}
