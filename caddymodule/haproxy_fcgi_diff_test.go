package caddymodule

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/haproxy"
	"github.com/caddy-ha/caddy-ha/internal/hadiff"
)

// fcgiRecorder is a FastCGI application on loopback that records the
// params of each request (by its HTTP_X_CLIENT param) and answers 200.
// It reads the records itself, so that it sees every param as sent
// (net/http/fcgi keeps only those it does not map to the request).
type fcgiRecorder struct {
	addr  string
	mu    sync.Mutex
	heard map[string]map[string]string
}

func startFCGIRecorder(t *testing.T) *fcgiRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &fcgiRecorder{addr: ln.Addr().String(), heard: map[string]map[string]string{}}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(conn)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

// FastCGI record types (the FastCGI specification, 8).
const (
	fcgiBeginRequest = 1
	fcgiEndRequest   = 3
	fcgiParams       = 4
	fcgiStdin        = 5
	fcgiStdout       = 6
	fcgiGetValues    = 9
	fcgiKeepConn     = 1 // the begin request's flag
)

// serve reads the requests of a connection: each request's params, then
// its body, answered; the connection kept while the client asks for it.
func (r *fcgiRecorder) serve(conn net.Conn) {
	defer conn.Close()
	rd := bufio.NewReader(conn)
	var params []byte
	keep := false
	for {
		typ, id, content, err := readFCGIRecord(rd)
		if err != nil {
			return
		}
		switch typ {
		case fcgiBeginRequest:
			params, keep = nil, len(content) > 2 && content[2]&fcgiKeepConn != 0
		case fcgiParams:
			params = append(params, content...)
		case fcgiStdin:
			if len(content) > 0 {
				continue
			}
			r.record(decodeFCGIParams(params))
			if answerFCGI(conn, id) != nil || !keep {
				return
			}
		case fcgiGetValues:
			continue
		}
	}
}

func (r *fcgiRecorder) record(p map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heard[p["HTTP_X_CLIENT"]] = p
}

func (r *fcgiRecorder) params(client string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.heard[client]
}

func readFCGIRecord(rd io.Reader) (typ byte, id uint16, content []byte, err error) {
	var h [8]byte
	if _, err = io.ReadFull(rd, h[:]); err != nil {
		return 0, 0, nil, err
	}
	content = make([]byte, int(binary.BigEndian.Uint16(h[4:6]))+int(h[6]))
	if _, err = io.ReadFull(rd, content); err != nil {
		return 0, 0, nil, err
	}
	return h[1], binary.BigEndian.Uint16(h[2:4]), content[:binary.BigEndian.Uint16(h[4:6])], nil
}

// decodeFCGIParams reads name-value pairs: each length one byte, or four
// with the high bit set.
func decodeFCGIParams(b []byte) map[string]string {
	out := map[string]string{}
	length := func() int {
		if len(b) == 0 {
			return -1
		}
		if b[0]&0x80 == 0 {
			n := int(b[0])
			b = b[1:]
			return n
		}
		if len(b) < 4 {
			return -1
		}
		n := int(binary.BigEndian.Uint32(b[:4]) & 0x7fffffff)
		b = b[4:]
		return n
	}
	for len(b) > 0 {
		nl, vl := length(), length()
		if nl < 0 || vl < 0 || nl+vl > len(b) {
			break
		}
		out[string(b[:nl])] = string(b[nl : nl+vl])
		b = b[nl+vl:]
	}
	return out
}

// answerFCGI answers request id: 200, a short body, and its end.
func answerFCGI(w io.Writer, id uint16) error {
	body := "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nrecorded\n"
	for _, rec := range []struct {
		typ     byte
		content string
	}{{fcgiStdout, body}, {fcgiStdout, ""}, {fcgiEndRequest, "\x00\x00\x00\x00\x00\x00\x00\x00"}} {
		h := []byte{1, rec.typ, byte(id >> 8), byte(id), byte(len(rec.content) >> 8), byte(len(rec.content)), 0, 0}
		if _, err := w.Write(append(h, rec.content...)); err != nil {
			return err
		}
	}
	return nil
}

// fcgiDocumentedShapes are the params in which Caddy's transport fastcgi
// differs from HAProxy, as the warning at use-fcgi-app says: for each,
// the shape of the difference (given the params each proxy sent, caddy-ha's
// with HAProxy's port) that a row of docs/haproxy.md's Known differences
// (field "fastcgi param <name>") excuses. A param that differs otherwise
// is a difference nothing documents.
var fcgiDocumentedShapes = map[string]func(name string, hap, caddy map[string]string) bool{
	"DOCUMENT_URI":        fcgiLeftOutByHAProxy,
	"REQUEST_SCHEME":      fcgiLeftOutByHAProxy,
	"REMOTE_HOST":         fcgiLeftOutByHAProxy,
	"REMOTE_IDENT":        fcgiLeftOutByHAProxy,
	"SERVER_ADDR":         fcgiLeftOutByHAProxy,
	"HTTP_CONTENT_LENGTH": fcgiCopyLeftOutByHAProxy,
	"HTTP_CONTENT_TYPE":   fcgiCopyLeftOutByHAProxy,
	"PATH_INFO":           fcgiEmptyLeftOutByHAProxy,
	"QUERY_STRING":        fcgiEmptyLeftOutByHAProxy,
	// Of a request without a Content-Type: empty, or Caddy's type of a
	// body where the method is not GET, HEAD or OPTIONS (its fastcgi client's Post).
	"CONTENT_TYPE": func(name string, hap, caddy map[string]string) bool {
		return fcgiEmptyLeftOutByHAProxy(name, hap, caddy) || fcgiLeftOutByHAProxy(name, hap, caddy) &&
			caddy[name] == "application/x-www-form-urlencoded" && !slices.Contains([]string{"GET", "HEAD", "OPTIONS"}, caddy["REQUEST_METHOD"])
	},
	// Caddy's are empty; HAProxy's the Authorization header's scheme and
	// Basic user, or left out without one.
	"AUTH_TYPE":       fcgiSentEmpty,
	"REMOTE_USER":     fcgiSentEmpty,
	"SERVER_SOFTWARE": func(name string, hap, caddy map[string]string) bool { return hap[name] != "" && caddy[name] != "" },
}

func fcgiLeftOutByHAProxy(name string, hap, caddy map[string]string) bool {
	_, inHAP := hap[name]
	_, inCaddy := caddy[name]
	return !inHAP && inCaddy
}

func fcgiEmptyLeftOutByHAProxy(name string, hap, caddy map[string]string) bool {
	return fcgiLeftOutByHAProxy(name, hap, caddy) && caddy[name] == ""
}

// fcgiCopyLeftOutByHAProxy: HTTP_CONTENT_<x> the same as CONTENT_<x>.
func fcgiCopyLeftOutByHAProxy(name string, hap, caddy map[string]string) bool {
	return fcgiLeftOutByHAProxy(name, hap, caddy) && caddy[name] == caddy[strings.TrimPrefix(name, "HTTP_")]
}

func fcgiSentEmpty(name string, _, caddy map[string]string) bool {
	v, ok := caddy[name]
	return ok && v == ""
}

// haproxy/testdata/fcgi.cfg through HAProxy and caddy-ha to one recording
// FastCGI application: a .php path, one with path info, a directory (the
// index), a query, a POST with a body, a DELETE without one; each with
// Authorization but the DELETE: the params each sends are the same, but
// as docs/haproxy.md's Known differences say, with the warning they name.
func TestHAProxyDifferentialFastCGI(t *testing.T) {
	golden := "../haproxy/testdata/fcgi.cfg"
	t.Run("pass-header Authorization", func(t *testing.T) { compareFastCGI(t, golden, "127.0.0.1:8080") })
	t.Run("Authorization not passed", func(t *testing.T) {
		compareFastCGI(t, golden, "127.0.0.1:8080", "    pass-header Authorization\n", "")
	})
	// The corpus's, which the corpus differential does not compare (its
	// recording backends speak HTTP).
	t.Run("php-fpm-fastcgi.cfg", func(t *testing.T) {
		compareFastCGI(t, "../haproxy/testdata/corpus/php-fpm-fastcgi.cfg", ":80")
	})
}

// fcgiRequest is a request of compareFastCGI's, and the script name and
// path info HAProxy makes of it.
type fcgiRequest struct {
	method, path, body string
	authorization      bool // sends Authorization: Basic (user, pass)
	script, pathInfo   string
}

// compareFastCGI runs file on both proxies, its bind address (bindAddr)
// replaced by each one's, its server 127.0.0.1:9000 by the recording
// application and its text as replace says, and compares the params each
// proxy sends for the same requests.
func compareFastCGI(t *testing.T, file, bindAddr string, replace ...string) {
	app := startFCGIRecorder(t)
	hapAddr, caddyAddr, warnings := startBoth(t, file, bindAddr, append([]string{"127.0.0.1:9000", app.addr}, replace...)...)
	known := knownDifferences(t)
	var ws []haproxy.Warning
	for _, w := range warnings {
		ws = append(ws, haproxy.Warning{Msg: w})
	}
	excused := func(d hadiff.Difference) bool { _, _, ok := hadiff.Excuse(d, hadiff.Request{}, known, ws); return ok }
	_, hapPort, _ := net.SplitHostPort(hapAddr)
	_, caddyPort, _ := net.SplitHostPort(caddyAddr)
	for i, tt := range []fcgiRequest{
		{"GET", "/info.php", "", true, "/info.php", ""},
		{"GET", "/app.php/users/7", "", true, "/app.php", "/users/7"},
		{"GET", "/", "", true, "/index.php", ""},
		{"GET", "/blog/", "", true, "/blog/index.php", ""},
		{"GET", "/search.php?q=caddy&page=2", "", true, "/search.php", ""},
		{"POST", "/form.php", "name=value", true, "/form.php", ""},
		{"DELETE", "/item.php/7", "", false, "/item.php", "/7"},
	} {
		hap := sendFastCGI(t, app, hapAddr, tt, fmt.Sprintf("%d-hap", i))
		caddy := sendFastCGI(t, app, caddyAddr, tt, fmt.Sprintf("%d-caddy", i))
		if hap["SCRIPT_NAME"] != tt.script || hap["SCRIPT_FILENAME"] != "/var/www/html"+tt.script || hap["PATH_INFO"] != tt.pathInfo {
			t.Errorf("%s %s: HAProxy sent SCRIPT_NAME %q, SCRIPT_FILENAME %q, PATH_INFO %q", tt.method, tt.path, hap["SCRIPT_NAME"], hap["SCRIPT_FILENAME"], hap["PATH_INFO"])
		}
		for n, v := range caddy {
			caddy[n] = strings.ReplaceAll(v, caddyPort, hapPort)
		}
		compareFCGIParams(t, tt.method+" "+tt.path, hap, caddy, excused)
	}
}

// sendFastCGI sends tt to addr as client (its X-Client header) and
// returns the params the application got.
func sendFastCGI(t *testing.T, app *fcgiRecorder, addr string, tt fcgiRequest, client string) map[string]string {
	t.Helper()
	req, err := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(tt.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Client", client)
	if tt.authorization {
		req.SetBasicAuth("user", "pass")
	}
	if tt.body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s %s through %s: %d", tt.method, tt.path, addr, resp.StatusCode)
	}
	return app.params(client)
}

// compareFCGIParams fails on a param that differs (but those that name
// the request's client: X-Client, REMOTE_PORT) unless the difference has
// its documented shape (fcgiDocumentedShapes) and excused says a row of
// docs/haproxy.md's Known differences, with the warning it names, excuses
// it.
func compareFCGIParams(t *testing.T, what string, hap, caddy map[string]string, excused func(hadiff.Difference) bool) {
	t.Helper()
	names := slices.Sorted(maps.Keys(hap))
	for n := range caddy {
		if _, ok := hap[n]; !ok {
			names = append(names, n)
		}
	}
	for _, n := range names {
		h, inHAP := hap[n]
		c, inCaddy := caddy[n]
		if n == "HTTP_X_CLIENT" || n == "REMOTE_PORT" || inHAP == inCaddy && h == c {
			continue
		}
		d := hadiff.Difference{Field: "fastcgi param " + n, HAProxy: h, Caddy: c}
		shape := fcgiDocumentedShapes[n]
		switch {
		case shape == nil || !shape(n, hap, caddy):
			t.Errorf("%s: %s: HAProxy %q (sent: %v), caddy-ha %q (sent: %v): not a documented difference", what, n, h, inHAP, c, inCaddy)
		case !excused(d):
			t.Errorf("%s: %s: HAProxy %q (sent: %v), caddy-ha %q (sent: %v): no row of docs/haproxy.md's Known differences excuses it with a warning the translation gave", what, n, h, inHAP, c, inCaddy)
		}
	}
}
