package caddymodule

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(new(BackupSelection))
}

// BackupSelection is HAProxy's backup servers as a selection policy: the
// upstreams it names as backups get requests only when no other upstream
// (a primary) is up. The primaries are balanced by primary_policy; when
// none of them is up (none is healthy, or primary_policy takes none of
// them, as weighted_round_robin does not take a weight of 0), the first
// backup that is up, in the upstreams' order, gets every request, or with
// all_backups the backups that are up are balanced by backup_policy. A
// primary that is up but full (at its max_requests) is not down: the
// request waits for it (lb_try_duration) rather than going to a backup,
// as HAProxy queues for a server at its maxconn.
//
// It is what the haproxy adapter and caddy ha migrate write for backup
// servers and option allbackups; documented in docs/haproxy.md.
type BackupSelection struct {
	// The backup upstreams, by dial address as the reverse_proxy's
	// upstreams are (host:port): the others are the primaries. Required.
	Backups []string `json:"backups,omitempty"`
	// The policy that balances the primaries (a module of
	// http.reverse_proxy.selection_policies). It sees the primaries only,
	// in the upstreams' order (weighted_round_robin's weights are theirs).
	// Default: round_robin.
	PrimaryPolicyRaw json.RawMessage `json:"primary_policy,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`
	// With no primary up, balance every backup that is up by
	// backup_policy (HAProxy's option allbackups) instead of sending
	// everything to the first. Default: off.
	AllBackups bool `json:"all_backups,omitempty"`
	// The policy that balances the backups with all_backups; it sees the
	// backups only, in the upstreams' order. Default: one of its own
	// configured as primary_policy is.
	BackupPolicyRaw json.RawMessage `json:"backup_policy,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`

	backup        map[string]bool
	primary       reverseproxy.Selector
	backupsPolicy reverseproxy.Selector
	logger        *zap.Logger
	dynamic       bool        // the pool is dynamic upstreams: a backup missing from it is down, not misnamed
	warned        atomic.Bool // a backup missing from the pool was logged
}

// CaddyModule returns the Caddy module information.
func (*BackupSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.selection_policies.backup", New: func() caddy.Module { return new(BackupSelection) }}
}

const backupModule = "lb_policy backup"

// Validate checks the settings: Caddy calls it after Provision, the
// Caddyfile adapter after the block. The upstreams are the
// reverse_proxy's, which a policy does not see before it selects: a
// backup that is not among static upstreams is logged at the first
// request; one that is not among dynamic checked's servers fails
// Provision.
func (s *BackupSelection) Validate() error {
	if len(s.Backups) == 0 {
		return badSetting(backupModule, "backups", "names no upstream: without backups, use primary_policy itself")
	}
	seen := map[string]bool{}
	for _, b := range s.Backups {
		if seen[b] {
			return badSetting(backupModule, "backups", "names %s twice", b)
		}
		seen[b] = true
		if strings.Contains(b, "{") { // a placeholder: matched as written
			continue
		}
		addr, err := caddy.ParseNetworkAddress(b)
		if err != nil || strings.Contains(b, "://") || !addr.IsUnixNetwork() && (addr.StartPort == 0 || addr.PortRangeSize() != 1) {
			return badSetting(backupModule, "backups", "%q is not an upstream's dial address (host:port, as reverse_proxy dials it)", b)
		}
	}
	if s.BackupPolicyRaw != nil && !s.AllBackups {
		return badSetting(backupModule, "backup_policy", "is used only with all_backups (without it the first backup up gets every request)")
	}
	return nil
}

// Provision loads the nested policies.
func (s *BackupSelection) Provision(ctx caddy.Context) error {
	s.logger = ctx.Logger()
	if err := s.Validate(); err != nil {
		return err
	}
	s.backup = map[string]bool{}
	for _, b := range s.Backups {
		s.backup[b] = true
	}
	if h := enclosingProxy(ctx); h != nil && h.DynamicUpstreamsRaw != nil {
		s.dynamic = true
		if servers, ok := checkedServers(h.DynamicUpstreamsRaw); ok {
			for _, b := range s.Backups {
				if !slices.Contains(servers, b) {
					return badSetting(backupModule, "backups", "%s is not one of dynamic checked's servers", b)
				}
			}
		}
	}
	if s.PrimaryPolicyRaw == nil {
		s.PrimaryPolicyRaw = caddyconfig.JSONModuleObject(new(reverseproxy.RoundRobinSelection), "policy", "round_robin", nil)
	}
	if s.AllBackups && s.BackupPolicyRaw == nil {
		s.BackupPolicyRaw = slices.Clone(s.PrimaryPolicyRaw) // its own state (a round robin's turn)
	}
	mod, err := ctx.LoadModule(s, "PrimaryPolicyRaw")
	if err != nil {
		return badSetting(backupModule, "primary_policy", "%v", err)
	}
	s.primary = mod.(reverseproxy.Selector)
	if s.AllBackups {
		mod, err := ctx.LoadModule(s, "BackupPolicyRaw")
		if err != nil {
			return badSetting(backupModule, "backup_policy", "%v", err)
		}
		s.backupsPolicy = mod.(reverseproxy.Selector)
	}
	return nil
}

// Select picks a primary by primary_policy, else a backup; see
// BackupSelection.
func (s *BackupSelection) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	var primaries, backups reverseproxy.UpstreamPool
	for _, u := range pool {
		if s.backup[u.Dial] {
			backups = append(backups, u)
		} else {
			primaries = append(primaries, u)
		}
	}
	if !s.dynamic && len(backups) < len(s.Backups) && !s.warned.Swap(true) {
		var missing []string
		for _, b := range s.Backups {
			if !slices.ContainsFunc(backups, func(u *reverseproxy.Upstream) bool { return u.Dial == b }) {
				missing = append(missing, b)
			}
		}
		s.logger.Warn("backups that are not upstreams of this reverse_proxy are never used", zap.Strings("missing", missing))
	}
	pick := func(sel reverseproxy.Selector) func(reverseproxy.UpstreamPool) *reverseproxy.Upstream {
		return func(group reverseproxy.UpstreamPool) *reverseproxy.Upstream {
			if len(group) == 0 {
				return nil
			}
			return sel.Select(group, r, w)
		}
	}
	var balanceBackups func(reverseproxy.UpstreamPool) *reverseproxy.Upstream
	if s.AllBackups {
		balanceBackups = pick(s.backupsPolicy)
	}
	return backupChoice(primaries, backups, (*reverseproxy.Upstream).Healthy, (*reverseproxy.Upstream).Full,
		pick(s.primary), balanceBackups)
}

// backupChoice is lb_policy backup's choice: what balance picks among the
// primaries; when it picks none and no primary is merely full (up, but
// at its limit of requests), the first backup that is up (none if it is
// full), or, given balanceBackups, what that picks among the backups.
func backupChoice[U comparable, P ~[]U](primaries, backups P, up, full func(U) bool, balance, balanceBackups func(P) U) U {
	var none U
	if u := balance(primaries); u != none {
		return u
	}
	if slices.ContainsFunc(primaries, func(u U) bool { return up(u) && full(u) }) {
		return none
	}
	if balanceBackups != nil {
		return balanceBackups(backups)
	}
	for _, u := range backups {
		if up(u) {
			if full(u) {
				return none
			}
			return u
		}
	}
	return none
}

// UnmarshalCaddyfile sets up the policy. Syntax:
//
//	lb_policy backup {
//		backups        <dial address>...
//		primary_policy <policy> [<args...>]
//		all_backups
//		backup_policy  <policy> [<args...>]
//	}
func (s *BackupSelection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, s, nil, func(opt string) error {
		var err error
		switch opt {
		case "backups":
			s.Backups = d.RemainingArgs()
			if len(s.Backups) == 0 {
				err = d.ArgErr()
			}
		case "primary_policy":
			s.PrimaryPolicyRaw, err = moduleArg(d, "http.reverse_proxy.selection_policies", "policy")
		case "all_backups":
			s.AllBackups = true
		case "backup_policy":
			s.BackupPolicyRaw, err = moduleArg(d, "http.reverse_proxy.selection_policies", "policy")
		default:
			err = d.Errf("unrecognized lb_policy backup option '%s'", opt)
		}
		return err
	})
}

// Interface guards
var (
	_ caddy.Provisioner     = (*BackupSelection)(nil)
	_ caddy.Validator       = (*BackupSelection)(nil)
	_ reverseproxy.Selector = (*BackupSelection)(nil)
	_ caddyfile.Unmarshaler = (*BackupSelection)(nil)
)
