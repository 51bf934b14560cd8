package handoff

import (
	"bytes"
	"strings"
)

// framing follows the HTTP/1.1 requests a server reads on a connection
// (RFC 9112: a request line, header fields, a body framed by
// Content-Length or chunked), to know where each one ends. A Conn cannot
// see what net/http's bufio.Reader has consumed of what it read, but it
// can tell whether it read past the end of a request before answering it:
// then net/http holds the next request in its buffer, where a successor
// would never see it.
//
// It accepts a strict subset of what net/http accepts and gives up on
// anything else (obsolete line folding, bare LF, HTTP/1.0, CONNECT,
// several Content-Lengths, a transfer coding other than chunked alone): a
// connection it gave up on is never handed off, so a disagreement with
// net/http can only make a connection close as it would without the
// wrapper. Its state is a few words, whatever the requests' size.
type framing struct {
	state   frameState
	head    [maxHead]byte // a line's first bytes
	tail    [len(http11)]byte
	lineLen int
	length  int64 // the body's Content-Length, -1 if none
	chunked bool
	remain  int64 // bytes of the body or chunk still to come
	// ended is set when a request's last byte was read, until an answer.
	ended bool
	// ahead is set when a request began while the previous one was still
	// unanswered: the client pipelines.
	ahead  bool
	failed bool
}

type frameState int

const (
	betweenRequests frameState = iota
	requestLine
	headerLine
	body
	chunkSize
	chunkData
	chunkEnd // the CRLF after a chunk's data
	trailerLine
)

// maxHead bounds the bytes kept of a line: enough for a method and for
// the header fields that frame a body.
const maxHead = 64

// http11 ends every request line it accepts.
const http11 = " HTTP/1.1\r"

// read follows b, the next bytes read from the connection.
func (f *framing) read(b []byte) {
	for len(b) > 0 && !f.failed {
		switch f.state {
		case betweenRequests:
			f.ahead = f.ahead || f.ended
			f.state, f.lineLen, f.length, f.chunked = requestLine, 0, -1, false
		case body, chunkData:
			n := int(min(f.remain, int64(len(b))))
			f.remain -= int64(n)
			b = b[n:]
			if f.remain > 0 {
				continue
			}
			if f.state == body {
				f.end()
			} else {
				f.state, f.lineLen = chunkEnd, 0
			}
		default:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				f.append(b)
				return
			}
			f.append(b[:i])
			b = b[i+1:]
			f.line()
			f.lineLen = 0
		}
	}
}

// answered notes an answer: what was read before it is answered.
func (f *framing) answered() { f.ended = false }

// atBoundary reports whether what was read so far ends with a request.
func (f *framing) atBoundary() bool { return f.state == betweenRequests && !f.failed }

func (f *framing) append(b []byte) {
	if f.lineLen < maxHead {
		copy(f.head[f.lineLen:], b)
	}
	if n := len(f.tail); len(b) >= n {
		copy(f.tail[:], b[len(b)-n:])
	} else {
		copy(f.tail[:], f.tail[len(b):])
		copy(f.tail[n-len(b):], b)
	}
	f.lineLen += len(b)
}

// line handles a line that has just ended (its LF not counted).
func (f *framing) line() {
	if f.lineLen == 0 || f.tail[len(f.tail)-1] != '\r' {
		f.failed = true // bare LF
		return
	}
	empty := f.lineLen == 1
	head := f.head[:min(f.lineLen, maxHead)]
	switch f.state {
	case requestLine:
		method, _, ok := bytes.Cut(head, []byte(" "))
		if !ok || len(method) == 0 || string(method) == "CONNECT" || f.lineLen < len(method)+2+len(http11) || string(f.tail[:]) != http11 {
			f.failed = true
			return
		}
		f.state = headerLine
	case headerLine:
		if empty {
			switch {
			case f.chunked && f.length >= 0:
				f.failed = true
			case f.chunked:
				f.state = chunkSize
			case f.length > 0:
				f.state, f.remain = body, f.length
			default:
				f.end()
			}
			return
		}
		f.field(head)
	case chunkSize:
		size, ok := chunkSizeOf(head, f.lineLen)
		switch {
		case !ok:
			f.failed = true
		case size == 0:
			f.state = trailerLine
		default:
			f.state, f.remain = chunkData, size
		}
	case chunkEnd:
		if !empty {
			f.failed = true
			return
		}
		f.state = chunkSize
	case trailerLine:
		if empty {
			f.end()
		} else if head[0] == ' ' || head[0] == '\t' {
			f.failed = true
		}
	}
}

// field handles a header field line, given its first bytes.
func (f *framing) field(head []byte) {
	if head[0] == ' ' || head[0] == '\t' {
		f.failed = true // obsolete line folding
		return
	}
	name, value, ok := bytes.Cut(head, []byte(":"))
	if !ok {
		// A name longer than the head frames nothing; no colon at all is
		// net/http's 400.
		f.failed = f.lineLen <= maxHead
		return
	}
	contentLength, transferEncoding := bytes.EqualFold(name, []byte("Content-Length")), bytes.EqualFold(name, []byte("Transfer-Encoding"))
	if !contentLength && !transferEncoding {
		return
	}
	if f.lineLen > maxHead {
		f.failed = true
		return
	}
	value = bytes.Trim(value[:len(value)-1], " \t") // without its CR
	switch {
	case transferEncoding && !f.chunked && bytes.EqualFold(value, []byte("chunked")):
		f.chunked = true
	case contentLength && f.length < 0 && len(value) > 0 && len(value) <= 18 && isDigits(value):
		f.length = 0
		for _, d := range value {
			f.length = f.length*10 + int64(d-'0')
		}
	default:
		f.failed = true
	}
}

// end notes that a request's last byte was read.
func (f *framing) end() {
	f.state, f.ended = betweenRequests, true
}

// chunkSizeOf parses a chunk-size line (hex digits, then CR or a ';' and
// extensions), given its first bytes and its length.
func chunkSizeOf(head []byte, lineLen int) (int64, bool) {
	var size int64
	for i, c := range head {
		if c == ';' || c == '\r' {
			return size, i > 0 && (c == ';' || i == lineLen-1)
		}
		d := strings.IndexByte("0123456789abcdefABCDEF", c)
		if d < 0 || i == 15 { // not hex, or more than int64 holds
			return 0, false
		}
		if d > 15 {
			d -= 6
		}
		size = size<<4 | int64(d)
	}
	return 0, false
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
