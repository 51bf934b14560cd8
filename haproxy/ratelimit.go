package haproxy

import (
	"fmt"
	"math"
	"slices"
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
// 100 requests in a sliding 10s window, counted in the ha store. A table
// of type string tracks a header or a cookie (track-sc1
// req.hdr(X-API-Key)): the zone is keyed on it, and counts the requests
// that have it (and that the track rule's condition takes).
//
// A table of addresses that stores conn_cur counts, per client, the
// streams that track it and have not ended: tracked by http-request
// track-sc<n> src, each HTTP request is one, counted from the track rule
// until its answer is sent, so
//
//	http-request deny deny_status 429 if { sc_conn_cur(0) gt 20 }
//
// denies a client's 21st request in progress at once (HAProxy 2.6: idle
// kept-alive connections count nothing). It becomes the in_flight handler
// at the deny's place and a matcher on its count.

// stickTable is a frontend's stick-table of request rates and requests
// in progress.
type stickTable struct {
	line    Line
	keyType string            // ip, ipv6 or string
	periods map[string]string // of each rate stored (rateData), as a Caddy duration
	connCur bool              // conn_cur is stored
	size    int               // most entries
}

// tracker is an http-request track-sc<n> rule: what a counter counts the
// requests of (their key), and when.
type tracker struct {
	line     Line
	key      trackKey
	cond     *Condition
	when     matcher // cond, resolved (nil cond: always)
	used     bool    // a deny reads its rate
	inFlight *Line   // the deny that reads its conn_cur
}

// trackKey is a tracked sample: the connection's address, or a header's
// or a cookie's value.
type trackKey struct {
	kind string // src, header or cookie
	name string // the header's or the cookie's
}

// trackSamples are the samples a counter tracks, by fetch, as the key's
// kind.
var trackSamples = map[string]string{"req.hdr": "header", "hdr": "header", "req.cook": "cookie", "cook": "cookie"}

// readStickTable reads a frontend's stick-table: of type ip, ipv6 or
// string, storing rates (rateData), conn_cur or both. The rates' keys are
// the store's to bound, and expire there; conn_cur's entries leave when
// their count is 0, at most size of them.
func (fe *frontend) readStickTable(l Line) error {
	if fe.stickTable != nil {
		return refuse(l, "a second stick-table in one frontend is not translated")
	}
	t, err := readTableOptions(l)
	if err != nil {
		return err
	}
	stores := len(t.periods) > 0 || t.connCur
	switch {
	case !stores && fe.section.Kind == "listen" && hasServers(fe.section):
		return nil // the listen's backend's: a table of its stick rules (readStickTable of backend)
	case !stores:
		return refuse(l, "without store http_req_rate(<period>), conn_rate(<period>) or conn_cur there is nothing to translate")
	case t.connCur && t.size == 0:
		return refuse(l, "no size: HAProxy refuses it too")
	}
	fe.stickTable = t
	fe.note(l, t.note())
	return nil
}

// readTableOptions reads a stick-table line's options.
func readTableOptions(l Line) (*stickTable, error) {
	t := &stickTable{line: l}
	w := l.Words
	for i := 1; i < len(w); i += 2 {
		if i+1 >= len(w) {
			return nil, refuse(l, "%s needs a value", w[i])
		}
		var err error
		switch v := w[i+1]; w[i] {
		case "type":
			if v != "ip" && v != "ipv6" && v != "string" {
				return nil, refuse(l, "type %s: only ip and ipv6 tables (of client addresses) and string tables (of a header or a cookie) are translated", v)
			}
			t.keyType = v
		case "size":
			if t.size, err = tableSize(v); err != nil {
				return nil, refuse(l, "size %s: %v", v, err)
			}
		case "expire", "len":
		case "store":
			err = t.readStored(v)
		default:
			err = refuse(l, "stick-table %s is not translated", w[i])
		}
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// note says what the table becomes.
func (t *stickTable) note() string {
	switch {
	case t.connCur && len(t.periods) > 0:
		return "the edge_rate_limit below, whose keys the store bounds, and the in_flight below, of size " + strconv.Itoa(t.size)
	case t.connCur:
		return "the in_flight below, of size " + strconv.Itoa(t.size)
	}
	return "the edge_rate_limit below; the store bounds its keys"
}

// readStored reads a stick-table's store <data>[,<data>…]: the rates of
// rateData and conn_cur.
func (t *stickTable) readStored(v string) error {
	t.periods = map[string]string{}
	for _, data := range strings.Split(v, ",") {
		if data == "conn_cur" {
			t.connCur = true
			continue
		}
		rate, d, err := storedRatePeriod(data, t.line)
		if err != nil {
			return err
		}
		t.periods[rate] = d
	}
	return nil
}

// rateData are the rates a stick-table stores that are translated.
// Tracked by http-request track-sc, each request is a stream of its own,
// counted once as it is tracked: conn_rate counts the tracked requests as
// http_req_rate does (HAProxy 2.6: a client's requests on kept-alive
// connections raise both alike), and each becomes an edge_rate_limit.
var rateData = []string{"http_req_rate", "conn_rate"}

// tableSize is a stick-table's size: a count of entries, with k, m or g
// for 2^10, 2^20 or 2^30 of them, as HAProxy reads it.
func tableSize(v string) (int, error) {
	factor := 1
	if n := len(v); n > 0 {
		if f, ok := map[byte]int{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30}[v[n-1]]; ok {
			factor, v = f, v[:n-1]
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > math.MaxInt32/factor {
		return 0, fmt.Errorf("a count of entries (with k, m or g) from 1 to 2^31-1 is translated")
	}
	return n * factor, nil
}

// readTrack reads http-request track-sc<n> <sample> [if|unless …]: the
// sample a counter of the frontend's stick-table counts.
func (fe *frontend) readTrack(l Line, args []string, cond *Condition) error {
	n, _ := strconv.Atoi(strings.TrimPrefix(arg(l, 1), "track-sc"))
	switch {
	case fe.stickTable == nil:
		return refuse(l, "no stick-table in this frontend before it")
	case len(args) != 1:
		return refuse(l, "only track-sc<n> <sample> is translated (not another table's)")
	case fe.trackers[n] != nil:
		return refuse(l, "counter %d is tracked at line %d too: one track rule a counter is translated", n, fe.trackers[n].line.Pos.Line)
	}
	key, err := readTrackKey(args[0], fe.stickTable.keyType, l)
	if err != nil {
		return err
	}
	fe.trackers[n] = &tracker{line: l, key: key, cond: cond}
	switch key.kind {
	case "src":
		fe.note(l, fe.stickTable.srcTrackNote())
	case "header":
		fe.note(l, "the edge_rate_limit below counts each last value of the header (what follows its last comma outside double quotes, of its last line, as HAProxy tracks it), of the requests that have one")
	default:
		fe.note(l, "the edge_rate_limit below counts each value of the cookie, of the requests that have one")
	}
	return nil
}

// srcTrackNote says what counts the client addresses a track rule
// tracks: edge_rate_limit, in_flight or both.
func (t *stickTable) srcTrackNote() string {
	switch {
	case t.connCur && len(t.periods) > 0:
		return "the edge_rate_limit and the in_flight below count each client address"
	case t.connCur:
		return "the in_flight below counts each client address"
	}
	return "the edge_rate_limit below counts each client address"
}

// readTrackKey reads a tracked sample: src, or a header's (req.hdr, hdr)
// last value (of the occurrence -1 or none: HAProxy 2.6 tracks the last
// of either) or a cookie's (req.cook, cook) value, without converters, as
// a table of keyType keys.
func readTrackKey(sample, keyType string, l Line) (trackKey, error) {
	if sample == "src" {
		return trackKey{kind: "src"}, nil
	}
	fetch, name, ok := strings.Cut(strings.TrimSuffix(sample, ")"), "(")
	kind := trackSamples[fetch]
	if n, occ, found := strings.Cut(name, ","); found && kind == "header" {
		if occ != "-1" {
			return trackKey{}, refuse(l, "track %s: occurrence %s is not translated: the last, -1 (what req.hdr(<name>) tracks too), is", sample, occ)
		}
		name = n
	}
	switch {
	case !ok || !strings.HasSuffix(sample, ")") || kind == "" || name == "" || strings.ContainsAny(name, ",()"):
		return trackKey{}, refuse(l, "track %s: only src, req.hdr(<name>[,-1]) and req.cook(<name>), without converters, are translated", sample)
	case keyType != "string":
		return trackKey{}, refuse(l, "track %s: a table of type %s keeps addresses: track src, or keep the %s in a table of type string", sample, keyType, kind)
	}
	return trackKey{kind: kind, name: name}, nil
}

// resolveTrackers settles each used counter's condition.
func (fe *frontend) resolveTrackers() error {
	for _, tr := range fe.trackers {
		if tr == nil || tr.cond == nil {
			continue
		}
		var err error
		if tr.when, err = fe.conditionMatcher(tr.cond, tr.line); err != nil {
			return err
		}
	}
	return nil
}

// storedRatePeriod reads a stick-table's store <rate>(<period>), a rate
// of rateData: the rate, and its period as a Caddy duration.
func storedRatePeriod(v string, l Line) (rate, period string, err error) {
	rate, arg, ok := strings.Cut(v, "(")
	if !ok || !slices.Contains(rateData, rate) || !strings.HasSuffix(arg, ")") {
		return "", "", refuse(l, "store %s: only http_req_rate(<period>), conn_rate(<period>) and conn_cur are translated", v)
	}
	d, err := duration(strings.TrimSuffix(arg, ")"), l.Pos)
	if err != nil {
		return "", "", err
	}
	// edge_rate_limit's sliding window counts in ratelimit.SlidingSlots slots.
	if p, err := time.ParseDuration(d); err != nil || p < 10*time.Millisecond || p%(10*time.Millisecond) != 0 {
		return "", "", refuse(l, "store %s: a sliding window of whole tens of milliseconds (at least 10ms) is translated", v)
	}
	return rate, d, nil
}

// counterTest is a condition's test of a tracked counter's data,
// { sc_<data>(<n>) gt|ge N } (or sc<n>_<data>), maybe through sub(<var>)
// of a constant variable: the counter, the most it lets through (the
// condition holds over limit), and the condition's other terms, which
// must hold too.
type counterTest struct {
	counter, limit int
	rest           []Term
	acl            *Line // the named ACL of the test, if it is one
}

// counterTestOf tells whether a condition, of one set of terms, tests a
// counter's data (an anonymous ACL or a named one of one line), and
// reads it.
func (fe *frontend) counterTestOf(c *Condition, data string, l Line) (counterTest, bool, error) {
	if c == nil || c.Unless || len(c.Any) != 1 {
		return counterTest{}, false, nil
	}
	terms := c.Any[0]
	for i, t := range terms {
		words, named := fe.termWords(t, l)
		if t.Not || len(words) != 3 {
			continue
		}
		fetch, conv, _ := strings.Cut(words[0], ",")
		counter := counterOf(fetch, data)
		if counter < 0 {
			continue
		}
		offset, err := fe.subtracted(conv, words[0], l)
		if err != nil {
			return counterTest{}, false, err
		}
		n, err := strconv.Atoi(words[2])
		if err != nil || (words[1] != "gt" && words[1] != "ge") {
			return counterTest{}, false, refuse(l, "%s %s %s: a counter's test is gt or ge a whole number", words[0], words[1], words[2])
		}
		limit := n + offset // the count includes this request: over limit it holds
		if words[1] == "ge" {
			limit--
		}
		return counterTest{counter: counter, limit: limit, rest: slices.Delete(slices.Clone(terms), i, i+1), acl: named}, true, nil
	}
	return counterTest{}, false, nil
}

// termWords are a term's ACL's words: an anonymous one's, or a named
// one's counter test (of one line, that the rule l sees: else
// conditionMatcher refuses it) and its line.
func (fe *frontend) termWords(t Term, l Line) ([]string, *Line) {
	if t.ACL == "" {
		return t.Anon, nil
	}
	if alts, err := fe.visibleACL(t.ACL, l); err == nil && len(alts) == 1 {
		return alts[0].counterTest, &alts[0].line
	}
	return nil, nil
}

// subtracted is what a counter's converter, sub(<var>) of a variable set
// to a constant integer (int(<n>)) before the rule, takes from its count:
// HAProxy's sub is a signed 64-bit subtraction, so count - v gt N is count
// gt N + v.
func (fe *frontend) subtracted(conv, fetch string, l Line) (int, error) {
	if conv == "" {
		return 0, nil
	}
	name, ok := strings.CutPrefix(conv, "sub(")
	name = strings.TrimSuffix(name, ")")
	v, set := fe.vars[name]
	if !ok || !strings.HasSuffix(conv, ")") || strings.Contains(name, ",") {
		return 0, refuse(l, "%s: of a counter's converters, only sub(<variable>) of a constant is translated", fetch)
	}
	n, err := strconv.Atoi(v.sample.arg)
	if !set || v.sample.subject != constSubject || err != nil || n < -1<<31 || n > 1<<31 {
		return 0, refuse(l, "%s: sub(%s) is translated of a variable that an http-request set-var(%s) int(<n>) before this rule sets", fetch, name, name)
	}
	return n, nil
}

// sameTerms tells whether terms are all those of the condition c, of one
// set of terms, in any order.
func sameTerms(terms []Term, c *Condition) bool {
	if c == nil || c.Unless || len(c.Any) != 1 || len(c.Any[0]) != len(terms) {
		return false
	}
	for _, t := range terms {
		if !slices.ContainsFunc(c.Any[0], func(u Term) bool {
			return u.Not == t.Not && u.ACL == t.ACL && slices.Equal(u.Anon, t.Anon)
		}) {
			return false
		}
	}
	return true
}

// isCounterFetch tells whether an ACL's fetch reads a tracked counter's
// data (counterOf), maybe through converters.
func isCounterFetch(fetch string) bool {
	fetch, _, _ = strings.Cut(fetch, ",")
	return slices.ContainsFunc(append(slices.Clone(rateData), "conn_cur"), func(data string) bool { return counterOf(fetch, data) >= 0 })
}

// counterOf is the counter a fetch reads data of (sc_<data>(<n>) or
// sc<n>_<data>, n from 0 to 2), -1 for another fetch.
func counterOf(fetch, data string) int {
	for n := range 3 {
		if fetch == "sc_"+data+"("+strconv.Itoa(n)+")" || fetch == "sc"+strconv.Itoa(n)+"_"+data {
			return n
		}
	}
	return -1
}

// rateZone is an edge_rate_limit zone: events a window (sliding, as
// HAProxy's rate), keyed on a counter's tracked sample, counting the
// requests its track rule takes.
type rateZone struct {
	name   string // the frontend's (and the counter's): letters, digits, '_' and '-' only
	events int
	window string // a Caddy duration
	track  *tracker
}

// rateLimitAnswer is the edge_rate_limit of a deny over a tracked rate
// (of rateData): HAProxy's deny_status must be 429, which edge_rate_limit
// answers (with Retry-After). One deny reads a counter: each
// edge_rate_limit counts, and a request the first denies would not reach
// the second.
func (fe *frontend) rateLimitAnswer(words []string, rate string, t counterTest, l Line) (answer, error) {
	counter, limit := t.counter, t.limit
	tr := fe.trackers[counter]
	if tr == nil { // then the frontend may have no table
		return answer{}, refuse(l, "sc_%s(%d) without http-request track-sc%d before it", rate, counter, counter)
	}
	period := fe.stickTable.periods[rate]
	switch {
	case period == "":
		return answer{}, refuse(l, "the stick-table at line %d does not store %s", fe.stickTable.line.Pos.Line, rate)
	case tr.used:
		return answer{}, refuse(l, "a second deny over counter %d: each edge_rate_limit counts, so one deny a counter is translated", counter)
	case len(words) != 2 || words[0] != "deny_status" || words[1] != "429":
		return answer{}, refuse(l, "a rate limit's deny must be deny_status 429, which edge_rate_limit answers")
	case limit <= 0:
		return answer{}, refuse(l, "a rate of 0 denies every request: write http-request deny")
	case len(t.rest) > 0 && !sameTerms(t.rest, tr.cond):
		return answer{}, refuse(l, "the deny's other terms must be the track rule's condition (line %d), as written: edge_rate_limit denies among the requests it counts", tr.line.Pos.Line)
	case strings.Trim(fe.section.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "":
		return answer{}, refuse(l, "the edge_rate_limit zone is named after the frontend, %q, and a zone's name takes letters, digits, '_' and '-' only", fe.section.Name)
	}
	tr.used = true
	name := fe.section.Name
	if counter > 0 {
		name += "_sc" + strconv.Itoa(counter)
	}
	return answer{kind: rateLimitAnswer, zone: rateZone{name: name, events: limit, window: period, track: tr}}, nil
}

// inFlightCount is the in_flight handler's placeholder: the count of the
// request's client, this request included.
const inFlightCount = "{http.in_flight.count}"

// readInFlightDeny reads a deny over a tracked conn_cur, { sc_conn_cur(<n>)
// gt <limit> }: the in_flight handler at its place counts the client's
// requests in progress from there until each is answered, and the deny's
// answer takes the requests over limit. The track rule's requests are
// counted from it in HAProxy: those a rule between them answers count
// there too, for the moment of their answer.
func (fe *frontend) readInFlightDeny(l Line, args []string, cond *Condition, counter, limit int) error {
	tr := fe.trackers[counter]
	switch {
	case tr == nil:
		return refuse(l, "sc_conn_cur(%d) without http-request track-sc%d before it", counter, counter)
	case !fe.stickTable.connCur:
		return refuse(l, "the stick-table at line %d does not store conn_cur", fe.stickTable.line.Pos.Line)
	case tr.key.kind != "src":
		return refuse(l, "conn_cur of a %s's value: in_flight counts each client address, only a table that tracks src is translated", tr.key.kind)
	case tr.cond != nil:
		return refuse(l, "conn_cur of a track rule with a condition (line %d): in_flight counts every request from the deny's place, not translated", tr.line.Pos.Line)
	case tr.inFlight != nil:
		return refuse(l, "a second deny over counter %d's conn_cur (line %d): each in_flight counts, so one deny a counter is translated", counter, tr.inFlight.Pos.Line)
	case limit <= 0:
		return refuse(l, "the count includes the request itself, so this denies every request: write http-request deny")
	}
	a, err := denyAnswer(args, l, fe.cfg.files())
	if err != nil {
		return err
	}
	tr.inFlight = &l
	over := acl{line: l, term: inFlightCount + " > " + strconv.Itoa(limit)}
	fe.answers = append(fe.answers, answerRule{line: l, cond: cond, answer: a, when: matcher{any: [][]term{{{alts: []acl{over}}}}}, inFlight: fe.stickTable.size})
	return nil
}
