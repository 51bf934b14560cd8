// Command caddy is Caddy with its standard modules and caddy-ha's.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-ha/caddy-ha"
)

func main() {
	caddycmd.Main()
}
