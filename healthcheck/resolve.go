package healthcheck

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ResolvedServer is a server HAProxy names by DNS and resolves at run
// time through a resolvers section: a server line's host name (one
// address), or a server-template's (up to its count of slots); its name
// is a host name, whose addresses take Port, or an SRV name
// (_service._proto.name), whose records give each target and its port.
type ResolvedServer struct {
	Name  string
	Port  string // a host name's; "" for an SRV name
	Slots int    // at most this many addresses
}

// IsSRV tells whether the name is an SRV name, as HAProxy reads it: its
// first label begins with an underscore.
func (s ResolvedServer) IsSRV() bool { return strings.HasPrefix(s.Name, "_") }

// Resolving is how ResolvedServers are resolved, as HAProxy's resolvers
// section and the servers' resolve options say.
type Resolving struct {
	// Nameservers are the DNS servers (host:port) asked in turn until
	// one answers; none: the system's resolver (/etc/resolv.conf, as
	// HAProxy's parse-resolv-conf).
	Nameservers []string
	// PreferIPv4: a name's IPv4 addresses, its IPv6 ones only where it
	// has none; else the other way round (HAProxy's resolve-prefer,
	// ipv6 by default).
	PreferIPv4 bool
	// AllowDupIP lets two servers of one backend have one IP address
	// (resolve-opts allow-dup-ip); without it an address already given
	// to an earlier server is skipped, as HAProxy does.
	AllowDupIP bool
	// Timeout bounds the lookups of one resolution of one server.
	Timeout time.Duration
}

// lookups is what Resolve asks: net.Resolver's, or a test's.
type lookups interface {
	LookupIP(ctx context.Context, network, host string) ([]net.IP, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// Resolver resolves ResolvedServers and remembers each one's last
// addresses: a lookup that fails (no answer, a server failure) keeps
// them, as HAProxy keeps a server's address while its hold period for
// that error runs; a valid answer without addresses (the name does not
// exist, or has none) takes them away. It remembers which addresses each
// one's slots took, too: a slot keeps its address while answers still
// have it, as HAProxy's server does.
type Resolver struct {
	how    Resolving
	lookup func(nameserver string) lookups
	mu     sync.Mutex
	last   map[ResolvedServer][]string
	taken  map[ResolvedServer][]string
}

// NewResolver resolves through how's nameservers.
func NewResolver(how Resolving) *Resolver {
	return &Resolver{how: how, lookup: goResolver, last: map[ResolvedServer][]string{}, taken: map[ResolvedServer][]string{}}
}

// goResolver is Go's own DNS client asking nameserver ("": the system's
// resolver, as configured in /etc/resolv.conf).
func goResolver(nameserver string) lookups {
	if nameserver == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, network, nameserver)
	}}
}

// Resolve resolves the servers, in order, and returns their addresses
// (host:port), each server's at most its slots (those it took before
// first, while the answer has them), no address twice (no IP twice
// without AllowDupIP).
func (r *Resolver) Resolve(ctx context.Context, servers []ResolvedServer) []string {
	var all []string
	used := map[string]bool{}
	for _, s := range servers {
		addrs, err := r.resolveOne(ctx, s)
		r.mu.Lock()
		if err != nil {
			addrs = r.last[s]
		} else {
			r.last[s] = addrs
		}
		took := r.fill(s, addrs, used)
		r.taken[s] = took
		r.mu.Unlock()
		all = append(all, took...)
	}
	return all
}

// fill is the addresses s's slots take of addrs: those it took before
// that addrs still has, then the others in addrs' order, skipping an
// address (or an IP) used.
func (r *Resolver) fill(s ResolvedServer, addrs []string, used map[string]bool) []string {
	var took []string
	for _, a := range append(slices.DeleteFunc(slices.Clone(r.taken[s]), func(a string) bool { return !slices.Contains(addrs, a) }), addrs...) {
		key := a
		if !r.how.AllowDupIP {
			key, _, _ = net.SplitHostPort(a)
		}
		if len(took) < s.Slots && !used[key] {
			used[key] = true
			took = append(took, a)
		}
	}
	return took
}

// errNoAnswer is a lookup that no nameserver answered.
var errNoAnswer = errors.New("no nameserver answered")

// resolveOne asks the nameservers in turn; a valid answer without
// addresses is no error.
func (r *Resolver) resolveOne(ctx context.Context, s ResolvedServer) ([]string, error) {
	nameservers := r.how.Nameservers
	if len(nameservers) == 0 {
		nameservers = []string{""}
	}
	err := errNoAnswer
	for _, ns := range nameservers {
		lctx, cancel := ctx, context.CancelFunc(func() {})
		if r.how.Timeout > 0 {
			lctx, cancel = context.WithTimeout(ctx, r.how.Timeout)
		}
		var addrs []string
		addrs, err = r.lookupServer(lctx, r.lookup(ns), s)
		cancel()
		if err == nil {
			return addrs, nil
		}
	}
	return nil, err
}

// lookupServer is the addresses of s by one nameserver: a host name's,
// with s's port; an SRV name's records' targets, each one's address with
// the record's port, in the order of the answer.
func (r *Resolver) lookupServer(ctx context.Context, l lookups, s ResolvedServer) ([]string, error) {
	if !s.IsSRV() {
		ips, err := r.lookupHost(ctx, l, s.Name)
		return joinPort(ips, s.Port), err
	}
	_, records, err := l.LookupSRV(ctx, "", "", s.Name)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, rec := range records {
		ips, err := r.lookupHost(ctx, l, rec.Target)
		if err != nil {
			return nil, err
		}
		if len(ips) > 0 { // one address per record, as HAProxy fills one server per record
			addrs = append(addrs, joinPort(ips[:1], strconv.Itoa(int(rec.Port)))...)
		}
	}
	return addrs, nil
}

// lookupHost is a host's addresses of the preferred family, or of the
// other where it has none.
func (r *Resolver) lookupHost(ctx context.Context, l lookups, host string) ([]net.IP, error) {
	families := []string{"ip6", "ip4"}
	if r.how.PreferIPv4 {
		families = []string{"ip4", "ip6"}
	}
	for _, family := range families {
		ips, err := l.LookupIP(ctx, family, host)
		if notFound(err) {
			continue
		}
		if err != nil || len(ips) > 0 {
			return ips, err
		}
	}
	return nil, nil
}

// notFound tells whether err is a valid answer that has no record: the
// name does not exist, or has none of that type.
func notFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}

func joinPort(ips []net.IP, port string) []string {
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = net.JoinHostPort(ip.String(), port)
	}
	return addrs
}

// Follow resolves servers every refresh, the first a refresh after it is
// called, and gives set each resolution's addresses, until ctx ends.
func (r *Resolver) Follow(ctx context.Context, servers []ResolvedServer, refresh time.Duration, set func([]string)) {
	ticker := time.NewTicker(refresh)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		addrs := r.Resolve(ctx, servers)
		if ctx.Err() != nil {
			return
		}
		set(addrs)
	}
}
