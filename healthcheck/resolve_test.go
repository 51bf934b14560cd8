package healthcheck

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// fakeDNS answers lookups from its tables; a name in fail fails (no
// answer), a name in neither table does not exist.
type fakeDNS struct {
	ip   map[string][]net.IP // by network/name: "ip4/app"
	srv  map[string][]*net.SRV
	fail map[string]bool
}

func (f *fakeDNS) LookupIP(_ context.Context, network, host string) ([]net.IP, error) {
	if f.fail[host] {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	ips, ok := f.ip[network+"/"+host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return ips, nil
}

func (f *fakeDNS) LookupSRV(_ context.Context, _, _, name string) (string, []*net.SRV, error) {
	if f.fail[name] {
		return "", nil, &net.DNSError{Err: "server misbehaving", Name: name, IsTemporary: true}
	}
	recs, ok := f.srv[name]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return name, recs, nil
}

func ips(s ...string) []net.IP {
	out := make([]net.IP, len(s))
	for i, v := range s {
		out[i] = net.ParseIP(v)
	}
	return out
}

func fakeResolver(how Resolving, f *fakeDNS) *Resolver {
	r := NewResolver(how)
	r.lookup = func(string) lookups { return f }
	return r
}

// As HAProxy fills a server's (or a template's) slots: the preferred
// family's addresses, the other's where the name has none; at most the
// slots; no IP twice in the backend unless allow-dup-ip; an SRV record's
// target with its port.
func TestResolverFillsSlotsAsHAProxy(t *testing.T) {
	f := &fakeDNS{ip: map[string][]net.IP{
		"ip4/app": ips("10.0.0.1", "10.0.0.2", "10.0.0.3"), "ip6/app": ips("fd00::1"),
		"ip4/v4only": ips("10.0.0.9"),
		"ip4/other":  ips("10.0.0.1", "10.0.0.4"),
		"ip4/t1":     ips("10.0.1.1"), "ip4/t2": ips("10.0.1.2"),
	}, srv: map[string][]*net.SRV{"_api._tcp.svc": {{Target: "t1", Port: 8001}, {Target: "t2", Port: 8002}, {Target: "t1", Port: 8003}}}}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		how     Resolving
		servers []ResolvedServer
		want    []string
	}{
		{"ipv6 preferred", Resolving{}, []ResolvedServer{{"app", "80", 5}}, []string{"[fd00::1]:80"}},
		{"ipv4 preferred, at most the slots", Resolving{PreferIPv4: true}, []ResolvedServer{{"app", "80", 2}}, []string{"10.0.0.1:80", "10.0.0.2:80"}},
		{"the other family where none", Resolving{}, []ResolvedServer{{"v4only", "8080", 3}}, []string{"10.0.0.9:8080"}},
		{"no IP twice", Resolving{PreferIPv4: true}, []ResolvedServer{{"app", "80", 1}, {"other", "81", 2}}, []string{"10.0.0.1:80", "10.0.0.4:81"}},
		{"allow-dup-ip", Resolving{PreferIPv4: true, AllowDupIP: true}, []ResolvedServer{{"app", "80", 1}, {"other", "81", 2}}, []string{"10.0.0.1:80", "10.0.0.1:81", "10.0.0.4:81"}},
		{"SRV, no IP twice", Resolving{}, []ResolvedServer{{"_api._tcp.svc", "", 10}}, []string{"10.0.1.1:8001", "10.0.1.2:8002"}},
		{"SRV, allow-dup-ip", Resolving{AllowDupIP: true}, []ResolvedServer{{"_api._tcp.svc", "", 10}}, []string{"10.0.1.1:8001", "10.0.1.2:8002", "10.0.1.1:8003"}},
		{"a name that does not exist", Resolving{}, []ResolvedServer{{"gone", "80", 3}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fakeResolver(tc.how, f).Resolve(ctx, tc.servers); !slices.Equal(got, tc.want) {
				t.Errorf("Resolve = %v, want %v", got, tc.want)
			}
		})
	}
}

// A lookup that fails keeps the last answer's addresses; an answer that
// the name does not exist takes them away.
func TestResolverKeepsAddressesWhileLookupsFail(t *testing.T) {
	f := &fakeDNS{ip: map[string][]net.IP{"ip4/app": ips("10.0.0.1")}, fail: map[string]bool{}}
	r := fakeResolver(Resolving{PreferIPv4: true}, f)
	servers := []ResolvedServer{{"app", "80", 1}}
	want := []string{"10.0.0.1:80"}
	if got := r.Resolve(context.Background(), servers); !slices.Equal(got, want) {
		t.Fatalf("first: %v, want %v", got, want)
	}
	f.fail["app"] = true
	if got := r.Resolve(context.Background(), servers); !slices.Equal(got, want) {
		t.Errorf("while failing: %v, want the last answer's %v", got, want)
	}
	f.fail["app"] = false
	delete(f.ip, "ip4/app")
	if got := r.Resolve(context.Background(), servers); len(got) != 0 {
		t.Errorf("after NXDOMAIN: %v, want none", got)
	}
}

// Nameservers are asked in turn until one answers.
func TestResolverAsksTheNextNameserver(t *testing.T) {
	good := &fakeDNS{ip: map[string][]net.IP{"ip4/app": ips("10.0.0.1")}}
	bad := &fakeDNS{fail: map[string]bool{"app": true}}
	r := NewResolver(Resolving{Nameservers: []string{"bad:53", "good:53"}, PreferIPv4: true})
	r.lookup = func(ns string) lookups {
		if ns == "bad:53" {
			return bad
		}
		return good
	}
	if got := r.Resolve(context.Background(), []ResolvedServer{{"app", "80", 1}}); !slices.Equal(got, []string{"10.0.0.1:80"}) {
		t.Errorf("Resolve = %v", got)
	}
}

// SetServers checks a new server at once, keeps an old one's health, and
// stops checking one no longer given.
func TestServerCheckerSetServers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	down := closed.Addr().String()
	closed.Close()
	events := &checkEvents{}
	c, err := NewServerChecker(nil, ServerCheck{Interval: 20 * time.Millisecond, Fall: 1}, nil, events)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Close()
	up := ln.Addr().String()
	c.SetServers([]string{up, down})
	if n := c.Usable(); n != 2 {
		t.Errorf("Usable() = %d after SetServers of two new servers, want 2 (each starts up)", n)
	}
	poll.Until(t, 5*time.Second, "the refused server down", func() bool { return slices.Equal(c.Up(), []string{up}) && c.Usable() == 1 })
	c.SetServers([]string{down, up})
	if h, ok := c.Health(down); !ok || h != 0 {
		t.Errorf("Health(%s) = %d, %t after SetServers: want its health kept, 0", down, h, ok)
	}
	c.SetServers([]string{up})
	if _, ok := c.Health(down); ok {
		t.Errorf("%s is still a server", down)
	}
	c.SetServers(nil)
	if n := c.Usable(); n != 0 {
		t.Errorf("Usable() = %d without servers, want 0", n)
	}
	c.SetServers([]string{up})
	// A check of down under way may still end; none starts after it.
	downChecks, upChecks := len(checksOf(events.all(), down)), len(checksOf(events.all(), up))
	poll.Until(t, 5*time.Second, "three checks of "+up+" after "+down+" left", func() bool { return len(checksOf(events.all(), up)) >= upChecks+3 })
	if n := len(checksOf(events.all(), down)); n > downChecks+1 {
		t.Errorf("%s checked %d more times after it left", down, n-downChecks)
	}
}

// A slot keeps its address while the answers still have it, whatever
// their order, as HAProxy's server does; one gone is replaced.
func TestResolverKeepsEachSlotsAddress(t *testing.T) {
	f := &fakeDNS{ip: map[string][]net.IP{"ip4/app": ips("10.0.0.1", "10.0.0.2", "10.0.0.3")}}
	r := fakeResolver(Resolving{PreferIPv4: true}, f)
	servers := []ResolvedServer{{"app", "80", 2}}
	for _, step := range []struct {
		answer []net.IP
		want   []string
	}{
		{ips("10.0.0.1", "10.0.0.2", "10.0.0.3"), []string{"10.0.0.1:80", "10.0.0.2:80"}},
		{ips("10.0.0.3", "10.0.0.2", "10.0.0.1"), []string{"10.0.0.1:80", "10.0.0.2:80"}},
		{ips("10.0.0.3", "10.0.0.1"), []string{"10.0.0.1:80", "10.0.0.3:80"}},
	} {
		f.ip["ip4/app"] = step.answer
		if got := r.Resolve(context.Background(), servers); !slices.Equal(got, step.want) {
			t.Errorf("answer %v: %v, want %v", step.answer, got, step.want)
		}
	}
}
