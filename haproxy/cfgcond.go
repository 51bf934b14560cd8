package haproxy

import (
	"slices"
	"strconv"
	"strings"
)

// HAProxy 2.4's conditional blocks (its configuration manual, 2.4):
// ".if <condition>" … [".elif <condition>" …] [".else" …] ".endif", and
// the messages ".notice", ".warning", ".alert" and ".diag". HAProxy reads
// them as it reads the file, with the environment of the process; so
// does Parse, with the environment it is given: the lines of the branch
// taken are the configuration, the others are not read. The translation
// then holds that branch only, which a Warning of the .if line says.

// directive is a conditional block's line, or a line of a branch not
// taken, as the translation comments it: approximated (a .if: a
// Warning), else ignored, with why.
type directive struct {
	line         Line
	why          string
	approximated bool
}

// condLevel is one .if block being read.
type condLevel struct {
	at      Line   // its .if
	inside  bool   // the block is in a branch not taken: nothing of it is evaluated
	active  bool   // the lines read now are kept
	taken   string // the branch taken so far ("" if none): ".else at line 21"
	sawElse bool
	skipped []Line // the lines of the branches not taken
}

// conditionals reads the conditional blocks of a configuration.
type conditionals struct {
	getenv func(string) (string, bool)
	levels []*condLevel
	out    []directive
}

// dropping reports whether the lines read now are in a branch not taken.
func (c *conditionals) dropping() bool {
	return len(c.levels) > 0 && !c.levels[len(c.levels)-1].active
}

// lexEnv is the environment line is read with: HAProxy reads a variable
// that is unset as empty, which is what a condition asks of it
// (streq("${ENV}",prod)) and harmless in a branch not taken, where
// nothing of the line is used; elsewhere it is refused (see expand).
func (c *conditionals) lexEnv(line string) func(string) (string, bool) {
	first := ""
	if f := strings.Fields(line); len(f) > 0 {
		first = f[0]
	}
	if !c.dropping() && first != ".if" && first != ".elif" {
		return c.getenv
	}
	return func(name string) (string, bool) {
		v, _ := c.getenv(name)
		return v, true
	}
}

// read takes l if it is a conditional block's line or in a branch not
// taken (true), else leaves it to the configuration (false).
func (c *conditionals) read(l Line) (bool, error) {
	if (l.Words[0] == ".else" || l.Words[0] == ".endif") && len(l.Words) > 1 {
		return true, refuse(l, "%s takes no argument (HAProxy refuses it too)", l.Words[0])
	}
	switch l.Words[0] {
	case ".if":
		return true, c.readIf(l)
	case ".elif", ".else":
		return true, c.readBranch(l)
	case ".endif":
		return true, c.readEndif(l)
	}
	if c.dropping() {
		top := c.levels[len(c.levels)-1]
		top.skipped = append(top.skipped, l)
		return true, nil
	}
	switch l.Words[0] {
	case ".notice", ".warning", ".diag":
		c.out = append(c.out, directive{line: l, why: "a message HAProxy prints as it reads the configuration: Caddy has none"})
		return true, nil
	case ".alert":
		return true, refuse(l, "HAProxy stops reading the configuration here with this message, and refuses it")
	}
	if strings.HasPrefix(l.Words[0], ".") {
		return true, refuse(l, "not a directive HAProxy 2.6 knows (.if, .elif, .else, .endif, .notice, .warning, .alert, .diag): HAProxy refuses it too")
	}
	return false, nil
}

func (c *conditionals) readIf(l Line) error {
	if c.dropping() {
		c.levels = append(c.levels, &condLevel{at: l, inside: true})
		return nil
	}
	v, err := evalCondition(l, c.getenv)
	if err != nil {
		return err
	}
	lv := &condLevel{at: l, active: v}
	if v {
		lv.taken = ".if at line " + strconv.Itoa(l.Pos.Line)
	}
	c.levels = append(c.levels, lv)
	return nil
}

// readBranch reads a .elif or .else.
func (c *conditionals) readBranch(l Line) error {
	kw := l.Words[0]
	if len(c.levels) == 0 {
		return refuse(l, "%s without a .if before it (HAProxy refuses it too)", kw)
	}
	lv := c.levels[len(c.levels)-1]
	if lv.sawElse {
		return refuse(l, "%s after the .else of the .if at line %d (HAProxy refuses it too)", kw, lv.at.Pos.Line)
	}
	lv.sawElse = kw == ".else"
	if lv.inside {
		return nil
	}
	c.out = append(c.out, directive{line: l, why: "a branch of the .if at line " + strconv.Itoa(lv.at.Pos.Line)})
	v := true
	if kw == ".elif" && lv.taken == "" {
		var err error
		if v, err = evalCondition(l, c.getenv); err != nil {
			return err
		}
	}
	lv.active = v && lv.taken == ""
	if lv.active {
		lv.taken = kw + " at line " + strconv.Itoa(l.Pos.Line)
	}
	return nil
}

func (c *conditionals) readEndif(l Line) error {
	if len(c.levels) == 0 {
		return refuse(l, ".endif without a .if before it (HAProxy refuses it too)")
	}
	lv := c.levels[len(c.levels)-1]
	c.levels = c.levels[:len(c.levels)-1]
	if lv.inside {
		return nil
	}
	taken := "the " + lv.taken
	if lv.taken == "" {
		taken = "none of its branches (no condition holds)"
	}
	c.out = append(c.out,
		directive{line: lv.at, approximated: true, why: "the translation holds one branch of this .if (to line " + strconv.Itoa(l.Pos.Line) +
			"), the one the environment it was adapted with takes: " + taken + "; where HAProxy runs with another environment, adapt the file there"},
		directive{line: l, why: "the end of the .if at line " + strconv.Itoa(lv.at.Pos.Line)})
	for _, s := range lv.skipped {
		c.out = append(c.out, directive{line: s, why: "in a branch of the .if at line " + strconv.Itoa(lv.at.Pos.Line) + " not taken: not read"})
	}
	return nil
}

// end checks that every .if was closed, and puts the directives in the
// order written.
func (c *conditionals) end() error {
	if len(c.levels) > 0 {
		return refuse(c.levels[0].at, "no .endif closes it (HAProxy refuses it too)")
	}
	slices.SortStableFunc(c.out, func(a, b directive) int { return a.line.Pos.Line - b.line.Pos.Line })
	return nil
}

// haproxySetsItself are the variables HAProxy sets in its own
// environment before it reads the configuration: defined() of them
// answers as the running HAProxy, which the translation cannot know.
var haproxySetsItself = map[string]bool{"HAPROXY_LOCALPEER": true, "HAPROXY_CFGFILES": true, "HAPROXY_MWORKER": true,
	"HAPROXY_CLI": true, "HAPROXY_MASTER_CLI": true}

// evalCondition evaluates the condition of a .if or .elif line as
// HAProxy 2.6 does: its words joined by spaces, terms (a number, a
// predicate, "(…)", "!" before one) joined by "&&" and "||" ("&&"
// first). What the translation cannot answer as HAProxy would is
// refused with the line.
func evalCondition(l Line, getenv func(string) (string, bool)) (bool, error) {
	e := condExpr{text: strings.Join(l.Words[1:], " "), getenv: getenv, l: l}
	if strings.TrimSpace(e.text) == "" {
		return false, nil // HAProxy takes no condition as false
	}
	v, err := e.or()
	if err == nil && e.skipSpace() < len(e.text) {
		err = e.fail("HAProxy cannot parse the condition at %d (it wants && or || between terms)", e.at+1)
	}
	return v, err
}

// condExpr is the reading of a condition's text.
type condExpr struct {
	text   string
	at     int
	getenv func(string) (string, bool)
	l      Line
}

func (e *condExpr) fail(format string, args ...any) error {
	return refuse(e.l, format, args...)
}

func (e *condExpr) skipSpace() int {
	for e.at < len(e.text) && (e.text[e.at] == ' ' || e.text[e.at] == '\t') {
		e.at++
	}
	return e.at
}

// operator reads op ("&&", "||") if it comes next.
func (e *condExpr) operator(op string) bool {
	e.skipSpace()
	if strings.HasPrefix(e.text[e.at:], op) {
		e.at += len(op)
		return true
	}
	return false
}

// or and and evaluate every term, as HAProxy parses the whole condition
// (a term it would refuse is refused even where it does not decide).
func (e *condExpr) or() (bool, error) {
	v, err := e.and()
	for err == nil && e.operator("||") {
		var w bool
		w, err = e.and()
		v = v || w
	}
	return v, err
}

func (e *condExpr) and() (bool, error) {
	v, err := e.term()
	for err == nil && e.operator("&&") {
		var w bool
		w, err = e.term()
		v = v && w
	}
	return v, err
}

func (e *condExpr) term() (bool, error) {
	if e.skipSpace() == len(e.text) {
		return false, e.fail("a term is missing")
	}
	switch c := e.text[e.at]; {
	case c == '!':
		e.at++
		v, err := e.term()
		return !v, err
	case c == '(':
		e.at++
		v, err := e.or()
		if err == nil && !e.operator(")") {
			err = e.fail("a parenthesis is not closed")
		}
		return v, err
	case c == '-' || '0' <= c && c <= '9':
		return e.number()
	}
	return e.predicate()
}

// number reads a number, true unless 0. HAProxy reads it as strtol does
// in base 0 (a leading 0 is octal, 0x hexadecimal); a run of digits is 0
// in every base or in none, so whether it is 0 is all that counts. An 8
// or a 9 after a leading 0 (not octal) and 0x are refused.
func (e *condExpr) number() (bool, error) {
	start := e.at
	if e.text[e.at] == '-' {
		e.at++
	}
	digits := e.at
	for e.at < len(e.text) && '0' <= e.text[e.at] && e.text[e.at] <= '9' {
		e.at++
	}
	n := e.text[digits:e.at]
	if n == "" || n[0] == '0' && strings.ContainsAny(n, "89") || e.at < len(e.text) && isNameByte(e.text[e.at], false) {
		return false, e.fail("a number at %d is not read as HAProxy reads it (decimal digits, or octal ones after a 0)", start+1)
	}
	return strings.Trim(n, "0") != "", nil
}

// predicate reads name(arguments) and answers it.
func (e *condExpr) predicate() (bool, error) {
	start := e.at
	for e.at < len(e.text) && (e.text[e.at] == '_' || 'a' <= e.text[e.at] && e.text[e.at] <= 'z') {
		e.at++
	}
	name := e.text[start:e.at]
	if name == "" || e.at == len(e.text) || e.text[e.at] != '(' {
		return false, e.fail("HAProxy cannot parse the condition at %d (it wants a number, a predicate, ! or a parenthesis)", start+1)
	}
	end := strings.IndexByte(e.text[e.at:], ')')
	if end < 0 {
		return false, e.fail("%s( is not closed", name)
	}
	inner := e.text[e.at+1 : e.at+end]
	e.at += end + 1
	if strings.ContainsAny(inner, "\"'\\(") {
		return false, e.fail("an argument of %s with a quote, a backslash or a parenthesis is not read as HAProxy reads it", name)
	}
	return e.answer(name, strings.Split(inner, ","))
}

// answer answers predicate name of args.
func (e *condExpr) answer(name string, args []string) (bool, error) {
	want := map[string]int{"defined": 1, "streq": 2, "strneq": 2, "version_atleast": 1, "version_before": 1}[name]
	switch {
	case name == "feature" || strings.HasPrefix(name, "openssl_"):
		return false, e.fail("%s() asks how the running HAProxy was built, which the translation cannot know: keep the lines of the branch Caddy is to take, without the block", name)
	case want == 0:
		return false, e.fail("%s() is not a predicate HAProxy 2.6 knows", name)
	case len(args) != want:
		return false, e.fail("%s() takes %d arguments (HAProxy refuses the line too)", name, want)
	}
	switch name {
	case "defined":
		if haproxySetsItself[args[0]] {
			return false, e.fail("HAProxy sets %s itself before it reads the configuration: the translation cannot know it", args[0])
		}
		_, ok := e.getenv(args[0])
		return ok, nil
	case "streq":
		return args[0] == args[1], nil
	case "strneq":
		return args[0] != args[1], nil
	}
	return e.version(name, args[0])
}

// version answers version_atleast and version_before as every HAProxy
// 2.6 release would (the HAProxy whose behaviour the translation keeps);
// a version whose answer depends on the 2.6 release is refused.
func (e *condExpr) version(name, v string) (bool, error) {
	want, ok := parseVersion(v)
	if !ok {
		return false, e.fail("%s(): only a version of numbers and dots is read", name)
	}
	first := compareVersions([]int{2, 6, 0}, want)
	last := compareVersions([]int{2, 6, 1 << 30}, want)
	if (first < 0) != (last < 0) {
		return false, e.fail("%s() holds for some HAProxy 2.6 releases and not others: the translation keeps HAProxy 2.6's behaviour, of no one release", name)
	}
	if name == "version_before" {
		return first < 0, nil
	}
	return first >= 0, nil
}

func parseVersion(v string) ([]int, bool) {
	var out []int
	for _, part := range strings.Split(v, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || part != strconv.Itoa(n) {
			return nil, false
		}
		out = append(out, n)
	}
	return out, len(out) <= 4
}

// compareVersions compares a and b, a missing part being 0.
func compareVersions(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
