package haproxy

import (
	"strconv"
	"strings"
	"time"
)

// A request rate limit as HAProxy configurations write it:
//
//	stick-table type ip size 100k expire 30s store http_req_rate(10s)
//	http-request track-sc0 src
//	http-request deny deny_status 429 if { sc_http_req_rate(0) gt 100 }
//
// becomes an edge_rate_limit zone keyed on the connection's address, of
// 100 requests in a sliding 10s window, counted in the ha store.

// readStickTable reads a frontend's stick-table: of type ip or ipv6,
// storing http_req_rate only. Its size and expiry are the store's to
// bound.
func (fe *frontend) readStickTable(l Line) error {
	if fe.stickTable != nil {
		return refuse(l, "a second stick-table in one frontend is not translated")
	}
	w := l.Words
	for i := 1; i < len(w); i += 2 {
		if i+1 >= len(w) {
			return refuse(l, "%s needs a value", w[i])
		}
		switch v := w[i+1]; w[i] {
		case "type":
			if v != "ip" && v != "ipv6" {
				return refuse(l, "type %s: only ip and ipv6 tables (of client addresses) are translated", v)
			}
		case "size", "expire":
		case "store":
			d, err := storedRatePeriod(v, l)
			if err != nil {
				return err
			}
			fe.ratePeriod = d
		default:
			return refuse(l, "stick-table %s is not translated", w[i])
		}
	}
	if fe.ratePeriod == "" {
		return refuse(l, "without store http_req_rate(<period>) there is nothing to translate")
	}
	fe.stickTable = &l
	fe.note(l, "the edge_rate_limit below; the store bounds its keys")
	return nil
}

// storedRatePeriod is the period of a stick-table's store
// http_req_rate(<period>), as a Caddy duration.
func storedRatePeriod(v string, l Line) (string, error) {
	if !strings.HasPrefix(v, "http_req_rate(") || !strings.HasSuffix(v, ")") || strings.Contains(v, ",") {
		return "", refuse(l, "store %s: only http_req_rate(<period>) is translated", v)
	}
	d, err := duration(v[len("http_req_rate("):len(v)-1], l.Pos)
	if err != nil {
		return "", err
	}
	// edge_rate_limit's sliding window counts in ratelimit.SlidingSlots slots.
	if p, err := time.ParseDuration(d); err != nil || p < 10*time.Millisecond || p%(10*time.Millisecond) != 0 {
		return "", refuse(l, "store %s: a sliding window of whole tens of milliseconds (at least 10ms) is translated", v)
	}
	return d, nil
}

// rateLimit tells whether a condition is { sc_http_req_rate(0) gt|ge N }
// (or sc0_http_req_rate), and the requests it lets through in a period.
func rateLimit(c *Condition) (int, bool) {
	if c == nil || c.Unless || len(c.Any) != 1 || len(c.Any[0]) != 1 {
		return 0, false
	}
	t := c.Any[0][0]
	if t.Not || len(t.Anon) != 3 || (t.Anon[0] != "sc_http_req_rate(0)" && t.Anon[0] != "sc0_http_req_rate") {
		return 0, false
	}
	n, err := strconv.Atoi(t.Anon[2])
	switch {
	case err != nil || n < 0:
		return 0, false
	case t.Anon[1] == "gt": // the rate counts this request: N pass
		return n, true
	case t.Anon[1] == "ge" && n > 0:
		return n - 1, true
	}
	return 0, false
}

// rateZone is an edge_rate_limit zone: events a window (sliding, as
// HAProxy's rate), keyed on the connection's address.
type rateZone struct {
	name   string // the frontend's: letters, digits, '_' and '-' only
	events int
	window string // a Caddy duration
}

// rateLimitAnswer is the edge_rate_limit of a deny over the tracked rate:
// HAProxy's deny_status must be 429, which edge_rate_limit answers (with
// Retry-After).
func (fe *frontend) rateLimitAnswer(words []string, limit int, l Line) (answer, error) {
	switch {
	case fe.track == nil:
		return answer{}, refuse(l, "sc_http_req_rate(0) without http-request track-sc0 src before it")
	case len(words) != 2 || words[0] != "deny_status" || words[1] != "429":
		return answer{}, refuse(l, "a rate limit's deny must be deny_status 429, which edge_rate_limit answers")
	case limit == 0:
		return answer{}, refuse(l, "a rate of 0 denies every request: write http-request deny")
	case strings.Trim(fe.section.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "":
		return answer{}, refuse(l, "the edge_rate_limit zone is named after the frontend, %q, and a zone's name takes letters, digits, '_' and '-' only", fe.section.Name)
	}
	return answer{kind: rateLimitAnswer, zone: rateZone{name: fe.section.Name, events: limit, window: fe.ratePeriod}}, nil
}
