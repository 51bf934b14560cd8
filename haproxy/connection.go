package haproxy

import "strings"

// tcp-request connection rules: HAProxy decides on a connection as it
// accepts it, from what it knows then (the peer's address), before TLS
// and before any request. Caddy decides per request: each reject is an
// abort, first in the site, with the rule's condition and none of the
// earlier accepts' (the first rule whose condition holds decides, as in
// HAProxy). Caddy reads the request first, so the warning says so; the
// client gets no answer from either.

// connectionRule is a tcp-request connection accept or reject, when its
// condition (nil: always) holds.
type connectionRule struct {
	line   Line
	reject bool
	cond   *Condition
	when   matcher // the condition, resolved
}

// connectionNote is what the translation of a reject differs in.
const connectionNote = "Caddy closes the connection once it has read a request (after the TLS handshake; over HTTP/2 it resets that request's stream), where HAProxy closes it as it accepts it: the client gets no answer from either"

// readConnectionRule reads tcp-request connection accept|reject [if|unless
// <condition>]; HAProxy's other actions are refused.
func (fe *frontend) readConnectionRule(l Line) error {
	words, cond, err := SplitCondition(l.Words, l.Pos)
	if err != nil {
		return err
	}
	switch {
	case len(words) > 2 && strings.HasPrefix(words[2], "track-sc"):
		return refuse(l, "tracked here, a table counts the client's open connections (conn_cur, an idle kept-alive one too), which Caddy does not count per client: not translated (http-request track-sc<n> src counts its requests in progress, in_flight's count, which is another: write it if that is what is meant)")
	case len(words) != 3:
		return refuse(l, "takes an action and, maybe, an if or unless condition")
	case words[2] != "accept" && words[2] != "reject":
		return refuse(l, "tcp-request connection %s is not translated: accept and reject are (abort of a connection from a src address)", words[2])
	}
	fe.connectionRules = append(fe.connectionRules, connectionRule{line: l, reject: words[2] == "reject", cond: cond})
	return nil
}

// resolveConnectionRules settles each rule's matcher, and refuses a
// condition on what a connection does not know when it is accepted (only
// src is), or a frontend with accept-proxy: HAProxy's rules see the
// peer's own address there, Caddy's remote_ip the PROXY header's.
func (fe *frontend) resolveConnectionRules() error {
	for i, r := range fe.connectionRules {
		for _, b := range fe.binds {
			if b.acceptProxy {
				return refuse(r.line, "with accept-proxy (line %d), HAProxy's tcp-request connection rules see the address of the peer that sent the PROXY header, Caddy's remote_ip the address the header gives: not translated (write http-request deny, which sees the header's in both)", b.line.Pos.Line)
			}
		}
		if r.cond == nil {
			continue
		}
		var err error
		if fe.connectionRules[i].when, err = fe.conditionMatcher(r.cond, r.line); err != nil {
			return err
		}
		if err := checkConnectionCondition(r.line, fe.connectionRules[i].when); err != nil {
			return err
		}
	}
	return nil
}

// checkConnectionCondition refuses a condition that tests anything but
// src: HAProxy has read nothing of the connection when it decides.
func checkConnectionCondition(l Line, when matcher) error {
	for _, terms := range when.any {
		for _, t := range terms {
			for _, a := range t.alts {
				if !a.src {
					return refuse(l, "acl %s at line %d tests %s, which a connection does not carry when it is accepted (haproxy -c warns that it never matches there): only src is translated in a tcp-request connection rule", a.fetch, a.line.Pos.Line, a.fetch)
				}
			}
		}
	}
	return nil
}
