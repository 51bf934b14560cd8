package haproxy

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// LineOutcome is what became of one line of a configuration (a section's
// first line or a setting): the rows of caddy ha migrate --report.
type LineOutcome struct {
	Pos Position `json:"pos"`
	// Source is the line as written, passwords redacted (as its comment
	// in the Caddyfile shows it).
	Source string `json:"source"`
	// Status is translated, approximated, ignored, refused, or not read
	// (NotRead).
	Status string `json:"status"`
	// Why says how (translated), what differs (approximated), why
	// (ignored, refused, not read).
	Why string `json:"why,omitempty"`
	// Instead is, for a refused line, what the registry says is
	// translated instead, or why the keyword has no counterpart.
	Instead string `json:"instead,omitempty"`
	// Foreseen: no Caddyfile was written (lines were refused), and
	// Status and Why are what the registry's entry for the line's keyword
	// says it becomes; the line was read, and not refused.
	Foreseen bool `json:"foreseen,omitempty"`
}

// NotRead is the status of a line the translation did not read: its
// section, or what would use it, was refused.
const NotRead = "not read"

// lineOutcomes is what became of each line of c, in the order written:
// refused with why (refusals: the error of the translation, nil if
// none); else as the writer commented it (written); else, in a refused
// configuration, of which no Caddyfile is written, what its keyword's
// entry says it becomes if it was read (reached), or not read.
func (c *Config) lineOutcomes(written map[Position]outcome, reached map[Position]bool, refusals error) []LineOutcome {
	refusedAt := refusalsAt(refusals)
	var out []LineOutcome
	for _, s := range c.Sections {
		lines := append([]Line{s.line()}, s.Lines...)
		sectionRead := slices.ContainsFunc(s.Lines, func(l Line) bool { return reached[l.Pos] })
		notRead := notReadWhy(lines, refusedAt)
		for i, l := range lines {
			o := LineOutcome{Pos: l.Pos, Source: l.source()}
			w, isWritten := written[l.Pos]
			switch msg, isRefused := refusedAt[l.Pos]; {
			case isRefused:
				o.Status, o.Why, o.Instead = refused.String(), msg, insteadOf(l, msg)
			case isWritten:
				o.Status, o.Why = w.status.String(), w.why
			case refusals == nil:
				o.Status, o.Why = NotRead, "not written (a caddy-ha bug: every line is kept as a comment)"
			case reached[l.Pos] || i == 0 && sectionRead:
				o.Status, o.Why, o.Foreseen = foreseen(l)
			default:
				o.Status, o.Why = NotRead, notRead
			}
			if l.modernized != "" && o.Status != refused.String() && o.Status != NotRead {
				// A 1.x line read as its 2.x replacement: a Warning.
				o.Status, o.Why = approximated.String(), strings.TrimSuffix(l.modernized+"; "+o.Why, "; ")
			}
			out = append(out, o)
		}
	}
	out = append(out, c.directiveOutcomes(written)...)
	slices.SortStableFunc(out, func(a, b LineOutcome) int { return comparePos(a.Pos, b.Pos) })
	return append(out, unplaced(refusedAt)...)
}

// directiveOutcomes are what became of the lines of the conditional
// blocks and of their branches not taken: as the writer commented them,
// else (no Caddyfile was written) as Parse said.
func (c *Config) directiveOutcomes(written map[Position]outcome) []LineOutcome {
	var out []LineOutcome
	for _, d := range c.directives {
		o := LineOutcome{Pos: d.line.Pos, Source: d.line.source(), Status: ignored.String(), Why: d.why}
		if d.approximated {
			o.Status = approximated.String()
		}
		if w, ok := written[d.line.Pos]; ok {
			o.Status, o.Why = w.status.String(), w.why
		}
		out = append(out, o)
	}
	return out
}

// refusalsAt are the refusals of err (nil: none), each message by its
// position, without it.
func refusalsAt(err error) map[Position]string {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if r, ok := err.(Refusals); ok {
		errs = r
	}
	at := map[Position]string{}
	for _, e := range errs {
		var located *Error
		if errors.As(e, &located) {
			at[located.Pos] = located.Msg
		} else {
			at[Position{}] = e.Error()
		}
	}
	return at
}

// unplaced is a refusal that names no line, as a row of its own.
func unplaced(refusedAt map[Position]string) []LineOutcome {
	if msg, ok := refusedAt[Position{}]; ok {
		return []LineOutcome{{Status: refused.String(), Why: msg}}
	}
	return nil
}

// insteadOf is the hint of a refused line: its keyword's entry, a
// refused keyword's why or what of it is translated, unless the refusal
// says it already.
func insteadOf(l Line, msg string) string {
	k := keywordAt(l)
	switch {
	case k == nil || k.doc == "" || strings.Contains(msg, k.doc):
		return ""
	case k.status == refused:
		return k.doc
	}
	return "what is translated: " + k.doc
}

// foreseen is what the registry says a line read and not refused
// becomes: its keyword's status, and why for an approximated or ignored
// one (a translated keyword's doc names every form, not this line's).
func foreseen(l Line) (string, string, bool) {
	k := keywordAt(l)
	if k == nil || k.status == translated {
		return translated.String(), "", true
	}
	return k.status.String(), k.doc, true
}

// notReadWhy says why a line of a section (its lines) was not read: the
// section was refused (at its first refused line), or what would read it
// (a frontend that sends to its backend, a proxy that takes its
// defaults) was.
func notReadWhy(lines []Line, refusedAt map[Position]string) string {
	for _, l := range lines {
		if _, ok := refusedAt[l.Pos]; ok {
			return "its section was refused at line " + strconv.Itoa(l.Pos.Line)
		}
	}
	return "what would read it (a frontend that sends to it, a proxy that takes it) was refused"
}

// KeptInHAProxy is the status of a line of a split configuration's TCP
// part only (see SplitTCP): HAProxy keeps serving it, from the residual
// configuration.
const KeptInHAProxy = "kept in HAProxy"

// Report is what became of each line of the configuration sp was split
// from, in the order written: the lines of its HTTP part as tr (its
// translation) says, those of its TCP part only kept in HAProxy, in the
// file residual.
func (sp Split) Report(tr Translation, residual string) []LineOutcome {
	lines := slices.Clone(tr.Lines)
	for _, s := range sp.TCP.Sections {
		if slices.Contains(sp.HTTP.Sections, s) {
			continue
		}
		why := "in " + residual + ": a mode tcp proxy"
		if s.Kind == "defaults" {
			why = "in " + residual + ": defaults only mode tcp proxies take"
		}
		for _, l := range append([]Line{s.line()}, s.Lines...) {
			lines = append(lines, LineOutcome{Pos: l.Pos, Source: l.source(), Status: KeptInHAProxy, Why: why})
		}
	}
	slices.SortStableFunc(lines, func(a, b LineOutcome) int { return comparePos(a.Pos, b.Pos) })
	return lines
}
