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

	"github.com/caddy-ha/caddy-ha/haproxy"
)

func init() {
	caddyconfig.RegisterAdapter("haproxy", HAProxyAdapter{})
}

// HAProxyAdapter is the config adapter "haproxy": caddy run --adapter
// haproxy --config haproxy.cfg runs an HAProxy configuration as it is.
// It is the Caddyfile that caddy ha migrate prints, adapted as Caddy
// adapts any Caddyfile, so both give the same JSON. A keyword that is not
// translated is an error with its file and line, never a warning.
type HAProxyAdapter struct{}

// Adapt translates an HAProxy configuration into Caddy's JSON.
func (HAProxyAdapter) Adapt(body []byte, options map[string]any) ([]byte, []caddyconfig.Warning, error) {
	file, _ := options["filename"].(string)
	text, err := migrate(body, file)
	if err != nil {
		return nil, nil, err
	}
	// What caddyfile.Adapter does, but for its check of the layout, whose
	// warning is about the translation's own (and costs a sixth of a long
	// block list's time): the same JSON as caddy adapt of migrate's text.
	name := file + " (as caddy ha migrate writes it)"
	blocks, err := caddyfile.Parse(name, []byte(text))
	if err == nil {
		var cfg *caddy.Config
		var warnings []caddyconfig.Warning
		if cfg, warnings, err = (httpcaddyfile.ServerType{}).Setup(blocks, map[string]any{"filename": name}); err == nil {
			out, err := json.Marshal(cfg)
			return out, warnings, err
		}
	}
	return nil, nil, fmt.Errorf("the translation of %s does not adapt (a caddy-ha bug): %v", file, err)
}

// migrate is the Caddyfile of the HAProxy configuration body, read from
// file, with the process's environment.
func migrate(body []byte, file string) (string, error) {
	cfg, err := haproxy.Parse(bytes.NewReader(body), file, os.LookupEnv)
	if err != nil {
		return "", err
	}
	return haproxy.Translate(cfg)
}

// Interface guards
var _ caddyconfig.Adapter = HAProxyAdapter{}
