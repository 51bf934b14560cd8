package handoff

import (
	"strings"
	"testing"
)

// framing finds where requests end however the bytes are split, and gives
// up on what it does not frame as net/http would.
func TestFramingFindsRequestEnds(t *testing.T) {
	const (
		get     = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
		post    = "POST /orders HTTP/1.1\r\nHost: x\r\ncontent-length:  5 \r\n\r\nhello"
		chunked = "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n"
	)
	long := "GET /" + strings.Repeat("x", 300) + " HTTP/1.1\r\nHost: x\r\nCookie: " + strings.Repeat("c", 300) + "\r\n\r\n"
	for _, tt := range []struct {
		name, stream string
		atEnd        bool // what was read ends with a request
		failed       bool
	}{
		{"GET", get, true, false},
		{"POST with Content-Length", post, true, false},
		{"chunked with extension and trailer", chunked, true, false},
		{"long request line and field", long, true, false},
		{"two requests", get + post, true, false},
		{"headers without the body", strings.TrimSuffix(post, "hello"), false, false},
		{"a request and the next's start", get + "GE", false, false},
		{"bare LF", "GET / HTTP/1.1\nHost: x\n\n", false, true},
		{"HTTP/1.0", "GET / HTTP/1.0\r\n\r\n", false, true},
		{"CONNECT", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", false, true},
		{"obsolete line folding", "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n", false, true},
		{"two Content-Lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na", false, true},
		{"chunked and Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", false, true},
		{"another transfer coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false, true},
		{"signed length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\na", false, true},
		{"chunk size with a space", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1 \r\na\r\n0\r\n\r\n", false, true},
		{"chunk without its CRLF", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n", false, true},
		{"leading empty line", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", false, true},
	} {
		for _, step := range []int{1, 3, len(tt.stream)} {
			var f framing
			for b := []byte(tt.stream); len(b) > 0; b = b[min(step, len(b)):] {
				f.read(b[:min(step, len(b))])
			}
			if f.atBoundary() != tt.atEnd || f.failed != tt.failed {
				t.Errorf("%s, read %d bytes at a time: at a request's end %v, failed %v; want %v, %v", tt.name, step, f.atBoundary(), f.failed, tt.atEnd, tt.failed)
			}
		}
	}
}

// A request read before the previous one was answered is seen as ahead;
// one read after its answer is not.
func TestFramingSeesPipelining(t *testing.T) {
	const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	var f framing
	f.read([]byte(get))
	f.answered()
	f.read([]byte(get))
	if f.ahead {
		t.Fatal("a request read after the previous answer counted as pipelined")
	}
	f.read([]byte("G"))
	if !f.ahead {
		t.Fatal("a request begun before the previous one's answer not seen")
	}
}

// What following a request's framing costs: a POST as Go's client sends it.
func BenchmarkFramingPOST(b *testing.B) {
	req := []byte("POST /orders HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 11\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n{\"order\":1}")
	var f framing
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		f.read(req)
		f.answered()
	}
	if !f.atBoundary() || f.failed {
		b.Fatal("not framed")
	}
}
