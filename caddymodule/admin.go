package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

func init() {
	caddy.RegisterModule(AdminLeader{})
}

// AdminLeader serves GET /ha/leader on Caddy's admin endpoint: each
// leader pool's view (leader, epoch, every node's probe state) as JSON.
type AdminLeader struct{}

// CaddyModule returns the Caddy module information.
func (AdminLeader) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.ha_leader",
		New: func() caddy.Module { return new(AdminLeader) },
	}
}

// Routes returns the admin routes.
func (AdminLeader) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/ha/leader", Handler: caddy.AdminHandlerFunc(serveLeaderViews)}}
}

func serveLeaderViews(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("method not allowed")}
	}
	views := []healthcheck.PoolView{}
	leaderPools.Range(func(_, value any) bool {
		views = append(views, value.(*leaderPool).mon.View())
		return true
	})
	sort.Slice(views, func(i, j int) bool { return views[i].Pool < views[j].Pool })
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(views)
}

// Interface guards
var _ caddy.AdminRouter = AdminLeader{}
