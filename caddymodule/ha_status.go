package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-ha/caddy-ha/status"
)

func init() {
	caddy.RegisterModule(HAStatus{})
	httpcaddyfile.RegisterHandlerDirective("ha_status", parseHAStatus)
	httpcaddyfile.RegisterDirectiveOrder("ha_status", httpcaddyfile.After, "metrics")
}

// HAStatus serves the operator's view of caddy-ha, the way Caddy's metrics
// handler serves metrics: mount it where only operators reach it (behind
// basic_auth, or on an internal address). It answers an HTML page, one
// section per capability, that refreshes itself and needs no script or
// external asset; or the same view as JSON, for `?format=json` or a
// request that accepts application/json before text/html.
type HAStatus struct {
	// How often the page reloads itself; -1 (off in the Caddyfile) never.
	// Default: 5s.
	Refresh caddy.Duration `json:"refresh,omitempty"`
}

const defaultStatusRefresh = 5 * time.Second

// CaddyModule returns the Caddy module information.
func (HAStatus) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.ha_status", New: func() caddy.Module { return new(HAStatus) }}
}

func (h *HAStatus) setDefaults() {
	if h.Refresh == 0 {
		h.Refresh = caddy.Duration(defaultStatusRefresh)
	}
}

// Provision sets the defaults.
func (h *HAStatus) Provision(caddy.Context) error {
	h.setDefaults()
	return nil
}

// Validate checks the settings, unset ones at their defaults.
func (h *HAStatus) Validate() error {
	v := *h
	v.setDefaults()
	if v.Refresh < -1 || v.Refresh > 0 && v.Refresh < caddy.Duration(time.Second) {
		return badSetting("ha_status", "refresh", "must be at least 1s, or off")
	}
	return nil
}

// ServeHTTP answers the status page or its JSON.
func (h *HAStatus) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return caddyhttp.Error(http.StatusMethodNotAllowed, nil)
	}
	v := currentStatus()
	w.Header().Set("Cache-Control", "no-store")
	if wantsJSON(r) {
		return writeStatusJSON(w, v)
	}
	var page bytes.Buffer
	if err := status.WriteHTML(&page, v, max(time.Duration(h.Refresh), 0)); err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err := page.WriteTo(w)
	return err
}

// wantsJSON: ?format=json, or an Accept that prefers application/json to
// text/html (an equal preference, as */* gives, is HTML).
func wantsJSON(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "json"
	}
	accept := r.Header.Get("Accept")
	return acceptQuality(accept, "application/json") > acceptQuality(accept, "text/html")
}

// acceptQuality is the q-value that Accept gives media type mediaType:
// that of its most specific matching range, 0 if none, 1 with no Accept.
func acceptQuality(accept, mediaType string) float64 {
	if strings.TrimSpace(accept) == "" {
		return 1
	}
	major, _, _ := strings.Cut(mediaType, "/")
	best, bestSpecificity := 0.0, -1
	for _, part := range strings.Split(accept, ",") {
		params := strings.Split(part, ";")
		specificity := -1
		switch strings.ToLower(strings.TrimSpace(params[0])) {
		case mediaType:
			specificity = 2
		case major + "/*":
			specificity = 1
		case "*/*":
			specificity = 0
		}
		if specificity <= bestSpecificity {
			continue
		}
		q := 1.0
		for _, p := range params[1:] {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		best, bestSpecificity = q, specificity
	}
	return best
}

func writeStatusJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseHAStatus parses the directive. Syntax:
//
//	ha_status [<matcher>] {
//		refresh <duration>|off
//	}
func parseHAStatus(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(HAStatus)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens.
func (h *HAStatus) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, h, nil, func(opt string) error {
		switch opt {
		case "refresh":
			if !d.NextArg() {
				return d.ArgErr()
			}
			if d.Val() == "off" {
				h.Refresh = -1
				return nil
			}
			d.Prev()
			return durationArg(d, opt, &h.Refresh)
		default:
			return d.Errf("unrecognized ha_status option '%s'", opt)
		}
	})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*HAStatus)(nil)
	_ caddy.Validator             = (*HAStatus)(nil)
	_ caddyhttp.MiddlewareHandler = (*HAStatus)(nil)
	_ caddyfile.Unmarshaler       = (*HAStatus)(nil)
)
