// Package forwarded reads and writes the headers by which proxies tell the
// next hop who the client is: RFC 7239 Forwarded and the de facto
// X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host. It lets a proxy
// behind other proxies tell the real client from one that merely claims to
// be someone else. It knows nothing of Caddy.
//
// Parsing is strict: a header parses whole or is rejected, because a
// half-read chain is a chain an attacker can shape. Resolution walks the
// chain from the nearest proxy towards the client and stops at the first
// hop that is not trusted; whatever stands left of it is what the client
// chose to send, and is ignored.
package forwarded

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// MaxHeaderBytes bounds one forwarded header, all its lines together; a
// longer header is rejected rather than read.
const MaxHeaderBytes = 8 << 10

// MaxHops bounds the entries of one forwarded header: real chains are a few
// hops long, and the bound caps the work a client can ask for.
const MaxHops = 64

// maxHostName bounds a host name, as DNS does.
const maxHostName = 253

// The canonical header names, so that http.Header is indexed directly.
const (
	headerForwarded = "Forwarded"
	headerXFF       = "X-Forwarded-For"
	headerXFP       = "X-Forwarded-Proto"
	headerXFH       = "X-Forwarded-Host"
)

var (
	// ErrMalformed is wrapped by the errors about headers that break
	// their syntax.
	ErrMalformed = errors.New("malformed forwarded header")
	// ErrTooLarge is wrapped by the errors about headers over
	// MaxHeaderBytes or MaxHops.
	ErrTooLarge = errors.New("forwarded header too large")
)

// syntaxError says where a header breaks its syntax. It never quotes the
// header, which the client controls and may be long.
type syntaxError struct {
	header string
	line   int // index of the header line
	offset int // byte offset in that line
	reason string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("malformed %s (line %d, byte %d): %s", e.header, e.line+1, e.offset, e.reason)
}

func (e *syntaxError) Unwrap() error { return ErrMalformed }

// Node is a node identifier of RFC 7239 §6: one end of one hop. Its zero
// value is a node that was not given at all.
type Node struct {
	// Addr is the node's IP address, never with a zone; the zero Addr
	// when the node is not an IP.
	Addr netip.Addr
	// Name is "unknown" or an obfuscated identifier such as "_hidden"
	// when the node is not an IP, and empty when it is.
	Name string
	// Port is the node's port; 0 when none is given or it is obfuscated.
	Port uint16
	// ObfuscatedPort is an obfuscated port such as "_4711", or empty.
	ObfuscatedPort string
}

// IsIP says whether the node is an IP address rather than unknown,
// obfuscated or absent.
func (n Node) IsIP() bool { return n.Addr.IsValid() }

// String returns the node in RFC 7239 syntax, unquoted.
func (n Node) String() string { return string(appendNode(nil, n)) }

// Element is one forwarded-element of RFC 7239: what one proxy says about
// the request it received. An absent parameter is a zero field.
type Element struct {
	// For is who sent the request to the proxy.
	For Node
	// By is the proxy's own interface that received it.
	By Node
	// Proto is "http" or "https", the scheme the request came with.
	Proto string
	// Host is the Host the request came with.
	Host string
}

// String returns the element in RFC 7239 syntax.
func (e Element) String() string { return string(appendElement(nil, e)) }

// ParseNode parses a node identifier in the syntax of RFC 7239 §6,
// unquoted: "192.0.2.1", "[2001:db8::1]:4711", "unknown", "_hidden:_port".
// It is meant for configuration, such as a proxy's own by= identity.
func ParseNode(s string) (Node, error) {
	n, reason := parseNode(s)
	if reason != "" {
		return Node{}, fmt.Errorf("%w: node %q: %s", ErrMalformed, s, reason)
	}
	return n, nil
}

// ParseForwarded appends the elements of a Forwarded header to dst, left
// (nearest the client) to right (nearest this proxy); lines are the
// header's lines, which form one list. Only the parameters for, by, proto
// and host are known: an extension parameter may change what an element
// means (RFC 7239 §5.5), so one is rejected rather than guessed at. So are
// an empty element or pair, a parameter given twice in one element,
// whitespace other than around commas, and a proto other than http or
// https. On error dst is returned unchanged.
func ParseForwarded(dst []Element, lines []string) ([]Element, error) {
	if err := checkSize(headerForwarded, lines); err != nil {
		return dst, err
	}
	out := dst
	for li, line := range lines {
		pos := skipOWS(line, 0)
		for {
			if len(out)-len(dst) == MaxHops {
				return dst, fmt.Errorf("%w: %s has over %d elements", ErrTooLarge, headerForwarded, MaxHops)
			}
			e, next, reason := parseElement(line, pos)
			if reason != "" {
				return dst, &syntaxError{headerForwarded, li, next, reason}
			}
			out = append(out, e)
			pos = skipOWS(line, next)
			if pos == len(line) {
				break
			}
			if line[pos] != ',' {
				return dst, &syntaxError{headerForwarded, li, pos, "expected ',' or ';'"}
			}
			pos = skipOWS(line, pos+1)
		}
	}
	return out, nil
}

// Which parameters an element has had, to refuse one given twice.
const (
	seenFor = 1 << iota
	seenBy
	seenProto
	seenHost
)

// parseElement parses the element at s[pos:]; it returns the offset after
// it, or where it breaks and why.
func parseElement(s string, pos int) (e Element, next int, reason string) {
	var seen uint8
	for {
		nameEnd := scanToken(s, pos)
		if nameEnd == pos {
			return e, pos, "expected a parameter"
		}
		name := s[pos:nameEnd]
		if nameEnd == len(s) || s[nameEnd] != '=' {
			return e, nameEnd, "expected '='"
		}
		valueStart := nameEnd + 1
		value, valueEnd, badValue := parseValue(s, valueStart)
		if badValue != "" {
			return e, valueEnd, badValue
		}
		var bit uint8
		switch {
		case strings.EqualFold(name, "for"):
			bit = seenFor
			e.For, reason = parseNode(value)
		case strings.EqualFold(name, "by"):
			bit = seenBy
			e.By, reason = parseNode(value)
		case strings.EqualFold(name, "proto"):
			bit = seenProto
			var ok bool
			if e.Proto, ok = parseProto(value); !ok {
				reason = "proto is neither http nor https"
			}
		case strings.EqualFold(name, "host"):
			bit = seenHost
			e.Host, reason = value, checkHost(value)
		default:
			return e, pos, "unknown parameter"
		}
		if seen&bit != 0 {
			return e, pos, "parameter given twice in one element"
		}
		seen |= bit
		if reason != "" {
			return e, valueStart, reason
		}
		if valueEnd == len(s) || s[valueEnd] != ';' {
			return e, valueEnd, ""
		}
		pos = valueEnd + 1
	}
}

// parseValue parses the token or quoted-string at s[pos:] and returns its
// value, unescaped, and the offset after it.
func parseValue(s string, pos int) (value string, next int, reason string) {
	if pos < len(s) && s[pos] == '"' {
		return parseQuoted(s, pos)
	}
	end := scanToken(s, pos)
	if end == pos {
		return "", pos, "expected a token or a quoted string"
	}
	return s[pos:end], end, ""
}

// parseQuoted parses the quoted-string at s[pos:]. Its value is a substring
// of s unless it has escapes, so the common case does not allocate.
func parseQuoted(s string, pos int) (value string, next int, reason string) {
	escapes := 0
	for i := pos + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			if escapes == 0 {
				return s[pos+1 : i], i + 1, ""
			}
			return unescape(s[pos+1:i], escapes), i + 1, ""
		case c == '\\':
			i++
			if i == len(s) || !isQuotedPairChar(s[i]) {
				return "", i, "bad escape in quoted string"
			}
			escapes++
		case !isQuotedTextChar(c):
			return "", i, "bad character in quoted string"
		}
	}
	return "", len(s), "unterminated quoted string"
}

// unescape drops the backslash of each of the escapes quoted-pairs in s,
// which parseQuoted has checked.
func unescape(s string, escapes int) string {
	var b strings.Builder
	b.Grow(len(s) - escapes)
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseNode parses a node identifier (RFC 7239 §6) and says why it is not
// one, if it is not. IPv6 needs brackets, which keep its colons apart from
// the port's.
func parseNode(s string) (n Node, reason string) {
	var rest string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Node{}, "unclosed '['"
		}
		if n.Addr, reason = parseIPv6(s[1:end]); reason != "" {
			return Node{}, reason
		}
		rest = s[end+1:]
	} else {
		name := s
		if i := strings.IndexByte(s, ':'); i >= 0 {
			name, rest = s[:i], s[i:]
		}
		switch {
		case strings.EqualFold(name, "unknown"):
			n.Name = "unknown"
		case strings.HasPrefix(name, "_"):
			if !isObfuscated(name) {
				return Node{}, "bad obfuscated identifier"
			}
			n.Name = name
		default:
			addr, err := netip.ParseAddr(name)
			if err != nil || !addr.Is4() {
				return Node{}, "not an IPv4 address, a bracketed IPv6 address, unknown or an obfuscated identifier"
			}
			n.Addr = addr
		}
	}
	if rest == "" {
		return n, ""
	}
	if rest[0] != ':' {
		return Node{}, "junk after the address"
	}
	port := rest[1:]
	if strings.HasPrefix(port, "_") {
		if !isObfuscated(port) {
			return Node{}, "bad obfuscated port"
		}
		n.ObfuscatedPort = port
		return n, ""
	}
	if n.Port = parsePort(port); n.Port == 0 {
		return Node{}, "port is not a number from 1 to 65535"
	}
	return n, ""
}

// parseIPv6 parses the inside of brackets. A zone names an interface of the
// sender's host, which means nothing here, so it is refused.
func parseIPv6(s string) (netip.Addr, string) {
	if strings.IndexByte(s, '%') >= 0 {
		return netip.Addr{}, "IPv6 zone"
	}
	addr, err := netip.ParseAddr(s)
	if err != nil || !addr.Is6() {
		return netip.Addr{}, "bad IPv6 address"
	}
	return addr, ""
}

// parsePort returns the port s spells, or 0 if it spells none: port 0
// cannot be connected from.
func parsePort(s string) uint16 {
	if len(s) == 0 || len(s) > 5 {
		return 0
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > 65535 {
		return 0
	}
	return uint16(n)
}

// isObfuscated says whether s is an obfnode or obfport of RFC 7239 §6.3.
func isObfuscated(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// checkHost says why s is not a Host header value (RFC 7230 §5.4) of the
// kind this package passes on, if it is not: a host name of unreserved
// characters (no percent-encoding, no sub-delims) or a bracketed IPv6
// address without zone, and an optional port.
func checkHost(s string) string {
	if s == "" {
		return "empty host"
	}
	var rest string
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "unclosed '['"
		}
		if _, reason := parseIPv6(s[1:end]); reason != "" {
			return reason
		}
		rest = s[end+1:]
	} else {
		name := s
		if i := strings.IndexByte(s, ':'); i >= 0 {
			name, rest = s[:i], s[i:]
		}
		if name == "" || len(name) > maxHostName {
			return "host name empty or too long"
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !isAlnum(c) && c != '-' && c != '.' && c != '_' && c != '~' {
				return "bad character in host"
			}
		}
	}
	if rest == "" {
		return ""
	}
	if rest[0] != ':' {
		return "junk after the host"
	}
	if parsePort(rest[1:]) == 0 {
		return "port is not a number from 1 to 65535"
	}
	return ""
}

// parseProto returns the scheme s names, lower case, if it is http or
// https: the only schemes a request to this proxy can have come with.
func parseProto(s string) (string, bool) {
	switch {
	case strings.EqualFold(s, "http"):
		return "http", true
	case strings.EqualFold(s, "https"):
		return "https", true
	}
	return "", false
}

// ParseXForwardedFor appends the addresses of an X-Forwarded-For header to
// dst, left (nearest the client) to right; lines are the header's lines,
// which form one list. An entry is a bare IPv4 or IPv6 address, without
// port, brackets or zone, or "unknown", which some proxies send for a
// client they will not name and which is returned as the zero Addr. With
// room in dst it does not allocate. On error dst is returned unchanged.
func ParseXForwardedFor(dst []netip.Addr, lines []string) ([]netip.Addr, error) {
	if err := checkSize(headerXFF, lines); err != nil {
		return dst, err
	}
	out := dst
	for li, line := range lines {
		for rest, more := line, true; more; {
			offset := len(line) - len(rest)
			var item string
			item, rest, more = cutItem(rest)
			if len(out)-len(dst) == MaxHops {
				return dst, fmt.Errorf("%w: %s has over %d entries", ErrTooLarge, headerXFF, MaxHops)
			}
			addr, reason := parseXFFEntry(item)
			if reason != "" {
				return dst, &syntaxError{headerXFF, li, offset, reason}
			}
			out = append(out, addr)
		}
	}
	return out, nil
}

func parseXFFEntry(s string) (netip.Addr, string) {
	switch {
	case s == "":
		return netip.Addr{}, "empty entry"
	case strings.EqualFold(s, "unknown"):
		return netip.Addr{}, ""
	case strings.IndexByte(s, '%') >= 0:
		return netip.Addr{}, "IPv6 zone"
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, "not an IP address"
	}
	return addr, ""
}

// ParseXForwardedProto returns the scheme of an X-Forwarded-Proto header,
// "http" or "https", or "" if there is no header. A request has one scheme,
// so the same value repeated is accepted and differing values are not.
func ParseXForwardedProto(lines []string) (string, error) {
	return parseSingle(headerXFP, lines, func(s string) (string, string) {
		if proto, ok := parseProto(s); ok {
			return proto, ""
		}
		return "", "neither http nor https"
	})
}

// ParseXForwardedHost returns the host of an X-Forwarded-Host header, a
// host name or bracketed IPv6 address with an optional port, or "" if there
// is no header. A request has one host, so the same value repeated is
// accepted and differing values are not.
func ParseXForwardedHost(lines []string) (string, error) {
	return parseSingle(headerXFH, lines, func(s string) (string, string) {
		return s, checkHost(s)
	})
}

// parseSingle reads a header that holds one value, perhaps repeated; parse
// returns the value an entry stands for, or why it stands for none.
func parseSingle(header string, lines []string, parse func(string) (value, reason string)) (string, error) {
	if err := checkSize(header, lines); err != nil {
		return "", err
	}
	value := ""
	for li, line := range lines {
		for rest, more := line, true; more; {
			offset := len(line) - len(rest)
			var item string
			item, rest, more = cutItem(rest)
			v, reason := "", "empty entry"
			if item != "" {
				v, reason = parse(item)
			}
			if reason == "" && value != "" && !strings.EqualFold(v, value) {
				reason = "differs from an earlier entry"
			}
			if reason != "" {
				return "", &syntaxError{header, li, offset, reason}
			}
			if value == "" {
				value = v
			}
		}
	}
	return value, nil
}

// checkSize refuses a header over MaxHeaderBytes before any of it is read.
func checkSize(header string, lines []string) error {
	n := 0
	for _, line := range lines {
		n += len(line)
	}
	if n > MaxHeaderBytes {
		return fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, header, n, MaxHeaderBytes)
	}
	return nil
}

// cutItem returns the first entry of a comma-separated list without the
// whitespace around it, the list after the comma, and whether there was a
// comma.
func cutItem(s string) (item, rest string, more bool) {
	item, rest, more = strings.Cut(s, ",")
	return trimOWS(item), rest, more
}

func trimOWS(s string) string {
	start, end := 0, len(s)
	for start < end && isOWS(s[start]) {
		start++
	}
	for end > start && isOWS(s[end-1]) {
		end--
	}
	return s[start:end]
}

func skipOWS(s string, pos int) int {
	for pos < len(s) && isOWS(s[pos]) {
		pos++
	}
	return pos
}

// scanToken returns the end of the token (RFC 7230 §3.2.6) at s[pos:].
func scanToken(s string, pos int) int {
	for pos < len(s) && isTokenChar(s[pos]) {
		pos++
	}
	return pos
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isTokenChar(c byte) bool { return tokenChars[c] }

// tokenChars is tchar of RFC 7230 §3.2.6, as a table: token scanning is
// much of the parsing.
var tokenChars = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// isQuotedTextChar is qdtext of RFC 7230 §3.2.6 less obs-text: no value
// this package reads can hold a byte over 0x7e.
func isQuotedTextChar(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || 0x23 <= c && c <= 0x5b || 0x5d <= c && c <= 0x7e
}

// isQuotedPairChar is what may follow a backslash, less obs-text.
func isQuotedPairChar(c byte) bool {
	return c == '\t' || 0x20 <= c && c <= 0x7e
}
