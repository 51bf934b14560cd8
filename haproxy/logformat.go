package haproxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// HAProxy's log-format strings: a header value of http-request and
// http-response set-header and add-header, a redirect's location, prefix
// or scheme. Literal text, %% for a literal %, variables (%ci) and
// samples (%[fetch,converter]) evaluated for each request. Each sample
// becomes a placeholder of Caddy that gives the same bytes, by the one
// table below; any other is refused with its line.

// logFormat is a log-format string (raw, as written) read into its
// parts, in order.
type logFormat struct {
	raw   string
	parts []formatPart
	// differs says how each of its samples whose placeholder may give
	// other bytes than HAProxy's differs (a Warning at its line).
	differs []string
}

// literalFormat is v taken as written: literal text.
func literalFormat(v string) logFormat {
	return logFormat{raw: v, parts: []formatPart{{text: v}}}
}

// formatPart is literal text (placeholder "") or one of Caddy's
// placeholders (its name, without braces).
type formatPart struct {
	text, placeholder string
}

// formatEntry is what becomes of one fetch, converter or variable: a
// placeholder (of the fetch's argument, for hdr), or refused (refusal
// says why).
type formatEntry struct {
	placeholder func(arg string) string
	takesName   bool   // a header's name, in parentheses: hdr(<name>)
	doc         string // what HAProxy gives, and Caddy's counterpart
	refusal     string
	differs     string // how Caddy's value may differ: a Warning
	after       string // a converter's one fetch it is translated after
}

// formatMap is a placeholder no module of Caddy gives as HAProxy's sample
// is, made by a map directive of the site from one that one does: the
// first input that matches the source (~ a regular expression, whose
// output may take its groups) gives its output, else the fallback.
type formatMap struct {
	source   string
	cases    [][2]string
	fallback string
}

// formatMaps are the map-made placeholders, by name, but hdr's
// (formatMapOf).
var formatMaps = map[string]formatMap{
	// The path as sent: the request's URI before its query (Caddy's
	// {http.request.uri.path} is decoded).
	"haproxy.path": {source: "{http.request.uri}", cases: [][2]string{{"~^([^?]*)", "${1}"}}},
	// A redirect's path or URI with append-slash: a slash after it
	// unless it ends with one.
	"haproxy.path_slashed": {source: "{http.request.uri}", cases: [][2]string{{"~^([^?]*[^?/])([?].*)?$", "${1}/"}, {"~^([^?]*)", "${1}"}}},
	"haproxy.uri_slashed":  {source: "{http.request.uri}", cases: [][2]string{{"~^(.*[^/])$", "${1}/"}, {"~^(.*)$", "${1}"}}},
	"haproxy.base":         {source: "{http.request.hostport}{http.request.uri}", cases: [][2]string{{"~^([^?]*)", "${1}"}}},
	"haproxy.ssl_fc":       {source: "{http.request.scheme}", cases: [][2]string{{"https", "1"}}, fallback: "0"},
	"haproxy.req_ver":      {source: "{http.request.proto}", cases: [][2]string{{"~^HTTP/(.*)$", "${1}"}}},
	// OpenSSL's names of the version and the suite, as HAProxy gives
	// them, of Caddy's (Go's) names: every version and suite Caddy's TLS
	// negotiates; nothing without TLS, where HAProxy's sample fails.
	"haproxy.ssl_fc_protocol": {source: "{http.request.tls.version}", cases: [][2]string{{"tls1.2", "TLSv1.2"}, {"tls1.3", "TLSv1.3"}}},
	"haproxy.ssl_fc_cipher":   {source: "{http.request.tls.cipher_suite}", cases: opensslSuiteNames()},
}

// opensslSuiteNames are the cases of Go's name of each suite Caddy's TLS
// negotiates (goCipherSuites, goTLS13Suites) to OpenSSL's, in Go's names'
// order: TLS 1.3's are the same in both.
func opensslSuiteNames() [][2]string {
	var cases [][2]string
	for openssl, goName := range goCipherSuites {
		cases = append(cases, [2]string{goName, openssl})
	}
	for _, n := range goTLS13Suites {
		cases = append(cases, [2]string{n, n})
	}
	slices.SortFunc(cases, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return cases
}

// placeholder is a formatEntry's placeholder that takes no argument.
func placeholder(name string) func(string) string { return func(string) string { return name } }

// headerPlaceholder is hdr(<name>)'s placeholder: the Host header as sent
// (with its port) is Caddy's hostport, which Go takes out of the headers;
// another header's last value, as HAProxy takes it, a map's of Caddy's
// (formatMapOf). name is a header name (formatSample checks it): no
// brace, quote or space ends the placeholder or the token it is in.
func headerPlaceholder(name string) string {
	if strings.EqualFold(name, "host") {
		return "http.request.hostport"
	}
	return headerMapPrefix + strings.ToLower(name)
}

const headerMapPrefix = "haproxy.hdr."

// formatMapOf is the map that makes a map-made placeholder: hdr(<name>)'s
// the last of the header's values, as HAProxy takes it (a header sent
// twice, or with commas, gives what follows the last comma, without
// spaces), of Caddy's all joined by commas.
func formatMapOf(name string) (formatMap, bool) {
	if header, ok := strings.CutPrefix(name, headerMapPrefix); ok {
		return formatMap{source: "{http.request.header." + header + "}", cases: [][2]string{{lastHeaderValue, "${1}"}}}, true
	}
	m, ok := formatMaps[name]
	return m, ok
}

// lastHeaderValue is the regular expression of the map of a header's last
// value: the values before it, each of characters but a comma or a double
// quote and of double-quoted strings (whose commas do not separate, and
// where a backslash escapes the next character, as HAProxy 2.6 reads
// them), then the last, which a string unterminated may end, trimmed.
// A double quote is \x22: a quote would end the Caddyfile's token.
const lastHeaderValue = `"~^(?:(?:[^,\x22]|\x22(?:[^\x22\\]|\\.)*\x22)*,)*[ \t]*((?:[^,\x22]|\x22(?:[^\x22\\]|\\.)*(?:\x22|\\?$))*?)[ \t]*$"`

// formatFetches are the sample fetches of %[…]; formatVariables the
// log-format variables. docs/haproxy.md's table is written from them.
var formatFetches = map[string]formatEntry{
	"src":             {placeholder: placeholder("http.request.remote.host"), doc: "the client's address"},
	"src_port":        {placeholder: placeholder("http.request.remote.port"), doc: "the client's port"},
	"dst":             {placeholder: placeholder("http.request.local.host"), doc: "the address the client connected to"},
	"dst_port":        {placeholder: placeholder("http.request.local.port"), doc: "the port the client connected to"},
	"hdr":             {placeholder: headerPlaceholder, takesName: true, doc: "the header's last value (what follows its last comma outside double quotes, of its last line): a `map` of `{http.request.header.<name>}`; Host's, with its port, is `{http.request.hostport}`"},
	"req.hdr":         {placeholder: headerPlaceholder, takesName: true, doc: "as `hdr`"},
	"query":           {placeholder: placeholder("http.request.uri.query"), doc: "the query string as sent, without `?`"},
	"url":             {placeholder: placeholder("http.request.uri"), doc: "the path and query as sent"},
	"method":          {placeholder: placeholder("http.request.method"), doc: "the request's method"},
	"ssl_fc_sni":      {placeholder: placeholder("http.request.tls.server_name"), doc: "the name the client sent in TLS (SNI), empty without"},
	"path":            {placeholder: placeholder("haproxy.path"), doc: "the path as sent, without the query: a `map` of `{http.request.uri}` (Caddy's `{http.request.uri.path}` is decoded)"},
	"base":            {placeholder: placeholder("haproxy.base"), doc: "the Host and the path as sent: a `map` of `{http.request.hostport}{http.request.uri}`"},
	"ssl_fc":          {placeholder: placeholder("haproxy.ssl_fc"), doc: "1 over TLS, else 0: a `map` of `{http.request.scheme}`"},
	"req.ver":         {placeholder: placeholder("haproxy.req_ver"), doc: "the HTTP version (1.1, 2.0): a `map` of `{http.request.proto}`"},
	"ssl_fc_protocol": {placeholder: placeholder("haproxy.ssl_fc_protocol"), doc: "OpenSSL's name of the TLS version (`TLSv1.2`, `TLSv1.3`), empty without TLS: a `map` of `{http.request.tls.version}` (`tls1.2`, `tls1.3`)"},
	"ssl_fc_cipher":   {placeholder: placeholder("haproxy.ssl_fc_cipher"), doc: "OpenSSL's name of the suite (`ECDHE-RSA-AES128-GCM-SHA256`; TLS 1.3's, `TLS_AES_128_GCM_SHA256`, as IANA's), empty without TLS: a `map` of `{http.request.tls.cipher_suite}`, Go's (IANA's) name, for each suite Caddy negotiates", differs: suiteChoiceDiffers},
}

// suiteChoiceDiffers is how the suite Caddy negotiates may differ from
// HAProxy's.
const suiteChoiceDiffers = "ssl_fc_cipher is the suite Go's TLS chose, by OpenSSL's name: Go picks by its own order (AES-128-GCM first where both ends have AES hardware), HAProxy by OpenSSL's (TLS 1.3's AES-256-GCM first by default), so a client may get another suite from each"

var formatVariables = map[string]formatEntry{
	"ci": {placeholder: placeholder("http.request.remote.host"), doc: "as `src`"},
	"cp": {placeholder: placeholder("http.request.remote.port"), doc: "as `src_port`"},
	"fi": {placeholder: placeholder("http.request.local.host"), doc: "as `dst`"},
	"fp": {placeholder: placeholder("http.request.local.port"), doc: "as `dst_port`"},
	"H":  {placeholder: placeholder("system.hostname"), doc: "the machine's host name"},
	"ID": {refusal: "the unique ID of unique-id-format, which Caddy has as {http.request.uuid}, a random UUID of another form (see unique-id-header): not translated in a value"},
}

// formatConverters are the converters after a fetch: one has a
// counterpart among Caddy's placeholders after one fetch (after).
var formatConverters = map[string]formatEntry{
	"lower": {refusal: "Caddy's placeholders have no case conversion"},
	"upper": {refusal: "Caddy's placeholders have no case conversion"},
	// HAProxy 2.6 encodes every byte but RFC 3986's unreserved (letters,
	// digits, -._~) as %XX, of the bytes as sent; so does Go's
	// url.QueryEscape, of the URI as Go's URL gives it.
	"url_enc": {after: "url", placeholder: placeholder("http.request.uri_escaped"),
		doc:     "the URI, every byte but letters, digits and `-._~` as `%XX` (its default, `query`)",
		differs: "url_enc of url is Caddy's {http.request.uri_escaped}, which encodes the URI as Go gives it: a byte of the path that Go escapes and HAProxy takes as sent (\", <, >, \\, ^, `, {, |, }) makes Go escape the whole path anew before encoding it (/\"x/%7e gives %2F%2522x%2F~, where HAProxy sends %2F%22x%2F%257e): the same address once the receiver decodes the value"},
}

// maps are the map-made placeholders f uses.
func (f logFormat) maps() []string {
	var names []string
	for _, p := range f.parts {
		if _, ok := formatMapOf(p.placeholder); ok {
			names = append(names, p.placeholder)
		}
	}
	return names
}

// readLogFormat reads v, a log-format string of line l.
func readLogFormat(v string, l Line) (f logFormat, err error) {
	f.raw = v
	var text strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			text.WriteByte(v[i])
			continue
		}
		name, arg, n, err := formatItem(v[i+1:], l)
		if err != nil {
			return f, err
		}
		i += n
		if name == "%" {
			text.WriteByte('%')
			continue
		}
		e, err := formatLookup(name, l)
		if err != nil {
			return f, err
		}
		if text.Len() > 0 {
			f.parts = append(f.parts, formatPart{text: text.String()})
			text.Reset()
		}
		f.parts = append(f.parts, formatPart{placeholder: e.placeholder(arg)})
		if e.differs != "" && !slices.Contains(f.differs, e.differs) {
			f.differs = append(f.differs, e.differs)
		}
	}
	if text.Len() > 0 || len(f.parts) == 0 {
		f.parts = append(f.parts, formatPart{text: text.String()})
	}
	return f, nil
}

// formatItem reads what follows a %: another % ("%"), a sample %[…]
// (its fetch with its argument, and no converter) or a variable. n is
// how many bytes it took.
func formatItem(rest string, l Line) (name, arg string, n int, err error) {
	switch {
	case strings.HasPrefix(rest, "%"):
		return "%", "", 1, nil
	case strings.HasPrefix(rest, "{"):
		return "", "", 0, refuse(l, "log-format flags (%%{…}) are not translated")
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", "", 0, refuse(l, "%%[ without its ]: HAProxy refuses it too")
		}
		name, arg, err = formatSample(rest[1:end], l)
		return name, arg, end + 1, err
	}
	n = len(rest) - len(strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
	if n == 0 {
		return "", "", 0, refuse(l, "a %% that begins no log-format variable or sample: write %%%% for a %%")
	}
	return "%" + rest[:n], "", n, nil
}

// formatSample reads a sample expression: its fetch, with one argument
// for hdr and req.hdr; a converter is refused with the table's reason.
func formatSample(expr string, l Line) (fetch, arg string, err error) {
	sample, converters, converted := strings.Cut(expr, ",")
	if end := strings.IndexByte(expr, ')'); end >= 0 && strings.IndexByte(sample, '(') >= 0 {
		// the converters follow the fetch's arguments
		sample, converters = expr[:end+1], expr[end+1:]
		converters, converted = strings.CutPrefix(converters, ",")
	}
	if converted {
		return formatConverted(sample, converters, expr, l)
	}
	fetch, args, hasArgs := strings.Cut(sample, "(")
	e, known := formatFetches[fetch]
	if !known {
		return "", "", refuse(l, "log-format sample %s is not translated (see docs/haproxy.md's table of samples)", fetch)
	}
	if hasArgs {
		a, ok := strings.CutSuffix(args, ")")
		if !ok || a == "" || strings.ContainsAny(a, ",()") || !e.takesName {
			return "", "", refuse(l, "%%[%s]: only hdr(<name>) and req.hdr(<name>) take an argument here", expr)
		}
		if !isHTTPName(a) {
			return "", "", refuse(l, "%%[%s]: %q is not a header name", expr, a)
		}
		arg = a
	} else if e.takesName {
		return "", "", refuse(l, "%%[%s]: a header's name is needed here", expr)
	}
	return fetch, arg, nil
}

// formatConverted reads a sample's fetch and converters: one converter
// of the table after its one fetch, without arguments but its default
// (url_enc(query)), is the name "<fetch>,<converter>"; another is refused
// with the table's reason.
func formatConverted(sample, converters, expr string, l Line) (string, string, error) {
	name, args, _ := strings.Cut(converters, "(")
	e, ok := formatConverters[name]
	switch {
	case !ok:
		return "", "", refuse(l, "converter %s in %%[%s] is not translated", name, expr)
	case e.refusal != "":
		return "", "", refuse(l, "converter %s in %%[%s]: %s", name, expr, e.refusal)
	case sample != e.after || (args != "" && args != "query)"):
		return "", "", refuse(l, "converter %s in %%[%s]: translated as %%[%s,%s] alone", name, expr, e.after, name)
	}
	return sample + "," + name, "", nil
}

// formatLookup is the table's entry of a fetch, a fetch with its
// converter or a %variable, or its line's refusal.
func formatLookup(name string, l Line) (formatEntry, error) {
	if _, converter, ok := strings.Cut(name, ","); ok {
		return formatConverters[converter], nil // formatConverted took it
	}
	e, ok := formatFetches[name]
	if v, isVar := strings.CutPrefix(name, "%"); isVar {
		e, ok = formatVariables[v]
	}
	switch {
	case !ok:
		return e, refuse(l, "log-format sample %s is not translated (see docs/haproxy.md's table of samples)", name)
	case e.refusal != "":
		return e, refuse(l, "log-format sample %s: %s", name, e.refusal)
	}
	return e, nil
}

// isHTTPName reports whether v is a header name (an RFC 9110 token).
func isHTTPName(v string) bool {
	for i := 0; i < len(v); i++ {
		if !isTokenChar(v[i]) {
			return false
		}
	}
	return v != ""
}

func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// text is the log-format's text when it holds no sample (ok false if it
// holds one).
func (f logFormat) text() (string, bool) {
	if len(f.parts) == 1 && f.parts[0].placeholder == "" {
		return f.parts[0].text, true
	}
	return "", false
}

// formatTable is docs/haproxy.md's table of the log-format samples and
// variables.
func formatTable() string {
	var b strings.Builder
	b.WriteString("| sample or variable | status | becomes, or why |\n|---|---|---|\n")
	row := func(name string, e formatEntry) {
		switch {
		case e.refusal != "":
			fmt.Fprintf(&b, "| `%s` | refused | %s |\n", name, e.refusal)
		case e.differs != "":
			fmt.Fprintf(&b, "| `%s` | approximated | %s: `{%s}`; %s |\n", name, e.doc, e.placeholder("<name>"), e.differs)
		default:
			fmt.Fprintf(&b, "| `%s` | translated | %s: `{%s}` |\n", name, e.doc, e.placeholder("<name>"))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(formatFetches)) {
		if formatFetches[name].takesName {
			row("%["+name+"(<name>)]", formatFetches[name])
			continue
		}
		row("%["+name+"]", formatFetches[name])
	}
	for _, name := range slices.Sorted(maps.Keys(formatConverters)) {
		if e := formatConverters[name]; e.after != "" {
			row("%["+e.after+","+name+"]", e)
			continue
		}
		row("%[…,"+name+"]", formatConverters[name])
	}
	for _, name := range slices.Sorted(maps.Keys(formatVariables)) {
		row("%"+name, formatVariables[name])
	}
	b.WriteString("| `%%` | translated | a literal `%` |\n")
	return b.String()
}
