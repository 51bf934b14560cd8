package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: replace-header replaces each line of a header that its
// expression matches anywhere with the format, whole, as HAProxy does: the
// expression around its leftmost match, its match group 1 (HAProxy's \0)
// and its groups after it, '$' doubled; a response's as header_down (with
// a condition, a deferred header), a request's as request_header.
// replace-value, a regular expression RE2 reads otherwise, a log-format
// format, a request's Host or forwarding header, and a replace-header
// that a set-header of the same header follows in one header_down are
// refused.
func TestReplaceHeader(t *testing.T) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n"
	const tail = "\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct{ rules, want string }{
		{"\thttp-response replace-header Set-Cookie (.*) \"\\1; Secure\"\n", `header_down Set-Cookie ^(?s:.*?)((.*))(?s:.*)$ "$\{2\}; Secure"`},
		{"\thttp-response replace-header X-A ^a(b)$ \"\\0-\\1 \\$1\"\n", `header_down X-A ^(?s:.*?)(^a(b)$)(?s:.*)$ "$\{1\}-$\{2\} $$1"`},
		{"\thttp-response replace-header X-A a b if { src 10.0.0.0/8 }\n", "header @response_5 {\n\t\tX-A ^(?s:.*?)(a)(?s:.*)$ b\n\t\tdefer"},
		{"\thttp-request replace-header X-Tenant ^c-(.*)$ \"t-\\1\"\n", `request_header X-Tenant ^(?s:.*?)(^c-(.*)$)(?s:.*)$ "t-$\{2\}"`},
		{"\thttp-response set-header X-A 1\n\thttp-response replace-header X-A 1 2\n", "header_down X-A ^(?s:.*?)(1)(?s:.*)$ 2"},
	} {
		cfg, err := Parse(strings.NewReader(head+tt.rules+tail), "r.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := caddyfileOf(cfg); err != nil || !strings.Contains(out, tt.want) {
			t.Errorf("%s: %v, the translation lacks %q:\n%s", tt.rules, err, tt.want, out)
		}
	}
	for _, tt := range []struct{ rules, want string }{
		{"\thttp-response replace-value Cache-Control ^public$ private\n", "r.cfg:5: http-response replace-value: not translated: HAProxy matches each comma-separated value"},
		{"\thttp-request replace-value X-A a b\n", "r.cfg:5: http-request replace-value: not translated: HAProxy matches each comma-separated value"},
		{"\thttp-request replace-header Host (.*) x.example\n", "r.cfg:5: http-request replace-header: replace-header Host of a request is not translated"},
		{"\thttp-request replace-header X-Forwarded-For (.*) x\n", "r.cfg:5: http-request replace-header: replace-header X-Forwarded-For of a request is not translated"},
		{"\thttp-response replace-header X-A a\\Z b\n", "r.cfg:5: http-response replace-header: a\\Z: not a regular expression Go's RE2 reads"},
		{"\thttp-response replace-header X-A a \"%[src]\"\n", "r.cfg:5: http-response replace-header: %[src]: log-format expressions are not translated yet"},
		{"\thttp-response replace-header X-A a b\n\thttp-response add-header X-A c\n", "r.cfg:5: http-response replace-header: a replace-header before a add-header of X-A (line 6) is not translated"},
		{"\thttp-response replace-header X-A a\n", "r.cfg:5: http-response replace-header: only http-response del-header"},
	} {
		cfg, err := Parse(strings.NewReader(head+tt.rules+tail), "r.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := caddyfileOf(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %s", tt.rules, err, tt.want)
		}
	}
}

// Issue 28: a 1.x rsprep/rspirep/reqrep/reqirep of one header's lines
// ("^<name>:\ <regex>" "<name>:\ <format>") is read as the 2.x
// replace-header of that header's value (without case for the i rules),
// a warning at its line; another form (a request line's, a header
// renamed) is refused naming the 1.x keyword.
func TestLegacyReplaceReadAsReplaceHeader(t *testing.T) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	cfg, err := Parse(strings.NewReader(head+"\trspirep ^Location:\\ http://internal(.*) Location:\\ /api\\1\n"), "l.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if want := `header_down Location ^(?s:.*?)((?i)^http://internal(.*))(?s:.*)$ "/api$\{2\}"`; err != nil || !strings.Contains(tr.Caddyfile, want) {
		t.Fatalf("%v: the translation lacks %q:\n%s", err, want, tr.Caddyfile)
	}
	if lines := warnedLines(tr, "rspirep: read as http-response replace-header Location"); len(lines) != 1 || lines[0] != 8 {
		t.Errorf("warnings %+v, want one at line 8", tr.Warnings)
	}
	for rule, want := range map[string]string{
		`rsprep ^X-A:\ (.*) X-B:\ \1`:         "l.cfg:8: rsprep ^X-A: (.*): this form is not translated",
		`reqrep ^GET\ /api/(.*) GET\ /\1`:     "l.cfg:8: reqrep ^GET /api/(.*): this form is not translated",
		`reqirep ^Host:\ www\.(.*) Host:\ \1`: "l.cfg:8: reqirep (read as http-request replace-header): replace-header Host of a request is not translated",
		`rsprep ^X-A:\ (a{2}) X-A:\ b`:        "l.cfg:8: rsprep (read as http-response replace-header)",
	} {
		cfg, err := Parse(strings.NewReader(head+"\t"+rule+"\n"), "l.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Translate(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", rule, err, want)
		}
	}
}
