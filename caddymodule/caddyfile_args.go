package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The argument readers every directive's Caddyfile parsing shares: each
// reads the one argument of option opt into dst, or reports the line.

func durationArg(d *caddyfile.Dispenser, opt string, dst *caddy.Duration) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	dur, err := caddy.ParseDuration(d.Val())
	if err != nil {
		return d.Errf("%s: %v", opt, err)
	}
	if dur <= 0 {
		return d.Errf("%s must be positive, got %s", opt, d.Val())
	}
	*dst = caddy.Duration(dur)
	return nil
}

func countArg(d *caddyfile.Dispenser, opt string, dst *int) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return d.Errf("%s must be a whole number of at least 1, got %s", opt, d.Val())
	}
	*dst = n
	return nil
}

func stringArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	return nil
}

// noMoreArgs fails when opt, a flag or a one-argument option, has more.
func noMoreArgs(d *caddyfile.Dispenser, opt string) error {
	if d.NextArg() {
		return d.Errf("%s: too many arguments", opt)
	}
	return nil
}
