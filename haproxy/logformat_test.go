package haproxy

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
)

// A log-format string is read into literal text and the table's
// placeholders: %% a %, a variable or a sample each a placeholder, any
// other % refused with the line.
func TestReadLogFormat(t *testing.T) {
	l := Line{Words: []string{"http-request", "set-header"}}
	for _, tt := range []struct {
		v    string
		want []formatPart // nil: refused
	}{
		{"plain", []formatPart{{text: "plain"}}},
		{"", []formatPart{{text: ""}}},
		{"100%%", []formatPart{{text: "100%"}}},
		{"%ci:%cp", []formatPart{{placeholder: "http.request.remote.host"}, {text: ":"}, {placeholder: "http.request.remote.port"}}},
		{"https://%[hdr(Host)]%[url]", []formatPart{{text: "https://"}, {placeholder: "http.request.hostport"}, {placeholder: "http.request.uri"}}},
		{"%[req.hdr(X-Real-IP)]", []formatPart{{placeholder: "haproxy.hdr.x-real-ip"}}},
		{"%[path]?%[query]", []formatPart{{placeholder: "haproxy.path"}, {text: "?"}, {placeholder: "http.request.uri.query"}}},
		{"%[ssl_fc_protocol] %[ssl_fc_cipher]", []formatPart{{placeholder: "haproxy.ssl_fc_protocol"}, {text: " "}, {placeholder: "haproxy.ssl_fc_cipher"}}},
		{"%[src", nil},
		{"%{+Q}ci", nil},
		{"50%", nil},
		{"%[hdr]", nil},
		{"%[hdr(a,1)]", nil},
		{"%[hdr(a}b)]", nil},
		{"%[src,lower]", nil},
		{"%[src_is_local]", nil},
		{"%ID", nil},
		{"%b", nil},
	} {
		f, err := readLogFormat(tt.v, l)
		switch {
		case tt.want == nil && err == nil:
			t.Errorf("%q: read as %+v, want it refused", tt.v, f.parts)
		case tt.want == nil && !strings.Contains(err.Error(), "http-request set-header: "):
			t.Errorf("%q: %v, want a refusal of the line", tt.v, err)
		case tt.want != nil && (err != nil || !slices.Equal(f.parts, tt.want)):
			t.Errorf("%q: %+v, %v; want %+v", tt.v, f.parts, err, tt.want)
		}
	}
}

// An http-response rule with a condition is a deferred header directive
// only where HAProxy runs it as Caddy would: a condition on what HAProxy
// reads in a response (the client's address, the method, TLS), on the
// frontend's side, and not before a rule without one on the same header.
func TestResponseConditions(t *testing.T) {
	const head = "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n" +
		"frontend web\n    bind 127.0.0.1:8080\n"
	const tail = "    default_backend app\nbackend app\n    server a 127.0.0.1:9000\n"
	out, err := translateText(t, head+"    http-response set-header X-A 1 if { method GET }\n    http-response set-header X-A 2 if { ssl_fc }\n"+tail)
	if err != nil {
		t.Fatal(err)
	}
	if last, first := strings.Index(out, "header @response_9 {"), strings.Index(out, "header @response_8 {"); last < 0 || first < last {
		t.Errorf("the last rule with a condition is not written first:\n%s", out)
	}
	// A request's fetch HAProxy never matches in a response: false, as
	// there (haproxy -c warns), the line noted.
	out, err = translateText(t, head+"    http-response set-header X-A 1 if { path_beg /api/ }\n    http-response set-header X-B 1 unless { path_beg /api/ } || { src 127.0.0.1 }\n"+tail)
	for _, want := range []string{"@response_8 expression `false`\n", "@response_9 expression `!(false || remote_ip(\"127.0.0.1\"))`\n",
		"(HAProxy never matches path_beg (line 8) in an http-response rule (haproxy -c warns): false here too)"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%v: the translation lacks %q:\n%s", err, want, out)
		}
	}
	for _, tt := range []struct{ rules, want string }{
		{"    http-response set-header X-A 1 if { method GET }\n    http-response del-header x-a\n", "b.cfg:8: http-response set-header: a rule with a condition before one without on X-A (line 9)"},
	} {
		if _, err := translateText(t, head+tt.rules+tail); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %s", tt.rules, err, tt.want)
		}
	}
	// A backend's, with a condition on what HAProxy reads in a response,
	// is its deferred header handler (backend-rules.cfg's differential).
	out, err = translateText(t, head+tail+"    http-response del-header X-A if { method GET }\n")
	if err != nil || !strings.Contains(out, "header @response_11 {") {
		t.Errorf("a backend's rule with a condition: %v\n%s", err, out)
	}
}

// url_enc of url is Caddy's {http.request.uri_escaped}, approximated
// with why it is not HAProxy's encoding where Go re-escapes a path
// (tested on HAProxy 2.6: /"x/%7e gives %2F%22x%2F%257e,
// {http.request.uri_escaped} %2F%2522x%2F~); after another fetch, with
// another argument or another converter, it is refused.
func TestURLEncOfURL(t *testing.T) {
	l := Line{Words: []string{"http-request", "redirect"}}
	for _, v := range []string{"/oauth2/start?rd=%[url,url_enc]", "/oauth2/start?rd=%[url,url_enc(query)]"} {
		f, err := readLogFormat(v, l)
		if err != nil || len(f.parts) != 2 || f.parts[1].placeholder != "http.request.uri_escaped" || len(f.differs) != 1 || !strings.Contains(f.differs[0], "%2F%2522x%2F~") {
			t.Errorf("%s: %+v %v, want {http.request.uri_escaped} and why it differs", v, f, err)
		}
	}
	for v, want := range map[string]string{
		"%[path,url_enc]":        "converter url_enc in %[path,url_enc]: translated as %[url,url_enc] alone",
		"%[url,url_enc(other)]":  "converter url_enc in %[url,url_enc(other)]: translated as %[url,url_enc] alone",
		"%[hdr(x),url_enc]":      "converter url_enc in %[hdr(x),url_enc]: translated as %[url,url_enc] alone",
		"%[url,url_enc,lower]":   "converter url_enc,lower in %[url,url_enc,lower] is not translated",
		"%[req.hdr(host),lower]": "converter lower in %[req.hdr(host),lower]: Caddy's placeholders have no case conversion",
	} {
		if _, err := readLogFormat(v, l); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", v, err, want)
		}
	}
}

// ssl_fc_cipher's map gives OpenSSL's name (HAProxy's) of every suite
// Go's TLS offers as secure, which are those Caddy negotiates.
func TestSSLCipherSampleMap(t *testing.T) {
	m := formatMaps["haproxy.ssl_fc_cipher"]
	openssl := map[string]string{}
	for _, c := range m.cases {
		openssl[c[0]] = c[1]
	}
	for _, s := range tls.CipherSuites() {
		got, ok := openssl[s.Name]
		switch {
		case !ok:
			t.Errorf("%s: not in ssl_fc_cipher's map", s.Name)
		case slices.Contains(s.SupportedVersions, tls.VersionTLS13) != (got == s.Name):
			t.Errorf("%s: OpenSSL's name %s", s.Name, got)
		case goCipherSuites[got] != s.Name && got != s.Name:
			t.Errorf("%s: OpenSSL's name %s, which goCipherSuites gives %s", s.Name, got, goCipherSuites[got])
		}
	}
}
