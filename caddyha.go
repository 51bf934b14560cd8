// Package caddyha plugs caddy-ha's modules into Caddy: import it (or build
// with xcaddy --with github.com/caddy-ha/caddy-ha) to get them all.
package caddyha

import (
	// The Caddy modules.
	_ "github.com/caddy-ha/caddy-ha/caddymodule"
)
