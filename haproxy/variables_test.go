package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: http-request set-var and ACLs of var(<name>): each ACL tests
// the sample itself, as set-var computes it (a header's last value, then
// the converters); what would not read the value the variable holds is
// refused at its line.
func TestVariables(t *testing.T) {
	site := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\thttp-request set-var(txn.h) req.hdr(host),field(1,:),lower\n\t%s\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		line, want string
		has        []string
	}{
		{`use_backend b if { var(txn.h) -m str a.test }`, "", []string{`expression ` + "`" + `({http.request.hostport}.split(":").size() >= 1 ? {http.request.hostport}.split(":")[0] : "").lowerAscii() == "a.test"` + "`"}},
		{`http-request deny if { var(txn.h) -m end .test }`, "", []string{`.lowerAscii().endsWith(".test")`}},
		{`use_backend b if { var(txn.h) a.test }`, "k.cfg:6: use_backend b: var(txn.h) without -m: HAProxy wants the match method first (it refuses it too)", nil},
		{`use_backend b if { var(txn.h) -m found }`, "k.cfg:6: use_backend b: var(txn.h) -m found is not translated", nil},
		{`use_backend b if { var(txn.other) -m str x }`, "k.cfg:6: use_backend b: var(txn.other): no http-request set-var(txn.other) of this proxy sets it", nil},
		{`http-request set-var(txn.h) path`, "k.cfg:6: http-request set-var(txn.h): txn.h is set again (line 5 set it first): not translated yet", nil},
		{`http-request set-var(sess.s) path`, "k.cfg:6: http-request set-var(sess.s): variables of scope sess are not translated (txn and req are)", nil},
		{"http-request set-var(txn.x) int(+03)\n\tuse_backend b if { var(txn.x) -m str 3 }", "", []string{`(a constant, known here: each ACL of var(txn.x) and each converter of it reads "3")`, "expression `\"3\" == \"3\"`"}},
		{"http-request set-var(txn.x) bool(true)\n\tuse_backend b if { var(txn.x) -m str 1 }", "", []string{"expression `\"1\" == \"1\"`"}},
		{"http-request set-var(txn.x) str(a b)", "k.cfg:6: http-request set-var(txn.x): takes one sample expression", nil},
		{`http-request set-var(txn.x) int(3x)`, "k.cfg:6: http-request set-var(txn.x): sample fetch int(3x): int(<whole number>), str(<text>) and bool(<0, 1, true or false>) are translated, without converters", nil},
		{`http-request set-var(txn.x) int(3),add(1)`, "k.cfg:6: http-request set-var(txn.x): sample fetch int(3),add(1): int(<whole number>)", nil},
		{`http-request set-var(txn.x) path,url_dec`, "k.cfg:6: http-request set-var(txn.x): converter url_dec is not translated (lower, upper and field(<index>,<delimiter>) are)", nil},
		{`http-request set-var(txn.x) path,field(-1,/)`, "k.cfg:6: http-request set-var(txn.x): converter field(-1,/): only field(<index from 1>,<one delimiter>) is translated", nil},
		{`http-request set-var(txn.x) path if { path /a }`, "k.cfg:6: http-request set-var(txn.x): conditions are not translated yet", nil},
		{`http-request set-header Host b.test`, "k.cfg:6: http-request set-header: changes Host after set-var(txn.h) at line 5 read it", nil},
	} {
		text := strings.Replace(site, "%s", tt.line, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
	// An http-request rule before the set-var reads the variable unset.
	text := strings.Replace(site, "\thttp-request set-var(txn.h) req.hdr(host),field(1,:),lower\n\t%s\n", "\thttp-request deny if { var(txn.h) -m str a }\n\thttp-request set-var(txn.h) hdr(host)\n", 1)
	out, err := translateK(t, text)
	checkOutcome(t, text, out, err, "k.cfg:5: http-request deny: var(txn.h) is set at line 6, after this rule, which reads it unset: not translated")
	// A backend's set-var is not translated yet.
	text = strings.Replace(site, "%s", "", 1) + "\thttp-request set-var(txn.b) path\n"
	out, err = translateK(t, text)
	checkOutcome(t, text, out, err, "k.cfg:10: http-request set-var(txn.b): http-request set-var(txn.b) in a backend is not translated yet")
}
