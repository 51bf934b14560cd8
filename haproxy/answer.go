package haproxy

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The directives of an answering rule are lines with matcherMark where
// its matcher goes (" @name", or "" for a rule without a condition).
const matcherMark = "\x00"

// denyDirective is http-request deny's [deny_status <code>] as error
// (HAProxy's default 403), which an errorfile's handle_errors answers.
func denyDirective(words []string, l Line) ([]string, error) {
	status := "403"
	switch {
	case len(words) == 0:
	case len(words) == 2 && words[0] == "deny_status":
		status = words[1]
	default:
		return nil, refuse(l, "only [deny_status <code>] is translated")
	}
	if err := checkStatus(status, 400, 599, l); err != nil {
		return nil, err
	}
	return []string{"error" + matcherMark + " " + status}, nil
}

// returnDirective is http-request return's [status <code>] [content-type
// <type>] [string <text>] as respond (HAProxy's default 200, no body).
func returnDirective(words []string, l Line) ([]string, error) {
	status, ctype, body := "200", "", ""
	for i := 0; i < len(words); i += 2 {
		if i+1 >= len(words) {
			return nil, refuse(l, "%s needs a value", words[i])
		}
		switch v := words[i+1]; words[i] {
		case "status":
			status = v
		case "content-type":
			ctype = v
		case "string":
			body = v
		default:
			return nil, refuse(l, "http-request return %s is not translated yet", words[i])
		}
	}
	if err := checkStatus(status, 200, 599, l); err != nil {
		return nil, err
	}
	if body != "" && ctype == "" {
		return nil, refuse(l, "string without content-type: HAProxy refuses it too")
	}
	if ctype == "" {
		return []string{"respond" + matcherMark + " " + status}, nil
	}
	ctypeTok, err := literalToken(ctype, l.envs)
	if err != nil {
		return nil, refuseValue(l, "content-type", ctype, err)
	}
	bodyTok, err := literalToken(body, l.envs)
	if err != nil {
		return nil, refuseValue(l, "string", body, err)
	}
	return []string{"header" + matcherMark + " Content-Type " + ctypeTok, "respond" + matcherMark + " " + bodyTok + " " + status}, nil
}

// redirectDirective is a redirect rule's location, prefix or scheme with
// [code <code>] as redir (HAProxy's default 302). HAProxy builds a scheme
// redirect from the Host header and the URI with its query.
func redirectDirective(words []string, l Line) ([]string, error) {
	if len(words) < 2 {
		return nil, refuse(l, "takes location, prefix or scheme and a value")
	}
	kind, v := words[0], words[1]
	if strings.Contains(v, "%[") {
		return nil, refuse(l, "log-format expressions are not translated yet")
	}
	lit, err := withEnv(v, l.envs, escapeLiteral)
	if err != nil {
		return nil, refuseValue(l, kind, v, err)
	}
	var to string
	switch kind {
	case "location":
		to = lit
	case "prefix":
		to = strings.TrimSuffix(lit, "/") + "{uri}"
	case "scheme":
		to = lit + "://{hostport}{uri}"
	default:
		return nil, refuse(l, "redirect %s is not translated yet", kind)
	}
	code := "302"
	switch rest := words[2:]; {
	case len(rest) == 0:
	case len(rest) == 2 && rest[0] == "code":
		code = rest[1]
	default:
		return nil, refuse(l, "only [code <code>] is translated after the %s", kind)
	}
	switch code {
	case "301", "302", "303", "307", "308":
	default:
		return nil, refuse(l, "code %s: HAProxy redirects with 301, 302, 303, 307 or 308", code)
	}
	toTok, err := quoteToken(to)
	if err != nil {
		return nil, refuseValue(l, kind, v, err)
	}
	return []string{"redir" + matcherMark + " " + toTok + " " + code}, nil
}

func checkStatus(v string, lo, hi int, l Line) error {
	if n, err := strconv.Atoi(v); err != nil || n < lo || n > hi {
		return refuse(l, "status %s: want %d to %d", v, lo, hi)
	}
	return nil
}

// responseHeader reads an http-response del-header, set-header or
// add-header line (reverse_proxy's header_down): without a condition, and
// without log-format expressions.
func responseHeader(l Line) (headerRule, error) {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return headerRule{}, err
	}
	if cond != nil {
		return headerRule{}, refuse(l, "conditions are not translated yet")
	}
	switch op := arg(l, 1); {
	case op == "del-header" && len(words) == 3, (op == "set-header" || op == "add-header") && len(words) == 4:
		return headerRuleOf(l, words[2:])
	}
	return headerRule{}, refuse(l, "only http-response del-header <name>, set-header and add-header <name> <value> are translated")
}

// errorPage is an errorfile: the answer HAProxy sends instead of its own
// for a status, read as HAProxy reads it (a whole HTTP response).
type errorPage struct {
	line    Line
	status  string
	headers [][2]string
	body    string
}

// maxErrorFile bounds an errorfile (HAProxy's own bound is its buffer size).
const maxErrorFile = 64 << 10

// readErrorFile reads errorfile <code> <file> from files.
func readErrorFile(files Files, l Line) (errorPage, error) {
	if len(l.Words) != 3 {
		return errorPage{}, refuse(l, "takes a status and a file")
	}
	status, file := l.Words[1], l.Words[2]
	if err := checkStatus(status, 400, 599, l); err != nil {
		return errorPage{}, err
	}
	// A regular file of a bounded size, as HAProxy wants it (never a
	// device that reads forever).
	if info, err := files.Stat(file); err != nil {
		return errorPage{}, refuse(l, "%v", err)
	} else if !info.Mode().IsRegular() || info.Size() > maxErrorFile {
		return errorPage{}, refuse(l, "%s is not a regular file of at most 64 KiB", file)
	}
	b, err := files.ReadFile(file)
	if err != nil {
		return errorPage{}, refuse(l, "%v", err)
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

// write writes the page as the site's handle_errors for its status.
func (p errorPage) write(c *caddyfile) {
	c.comment(p.line, "")
	c.open("handle_errors %s", p.line.Words[1])
	for _, h := range p.headers {
		c.line("header %s %s", c.name(h[0]), c.literal(h[1]))
	}
	c.line("respond %s %s", c.literal(p.body), p.status)
	c.close()
}
