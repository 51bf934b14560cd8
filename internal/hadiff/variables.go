package hadiff

import (
	"strconv"
	"strings"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

// sectionVariables are the samples that a section's http-request
// set-var(<name>) lines store, by variable name.
func sectionVariables(s *haproxy.Section) map[string]string {
	vars := map[string]string{}
	for _, l := range s.Lines {
		w := l.Words
		if len(w) < 3 || w[0] != "http-request" || !strings.HasPrefix(w[1], "set-var(") {
			continue
		}
		vars[strings.TrimSuffix(strings.TrimPrefix(w[1], "set-var("), ")")] = w[2]
	}
	return vars
}

// aclTest is aclTest of an ACL's words, one of a variable read as the
// sample its set-var stores: the sample's fetch sent a value its
// converters turn into the ACL's (encodeSample).
func (d *deriver) aclTest(w []string) (test, string) {
	if strings.HasPrefix(w[0], "http_auth(") {
		return d.authTest(w[0])
	}
	name, ok := strings.CutPrefix(w[0], "var(")
	if !ok {
		return aclTest(w, func(v string) string { return v })
	}
	sample, ok := d.vars[strings.TrimSuffix(name, ")")]
	if !ok {
		return test{}, "fetch " + w[0] + ": no set-var of it in the section: not derived"
	}
	parts := strings.Split(sample, ",")
	// field(<n>,<delimiter>)'s comma splits it in two parts: one again.
	for i := 1; i+1 < len(parts); i++ {
		if strings.HasPrefix(parts[i], "field(") && !strings.HasSuffix(parts[i], ")") {
			parts[i] += "," + parts[i+1]
			parts = append(parts[:i+1], parts[i+2:]...)
		}
	}
	fetch := parts[0]
	header := strings.HasPrefix(fetch, "hdr(") || strings.HasPrefix(fetch, "req.hdr(")
	host := header && strings.EqualFold(strings.TrimSuffix(fetch[strings.Index(fetch, "(")+1:], ")"), "host")
	return aclTest(append([]string{fetch}, w[1:]...), func(v string) string {
		v = encodeSample(v, parts[1:])
		if header && !host {
			// A sample of a header takes its last value.
			v = "decoy, " + v
		}
		return v
	})
}

// encodeSample is a value that the converters turn into v: lower's input
// in upper case (and upper's in lower), field's with a field before and
// after v.
func encodeSample(v string, converters []string) string {
	for i := len(converters) - 1; i >= 0; i-- {
		c := converters[i]
		switch {
		case c == "lower":
			v = strings.ToUpper(v)
		case c == "upper":
			v = strings.ToLower(v)
		case strings.HasPrefix(c, "field(") && strings.HasSuffix(c, ")"):
			index, delim, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(c, "field("), ")"), ",")
			if n, err := strconv.Atoi(index); err == nil && n >= 1 {
				v = strings.Repeat("x"+delim, n-1) + v + delim + "8080"
			}
		}
	}
	return v
}
