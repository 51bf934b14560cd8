// Package handoff lets a server that is being replaced pass its idle
// HTTP/1 connections to its successor on the same address instead of
// closing them.
//
// Go's http.Server.Shutdown closes an idle kept-alive connection at once,
// while its client may be sending the next request on it: the client sees
// a reset or EOF. HAProxy answers one more request on such a connection
// (idle-close-on-response); a Caddy config reload does better by handing
// the connection to the new config's server, which reads that next request
// itself. Nothing is lost: a connection is handed off only while the old
// server holds none of its bytes unanswered, and a read in progress is
// interrupted (by a deadline, as net/http does itself) and what it got is
// given to the successor first.
//
// A connection on which the old server may hold a request in its own read
// buffer (the client pipelines), or that it announced it closes, is closed
// as before instead: its client would wait for an answer that never comes,
// or for the close it was told of.
//
// Only HTTP/1 connections are handed off, plain or over TLS: a TLS
// connection is wrapped with its session (see Listener.Accept), which moves
// with it; HTTP/2 streams and upgraded streams live in the old server's
// objects. Every other connection, and every connection without a
// successor listening on its address, is closed as before. It knows
// nothing of Caddy.
package handoff

import (
	"net"
	"sync"
	"time"
)

// Registry knows the open Listeners by address, so that a closing one can
// find its successor. One Registry serves a process.
type Registry struct {
	mu        sync.Mutex
	listeners map[string]map[*Listener]struct{}
	// HandedOff, if set, is called for every connection handed off.
	HandedOff func()
	// Closed, if set, is called for every connection of a closed listener
	// that closes instead of being handed off (see Conn).
	Closed func()
	// Panicked, if set, is told of a panic in a Listener's accept loop (a
	// listener that panicked accepts nothing more) or in a connection's
	// lingering close (see Conn.Close).
	Panicked func(v any, stack []byte)
	// Drained, if set, is told once of each closed Listener whose
	// connections are all gone, handed off or closed.
	Drained func(Drain)
}

// Drain is what became of a closed Listener's connections.
type Drain struct {
	// Addr is the listener's address.
	Addr net.Addr
	// OpenAtClose were its connections when it closed.
	OpenAtClose int64
	// HandedOff went to a successor; Closed closed instead (HTTP/2,
	// upgraded, pipelined, told Connection: close, ended by the client,
	// or no successor on the address). A new connection its socket
	// accepted after the close went to a successor, and counts in neither.
	HandedOff, Closed int64
	// Took is the time from its close to its last connection's end: how
	// long its server's busy connections kept it.
	Took time.Duration
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{listeners: map[string]map[*Listener]struct{}{}}
}

// maxPending bounds the connections handed to a listener that its server
// has not accepted yet; beyond it they are closed.
const maxPending = 1024

// Wrap returns ln as a Listener of r: its connections can be handed off to
// a successor, and it accepts those its predecessors hand off.
func (r *Registry) Wrap(ln net.Listener) *Listener {
	l := &Listener{
		Listener: ln,
		registry: r,
		key:      ln.Addr().Network() + "/" + ln.Addr().String(),
		accepted: make(chan accepted),
		handed:   make(chan *Conn, maxPending),
		closed:   make(chan struct{}),
	}
	r.mu.Lock()
	if r.listeners[l.key] == nil {
		r.listeners[l.key] = map[*Listener]struct{}{}
	}
	r.listeners[l.key][l] = struct{}{}
	r.mu.Unlock()
	go l.acceptLoop()
	return l
}

// handOffOrClose gives c, one of from's connections, to an open listener
// on from's address other than from, or closes it (see giveOn).
func (r *Registry) handOffOrClose(from *Listener, c *Conn) error {
	handedOff, err := r.giveOn(from, c)
	from.left(handedOff)
	return err
}

// giveOn gives c to an open listener on from's address other than from,
// after clearing the deadlines its old server set; without one that takes
// it, c is closed. It reports whether c was given on.
func (r *Registry) giveOn(from *Listener, c *Conn) (bool, error) {
	if err := c.Conn.SetDeadline(time.Time{}); err != nil {
		return false, c.Conn.Close()
	}
	r.mu.Lock()
	for to := range r.listeners[from.key] {
		if to == from {
			continue
		}
		c.ln = to
		to.open.Add(1)
		select {
		case to.handed <- c:
			r.mu.Unlock()
			return true, nil
		default: // its server is not accepting: try another, or close
			to.open.Add(-1)
		}
	}
	r.mu.Unlock()
	return false, c.Conn.Close()
}

// remove forgets l. A listener it leaves alone on the address closes the
// connections it parked: none could take them.
func (r *Registry) remove(l *Listener) {
	r.mu.Lock()
	delete(r.listeners[l.key], l)
	var alone *Listener
	switch len(r.listeners[l.key]) {
	case 0:
		delete(r.listeners, l.key)
	case 1:
		for alone = range r.listeners[l.key] {
		}
	}
	r.mu.Unlock()
	if alone != nil {
		alone.unparkUnlessSuccessor()
	}
}

// hasSuccessor reports whether another listener than l is open on l's
// address.
func (r *Registry) hasSuccessor(l *Listener) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for other := range r.listeners[l.key] {
		if other != l {
			return true
		}
	}
	return false
}
