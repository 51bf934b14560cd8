package haproxy

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Issue 28: set-path, replace-path, set-uri, replace-uri and set-query
// in a backend's route and in a frontend's, in HAProxy's order; regsub
// as the first match of its expression; a rewrite of the URI read as one
// of the path where it is one; what is not exact refused at its line.
func TestPathRewrites(t *testing.T) {
	backend := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n\t%s\n"
	for _, tt := range []struct {
		line, want string
		has        []string
	}{
		{`http-request set-path %[path,regsub(^/search/,/)]`, "", []string{`uri path_regexp ^((?s:.*?))(^/search/)((?s:.*))$ "$\{1\}/$\{3\}"`}},
		{`http-request set-path "%[path,regsub('/a/([^/]*)/(.*)','/\2/\1')]"`, "", []string{`uri path_regexp ^((?s:.*?))(/a/([^/]*)/(.*))((?s:.*))$ "$\{1\}/$\{4\}/$\{3\}$\{5\}"`}},
		{`http-request set-path %[path,regsub(b,Q,i)]`, "", []string{`uri path_regexp ^((?s:.*?))((?i:b))((?s:.*))$`}},
		{`http-request set-path %[path,regsub(^/s/,)]`, "", []string{"(approximated: where the rewritten path is empty or does not begin with /, HAProxy sends it so"}},
		{`http-request set-path %[path,regsub(/+,/,g)]`, "", []string{`uri path_regexp (/+) /`}},
		{`http-request set-path %[path,regsub(x*,/,g)]`, "k.cfg:8: http-request set-path: regsub(x*,…,g): g of an expression that may match empty", nil},
		{`http-request set-path "%[path,regsub('\bx',/,g)]"`, "k.cfg:8: http-request set-path: regsub(\\bx,…,g): g of an expression that may match empty or tests what comes before", nil},
		{`http-request set-path %[path,regsub(x,/,s)]`, "k.cfg:8: http-request set-path: regsub's flags s: only g and i are translated", nil},
		{`http-request set-path /app%[path]/x`, "", []string{`uri path_regexp ^(.*)$ "/app$\{1\}/x"`}},
		{`http-request set-path /app%[path,regsub(^/a,)]`, "k.cfg:8: http-request set-path: /app%[path,regsub(^/a,)]: text around %[…,regsub(…)] is not translated", nil},
		{`http-request set-path %[path,lower]`, "k.cfg:8: http-request set-path: %[path,lower]: only the converter regsub is translated in a path", nil},
		{`http-request set-path %[url]`, "k.cfg:8: http-request set-path: %[url]: only %[path] and %[path,regsub(…)] are translated in set-path", nil},
		{`http-request set-path "%[path,regsub(^/a,\"b\")]"`, `k.cfg:8: http-request set-path: regsub(^/a,"b")]: a " outside single quotes is not translated`, nil},
		{`http-request set-path "%[path,regsub('^/a(?=b)',/)]"`, "k.cfg:8: http-request set-path: ^/a(?=b): not a regular expression Go's RE2 reads", nil},
		{`http-request set-path "%[path,regsub(^/a(b),/)]"`, "k.cfg:8: http-request set-path: regsub takes a regular expression, a substitution and flags", nil},
		{`http-request set-uri %[url,regsub(^/legacy,)]`, "", []string{"(approximated: HAProxy rewrites the URI as the request line has it", `uri path_regexp ^((?s:.*?))(^/legacy)((?s:.*))$ "$\{1\}$\{3\}"`}},
		{`http-request set-uri %[url,regsub(/legacy,)]`, "k.cfg:8: http-request set-uri: /legacy: only an expression anchored at the URI's beginning (^)", nil},
		{`http-request set-uri %[url,regsub(^/a.,)]`, "k.cfg:8: http-request set-uri: ^/a.: any character matches the query's ?", nil},
		{`http-request set-uri %[url,regsub(^/a$,)]`, "k.cfg:8: http-request set-uri: ^/a$: it tests where the path ends", nil},
		{`http-request set-uri %[url,regsub(^/a[^x],)]`, "k.cfg:8: http-request set-uri: ^/a[^x]: its class matches the query's ?", nil},
		{`http-request set-uri /main.html`, "", []string{"rewrite /main.html?\n"}},
		{`http-request set-uri /a/b;c=d?x=1&y`, "", []string{"rewrite /a/b;c=d?x=1&y\n"}},
		{`http-request set-uri /a(b)`, "k.cfg:8: http-request set-uri: /a(b): '(' in a path: Caddy's rewrite has Go send it escaped", nil},
		{`http-request set-uri /a?`, "k.cfg:8: http-request set-uri: an empty query", nil},
		{`http-request set-uri http://x/`, "k.cfg:8: http-request set-uri: http://x/: only a path (/…) is translated in set-uri", nil},
		{`http-request set-uri %[url]`, "k.cfg:8: http-request set-uri: %[url]: set-uri of %[url] alone is not translated", nil},
		{`http-request replace-uri ^/api/(.*) /\1`, "", []string{"(approximated: HAProxy rewrites the URI", `uri path_regexp ^(?s:.*?)(^/api/(.*))(?s:.*)$ "/$\{2\}"`}},
		{`http-request replace-uri ^/api/(v[0-9])/(.*)$ /\1/\2`, "", []string{`"/$\{2\}/$\{3\}"`}},
		{`http-request replace-uri ^/api/ /`, "k.cfg:8: http-request replace-uri: ^/api/: only ^<prefix>(.*), the rest of the URI carried over", nil},
		{`http-request replace-uri ^/api/(.*) /\1/x`, `k.cfg:8: http-request replace-uri: /\1/x: only a format that ends with \1`, nil},
		{`http-request replace-uri ^/api/(.*) \0\1`, `k.cfg:8: http-request replace-uri: \0\1: only a format that ends with \1`, nil},
		{`http-request replace-uri /api/(.*) /\1`, "k.cfg:8: http-request replace-uri: /api/(.*): only an expression anchored", nil},
		{`http-request set-query a=1&b`, "", []string{"rewrite ?a=1&b\n"}},
		{`http-request set-query ""`, "k.cfg:8: http-request set-query: an empty query", nil},
		{`http-request set-query a{b`, `k.cfg:8: http-request set-query: a{b: '{' in a query`, nil},
		{`http-request set-query %[query]`, "k.cfg:8: http-request set-query: %[query]: log-format samples are not translated in a query", nil},
	} {
		text := strings.Replace(backend, "%s", tt.line, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
	}
}

// HAProxy's regsub on a path, as the real HAProxy 2.6 answers
// %[path,regsub(…)] (the first match replaced, \0 the match, i without
// case), and Go's path_regexp of the translation.
func TestRegsubAsPathRegexp(t *testing.T) {
	for _, tt := range []struct {
		format, path, want string
	}{
		{"%[path,regsub(b,Q,i)]", "/a/bcB/b", "/a/QcB/b"},
		{"%[path,regsub(B,Q,i)]", "/a/bcB/b", "/a/QcB/b"},
		{"%[path,regsub('^/a/([^/]*)','/\\1,')]", "/a/bcB/b", "/bcB,/b"},
		{"%[path,regsub('^/a/(b)','[\\0]')]", "/a/bcB/b", "[/a/b]cB/b"},
		{"%[path,regsub(^/search/,/)]", "/search/x/search/", "/x/search/"},
		{"%[path,regsub(x*,Y)]", "/a", "Y/a"},
		{"%[path,regsub(z,Y)]", "/a", "/a"},
		{"%[path,regsub(/+,/,g)]", "//a///b/", "/a/b/"},
		{"%[path,regsub(a|ab,X,g)]", "/abab", "/XbXb"},
		{"%[path,regsub(^/x,Y,g)]", "/x/x", "Y/x"},
		{"%[path,regsub('([a-z])([0-9])','\\2\\1',g)]", "/a1b2/c3", "/1a2b/3c"},
		{"%[path,regsub(B,q,gi)]", "/abBb", "/aqqq"},
	} {
		l := Line{Words: []string{"http-request", "set-path", tt.format}}
		r, err := pathRewriteOf(l, l.Words[2:])
		if err != nil {
			t.Fatalf("%s: %v", tt.format, err)
		}
		if got := regexp.MustCompile(r.find).ReplaceAllString(tt.path, r.replace); got != tt.want {
			t.Errorf("%s of %s: %s, want %s (HAProxy's)", tt.format, tt.path, got, tt.want)
		}
	}
}

// A frontend's rewrites run in the order written among its answers, after
// its header rules, before use_backend tests the path; a rule the
// translation would run on the other side of a rewrite than HAProxy is
// refused where either reads the request.
func TestFrontendPathRewrites(t *testing.T) {
	frontend := "defaults\n\tmode http\nfrontend f\n\tbind :80\n%s\tacl api path_beg /api/\n\tuse_backend b if api\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		rules, want string
		has         []string
	}{
		{"\thttp-request deny if { path /old }\n\thttp-request set-path /api%[path]\n\thttp-request deny if { path /api/old }\n", "",
			[]string{"route {\n", "error @answer_5 403", "uri path_regexp ^(.*)$ \"/api$\\{1\\}\"", "error @answer_7 403", "@use_backend_9 expression"}},
		{"\thttp-request set-header X-A 1\n\thttp-request replace-path ^/v1/(.*) /api/\\1\n\thttp-request set-header X-B 2\n", "",
			[]string{"request_header X-A 1", "request_header X-B 2", `uri path_regexp ^(?s:.*?)(^/v1/(.*))(?s:.*)$ "/api/$\{2\}"`}},
		{"\thttp-request set-path /x\n\thttp-request set-header X-P %[path]\n", "k.cfg:6: http-request set-header: after the path rewrite at line 5", nil},
		{"\thttp-request set-path /x\n\thttp-request set-header X-P 1 if { path /x }\n", "k.cfg:6: http-request set-header: after the path rewrite at line 5", nil},
		{"\thttp-request set-path /x if { hdr(x-a) 1 }\n\thttp-request set-header X-A 1\n", "k.cfg:6: http-request set-header: after the path rewrite at line 5", nil},
		{"\thttp-request set-var(txn.p) path\n\thttp-request set-path /x\n", "k.cfg:6: http-request set-path: rewrites what set-var(txn.p) at line 5 read", nil},
		{"\thttp-request set-path /x\n\thttp-request set-log-level silent if { path /x }\n", "k.cfg:6: http-request set-log-level: log_skip runs before the path rewrite at line 5", nil},
		{"\thttp-request set-query a=1 if { path /x }\n", "", []string{"@path_5 expression", "rewrite @path_5 ?a=1\n"}},
	} {
		text := strings.Replace(frontend, "%s", tt.rules, 1)
		out, err := translateK(t, text)
		checkOutcome(t, text, out, err, tt.want, tt.has...)
		if tt.want != "" || len(tt.has) < 5 {
			continue
		}
		// In the order written.
		at := 0
		for _, h := range tt.has {
			i := strings.Index(out[at:], h)
			if i < 0 {
				t.Errorf("%q: %q is not after the rules before it:\n%s", text, h, out)
				break
			}
			at += i
		}
	}
}

// The 1.x reqrep of the request line, ^([^ :]*) <regex> \1 <format>, is
// read as the 2.x replace-uri <regex> <format> with a warning, its
// groups one less; another request-line form is refused.
func TestLegacyRequestLineReadAsReplaceURI(t *testing.T) {
	head := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for rule, want := range map[string]string{
		`reqrep ^([^\ :]*)\ /api/(.*) \1\ /\2`:                        `uri path_regexp ^(?s:.*?)(^/api/(.*))(?s:.*)$ "/$\{2\}"`,
		`reqirep ^([^\ :]+)\ /API/(v1)/(.*) \1\ /\2/x/\3`:             `uri path_regexp ^(?s:.*?)((?i)^/API/(v1)/(.*))(?s:.*)$ "/$\{2\}/x/$\{3\}"`,
		`reqrep ^([^\ :]*)\ /s/(.*)\ HTTP \1\ /\2\ HTTP`:              `uri path_regexp ^(?s:.*?)(^/s/(.*))(?s:.*)$ "/$\{2\}"`,
		`reqrep ^([^\ ]*)\ /cam/(.*) \1\ /\2`:                         `uri path_regexp ^(?s:.*?)(^/cam/(.*))(?s:.*)$ "/$\{2\}"`,
		`reqrep ^([^\ :]*)\ /(.*)$ \1\ /new/\2 if { src 10.0.0.0/8 }`: `uri @path_8 path_regexp ^(?s:.*?)(^/(.*)$)(?s:.*)$ "/new/$\{2\}"`,
	} {
		cfg, err := Parse(strings.NewReader(head+"\t"+rule+"\n"), "l.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := Translate(cfg)
		if err != nil || !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("%s: %v, want %s in:\n%s", rule, err, want, tr.Caddyfile)
		}
		if lines := warnedLines(tr, strings.Fields(rule)[0]+": read as http-request replace-uri"); len(lines) != 1 || lines[0] != 8 {
			t.Errorf("%s: warnings %+v, want one at line 8", rule, tr.Warnings)
		}
		headerLines := strings.Contains(rule, `([^\ ]*)`)
		if said := slices.ContainsFunc(tr.Warnings, func(w Warning) bool { return strings.Contains(w.Msg, "1.x rewrote a header line") }); said != headerLines {
			t.Errorf("%s: warnings %+v, want the header lines said for [^ ] only", rule, tr.Warnings)
		}
	}
	for rule, want := range map[string]string{
		`reqrep ^([^\ :]*)\ /api/(.*)\ HTTP/1.1 \1\ /\2`:        "l.cfg:8: reqrep (read as http-request replace-uri)",
		`reqrep ^([^\ ]*)\ /(.*)\ HTTP \1\ /\2&ipfrom=A1\ HTTP`: "l.cfg:8: reqrep (read as http-request replace-uri): /\\1&ipfrom=A1: only a format that ends with \\1",
		`reqrep ^(GET)\ /api/(.*) \1\ /\2`:                      "l.cfg:8: reqrep ^(GET) /api/(.*): this form is not translated",
		`reqrep ^([^\ :]*)\ /api/(.*) \1\ /\1\2`:                "l.cfg:8: reqrep ^([^ :]*) /api/(.*): this form is not translated",
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
