package haproxy

import (
	"slices"
	"strconv"
)

// HAProxy's maxconn, at three levels:
//
//   - global maxconn: the process's connections at once, every frontend's
//     together. Each servers option gets caddy-ha's listener wrapper
//     max_connections with group global: one count for all of them.
//   - a frontend's (or its defaults'): that frontend's connections at once,
//     across its binds: max_connections with a group of the frontend's
//     own, in each of its listeners' servers option. Listed before the
//     global one (it wraps the listener first), so that a connection
//     accepted while its frontend is full waits for the frontend's place
//     without holding a global one.
//   - a server's: its requests at once, the excess waiting for a place:
//     the transport's max_conns_per_host, which over HTTP/1.1 (one
//     request per connection) holds a request until a connection is free.
//
// While the limit is reached, the wrapper accepts nothing, so new
// connections wait in the kernel's backlog, as HAProxy leaves them.

// globalMaxconnGroup is the max_connections group of global maxconn.
const globalMaxconnGroup = "global"

// readMaxconn reads a maxconn's number: at least 1, or 0 where zero allows.
func readMaxconn(l Line, zero bool) (int, error) {
	n, err := strconv.Atoi(arg(l, 1))
	if err != nil || len(l.Words) != 2 || n < 0 || n == 0 && !zero {
		if zero {
			return 0, refuse(l, "takes a whole number")
		}
		return 0, refuse(l, "takes a whole number of at least 1")
	}
	return n, nil
}

// frontendMaxconn reads a frontend's (or its defaults') maxconn line; the
// last one wins, as in HAProxy.
func (fe *frontend) frontendMaxconn(l Line) error {
	n, err := readMaxconn(l, true)
	if err != nil {
		return err
	}
	if fe.maxconn != nil {
		fe.note(*fe.maxconn, "replaced by the maxconn at line "+strconv.Itoa(l.Pos.Line))
	}
	fe.maxconn = &l
	if n == 0 {
		fe.maxconn = nil // the global maxconn's, HAProxy's default
		fe.note(l, "0: the global maxconn holds, as in HAProxy")
	}
	return nil
}

// serverMaxconn reads a server's maxconn option: "" for 0 (no limit, as
// in HAProxy).
func serverMaxconn(v string, at Line) (string, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return "", refuse(at, "maxconn takes a whole number")
	}
	if n == 0 {
		return "", nil
	}
	return strconv.Itoa(n), nil
}

// checkMaxConns checks the servers' maxconn, which becomes the
// transport's max_conns_per_host: over HTTP/1.1, one request per
// connection, so at most that many requests at once to each server, the
// next waiting for a free connection. Where HAProxy differs: it sends a
// request to a server with room when the one in turn is full, and answers
// 503 to one queued past timeout queue; the transport's waits for its
// server, as long as the client does. transport pinned gives each
// signed-in client a connection of its own, which no per-server limit
// bounds; HTTP/2 carries many requests on one connection: both are
// refused.
func (be *backend) checkMaxConns() error {
	if be.tls.maxConn == "" {
		return nil
	}
	opts := slices.Clone(be.defaults)
	for _, s := range be.servers {
		opts = append(opts, s.opts...)
	}
	at := opts[slices.IndexFunc(opts, func(o option) bool { return o.word == "maxconn" })].line
	switch {
	case be.transport == "pinned":
		return refuse(at, "maxconn with http-reuse never is not translated: transport pinned gives each signed-in client a connection of its own, which max_conns_per_host does not bound (max_pinned bounds the pins of the pool, not the requests of a server)")
	case be.tls.alpn != "" && be.tls.alpn != "http/1.1", be.tls.proto == "h2":
		return refuse(at, "maxconn over HTTP/2 is not translated: max_conns_per_host bounds connections, and one carries many requests")
	}
	return nil
}

// limitsServers tells whether a server (or default-server) of the backend
// has a maxconn other than 0.
func (be *backend) limitsServers() bool {
	opts := slices.Clone(be.defaults)
	for _, s := range be.servers {
		opts = append(opts, s.opts...)
	}
	for i, o := range opts {
		if o.word == "maxconn" && (i+1 >= len(opts) || opts[i+1].word != "0") {
			return true
		}
	}
	return false
}

// checkServerMaxconnUses refuses a backend with a server maxconn that
// more than one rule sends to: each use is a reverse_proxy of its own,
// whose transport would count its requests apart, where HAProxy counts a
// server's requests together.
func checkServerMaxconnUses(frontends []*frontend) error {
	type use struct {
		be   *backend
		line Line
	}
	first := map[*Section]Line{}
	for _, fe := range frontends {
		var uses []use
		for _, r := range fe.rules {
			uses = append(uses, use{r.backend, r.line})
		}
		if fe.backend != nil {
			uses = append(uses, use{fe.backend, fe.backendLine})
		}
		for _, u := range uses {
			if !u.be.limitsServers() {
				continue
			}
			if at, ok := first[u.be.section]; ok {
				return refuse(u.line, "backend %s, whose servers have a maxconn, is sent to at line %d too: each use is a reverse_proxy whose transport would count the requests apart, where HAProxy counts a server's together (not translated)", u.be.section.Name, at.Pos.Line)
			}
			first[u.be.section] = u.line
		}
	}
	return nil
}
