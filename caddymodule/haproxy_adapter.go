package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

func init() {
	caddyconfig.RegisterAdapter("haproxy", HAProxyAdapter{})
}

// HAProxyAdapter is the config adapter "haproxy": caddy run --adapter
// haproxy --config haproxy.cfg runs an HAProxy configuration as it is.
// It is the Caddyfile that caddy ha migrate prints, adapted as Caddy
// adapts any Caddyfile, so both give the same JSON. A keyword that is not
// translated is an error with its file and line; a line translated close
// to but not exactly as HAProxy runs it is a warning with its file and
// line (caddy adapt prints them), and a comment in the Caddyfile.
type HAProxyAdapter struct{}

// Adapt translates an HAProxy configuration into Caddy's JSON.
func (HAProxyAdapter) Adapt(body []byte, options map[string]any) ([]byte, []caddyconfig.Warning, error) {
	file, _ := options["filename"].(string)
	tr, err := migrate(body, file)
	if err != nil {
		return nil, nil, err
	}
	approximated := make([]caddyconfig.Warning, 0, len(tr.Warnings))
	for _, w := range tr.Warnings {
		approximated = append(approximated, caddyconfig.Warning{File: w.Pos.File, Line: w.Pos.Line, Message: w.Msg})
	}
	// What caddyfile.Adapter does, but for its check of the layout, whose
	// warning is about the translation's own (and costs a sixth of a long
	// block list's time): the same JSON as caddy adapt of migrate's text.
	name := file + " (as caddy ha migrate writes it)"
	blocks, err := caddyfile.Parse(name, []byte(tr.Caddyfile))
	if err == nil {
		var cfg *caddy.Config
		var warnings []caddyconfig.Warning
		if cfg, warnings, err = (httpcaddyfile.ServerType{}).Setup(blocks, map[string]any{"filename": name}); err == nil {
			if err := setBeyond(cfg, tr.Beyond); err != nil {
				return nil, nil, err
			}
			out, err := json.Marshal(cfg)
			return out, append(approximated, warnings...), err
		}
	}
	return nil, nil, fmt.Errorf("the translation of %s does not adapt (a caddy-ha bug): %v", file, err)
}

// setBeyond sets in cfg what the translation asks for beyond its
// Caddyfile (which says so at its top).
func setBeyond(cfg *caddy.Config, b haproxy.Beyond) error {
	if b.SessionTicketsOff == nil {
		return nil
	}
	// The TLS app as the Caddyfile made it, every other field kept as it
	// is; its session tickets off.
	app := map[string]json.RawMessage{}
	if raw := cfg.AppsRaw["tls"]; raw != nil {
		if err := json.Unmarshal(raw, &app); err != nil {
			return err
		}
	}
	var tickets caddytls.SessionTicketService
	if raw := app["session_tickets"]; raw != nil {
		if err := json.Unmarshal(raw, &tickets); err != nil {
			return err
		}
	}
	tickets.Disabled = true
	var err error
	if app["session_tickets"], err = json.Marshal(tickets); err != nil {
		return err
	}
	if cfg.AppsRaw == nil {
		cfg.AppsRaw = caddy.ModuleMap{}
	}
	cfg.AppsRaw["tls"], err = json.Marshal(app)
	return err
}

// migrate is the translation of the HAProxy configuration body, read
// from file, with the process's environment.
func migrate(body []byte, file string) (haproxy.Translation, error) {
	cfg, err := parseHAProxy(body, file)
	if err != nil {
		return haproxy.Translation{}, err
	}
	return haproxy.Translate(cfg)
}

// parseHAProxy reads the HAProxy configuration body, read from file, with
// the process's environment.
func parseHAProxy(body []byte, file string) (*haproxy.Config, error) {
	return haproxy.Parse(bytes.NewReader(body), file, os.LookupEnv)
}

// Interface guards
var _ caddyconfig.Adapter = HAProxyAdapter{}
