package hadiff

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

// IgnoredRequestHeaders are the headers a server sees that are not
// compared, and why: the hop-by-hop ones (RFC 9110, 7.6.1), which each
// proxy writes for its own connection to the server; Via, which caddy-ha
// removes and HAProxy never adds (docs/haproxy.md: the backend's
// header_up -Via); and the harness's request number, which differs by
// proxy. Every other header is compared, its lines joined with ", "
// (RFC 9110, 5.3: one X-Forwarded-For line of two values is two lines of
// one).
var IgnoredRequestHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Via", RequestHeader,
}

// Response headers are compared only where the configuration sets or
// removes them (Derivation.ResponseHeaders): Date, Server, Content-Length
// and the like are each proxy's own.

// Target is one of a proxy's binds, as the harness reaches it.
type Target struct {
	Addr string
	TLS  bool
}

// Outcome is what one proxy did with one request.
type Outcome struct {
	Err      string // the request failed: no answer
	Status   int
	Location string
	Header   map[string]string // the compared response headers, lines joined
	Server   string            // the ServerHeader of the answer
	Seen     []Seen            // what the backends saw of it
}

// Timeout bounds each request the harness sends. An answer comes in
// milliseconds but where a proxy checks a password: a bcrypt hash under
// the race detector on 2 busy cores took more than 5 s (a userlist's
// wrong password, elk-kibana-userlist.cfg, load average 13).
const Timeout = 30 * time.Second

// Send sends r to t, numbered n (RequestHeader), over HTTP/1.1 on a
// connection of its own (from r.From), following no redirect, and returns
// what came back; Seen is the caller's to fill from the backends.
func Send(t Target, r Request, n string, respHeaders []string) Outcome {
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}
	if r.From != "" {
		local.IP = net.ParseIP(r.From)
	}
	dialer := &net.Dialer{LocalAddr: local, Timeout: Timeout}
	sni := strings.ToLower(r.Host)
	if net.ParseIP(sni) != nil {
		sni = ""
	}
	// Certificates are not what is compared here (the bind's own tests
	// are TestHAProxyDifferentialBindCertificates'): both get the same
	// test certificate, which is not verified.
	transport := &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{ServerName: sni, InsecureSkipVerify: true}} //nolint:gosec // see above
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	scheme := "http"
	if t.TLS {
		scheme = "https"
	}
	u, err := url.Parse(r.Target)
	if err != nil {
		return Outcome{Err: "the target does not parse: " + err.Error()}
	}
	u.Scheme, u.Host = scheme, t.Addr
	var body io.Reader
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		body = strings.NewReader("hadiff")
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), body)
	if err != nil {
		return Outcome{Err: err.Error()}
	}
	for name, v := range r.Header {
		req.Header[name] = slices.Clone(v)
	}
	req.Host = r.Host
	req.Header.Set(RequestHeader, n)
	resp, err := client.Do(req)
	if err != nil {
		return Outcome{Err: err.Error()}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	o := Outcome{Status: resp.StatusCode, Location: resp.Header.Get("Location"), Server: resp.Header.Get(ServerHeader), Header: map[string]string{}}
	for _, h := range respHeaders {
		if v := resp.Header.Values(h); v != nil {
			o.Header[h] = strings.Join(v, ", ")
		}
	}
	return o
}

// Difference is one field in which HAProxy and caddy-ha differ for one
// request.
type Difference struct {
	Field          string // status, Location, response header <name>, backend, server, requests to servers, request line, request header <name>, error
	HAProxy, Caddy string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: HAProxy %q, caddy-ha %q", d.Field, d.HAProxy, d.Caddy)
}

// Compare lists how b (caddy-ha's) differs from a (HAProxy's): whether
// each was answered, the status, Location, the compared response headers,
// the backend that answered (and the server, unless balanced picks among
// several: Layout.Balanced), how many requests reached a server, and the
// request line and headers the first one saw (IgnoredRequestHeaders
// aside).
func Compare(a, b Outcome, balanced map[string]bool) []Difference {
	var out []Difference
	diff := func(field, x, y string) {
		if x != y {
			out = append(out, Difference{field, x, y})
		}
	}
	if (a.Err == "") != (b.Err == "") {
		return []Difference{{"error", a.Err, b.Err}}
	}
	if a.Err != "" {
		return nil
	}
	diff("status", strconv.Itoa(a.Status), strconv.Itoa(b.Status))
	diff("Location", a.Location, b.Location)
	for _, h := range sortedUnion(a.Header, b.Header) {
		diff("response header "+h, a.Header[h], b.Header[h])
	}
	backendOf := func(id string) string { s, _, _ := strings.Cut(id, "/"); return s }
	diff("backend", backendOf(a.Server), backendOf(b.Server))
	if backendOf(a.Server) == backendOf(b.Server) && !balanced[backendOf(a.Server)] {
		diff("server", a.Server, b.Server)
	}
	diff("requests to servers", strconv.Itoa(len(a.Seen)), strconv.Itoa(len(b.Seen)))
	if len(a.Seen) == 0 || len(b.Seen) == 0 {
		return out
	}
	diff("request line", a.Seen[0].Line, b.Seen[0].Line)
	ha, hb := joined(a.Seen[0].Header), joined(b.Seen[0].Header)
	for _, h := range sortedUnion(ha, hb) {
		diff("request header "+h, ha[h], hb[h])
	}
	return out
}

func joined(h http.Header) map[string]string {
	out := map[string]string{}
	for name, v := range h {
		if !slices.Contains(IgnoredRequestHeaders, http.CanonicalHeaderKey(name)) {
			out[http.CanonicalHeaderKey(name)] = strings.Join(v, ", ")
		}
	}
	return out
}

func sortedUnion(a, b map[string]string) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Known is a known difference: a row of docs/haproxy.md's "Known
// differences" table. A difference in Field (a trailing * matches any
// rest) is known where the translation warned with a message holding
// Warning.
type Known struct {
	Field, Warning, Why string
	// ClientSent: a difference of a request header is excused only in a
	// request whose client sent that header (the field's cell says
	// clientSentQualifier after the field).
	ClientSent bool
}

// clientSentQualifier, after a request header's field in its cell, keeps
// the row to the requests that sent the header: a value the
// configuration's own rules make is never excused by it.
const clientSentQualifier = "when the client sent it"

// KnownHeading is the heading of the section ParseKnown reads.
const KnownHeading = "## Known differences"

// ParseKnown reads the table of the section headed KnownHeading in a
// markdown document: each row's first cell the field, its second the
// warning, each in backticks, its third why.
func ParseKnown(markdown []byte) ([]Known, error) {
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	in, rows := false, 0
	var out []Known
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			if in {
				break
			}
			in = line == KnownHeading
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		if rows++; rows <= 2 { // the header and its rule
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			return nil, fmt.Errorf("known differences: a row of %d cells: %s", len(cells), line)
		}
		fieldCell, clientSent := strings.CutSuffix(strings.TrimSpace(cells[0]), " "+clientSentQualifier)
		field, ok1 := backticked(fieldCell)
		warning, ok2 := backticked(cells[1])
		if !ok1 || !ok2 || field == "" || warning == "" {
			return nil, fmt.Errorf("known differences: the field and the warning must be in backticks: %s", line)
		}
		out = append(out, Known{Field: field, Warning: warning, Why: strings.TrimSpace(strings.Join(cells[2:], "|")), ClientSent: clientSent})
	}
	if !in {
		return nil, fmt.Errorf("no %q section", KnownHeading)
	}
	return out, sc.Err()
}

func backticked(cell string) (string, bool) {
	cell = strings.TrimSpace(cell)
	if len(cell) < 2 || cell[0] != '`' || cell[len(cell)-1] != '`' {
		return "", false
	}
	return cell[1 : len(cell)-1], true
}

// Excuse is the warning that makes d, a difference in the answers to
// req, a known difference, if any: of a row of known whose field matches
// d's (and, for a row kept to what the client sent, whose request sent
// the header), the first warning of the translation that holds the row's
// warning text.
func Excuse(d Difference, req Request, known []Known, warnings []haproxy.Warning) (Known, haproxy.Warning, bool) {
	for _, k := range known {
		if k.Field != d.Field && !(strings.HasSuffix(k.Field, "*") && strings.HasPrefix(d.Field, strings.TrimSuffix(k.Field, "*"))) {
			continue
		}
		if name, ok := strings.CutPrefix(d.Field, "request header "); k.ClientSent && (!ok || req.Header.Get(name) == "") {
			continue
		}
		for _, w := range warnings {
			if strings.Contains(w.Msg, k.Warning) {
				return k, w, true
			}
		}
	}
	return Known{}, haproxy.Warning{}, false
}

// BindPort stands in the headers a server saw for the port of the bind
// the request came in on: each proxy listens on a port of its own here,
// where the configuration has one (dst_port, %fp).
const BindPort = "<the bind's port>"

// MaskBindPort writes BindPort for each header value the servers saw
// that is the port of addr, the bind the request was sent to.
func (o *Outcome) MaskBindPort(addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	for _, s := range o.Seen {
		for _, values := range s.Header {
			for i, v := range values {
				if v == port {
					values[i] = BindPort
				}
			}
		}
	}
}
