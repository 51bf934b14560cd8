package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(AdminStatus{})
}

// AdminStatus serves the operator's view on Caddy's admin endpoint, as
// JSON: GET /ha/status is the whole view (what ha_status's page shows and
// `caddy ha status` prints), GET /ha/leader its leader pools alone.
type AdminStatus struct{}

// CaddyModule returns the Caddy module information.
func (AdminStatus) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.ha",
		New: func() caddy.Module { return new(AdminStatus) },
	}
}

// Routes returns the admin routes.
func (AdminStatus) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/ha/status", Handler: adminView(func() any { return currentStatus() })},
		{Pattern: "/ha/leader", Handler: adminView(func() any { return currentStatus().LeaderPools })},
	}
}

// adminView answers GET with view's JSON, as Caddy's own
// /reverse_proxy/upstreams does.
func adminView(view func() any) caddy.AdminHandler {
	return caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet {
			return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("method not allowed")}
		}
		return writeStatusJSON(w, view())
	})
}

// Interface guards
var _ caddy.AdminRouter = AdminStatus{}
