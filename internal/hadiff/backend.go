package hadiff

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	// RequestHeader carries the harness's number of a request, by which a
	// backend files what it saw; a request without it is a health check.
	RequestHeader = "X-Hadiff-Request"
	// ServerHeader is the answer's: the server that answered (Server.ID).
	ServerHeader = "X-Hadiff-Server"
	// RespondHeader asks a backend for a response header: each line
	// "<name>: <value>" is a line of its answer (for the configuration's
	// rules that rewrite what a server answers).
	RespondHeader = "X-Hadiff-Respond"
)

// Seen is what a recording backend saw of one request.
type Seen struct {
	Server string // Server.ID
	Line   string // the request line: method, target, protocol
	Header http.Header
}

// Backends are recording HTTP backends, one per server line: each answers
// every request 200 with its ID (ServerHeader and the body) and the
// headers RespondHeader asks for, health checks too, and files the request line and headers of each request
// that carries RequestHeader.
type Backends struct {
	mu      sync.Mutex
	seen    map[string][]Seen
	servers []*http.Server
}

// NewBackends makes an empty set; Start adds to it, Close ends them all.
func NewBackends() *Backends { return &Backends{seen: map[string][]Seen{}} }

// Start listens on a loopback port for the server id, speaking HTTP/1.1,
// and returns its address.
func (b *Backends) Start(id string) (string, error) { return b.start(id, nil) }

// StartH2C is Start for a server that speaks HTTP/2 in clear only, by
// prior knowledge (HAProxy's proto h2; a gRPC server without TLS).
func (b *Backends) StartH2C(id string) (string, error) {
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	return b.start(id, &h2c)
}

// start is Start with the protocols the server speaks (nil: HTTP/1.1).
func (b *Backends) start(id string, protocols *http.Protocols) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Protocols: protocols, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := r.Header.Get(RequestHeader); n != "" {
			h := r.Header.Clone()
			h.Set("Host", r.Host) // Go's server keeps it apart
			b.mu.Lock()
			b.seen[n] = append(b.seen[n], Seen{Server: id, Line: r.Method + " " + r.RequestURI + " " + r.Proto, Header: h})
			b.mu.Unlock()
		}
		for _, line := range r.Header.Values(RespondHeader) {
			if name, v, ok := strings.Cut(line, ": "); ok {
				w.Header().Add(name, v)
			}
		}
		w.Header().Set(ServerHeader, id)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(id + "\n"))
	})}
	b.mu.Lock()
	b.servers = append(b.servers, srv)
	b.mu.Unlock()
	go srv.Serve(ln) //nolint:errcheck // until Close
	return ln.Addr().String(), nil
}

// Seen is what the backends saw of the request numbered n, in order.
func (b *Backends) Seen(n string) []Seen {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Seen(nil), b.seen[n]...)
}

// Close stops every backend.
func (b *Backends) Close() {
	b.mu.Lock()
	servers := b.servers
	b.servers = nil
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, s := range servers {
		if s.Shutdown(ctx) != nil {
			s.Close()
		}
	}
}
