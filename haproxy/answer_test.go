package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: a deny with options is the answer HAProxy builds (as
// return's): its status (deny_status or status, 403 by default), its
// content-type, its string, lf-string or file (read through the Files
// seam), and each hdr added; a deny with deny_status alone stays HAProxy's
// error page. A return's hdr and file likewise; an errorfile is sent as it
// is (its status, headers and body; HAProxy ignores status and hdr then). HAProxy 2.6 answers a
// deny with hdr and no payload with an empty body and no content-type.
func TestBuiltAnswers(t *testing.T) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n"
	const tail = "\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	files := mapFiles{"/srv/page.html": "<p>down {for now}</p>\n", "/srv/empty": "",
		"/srv/503.http": "HTTP/1.0 503 Service Unavailable\r\nCache-Control: no-cache\r\nConnection: close\r\nContent-Type: text/html\r\n\r\n<h1>down</h1>\n"}
	for _, tt := range []struct {
		rule string
		want []string
	}{
		{`http-request deny deny_status 401 content-type application/json string "{\"e\":1}" hdr X-A "from %[src]" hdr X-A second`,
			[]string{"header +X-A \"from {http.request.remote.host}\"", "header +X-A second", "header Content-Type application/json", `respond "\{\"e\":1\}" 401`}},
		{"http-request deny hdr X-B b", []string{"header +X-B b", "respond 403"}},
		{"http-request deny status 418", []string{"respond 418"}},
		{"http-request deny deny_status 403", []string{"error 403", "handle_errors 403"}},
		{`http-request deny content-type text/plain lf-string "ip %[src]"`, []string{"header Content-Type text/plain", `respond "ip {http.request.remote.host}" 403`}},
		{"http-request return status 503 content-type text/html file /srv/page.html hdr Retry-After 60",
			[]string{"header +Retry-After 60", "header Content-Type text/html", "respond \"<p>down \\{for now\\}</p>\n\" 503"}},
		{"http-request return status 204 content-type text/html file /srv/empty", []string{"respond 204"}},
		{"http-request return status 200 errorfile /srv/503.http hdr X-A b", []string{"header +Cache-Control no-cache\n\t\theader +Content-Type text/html\n\t\trespond \"<h1>down</h1>\n\" 503"}},
	} {
		cfg, err := Parse(strings.NewReader(head+"\t"+tt.rule+"\n"+tail), "b.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Files = files
		out, err := caddyfileOf(cfg)
		if err != nil {
			t.Errorf("%s: %v", tt.rule, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the translation lacks %q:\n%s", tt.rule, w, out)
			}
		}
		if strings.Contains(tt.rule, "file /srv/empty") && strings.Contains(out, "Content-Type text/html") {
			t.Errorf("%s: HAProxy sends no content-type with an empty file:\n%s", tt.rule, out)
		}
	}
	for _, tt := range []struct{ rule, want string }{
		{"http-request deny string x", "b.cfg:5: http-request deny: string without content-type: HAProxy refuses it too"},
		{"http-request return content-type text/plain file /srv/page.html string x", "b.cfg:5: http-request return: string after file: one payload"},
		{"http-request return content-type text/plain file /srv/none", "b.cfg:5: http-request return: open srv/none: file does not exist"},
		{"http-request deny errorfile /srv/page.html", "b.cfg:5: http-request deny: /srv/page.html is not an HTTP response"},
		{"http-request deny errorfiles site", "b.cfg:5: http-request deny: http-request deny errorfiles is not translated yet"},
		{"http-request return deny_status 500", "b.cfg:5: http-request return: http-request return deny_status is not translated yet"},
		{"http-request deny hdr X-A", "b.cfg:5: http-request deny: hdr needs a name and a value"},
		{"http-request deny status 700", "b.cfg:5: http-request deny: status 700: want 200 to 599"},
	} {
		cfg, err := Parse(strings.NewReader(head+"\t"+tt.rule+"\n"+tail), "b.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Files = files
		if _, err := caddyfileOf(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %s", tt.rule, err, tt.want)
		}
	}
}

// Issue 28: a redirect's options after its target, as HAProxy 2.6 sends
// them: drop-query keeps the path alone, append-slash adds a slash unless
// the location ends with one (after a kept query), set-cookie and
// clear-cookie add HAProxy's Set-Cookie header; a location is sent as it
// is, and a prefix of "/" alone adds nothing.
func TestRedirectOptions(t *testing.T) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n"
	const tail = "\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct {
		rule string
		want []string
	}{
		{"redirect scheme https drop-query", []string{`redir "https://{hostport}{haproxy.path}" 302`, "map {http.request.uri} {haproxy.path}"}},
		{"redirect scheme https append-slash", []string{`redir "https://{hostport}{haproxy.uri_slashed}" 302`, "~^(.*[^/])$ ${1}/"}},
		{"redirect prefix https://x.test/ drop-query append-slash", []string{`redir "https://x.test/{haproxy.path_slashed}" 302`}},
		{"redirect prefix / code 301", []string{`redir "{uri}" 301`}},
		{"redirect location /a drop-query append-slash set-cookie A=b", []string{"header +Set-Cookie \"A=b; path=/;\"", "redir /a 302"}},
		{"redirect scheme https clear-cookie A", []string{"header +Set-Cookie \"A; path=/; Max-Age=0;\"", `redir "https://{hostport}{uri}" 302`}},
		{"http-request redirect location /a ignore-empty", []string{"redir /a 302"}},
	} {
		out, err := translateText(t, head+"\t"+tt.rule+"\n"+tail)
		if err != nil {
			t.Errorf("%s: %v", tt.rule, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the translation lacks %q:\n%s", tt.rule, w, out)
			}
		}
	}
}

// A redirect's prefix ending in a backslash stood right before the
// request's part, {uri}, whose brace Caddy's replacer then read as
// escaped: Location was the prefix and "{uri}" as text. No Caddyfile can
// put a backslash right before a placeholder: the line is refused, as a
// backslash before a sample is; one before another text is carried.
func TestRedirectBackslashBeforeTheRequestsPart(t *testing.T) {
	const head = "defaults\n\tmode http\nfrontend f\n\tbind :80\n"
	const tail = "\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, rule := range []string{`redirect prefix "http://x\\"`, `http-request redirect prefix "http://x\\" drop-query append-slash`} {
		if _, err := translateText(t, head+"\t"+rule+"\n"+tail); err == nil || !strings.Contains(err.Error(), "b.cfg:5: ") || !strings.Contains(err.Error(), errBackslashSample.Error()) {
			t.Errorf("%s: %v, want a refusal at b.cfg:5: %v", rule, err, errBackslashSample)
		}
	}
	out, err := translateText(t, head+"\tredirect location \"/a\\\\\"\n"+tail)
	if err != nil || !strings.Contains(out, "redir `/a\\` 302") {
		t.Errorf("a location ending in a backslash: %v\n%s", err, out)
	}
}
