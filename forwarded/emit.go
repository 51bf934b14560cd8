package forwarded

import (
	"net/http"
	"strconv"
)

// Outgoing holds the forwarded headers a proxy sends upstream, one value
// each; an empty one is not sent.
type Outgoing struct {
	XForwardedFor   string
	XForwardedProto string
	XForwardedHost  string
	Forwarded       string
}

// Set writes o to h, replacing whatever forwarded headers h had, so that
// none the client sent reaches upstream unchecked.
func (o Outgoing) Set(h http.Header) {
	for _, kv := range [...]struct{ key, value string }{
		{headerXFF, o.XForwardedFor},
		{headerXFP, o.XForwardedProto},
		{headerXFH, o.XForwardedHost},
		{headerForwarded, o.Forwarded},
	} {
		if kv.value == "" {
			delete(h, kv.key)
		} else {
			h[kv.key] = []string{kv.value}
		}
	}
}

// Emit formats chain, left (nearest the client) to right (this proxy's own
// element), as the headers to send upstream: the elements whole in
// Forwarded, if withForwarded (else it is not built: most proxies do not
// send it); their for= nodes in X-Forwarded-For, without ports, a node
// that is not an IP as "unknown", the only way that header can say so; and
// proto and host, those the client used, in X-Forwarded-Proto and -Host.
// The elements are to be as ParseForwarded returns them, or built from
// values it would accept: Emit quotes and escapes, but cannot make a
// control character or a bad address valid.
func Emit(chain []Element, proto, host string, withForwarded bool) Outgoing {
	var buf [256]byte
	b := buf[:0]
	for i, e := range chain {
		if i > 0 {
			b = append(b, ", "...)
		}
		if e.For.IsIP() {
			b = e.For.Addr.AppendTo(b)
		} else {
			b = append(b, "unknown"...)
		}
	}
	out := Outgoing{XForwardedFor: string(b), XForwardedProto: proto, XForwardedHost: host}
	if withForwarded {
		b = b[:0]
		for i, e := range chain {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendElement(b, e)
		}
		out.Forwarded = string(b)
	}
	return out
}

// appendElement appends e in RFC 7239 syntax, leaving out absent
// parameters.
func appendElement(b []byte, e Element) []byte {
	sep := false
	pair := func(name string) {
		if sep {
			b = append(b, ';')
		}
		sep = true
		b = append(b, name...)
		b = append(b, '=')
	}
	if e.For != (Node{}) {
		pair("for")
		start := len(b)
		b = quoteFrom(appendNode(b, e.For), start)
	}
	if e.By != (Node{}) {
		pair("by")
		start := len(b)
		b = quoteFrom(appendNode(b, e.By), start)
	}
	if e.Proto != "" {
		pair("proto")
		start := len(b)
		b = quoteFrom(append(b, e.Proto...), start)
	}
	if e.Host != "" {
		pair("host")
		start := len(b)
		b = quoteFrom(append(b, e.Host...), start)
	}
	return b
}

// appendNode appends n in RFC 7239 syntax, unquoted.
func appendNode(b []byte, n Node) []byte {
	switch {
	case n.Addr.Is6():
		b = append(b, '[')
		b = n.Addr.AppendTo(b)
		b = append(b, ']')
	case n.IsIP():
		b = n.Addr.AppendTo(b)
	default:
		b = append(b, n.Name...)
	}
	switch {
	case n.Port != 0:
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(n.Port), 10)
	case n.ObfuscatedPort != "":
		b = append(b, ':')
		b = append(b, n.ObfuscatedPort...)
	}
	return b
}

// quoteFrom makes b[start:] a value of RFC 7239: left alone if it is a
// token, quoted otherwise, with a backslash before each quote and
// backslash. Quoting in place spares a copy of the value.
func quoteFrom(b []byte, start int) []byte {
	end := len(b)
	escapes, token := 0, end > start
	for _, c := range b[start:end] {
		if c == '"' || c == '\\' {
			escapes++
		}
		token = token && isTokenChar(c)
	}
	if token {
		return b
	}
	b = append(b, make([]byte, 2+escapes)...)
	j := len(b) - 1
	b[j] = '"'
	for i := end - 1; i >= start; i-- {
		j--
		b[j] = b[i]
		if b[i] == '"' || b[i] == '\\' {
			j--
			b[j] = '\\'
		}
	}
	b[start] = '"'
	return b
}
