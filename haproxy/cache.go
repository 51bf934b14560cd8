package haproxy

// HAProxy's small object cache: a cache section holds answers that
// http-response cache-store stores, which http-request cache-use answers
// from for up to max-age. Caddy has no cache module in this build, so
// nothing is cached: every request reaches a server, and the client gets
// what the server answers now (a warning at the section). A cache serves
// a copy of what the server would answer, so what is lost is load on the
// servers, not meaning.

// cacheSection is a cache section, its lines noted as settings of a cache
// that is not there.
type cacheSection struct {
	section *Section
	notes   []note
}

// cacheApproximation is the cache section's warning; docs/haproxy.md's
// Known differences names it.
const cacheApproximation = "Caddy has no cache in this build: nothing is cached, every request reaches a server, where HAProxy answers a stored copy (with an Age header) for up to max-age"

// readCaches reads every cache section, each refused line recorded.
func (t *translator) readCaches() []*cacheSection {
	var out []*cacheSection
	for _, s := range t.cfg.Sections {
		if s.Kind != "cache" {
			continue
		}
		cs := &cacheSection{section: s}
		cs.notes = append(cs.notes, note{line: s.line(), what: cacheApproximation, approximated: true})
		for _, l := range s.Lines {
			t.reach(l.Pos)
			k := keywordAt(l)
			if k == nil || !k.in.has(inCache) {
				t.refused.add(refuse(l, "not a cache section's keyword"))
				continue
			}
			cs.notes = append(cs.notes, note{line: l, what: "ignored: " + k.doc})
		}
		out = append(out, cs)
	}
	return out
}

// cacheRule reads http-request cache-use <name> and http-response
// cache-store <name>, with any condition: ignored, as the cache they name
// is not there (see readCaches).
func cacheRule(l Line, cfg *Config) (note, error) {
	words, _, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return note{}, err
	}
	if len(words) != 3 {
		return note{}, refuse(l, "takes a cache's name, and maybe a condition")
	}
	if cfg.Section("cache", words[2]) == nil {
		return note{}, refuse(l, "no cache section %s (HAProxy refuses it too)", words[2])
	}
	return note{line: l, what: "ignored: nothing is cached (see cache " + words[2] + ")"}, nil
}

// otherFilters says why the filters other than cache and compression are
// refused.
const otherFilters = "SPOE has no counterpart in Caddy (port the agent's logic to a Caddy module); trace, bwlim and fcgi-app are not translated"

// filterNote reads filter cache <name> and filter compression, which
// declare the order of HAProxy's filters where a proxy has both: ignored,
// as Caddy has no cache (readCaches) and encode compresses what the
// server answers (compression lines). Another filter is refused.
func filterNote(l Line, cfg *Config) (note, error) {
	switch {
	case arg(l, 1) == "cache" && len(l.Words) == 3:
		if cfg.Section("cache", l.Words[2]) == nil {
			return note{}, refuse(l, "no cache section %s (HAProxy refuses it too)", l.Words[2])
		}
		return note{line: l, what: "ignored: nothing is cached (see cache " + l.Words[2] + ")"}, nil
	case arg(l, 1) == "compression" && len(l.Words) == 2:
		return note{line: l, what: "ignored: it orders HAProxy's filters; Caddy's encode compresses as the compression lines say"}, nil
	}
	return note{}, refuse(l, "%s", otherFilters)
}
