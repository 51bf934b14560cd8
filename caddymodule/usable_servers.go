package caddymodule

import (
	"net/http"
	"strconv"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-ha/caddy-ha/poolcount"
)

func init() {
	caddy.RegisterModule(new(MatchUsableServers))
}

// MatchUsableServers matches requests by how many servers of a pool are
// usable now, as HAProxy's nbsrv(<backend>) in an ACL: the count an
// upstream source publishes under a name (dynamic checked's name),
// compared with a number. A name nothing publishes counts 0.
//
// In a CEL expression, usable_servers("<name>") is that count itself, an
// int: expression `usable_servers("app") == 0`. Each request reads the
// count afresh, as one atomic load.
type MatchUsableServers struct {
	// The name the count is published under. Required.
	Name string `json:"name,omitempty"`
	// How the count compares with count: eq, lt, le, gt or ge (HAProxy's
	// operators). Required.
	Compare string `json:"compare,omitempty"`
	// The number the count is compared with. Default: 0.
	Count int `json:"count,omitempty"`

	holds func(usable, count int) bool
}

// usableServersCompare are the comparisons, by name.
var usableServersCompare = map[string]func(usable, count int) bool{
	"eq": func(u, n int) bool { return u == n },
	"lt": func(u, n int) bool { return u < n },
	"le": func(u, n int) bool { return u <= n },
	"gt": func(u, n int) bool { return u > n },
	"ge": func(u, n int) bool { return u >= n },
}

const usableServersModule = "usable_servers"

// CaddyModule returns the Caddy module information.
func (*MatchUsableServers) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.matchers.usable_servers", New: func() caddy.Module { return new(MatchUsableServers) }}
}

// Provision picks the comparison.
func (m *MatchUsableServers) Provision(caddy.Context) error {
	if err := m.Validate(); err != nil {
		return err
	}
	m.holds = usableServersCompare[m.Compare]
	return nil
}

// Validate checks the name and the comparison.
func (m *MatchUsableServers) Validate() error {
	switch {
	case m.Name == "":
		return badSetting(usableServersModule, "name", "is required")
	case usableServersCompare[m.Compare] == nil:
		return badSetting(usableServersModule, "compare", "must be eq, lt, le, gt or ge, not %q", m.Compare)
	}
	return nil
}

// usableServers is the count published under name, 0 if none is.
func usableServers(name string) int {
	n, _ := poolcount.Usable(name)
	return n
}

// MatchWithError tells whether the count compares with count as asked.
func (m *MatchUsableServers) MatchWithError(*http.Request) (bool, error) {
	return m.holds(usableServers(m.Name), m.Count), nil
}

// Match implements caddyhttp.RequestMatcher.
func (m *MatchUsableServers) Match(r *http.Request) bool {
	ok, _ := m.MatchWithError(r)
	return ok
}

// CELLibrary declares usable_servers(<name>) in Caddy's expression
// matcher: the count published under name, an int.
func (*MatchUsableServers) CELLibrary(caddy.Context) (cel.Library, error) {
	count := cel.Function(usableServersModule, cel.Overload(usableServersModule+"_string", []*cel.Type{cel.StringType}, cel.IntType,
		cel.UnaryBinding(func(name ref.Val) ref.Val { return types.Int(usableServers(string(name.(types.String)))) })))
	return caddyhttp.NewMatcherCELLibrary([]cel.EnvOption{count}, nil), nil
}

// UnmarshalCaddyfile sets up the matcher. Syntax:
//
//	usable_servers <name> eq|lt|le|gt|ge <count>
func (m *MatchUsableServers) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the matcher's name
	args := d.RemainingArgs()
	if len(args) != 3 {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n < 0 {
		return d.Errf("usable_servers: count must be a whole number, got %s", args[2])
	}
	m.Name, m.Compare, m.Count = args[0], args[1], n
	if err := m.Validate(); err != nil {
		return d.Errf("%v", err)
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner                 = (*MatchUsableServers)(nil)
	_ caddy.Validator                   = (*MatchUsableServers)(nil)
	_ caddyhttp.RequestMatcherWithError = (*MatchUsableServers)(nil)
	_ caddyhttp.CELLibraryProducer      = (*MatchUsableServers)(nil)
	_ caddyfile.Unmarshaler             = (*MatchUsableServers)(nil)
)
