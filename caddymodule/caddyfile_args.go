package caddymodule

import (
	"encoding/json"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
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

// parseDirective reads a directive's (or module's) name, which takes no
// arguments, then its block of options; see parseOptions.
func parseDirective(d *caddyfile.Dispenser, option func(name string) error) error {
	d.Next() // the name
	if d.NextArg() {
		return d.ArgErr()
	}
	return parseOptions(d, option)
}

// parseOptions reads the block that opens at the current token, handing
// each option's name to option, which reads its arguments; an option left
// with arguments it did not read fails with its line.
func parseOptions(d *caddyfile.Dispenser, option func(name string) error) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		if err := option(name); err != nil {
			return err
		}
		if err := noMoreArgs(d, name); err != nil {
			return err
		}
	}
	return nil
}

// onOffArg reads the argument of an on|off option.
func onOffArg(d *caddyfile.Dispenser, opt string) (bool, error) {
	var v string
	if err := stringArg(d, &v); err != nil {
		return false, err
	}
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, d.Errf("%s must be on or off, got %s", opt, v)
}

// moduleArg reads `<name> [<args...>] [{ … }]` as a module of namespace
// ns, in JSON with inlineKey naming it.
func moduleArg(d *caddyfile.Dispenser, ns, inlineKey string) (json.RawMessage, error) {
	var name string
	if err := stringArg(d, &name); err != nil {
		return nil, err
	}
	mod, err := caddyfile.UnmarshalModule(d, ns+"."+name)
	if err != nil {
		return nil, err
	}
	return caddyconfig.JSONModuleObject(mod, inlineKey, name, nil), nil
}

// storeArg reads `store memory|redis { … }`, which may appear once (set is
// what an earlier one read).
func storeArg(d *caddyfile.Dispenser, set json.RawMessage) (json.RawMessage, error) {
	if set != nil {
		return nil, d.Err("store may appear only once")
	}
	return moduleArg(d, "ha.stores", "backend")
}

// checked is err, or else what check finds wrong, with the line: for
// settings that are wrong only together.
func checked(d *caddyfile.Dispenser, err error, check func() error) error {
	if err != nil {
		return err
	}
	if err := check(); err != nil {
		return d.Err(err.Error())
	}
	return nil
}
