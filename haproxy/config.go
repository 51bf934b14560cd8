package haproxy

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Config is an HAProxy configuration: its sections in the order written.
type Config struct {
	Sections []*Section
	// Files, if set, is where the translation reads the files the
	// configuration names; nil: the filesystem.
	Files     Files
	sectionOf map[Position]*Section // the section of each line
	// directives are the lines of conditional blocks and of the
	// branches not taken (see conditionals), in the order written.
	directives []directive
}

// Section is one section: its keyword (global, defaults, frontend,
// backend, listen, or another HAProxy knows), its name and the named
// defaults it takes its settings from, its other arguments (a listen
// section's address), and its lines.
type Section struct {
	Kind  string
	Name  string
	From  string // "from <defaults>"; "" for the last defaults before it
	Args  []string
	Pos   Position
	Lines []Line
	head  Line    // its first line, as read
	cfg   *Config // the configuration it is in
}

// Line is one setting: its words, the keyword first.
type Line struct {
	Pos   Position
	Words []string
	// Source is each word as the file wrote it (quotes, escapes and
	// ${NAME} as they are), Env whether it took a value from the
	// environment; both nil for a line made by the translation.
	Source []string
	Env    []bool
	envs   []envUse // the environment's variables it read
	// modernized says how a line of a 1.x keyword was read as the 2.x
	// one that replaced it (Words are the 2.x line's, Source the line
	// as written); "" for any other line.
	modernized string
}

// source is the line as a comment shows it: as written, so that no value
// of the environment shows, and with passwords redacted (stats auth, a
// userlist's password and insecure-password).
func (l Line) source() string {
	shown := l.Source // as written, also where the words were read otherwise (modernized)
	if shown == nil {
		shown = make([]string, len(l.Words))
		for i, w := range l.Words {
			shown[i] = shownWord(w)
		}
	}
	shown = slices.Clone(shown)
	if i := secretWord(l.Words); i > 0 && i < len(shown) {
		if l.Words[0] == "stats" {
			if user, _, ok := strings.Cut(l.Words[i], ":"); ok && !l.fromEnv(i) {
				shown[i] = shownWord(user) + ":<redacted>"
				return strings.Join(shown, " ")
			}
		}
		shown[i] = "<redacted>"
	}
	return strings.Join(shown, " ")
}

// shownKeyword is the line's first two words, as a message names the
// line: a word that took a value from the environment as written.
func (l Line) shownKeyword() string {
	if l.modernized != "" { // the keyword the file wrote, and the 2.x one read
		return l.Source[0] + " (read as " + strings.Join(l.Words[:2], " ") + ")"
	}
	n := min(2, len(l.Words))
	shown := slices.Clone(l.Words[:n])
	for i := range shown {
		if l.fromEnv(i) {
			shown[i] = l.Source[i]
		}
	}
	return strings.Join(shown, " ")
}

// redactEnv is s with each value of the environment that l read written
// as l wrote its reference (${NAME}), for messages and notes about l.
func (l Line) redactEnv(s string) string {
	for _, u := range l.envs {
		if u.value != "" {
			s = strings.ReplaceAll(s, u.value, u.haproxy)
		}
	}
	return s
}

// fromEnv reports whether word i took a value from the environment.
func (l Line) fromEnv(i int) bool { return i < len(l.Env) && l.Env[i] }

// usesEnv reports whether any word took a value from the environment: no
// message shows such a line's values.
func (l Line) usesEnv() bool { return slices.Contains(l.Env, true) }

// secretWord is the index of the word of words that is a password, 0 if
// none: stats auth <user>:<password>, and a userlist's user <name>
// password|insecure-password <password>.
func secretWord(words []string) int {
	switch {
	case len(words) >= 3 && words[0] == "stats" && words[1] == "auth":
		return 2
	case len(words) >= 4 && words[0] == "user":
		if i := slices.IndexFunc(words, func(w string) bool { return w == "password" || w == "insecure-password" }); i > 0 && i+1 < len(words) {
			return i + 1
		}
	}
	return 0
}

// shownWord writes a word made by the translation back as HAProxy would
// read it, quoting it if it needs it.
func shownWord(w string) string {
	if w == "" || strings.ContainsAny(w, " \t\"'#\\\n\r$") {
		return strconv.Quote(w)
	}
	return w
}

// sectionKinds are the keywords that begin a section.
var sectionKinds = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"userlist": true, "peers": true, "resolvers": true, "mailers": true, "program": true,
	"http-errors": true, "ring": true, "cache": true, "crt-store": true, "traces": true,
	"fcgi-app": true,
}

// proxyKinds are the sections that may take settings from a defaults
// section.
var proxyKinds = map[string]bool{"defaults": true, "frontend": true, "backend": true, "listen": true}

// ParseFile reads the configuration in file, with the process's
// environment.
func ParseFile(file string) (*Config, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, file, os.LookupEnv)
}

// maxLineBytes bounds one logical line, continuations included.
const maxLineBytes = 1 << 20

// Parse reads a configuration; file names it in errors, getenv looks up
// its environment variables. A line ending in an unescaped backslash goes
// on on the next line.
func Parse(r io.Reader, file string, getenv func(string) (string, bool)) (*Config, error) {
	cfg := &Config{sectionOf: map[Position]*Section{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var logical strings.Builder
	var start Position
	n := 0
	conds := &conditionals{getenv: getenv}
	for sc.Scan() {
		n++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if logical.Len() == 0 {
			start = Position{File: file, Line: n}
		}
		if continued(text) {
			logical.WriteString(text[:len(text)-1])
			if logical.Len() > maxLineBytes {
				return nil, errAt(start, "a line continued over more than %d bytes", maxLineBytes)
			}
			continue
		}
		logical.WriteString(text)
		line := logical.String()
		logical.Reset()
		words, err := lexWords(line, start, conds.lexEnv(line))
		if err != nil {
			return nil, withKeyword(err, line)
		}
		if len(words.text) == 0 {
			continue
		}
		l := Line{Pos: start, Words: words.text, Source: words.source, Env: words.env, envs: words.uses}
		if taken, err := conds.read(l); taken || err != nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := cfg.add(l); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		// The line the scanner could not read (too long): the one after
		// the last it read.
		return nil, errAt(Position{File: file, Line: n + 1}, "%v", err)
	}
	if logical.Len() > 0 {
		return nil, errAt(start, "the last line ends in a backslash: nothing continues it")
	}
	if err := conds.end(); err != nil {
		return nil, err
	}
	cfg.directives = conds.out
	return cfg, nil
}

// withKeyword puts the first word of a line that could not be split
// before the error's text, so that it names the keyword it is about.
func withKeyword(err error, line string) error {
	e, ok := err.(*Error)
	f := strings.Fields(line)
	if !ok || len(f) == 0 || strings.ContainsAny(f[0], "\"'\\$#") {
		return err
	}
	return errAt(e.Pos, "%s: %s", f[0], e.Msg)
}

// continued reports whether a line ends in a backslash that is not itself
// escaped (an odd number of them).
func continued(text string) bool {
	n := 0
	for i := len(text) - 1; i >= 0 && text[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// add puts a line in the section it belongs to, or begins a section.
func (c *Config) add(l Line) error {
	kind := l.Words[0]
	if !sectionKinds[kind] {
		if len(c.Sections) == 0 {
			return errAt(l.Pos, "%q is outside any section (global, defaults, frontend, backend, listen)", kind)
		}
		s := c.Sections[len(c.Sections)-1]
		l, l.modernized = modernized(l)
		s.Lines = append(s.Lines, l)
		c.sectionOf[l.Pos] = s
		return nil
	}
	s := &Section{Kind: kind, Pos: l.Pos, head: l, cfg: c}
	args, err := c.readFrom(s, l.Words[1:])
	if err != nil {
		return err
	}
	if err := checkSectionArgs(kind, args, l.Pos); err != nil {
		return err
	}
	if len(args) > 0 {
		s.Name, s.Args = args[0], args[1:]
	}
	if err := checkSectionName(s); err != nil {
		return err
	}
	if err := c.checkUniqueName(s); err != nil {
		return err
	}
	c.Sections = append(c.Sections, s)
	return nil
}

// readFrom reads a proxy section's "from <defaults>" (at the end of its
// first line), returning the other arguments.
func (c *Config) readFrom(s *Section, args []string) ([]string, error) {
	i := indexOf(args, "from")
	if !proxyKinds[s.Kind] || i < 0 {
		return args, nil
	}
	if i != len(args)-2 {
		return nil, errAt(s.Pos, "%s: \"from\" takes one defaults section's name, at the end", s.Kind)
	}
	s.From = args[i+1]
	if c.namedDefaults(s.From, len(c.Sections)) == nil {
		return nil, errAt(s.Pos, "%s: no defaults section named %q before it", s.Kind, s.From)
	}
	return args[:i], nil
}

// checkSectionArgs checks the name a section takes: none in global, at
// most one in defaults, one in the others.
func checkSectionArgs(kind string, args []string, pos Position) error {
	switch {
	case kind == "global" && len(args) > 0:
		return errAt(pos, "global takes no name")
	case kind == "defaults" && len(args) > 1:
		return errAt(pos, "defaults takes at most a name")
	case kind != "global" && kind != "defaults" && len(args) == 0:
		return errAt(pos, "%s needs a name", kind)
	}
	return nil
}

// freelyNamed are the sections whose name HAProxy 2.6 takes whatever it
// holds; it refuses another's name with a byte besides letters, digits,
// '.', '_', ':' and '-' (invalid_char).
var freelyNamed = map[string]bool{"defaults": true, "cache": true, "program": true}

// checkSectionName refuses a name HAProxy refuses: the translation writes
// names into snippets', loggers' and comments' names, where a space, a
// quote, a brace or a newline would be Caddyfile syntax.
func checkSectionName(s *Section) error {
	if freelyNamed[s.Kind] {
		return nil
	}
	for i := 0; i < len(s.Name); i++ {
		if c := s.Name[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') && strings.IndexByte("._:-", c) < 0 {
			return errAt(s.Pos, "%s %q: character %q is not permitted in a %s name (HAProxy refuses it too)", s.Kind, s.Name, c, s.Kind)
		}
	}
	return nil
}

// checkUniqueName refuses a proxy named as an earlier one it would clash
// with: of its kind, or a listen (a frontend and a backend in one).
func (c *Config) checkUniqueName(s *Section) error {
	if !proxyKinds[s.Kind] || s.Kind == "defaults" || s.Name == "" {
		return nil
	}
	for _, o := range c.Sections {
		if o.Name == s.Name && proxyKinds[o.Kind] && o.Kind != "defaults" &&
			(o.Kind == s.Kind || o.Kind == "listen" || s.Kind == "listen") {
			return errAt(s.Pos, "%s %q: a %s of that name is at %s", s.Kind, s.Name, o.Kind, o.Pos)
		}
	}
	return nil
}

// namedDefaults is the last defaults section named name among the first
// before sections.
func (c *Config) namedDefaults(name string, before int) *Section {
	for i := before - 1; i >= 0; i-- {
		if s := c.Sections[i]; s.Kind == "defaults" && s.Name == name {
			return s
		}
	}
	return nil
}

// DefaultsOf is the defaults section whose settings s takes: the one its
// "from" names, else the last defaults section before it; nil if none.
func (c *Config) DefaultsOf(s *Section) *Section {
	at := indexOf(c.Sections, s)
	if at < 0 || !proxyKinds[s.Kind] {
		return nil
	}
	if s.From != "" {
		return c.namedDefaults(s.From, at)
	}
	if s.Kind == "defaults" {
		return nil // a defaults section inherits only through "from"
	}
	for i := at - 1; i >= 0; i-- {
		if c.Sections[i].Kind == "defaults" {
			return c.Sections[i]
		}
	}
	return nil
}

// line is the section's first line as written: its keyword, name,
// arguments and "from".
func (s *Section) line() Line {
	if s.head.Words != nil {
		return s.head
	}
	words := []string{s.Kind}
	if s.Name != "" {
		words = append(words, s.Name)
	}
	words = append(words, s.Args...)
	if s.From != "" {
		words = append(words, "from", s.From)
	}
	return Line{Pos: s.Pos, Words: words}
}

// Section returns the section of kind and name, nil if there is none.
func (c *Config) Section(kind, name string) *Section {
	for _, s := range c.Sections {
		if s.Kind == kind && s.Name == name {
			return s
		}
	}
	return nil
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func refuse(l Line, why string, args ...any) error {
	return errAt(l.Pos, "%s: %s", l.shownKeyword(), fmt.Sprintf(why, args...))
}

// refuseValue refuses l because no Caddyfile token carries v, the value of
// what, exactly; a line that took a value from the environment is not
// quoted, so that no message shows it.
func refuseValue(l Line, what, v string, err error) error {
	if l.usesEnv() {
		return refuse(l, "%s (a value from the environment) cannot be carried by a Caddyfile exactly: %v", what, err)
	}
	return refuse(l, "%s %s cannot be carried by a Caddyfile exactly: %v", what, quotedValue(v), err)
}

// arg is the word after the keyword's own words, "" if none.
func arg(l Line, at int) string {
	if at < len(l.Words) {
		return l.Words[at]
	}
	return ""
}

func (c *Config) lineAt(pos Position) (Line, bool) {
	for _, s := range c.Sections {
		if s.Pos == pos {
			return Line{Pos: s.Pos, Words: append([]string{s.Kind}, s.Name)}, true
		}
		for _, l := range s.Lines {
			if l.Pos == pos {
				return l, true
			}
		}
	}
	return Line{}, false
}

// sectionAt is the section that holds the setting at pos (nil: none).
// Looked up once per rule and ACL line, it is a map, so that adapting is
// linear in the lines (a scan made a block list of 20,000 lines
// quadratic).
func (c *Config) sectionAt(pos Position) *Section { return c.sectionOf[pos] }

func (c *Config) file() string {
	if len(c.Sections) == 0 {
		return ""
	}
	return c.Sections[0].Pos.File
}

// quotedValue shows v in a message: quoted, and shortened when long.
func quotedValue(v string) string {
	if len(v) > 60 {
		v = v[:60] + "…"
	}
	return strconv.Quote(v)
}
