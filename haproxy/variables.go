package haproxy

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// HAProxy's variables: http-request set-var(<scope>.<name>) <sample>
// stores the sample's value when the rule runs, and an ACL of var(<name>)
// tests it later. Caddy has no such store the expression matcher reads,
// so an ACL of a variable tests the sample itself, computed as set-var
// computed it: exact as long as nothing the sample reads changes between
// the set-var and the test, which resolve checks (checkVariableSources).

// variable is a variable set by an http-request set-var of a frontend.
type variable struct {
	line   Line
	sample sample
}

// sample is a sample expression as set-var evaluates it: a fetch and the
// converters applied to its value, in order.
type sample struct {
	fetch      string       // as written
	subject    fetchSubject // what it reads
	arg        string       // the header's name
	converters []converter
}

// converter is one converter of a sample: lower, upper, or field(<index>,
// <delimiter>).
type converter struct {
	name  string
	index int    // field's, from 1
	delim string // field's: one byte
}

// sampleFetches are the fetches a variable's sample may read, each as the
// request gives it: a header's last value (a sample takes the last,
// where an ACL tests each), the path as sent, the URI, the query, the
// method, the TLS client's server name.
var sampleFetches = map[string]fetchSubject{
	"hdr": headerSubject, "req.hdr": headerSubject,
	"path": pathSubject, "url": urlSubject, "query": querySubject, "method": methodSubject, "ssl_fc_sni": sniSubject,
}

// constantFetches are the fetches of a constant, each reading its
// argument as HAProxy 2.6 does into the value a string of it is: a
// variable of one is known when the configuration is read.
var constantFetches = map[string]func(arg string) (string, bool){
	"int": func(arg string) (string, bool) {
		n, err := strconv.ParseInt(arg, 10, 64)
		return strconv.FormatInt(n, 10), err == nil
	},
	"str": func(arg string) (string, bool) { return arg, !strings.ContainsAny(arg, "(),") },
	"bool": func(arg string) (string, bool) {
		v, ok := map[string]string{"0": "0", "1": "1", "false": "0", "true": "1"}[arg]
		return v, ok
	},
}

// variableScopes are the scopes of a variable translated: the
// transaction's and the request's, which a request's rules set and
// read; a session's outlives the request, and the process's every
// request.
var variableScopes = map[string]bool{"txn": true, "req": true}

// readSetVar reads http-request set-var(<scope>.<name>) <sample>.
func (fe *frontend) readSetVar(l Line, args []string, _ *Condition) error {
	name, ok := strings.CutPrefix(arg(l, 1), "set-var(")
	if !ok || !strings.HasSuffix(name, ")") {
		return refuse(l, "takes set-var(<scope>.<name>)")
	}
	name = strings.TrimSuffix(name, ")")
	if strings.Contains(name, ",") {
		return refuse(l, "set-var's conditions (%s) are not translated yet", name)
	}
	if scope, _, _ := strings.Cut(name, "."); !variableScopes[scope] {
		return refuse(l, "variables of scope %s are not translated (txn and req are): a sess variable outlives its request, a proc one is the process's", scope)
	}
	if len(args) != 1 {
		return refuse(l, "takes one sample expression")
	}
	if v, ok := fe.vars[name]; ok {
		return refuse(l, "%s is set again (line %d set it first): not translated yet", name, v.line.Pos.Line)
	}
	s, err := readSample(args[0], l)
	if err != nil {
		return err
	}
	if fe.vars == nil {
		fe.vars = map[string]variable{}
	}
	fe.vars[name] = variable{line: l, sample: s}
	what := "each ACL of var(" + name + ") tests this sample itself"
	if s.subject == constSubject {
		what = "a constant, known here: each ACL of var(" + name + ") and each converter of it reads " + strconv.Quote(s.arg)
	}
	fe.notes = append(fe.notes, note{line: l, what: what})
	return nil
}

// readSample reads a sample expression: a fetch of sampleFetches and the
// converters lower, upper and field(<index>,<delimiter>).
func readSample(expr string, l Line) (sample, error) {
	parts := strings.Split(expr, ",")
	var s sample
	// field's arguments hold a comma: join the parts of one call again.
	for i := 0; i < len(parts); i++ {
		for strings.Count(parts[i], "(") > strings.Count(parts[i], ")") && i+1 < len(parts) {
			parts[i] += "," + parts[i+1]
			parts = append(parts[:i+1], parts[i+2:]...)
		}
	}
	s.fetch = parts[0]
	name, arg, _ := strings.Cut(strings.TrimSuffix(parts[0], ")"), "(")
	if read, ok := constantFetches[name]; ok {
		v, ok := read(arg)
		if !ok || len(parts) > 1 || !strings.HasSuffix(parts[0], ")") {
			return s, refuse(l, "sample fetch %s: int(<whole number>), str(<text>) and bool(<0, 1, true or false>) are translated, without converters", expr)
		}
		s.subject, s.arg = constSubject, v
		return s, nil
	}
	subject, ok := sampleFetches[name]
	if !ok || (subject == headerSubject) != (arg != "") || strings.Contains(arg, ",") {
		return s, refuse(l, "sample fetch %s is not translated (%s are, of a header without an occurrence)", parts[0], "hdr(<name>), req.hdr(<name>), path, url, query, method and ssl_fc_sni")
	}
	if subject == headerSubject && strings.EqualFold(arg, "host") {
		subject = hostSubject
	}
	s.subject, s.arg = subject, arg
	for _, p := range parts[1:] {
		c, err := readConverter(p, l)
		if err != nil {
			return s, err
		}
		s.converters = append(s.converters, c)
	}
	return s, nil
}

// readConverter reads one converter of a sample.
func readConverter(p string, l Line) (converter, error) {
	switch p {
	case "lower", "upper":
		return converter{name: p}, nil
	}
	args, ok := strings.CutPrefix(p, "field(")
	if !ok || !strings.HasSuffix(args, ")") {
		return converter{}, refuse(l, "converter %s is not translated (lower, upper and field(<index>,<delimiter>) are)", p)
	}
	index, delim, _ := strings.Cut(strings.TrimSuffix(args, ")"), ",")
	n, err := strconv.Atoi(index)
	if err != nil || n < 1 || len(delim) != 1 {
		return converter{}, refuse(l, "converter %s: only field(<index from 1>,<one delimiter>) is translated", p)
	}
	return converter{name: "field", index: n, delim: delim}, nil
}

// resolveVariable gives the ACL a of a variable the sample its set-var
// computes, as the rule at l reads it: an http-request rule before the
// set-var would read the variable unset.
func (s *aclScope) resolveVariable(a *acl, l Line) error {
	v, ok := s.vars[a.variable]
	if !ok {
		return refuse(l, "var(%s): no http-request set-var(%s) of this proxy sets it (variables are translated where the frontend that tests them sets them)", a.variable, a.variable)
	}
	if l.Words[0] == "http-request" && comparePos(l.Pos, v.line.Pos) < 0 {
		return refuse(l, "var(%s) is set at line %d, after this rule, which reads it unset: not translated", a.variable, v.line.Pos.Line)
	}
	a.sample = &v.sample
	return nil
}

// checkVariableSources refuses a header rule that changes a header a
// variable read before it: HAProxy's variable keeps the value it read,
// where an ACL of it tests the sample itself, after every header rule.
func (fe *frontend) checkVariableSources() error {
	for _, name := range slices.Sorted(maps.Keys(fe.vars)) {
		v := fe.vars[name]
		if v.sample.subject != headerSubject && v.sample.subject != hostSubject {
			continue
		}
		for _, h := range fe.headers {
			if strings.EqualFold(h.name, v.sample.arg) && comparePos(h.line.Pos, v.line.Pos) > 0 {
				return refuse(h.line, "changes %s after set-var(%s) at line %d read it: the variable keeps the value before, which a translation of its ACLs cannot (they test the request as the rules leave it)", h.name, name, v.line.Pos.Line)
			}
		}
	}
	return nil
}
