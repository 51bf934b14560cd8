package haproxy

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

// answer is what a rule that answers the client itself does: a handler
// of the model, which emit writes as Caddy's directive.
type answer struct {
	kind answerKind
	// error, respond: the status; redir: the code.
	status string
	// respond: its Content-Type ("": none), body (a log-format string's
	// with lf-string) and hdr headers, in order.
	ctype   string
	body    logFormat
	headers []answerHeader
	// redir: how the target is made (location, prefix or scheme) and
	// the log-format value it is made of.
	redirect string
	target   logFormat
	// redir: the placeholder of the request's part after a prefix or
	// scheme target (redirectTails), and the Set-Cookie header of
	// set-cookie or clear-cookie ("": none).
	tail      string
	setCookie string
	// edge_rate_limit: its zone.
	zone rateZone
	// basic_auth: its realm and accounts.
	realm    string
	userlist *userlist
}

// answerHeader is a deny's or return's hdr <name> <fmt>: a header HAProxy
// adds to its answer, its value a log-format string.
type answerHeader struct {
	name string
	v    logFormat
}

type answerKind int

const (
	errorAnswer     answerKind = iota // error <status>: HAProxy's deny with its error page
	respondAnswer                     // respond: HAProxy's return, or a deny with its own answer
	redirAnswer                       // redir: HAProxy's redirect
	rateLimitAnswer                   // edge_rate_limit: a deny over the tracked rate
	authAnswer                        // basic_auth: HAProxy's http-request auth
)

// formats are the log-format values the answer writes: the redirect's
// target and the request's part after it, the body, the headers' values.
func (a answer) formats() []logFormat {
	f := []logFormat{a.target, a.body}
	if a.kind == redirAnswer && a.redirect != "location" {
		f = append(f, logFormat{parts: []formatPart{{placeholder: a.tail}}})
	}
	for _, h := range a.headers {
		f = append(f, h.v)
	}
	return f
}

// denyAnswer is http-request deny: without options, or with deny_status
// alone, error <status> (HAProxy's default 403), which an errorfile's
// handle_errors answers, as HAProxy's default-errorfiles; with any other
// option, the answer HAProxy builds as return's (status 403 by default).
func denyAnswer(words []string, l Line, files Files) (answer, error) {
	status := "403"
	switch {
	case len(words) == 0:
	case len(words) == 2 && words[0] == "deny_status":
		status = words[1]
	default:
		return builtAnswer(words, "403", l, files)
	}
	return answer{kind: errorAnswer, status: status}, checkPageStatus(status, l)
}

// returnAnswer is http-request return (HAProxy's default 200).
func returnAnswer(words []string, l Line, files Files) (answer, error) {
	return builtAnswer(words, "200", l, files)
}

// builtAnswer is the answer of return's options (deny's too, with
// deny_status for status): [status <code>] [content-type <type>]
// [string <text> | lf-string <log-format> | file <path> | errorfile
// <path>] [hdr <name> <log-format>]*, as respond (HAProxy's defaults:
// status, no body). An errorfile is sent as it is (its status, headers
// and body); HAProxy then ignores status, content-type and hdr.
func builtAnswer(words []string, status string, l Line, files Files) (answer, error) {
	a := answer{kind: respondAnswer, status: status, body: literalFormat("")}
	payload := ""
	var page *errorPage
	for i := 0; i < len(words); i += 2 {
		if i+1 >= len(words) {
			return a, refuse(l, "%s needs a value", words[i])
		}
		switch opt := words[i]; {
		case opt == "hdr":
			if i+2 >= len(words) {
				return a, refuse(l, "hdr needs a name and a value")
			}
			if err := a.readHeader(words[i+1], words[i+2], l); err != nil {
				return a, err
			}
			i++
		case payloadOptions[opt] && payload != "":
			return a, refuse(l, "%s after %s: one payload", opt, payload)
		case opt == "errorfile":
			payload = opt
			p, err := readResponseFile(files, words[i+1], l)
			if err != nil {
				return a, err
			}
			page = &p
		case payloadOptions[opt]:
			payload = opt
			if err := a.readPayload(opt, words[i+1], l, files); err != nil {
				return a, err
			}
		default:
			if err := a.readSetting(opt, words[i+1], l); err != nil {
				return a, err
			}
		}
	}
	if page != nil {
		a.sendPage(*page)
	}
	return a, a.checkBuilt(payload, l)
}

// sendPage makes the answer the page's, as HAProxy sends an errorfile:
// its status, headers and body, whatever the other options said.
func (a *answer) sendPage(p errorPage) {
	a.status, a.ctype, a.body, a.headers = p.status, "", literalFormat(p.body), nil
	for _, h := range p.headers {
		a.headers = append(a.headers, answerHeader{name: h[0], v: literalFormat(h[1])})
	}
}

// payloadOptions are the options of return that give its body.
var payloadOptions = map[string]bool{"string": true, "lf-string": true, "file": true, "errorfile": true}

// readSetting reads status (deny_status in a deny) and content-type.
func (a *answer) readSetting(opt, v string, l Line) error {
	switch {
	case opt == "status", opt == "deny_status" && l.Words[1] == "deny":
		a.status = v
	case opt == "content-type":
		a.ctype = v
	default:
		return refuse(l, "http-request %s %s is not translated yet", l.Words[1], opt)
	}
	return nil
}

// readPayload reads the body: a string, a log-format string, or a file's
// content, read now as HAProxy reads it when it starts.
func (a *answer) readPayload(opt, v string, l Line, files Files) error {
	var err error
	switch opt {
	case "string":
		a.body = literalFormat(v)
	case "lf-string":
		a.body, err = readLogFormat(v, l)
	case "file":
		var b []byte
		if b, err = readAnswerFile(files, v, l); err == nil {
			a.body = literalFormat(string(b))
		}
	}
	return err
}

func (a *answer) readHeader(name, v string, l Line) error {
	if !isHTTPName(name) {
		return refuse(l, "hdr %s: not a header name", name)
	}
	f, err := readLogFormat(v, l)
	a.headers = append(a.headers, answerHeader{name: name, v: f})
	return err
}

// checkBuilt checks the answer as HAProxy does: a status from 200 to 599,
// a content-type for a body; without a body, HAProxy sends no
// content-type (it ignores the option).
func (a *answer) checkBuilt(payload string, l Line) error {
	if err := checkStatus(a.status, 200, 599, l); err != nil {
		return err
	}
	switch {
	case payload == "errorfile": // its own headers
	case a.body.raw == "":
		a.ctype = ""
	case a.ctype == "":
		return refuse(l, "%s without content-type: HAProxy refuses it too", payload)
	}
	return nil
}

// redirectAnswer is a redirect rule's location, prefix or scheme and its
// options as redir (HAProxy's default 302). HAProxy builds a scheme
// redirect from the Host header and the URI with its query.
func redirectAnswer(words []string, l Line) (answer, error) {
	if len(words) < 2 {
		return answer{}, refuse(l, "takes location, prefix or scheme and a value")
	}
	a := answer{kind: redirAnswer, redirect: words[0], status: "302", tail: "uri"}
	if _, ok := redirectTargets[a.redirect]; !ok {
		return a, refuse(l, "redirect %s is not translated yet", a.redirect)
	}
	// http-request redirect's value is a log-format string; the
	// redirect keyword's is taken as written (HAProxy's own documentation).
	a.target = literalFormat(words[1])
	if l.Words[0] == "http-request" {
		var err error
		if a.target, err = readLogFormat(words[1], l); err != nil {
			return a, err
		}
	}
	if err := a.readRedirectOptions(words[2:], l); err != nil {
		return a, err
	}
	switch a.status {
	case "301", "302", "303", "307", "308":
	default:
		return a, refuse(l, "code %s: HAProxy redirects with 301, 302, 303, 307 or 308", a.status)
	}
	return a, nil
}

// readRedirectOptions reads a redirect's options after its target, as
// HAProxy 2.6 applies them: drop-query and append-slash to the request's
// part of a prefix or scheme redirect (a location is sent as it is);
// set-cookie and clear-cookie (the last of them) as HAProxy's Set-Cookie
// header; ignore-empty skips a location whose value is empty.
func (a *answer) readRedirectOptions(opts []string, l Line) error {
	var dropQuery, appendSlash bool
	for i := 0; i < len(opts); i++ {
		switch opt := opts[i]; opt {
		case "drop-query":
			dropQuery = true
		case "append-slash":
			appendSlash = true
		case "ignore-empty":
			if _, literal := a.target.text(); !literal && a.redirect == "location" {
				return refuse(l, "ignore-empty with a sample in the location: HAProxy skips the rule when the location is empty, Caddy's redir would send it (not translated; drop ignore-empty and add a condition that the sample is found, such as { hdr(<name>) -m found })")
			}
		case "code", "set-cookie", "clear-cookie":
			if i+1 >= len(opts) {
				return refuse(l, "%s needs a value", opt)
			}
			i++
			a.readRedirectSetting(opt, opts[i])
		default:
			return refuse(l, "redirect option %s: HAProxy takes code, drop-query, append-slash, set-cookie, clear-cookie and ignore-empty (it refuses this one too)", opt)
		}
	}
	a.tail = redirectTails[[2]bool{dropQuery, appendSlash}]
	return nil
}

// readRedirectSetting reads code, or set-cookie's or clear-cookie's
// cookie into the Set-Cookie header HAProxy sends: the cookie as written,
// then "; path=/;" (and " Max-Age=0;" to clear it).
func (a *answer) readRedirectSetting(opt, v string) {
	switch opt {
	case "code":
		a.status = v
	case "set-cookie":
		a.setCookie = v + "; path=/;"
	case "clear-cookie":
		a.setCookie = v + "; path=/; Max-Age=0;"
	}
}

// redirectTails are the placeholders of the request's part that a prefix
// or scheme redirect puts after its target, by drop-query and
// append-slash: the URI as sent, or its path alone; with append-slash, a
// slash after it unless it ends with one (after the query, if kept, as
// HAProxy puts it).
var redirectTails = map[[2]bool]string{
	{false, false}: "uri", // Caddyfile's shorthand of {http.request.uri}
	{true, false}:  "haproxy.path",
	{false, true}:  "haproxy.uri_slashed",
	{true, true}:   "haproxy.path_slashed",
}

// redirectTargets make a redirect's target of its value and the
// request's part (tail, a placeholder's name): as it is, before the
// request's part (a prefix of "/" alone, nothing, as HAProxy drops it),
// or as the scheme of the request's host and part. Their placeholders
// are parts of the format, so that the token writer sees what stands
// before each (a backslash would escape its brace).
var redirectTargets = map[string]func(target logFormat, tail string) logFormat{
	"location": func(target logFormat, _ string) logFormat { return target },
	"prefix": func(target logFormat, tail string) logFormat {
		if lit, ok := target.text(); ok && lit == "/" {
			target.parts = nil
		}
		target.parts = slices.Concat(target.parts, []formatPart{{placeholder: tail}})
		return target
	},
	"scheme": func(target logFormat, tail string) logFormat {
		target.parts = slices.Concat(target.parts, []formatPart{{text: "://"}, {placeholder: "hostport"}, {placeholder: tail}})
		return target
	},
}

func checkStatus(v string, lo, hi int, l Line) error {
	if n, err := strconv.Atoi(v); err != nil || n < lo || n > hi {
		return refuse(l, "status %s: want %d to %d", v, lo, hi)
	}
	return nil
}

// responseHeader reads an http-response del-header, set-header,
// add-header or replace-header line (reverse_proxy's header_down; with a
// condition, h.cond, a deferred header directive).
func responseHeader(l Line) (headerRule, error) {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return headerRule{}, err
	}
	switch op := arg(l, 1); {
	case op == "del-header" && len(words) == 3, (op == "set-header" || op == "add-header") && len(words) == 4,
		op == "replace-header" && len(words) == 5, op == "replace-value":
		h, err := headerRuleOf(l, words[2:])
		h.cond = cond
		return h, err
	}
	return headerRule{}, refuse(l, "only %s del-header <name>, set-header and add-header <name> <value>, and replace-header <name> <regex> <format> are translated", l.Words[0])
}

// errorPage is an errorfile: the answer HAProxy sends instead of its own
// for a status, read as HAProxy reads it (a whole HTTP response).
type errorPage struct {
	line    Line
	status  string
	headers [][2]string
	body    string
}

// readAnswerFile reads a file the configuration names for an answer (an
// errorfile, a return's file) as HAProxy wants it: a regular file of a
// bounded size.
func readAnswerFile(files Files, file string, l Line) ([]byte, error) {
	b, err := readBounded(files, file, maxErrorFile)
	if err != nil {
		return nil, refuse(l, "%v", err)
	}
	return b, nil
}

// readErrorFile reads errorfile <code> <file> from files.
func readErrorFile(files Files, l Line) (errorPage, error) {
	if len(l.Words) != 3 {
		return errorPage{}, refuse(l, "takes a status and a file")
	}
	status, file := l.Words[1], l.Words[2]
	if err := checkStatus(status, 400, 599, l); err != nil {
		return errorPage{}, err
	}
	return readResponseFile(files, file, l)
}

// readResponseFile reads a file that holds a whole HTTP response (an
// errorfile, a return's errorfile) as HAProxy sends it: its status,
// headers (but Content-Length and Connection, which Caddy writes) and
// body.
func readResponseFile(files Files, file string, l Line) (errorPage, error) {
	b, err := readAnswerFile(files, file, l)
	if err != nil {
		return errorPage{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		return errorPage{}, refuse(l, "%s is not an HTTP response: %v", file, err)
	}
	body, _ := io.ReadAll(resp.Body)
	p := errorPage{line: l, status: strconv.Itoa(resp.StatusCode), body: string(body)}
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		switch k {
		case "Content-Length", "Connection":
			continue // Caddy writes its own
		}
		for _, v := range resp.Header[k] {
			p.headers = append(p.headers, [2]string{k, v})
		}
	}
	return p, nil
}
