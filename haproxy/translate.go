package haproxy

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Translate turns cfg into a Caddyfile for the custom Caddy with caddy-ha's
// modules, and says what became of each line (Lines, also on refusal). Every line is translated, or ignored for a stated reason, or
// refused: the refusals are the error (Refusals if there are several),
// each naming the file, the line, the keyword and why, so that nothing
// the configuration asked for is lost without a word. Each line is kept as a comment above what it became.
// Lines translated close to but not exactly as HAProxy runs them are
// the Translation's Warnings, each with its line, as well as comments.
func Translate(cfg *Config) (Translation, error) {
	t := &translator{cfg: cfg, counted: countedBackends(cfg)}
	m, err := t.read()
	if err != nil {
		err = cfg.shown(err)
		return Translation{Lines: cfg.lineOutcomes(nil, t.reached, err)}, err
	}
	c := emit(m)
	err = c.err
	if err != nil {
		err = cfg.redacted(cfg.named(err))
	}
	out := c.b.String()
	if err == nil {
		err = cfg.checkNoEnvValue(out)
	}
	lines := cfg.lineOutcomes(c.outcomes, t.reached, err)
	if err != nil {
		return Translation{Lines: lines}, err
	}
	warnings := append(cfg.modernizedLines(), c.warnings...)
	slices.SortStableFunc(warnings, func(a, b Warning) int { return comparePos(a.Pos, b.Pos) })
	return Translation{Caddyfile: out, Warnings: warnings, Lines: lines, Beyond: m.beyond()}, nil
}

// modernizedLines are the warnings of the 1.x lines read as their 2.x
// replacements (see modernized).
func (c *Config) modernizedLines() []Warning {
	var out []Warning
	for _, s := range c.Sections {
		for _, l := range s.Lines {
			if l.modernized != "" {
				out = append(out, Warning{Pos: l.Pos, Msg: strings.Join(l.Source[:1], "") + ": " + l.modernized})
			}
		}
	}
	return out
}

// Translation is what Translate makes of a configuration.
type Translation struct {
	// Caddyfile is the translation, each HAProxy line kept as a comment.
	Caddyfile string
	// Warnings are the lines translated close to, but not exactly as,
	// HAProxy runs them, in the order written.
	Warnings []Warning
	// Lines are what became of each line, in the order written; also
	// when the configuration is refused (then with the refused lines, and
	// what the others would become or why they were not read).
	Lines []LineOutcome
	// Beyond is what the JSON of the Caddyfile must also say (the
	// haproxy adapter sets it): what the Caddyfile cannot.
	Beyond Beyond
}

// shown is a refusal, or each of several, as a message shows it (named,
// redacted).
func (c *Config) shown(err error) error {
	r, ok := err.(Refusals)
	if !ok {
		return c.redacted(c.named(err))
	}
	out := make(Refusals, len(r))
	for i, e := range r {
		out[i] = c.redacted(c.named(e))
	}
	return out
}

// named makes a refusal name the keyword of its line: one whose text
// begins otherwise (a time or an address that is wrong, a condition's
// mistake) gets the line's first words before it, as refuse writes them.
func (c *Config) named(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	l, ok := c.lineAt(e.Pos)
	if !ok || namesKeyword(e.Msg, l.Words[0]) || l.modernized != "" && namesKeyword(e.Msg, l.Source[0]) {
		return err
	}
	return refuse(l, "%s", e.Msg)
}

// lineAt is the line (a setting, or a section's first line) at pos.
// redacted is err with the values of the environment its line read
// written as the line wrote them (${NAME}).
func (c *Config) redacted(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if l, ok := c.lineAt(e.Pos); ok && len(l.envs) > 0 {
		return &Error{Pos: e.Pos, Msg: l.redactEnv(e.Msg)}
	}
	return err
}

// minCheckedEnvValue is the shortest value of the environment that
// checkNoEnvValue looks for: shorter ones (a port, a count) are found by
// chance in any Caddyfile, and are not secrets.
const minCheckedEnvValue = 6

// checkNoEnvValue refuses a translation that holds a value of the
// environment as it is: every one the translation needs is written as
// Caddy's {$NAME} (withEnv), so one found is a value that went out some
// other way, and would be in a file people commit. A value the
// configuration holds as written too (a default that was used,
// ${BIND_ADDR-0.0.0.0}, or an address another line names) is its own
// text, which its comments show: it is not looked for.
func (c *Config) checkNoEnvValue(out string) error {
	var written strings.Builder
	for _, s := range c.Sections {
		for _, l := range append([]Line{s.head}, s.Lines...) {
			written.WriteString(strings.Join(l.Source, " ") + "\n")
		}
	}
	for _, s := range c.Sections {
		for _, l := range append([]Line{s.head}, s.Lines...) {
			for _, u := range l.envs {
				if len(u.value) >= minCheckedEnvValue && !strings.Contains(written.String(), u.value) && strings.Contains(out, u.value) {
					return refuse(l, "the value of %s would be in the translation as it is: this use of the environment is not translated (write the value, or ask for it in the Caddyfile as {$NAME})", u.haproxy)
				}
			}
		}
	}
	return nil
}

// namesKeyword tells whether an error's text (after its file and line)
// names the keyword: its first word is the keyword (quoted or not, a
// colon after it or not), or it is "global <keyword>".
func namesKeyword(msg, keyword string) bool {
	w := strings.Fields(msg)
	if len(w) == 0 {
		return false
	}
	first := strings.TrimSuffix(w[0], ":")
	if unq, err := strconv.Unquote(first); err == nil && first[0] == '"' {
		first = unq
	}
	return first == keyword || first == "global" && len(w) > 1 && strings.TrimSuffix(w[1], ":") == keyword
}
