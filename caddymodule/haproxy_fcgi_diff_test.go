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

// The params in which Caddy's transport fastcgi differs from HAProxy
// (docs/haproxy.md, FastCGI; the warning at use-fcgi-app says so):
// fcgiParamsCaddyAdds it sends and HAProxy does not, fcgiParamsSentEmpty
// it sends empty where HAProxy leaves them out, fcgiParamsFromBasicAuth
// HAProxy reads from the Authorization header (Caddy's are empty).
var (
	fcgiParamsCaddyAdds     = []string{"AUTH_TYPE", "DOCUMENT_URI", "REMOTE_HOST", "REMOTE_IDENT", "REMOTE_USER", "REQUEST_SCHEME", "SERVER_ADDR"}
	fcgiParamsSentEmpty     = []string{"CONTENT_TYPE", "PATH_INFO", "QUERY_STRING"}
	fcgiParamsFromBasicAuth = []string{"AUTH_TYPE", "REMOTE_USER"}
)

// haproxy/testdata/fcgi.cfg through HAProxy and caddy-ha to one recording
// FastCGI application: a .php path, one with path info, a directory (the
// index), a query, a POST with a body and Authorization: the params each
// sends are the same, but those Caddy adds and SERVER_SOFTWARE.
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

// compareFastCGI runs file on both proxies, its bind address (bindAddr)
// replaced by each one's, its server 127.0.0.1:9000 by the recording
// application and its text as replace says, and compares the params each
// proxy sends for the same requests.
func compareFastCGI(t *testing.T, file, bindAddr string, replace ...string) {
	app := startFCGIRecorder(t)
	hapAddr, caddyAddr, warnings := startBoth(t, file, bindAddr, append([]string{"127.0.0.1:9000", app.addr}, replace...)...)
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "DOCUMENT_URI") }) {
		t.Errorf("no warning of the params Caddy adds: %q", warnings)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for i, tt := range []struct{ method, path, body, script, pathInfo string }{
		{"GET", "/info.php", "", "/info.php", ""},
		{"GET", "/app.php/users/7", "", "/app.php", "/users/7"},
		{"GET", "/", "", "/index.php", ""},
		{"GET", "/blog/", "", "/blog/index.php", ""},
		{"GET", "/search.php?q=caddy&page=2", "", "/search.php", ""},
		{"POST", "/form.php", "name=value", "/form.php", ""},
	} {
		var got [2]map[string]string
		for j, addr := range []string{hapAddr, caddyAddr} {
			name := fmt.Sprintf("%d-%d", i, j)
			req, _ := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(tt.body))
			req.Header.Set("X-Client", name)
			req.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s through %s: %d", tt.method, tt.path, addr, resp.StatusCode)
			}
			got[j] = app.params(name)
		}
		if p := got[0]; p["SCRIPT_NAME"] != tt.script || p["SCRIPT_FILENAME"] != "/var/www/html"+tt.script || p["PATH_INFO"] != tt.pathInfo {
			t.Errorf("%s %s: HAProxy sent SCRIPT_NAME %q, SCRIPT_FILENAME %q, PATH_INFO %q", tt.method, tt.path, p["SCRIPT_NAME"], p["SCRIPT_FILENAME"], p["PATH_INFO"])
		}
		compareFCGIParams(t, tt.method+" "+tt.path, got[0], got[1], hapAddr, caddyAddr)
	}
}

// compareFCGIParams fails on a param that differs, but as documented
// (the lists above, SERVER_SOFTWARE) and what names each proxy's own
// port and the request's client (X-Client, REMOTE_PORT).
func compareFCGIParams(t *testing.T, what string, hap, caddy map[string]string, hapAddr, caddyAddr string) {
	t.Helper()
	_, hapPort, _ := net.SplitHostPort(hapAddr)
	_, caddyPort, _ := net.SplitHostPort(caddyAddr)
	names := slices.Sorted(maps.Keys(hap))
	for n := range caddy {
		if _, ok := hap[n]; !ok {
			names = append(names, n)
		}
	}
	for _, n := range names {
		h, inHAP := hap[n]
		c, inCaddy := caddy[n]
		c = strings.ReplaceAll(c, caddyPort, hapPort)
		switch {
		case n == "SERVER_SOFTWARE", n == "HTTP_X_CLIENT", n == "REMOTE_PORT":
		case !inHAP && slices.Contains(fcgiParamsCaddyAdds, n):
		case !inHAP && c == "" && slices.Contains(fcgiParamsSentEmpty, n):
		case !inHAP && strings.HasPrefix(n, "HTTP_CONTENT_") && inCaddy && c == caddy[strings.TrimPrefix(n, "HTTP_")]:
		case c == "" && slices.Contains(fcgiParamsFromBasicAuth, n):
		case inHAP != inCaddy || h != c:
			t.Errorf("%s: %s: HAProxy %q (%v), caddy-ha %q (%v)", what, n, h, inHAP, c, inCaddy)
		}
	}
}
