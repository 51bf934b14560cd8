package haproxy

import (
	"fmt"
	"slices"
	"strings"
)

// A backend's stick table pins a client to a server: HAProxy records the
// server a key went to and sends the key's next requests there. Two
// shapes are translated, each close to HAProxy's (a warning):
//
//	stick-table type string len 52 size 1m expire 3h
//	stick on req.cook(JSESSIONID)
//	stick store-response res.cook(JSESSIONID)
//
// the server's own session cookie learned from its answer (1.x's
// appsession), as Caddy's cookie policy with a cookie of its own; and
//
//	stick-table type ip size 200k expire 30m
//	stick on src
//
// the client's address, as Caddy's ip_hash. Caddy has no table a response
// fills: upload_affinity learns ids from a creation's answer, but from its
// Location or JSON body and for one upload path, not from a cookie.

// backendStick is what a backend's stick lines say.
type backendStick struct {
	table *Line
	// keyType is the table's type: ip, ipv6 or string.
	keyType string
	// rules are the stick on, match, store-request and store-response
	// lines, in the order written.
	rules []Line
}

// readStickTable reads a backend's stick-table: its key type, and the
// sizes and expiry of a table that is not there (see settleStick).
func (be *backend) readStickTable(l Line) error {
	if be.section.Kind == "listen" && slices.Contains(l.Words, "store") {
		return nil // the listen's frontend's: a rate limit's (readStickTable of frontend)
	}
	if be.stick.table != nil {
		return refuse(l, "a second stick-table in one backend is not translated")
	}
	w := l.Words
	for i := 1; i < len(w); i++ {
		switch w[i] {
		case "type":
			if i+1 >= len(w) {
				return refuse(l, "type takes ip, ipv6 or string")
			}
			i++
			if t := w[i]; t != "ip" && t != "ipv6" && t != "string" {
				return refuse(l, "type %s: only a table of client addresses (ip, ipv6) or of a session cookie (string) is translated in a backend", t)
			}
			be.stick.keyType = w[i]
		case "len", "size", "expire":
			i++ // a table that is not there: see settleStick's warning
		case "nopurge":
		case "peers":
			return refuse(l, "peers: Caddy has no stick-table replication")
		default:
			return refuse(l, "stick-table %s is not translated in a backend", w[i])
		}
	}
	if be.stick.keyType == "" {
		return refuse(l, "no type: HAProxy refuses it too")
	}
	be.stick.table = &l
	return nil
}

// readStick reads stick on, match, store-request and store-response
// <sample>, without a table of another proxy or a condition.
func (be *backend) readStick(l Line) error {
	if len(l.Words) != 3 {
		return refuse(l, "only stick %s <sample>, without table or condition, is translated", l.Words[1])
	}
	be.stick.rules = append(be.stick.rules, l)
	return nil
}

// cookieSamples are the fetches of a cookie's value, in a request and in
// a response.
var (
	requestCookieSamples  = []string{"req.cook(", "cook("}
	responseCookieSamples = []string{"res.cook(", "scook("}
)

// cookieOf is the cookie's name that sample fetches with one of fetches
// (req.cook(<name>)), or "".
func cookieOf(sample string, fetches []string) string {
	for _, f := range fetches {
		arg, ok := strings.CutPrefix(sample, f)
		if name, closed := strings.CutSuffix(arg, ")"); ok && closed && name != "" && !strings.ContainsAny(name, ",()") {
			return name
		}
	}
	return ""
}

// stickRefusal says what is translated of a backend's stick lines.
const stickRefusal = "only stick on src with a table of type ip or ipv6, or a string table learning the server's session cookie (stick on or stick match req.cook(<name>) with stick store-response res.cook(<name>)), is translated"

// settleStick settles what the backend's stick lines say together: ip_hash
// for the client's address, or the cookie policy for the server's
// session cookie, each with its warning; any other shape is refused.
func (be *backend) settleStick() error {
	st := be.stick
	if st.table == nil && len(st.rules) == 0 {
		return nil
	}
	switch {
	case st.table == nil:
		return refuse(st.rules[0], "no stick-table in this backend before it (a table of another proxy is not translated)")
	case len(st.rules) == 0:
		return refuse(*st.table, "a backend's stick-table without stick rules is not translated")
	case be.leader:
		return refuse(*st.table, "stickiness in the leader's pool is not translated: the leader gets every request")
	}
	if st.keyType == "string" {
		return be.settleSessionCookie()
	}
	if len(st.rules) != 1 || st.rules[0].Words[1] != "on" || st.rules[0].Words[2] != "src" {
		return refuse(st.rules[0], "%s", stickRefusal)
	}
	on := st.rules[0]
	be.stickSource = &on
	be.notes = append(be.notes, note{line: *st.table, what: fmt.Sprintf("the client's server is ip_hash's, not a table's (see line %d)", on.Pos.Line)},
		note{line: on, approximated: true, what: "ip_hash: Caddy picks a client's server by a hash of its address (the same while the servers stay the same), in place of the balance; HAProxy balances a client's first request and keeps it on that server until the table's entry expires"})
	return nil
}

// settleSessionCookie reads a string table learning the server's session
// cookie: the cookie policy, with a cookie of Caddy's own beside the
// server's, which passes unchanged.
func (be *backend) settleSessionCookie() error {
	st := be.stick
	var name string
	var learned *Line
	matched := false
	for _, l := range st.rules {
		fetches := requestCookieSamples
		if l.Words[1] == "store-response" {
			fetches = responseCookieSamples
			learned = &l
		} else if l.Words[1] != "store-request" {
			matched = true
		}
		c := cookieOf(l.Words[2], fetches)
		if c == "" || name != "" && c != name {
			return refuse(l, "%s", stickRefusal)
		}
		name = c
	}
	if learned == nil || !matched {
		return refuse(st.rules[0], "%s", stickRefusal)
	}
	if be.cookie != nil {
		return refuse(*learned, "stickiness by both a cookie line and a stick table is not translated")
	}
	be.cookie, be.cookieName = learned, name+pinCookieSuffix
	be.cookieNote = fmt.Sprintf("Caddy keeps the client on its server with a cookie of its own, %s (a hash of the server's address), set on its first answer; HAProxy learns the server's %s from its answer into a table and sends a request carrying it to that server until the entry expires", be.cookieName, name)
	for _, l := range append([]Line{*st.table}, st.rules...) {
		if l.Pos != learned.Pos {
			be.notes = append(be.notes, note{line: l, what: fmt.Sprintf("see line %d: lb_policy cookie", learned.Pos.Line)})
		}
	}
	return nil
}

// pinCookieSuffix makes the name of the cookie Caddy's cookie policy sets
// beside a server's own session cookie.
const pinCookieSuffix = "_SERVER"
