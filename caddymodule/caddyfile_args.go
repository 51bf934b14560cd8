package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
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

// optionLines are the lines of a block's options, by name, so that a
// setting found wrong after the block is reported where it was written.
type optionLines map[string]int

// parseDirective reads a directive's (or module's) name, which takes no
// arguments, then its block of options; see parseOptions.
func parseDirective(d *caddyfile.Dispenser, option func(name string) error) (optionLines, error) {
	d.Next() // the name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	return parseOptions(d, option)
}

// repeatableOptions may be written more than once in a block: each adds
// to a list. Any other option written twice is refused, rather than the
// last one silently winning.
var repeatableOptions = map[string]bool{"zone": true, "match": true, "leader_paths": true, "address": true, "addresses": true, "resolve": true}

// parseOptions reads the block that opens at the current token, handing
// each option's name to option, which reads its arguments; an option
// written twice (unless repeatable), or left with arguments it did not
// read, fails with its line.
func parseOptions(d *caddyfile.Dispenser, option func(name string) error) (optionLines, error) {
	lines := optionLines{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		if _, seen := lines[name]; seen && !repeatableOptions[name] {
			return nil, d.Errf("duplicate %s option", name)
		}
		lines[name] = d.Line()
		if err := option(name); err != nil {
			return nil, err
		}
		if err := noMoreArgs(d, name); err != nil {
			return nil, err
		}
	}
	return lines, nil
}

// parseValidated reads a module's name and block with option (see
// parseDirective), then validates the module once, as Caddy does after
// provisioning: a bad setting is reported at the line of the option that
// set it (options maps a JSON field to that option where their names
// differ), else at the block's end.
func parseValidated(d *caddyfile.Dispenser, m caddy.Validator, options map[string]string, option func(name string) error) error {
	lines, err := parseDirective(d, option)
	if err != nil {
		return err
	}
	return validatedAt(d, lines, options, m.Validate())
}

// validatedAt is err with the line of the setting it names, if any.
func validatedAt(d *caddyfile.Dispenser, lines optionLines, options map[string]string, err error) error {
	if err == nil {
		return nil
	}
	line := d.Line()
	if bad, ok := errors.AsType[*settingError](err); ok {
		opt := bad.field
		if name, ok := options[opt]; ok {
			opt = name
		}
		if l, ok := lines[opt]; ok {
			line = l
		}
	}
	return fmt.Errorf("%w, at %s:%d", err, d.File(), line)
}

// settingError is a setting that a module's Validate refuses, named by the
// JSON field a JSON config writes (the Caddyfile option is mostly named
// alike).
type settingError struct {
	module string // as the Caddyfile names it, e.g. "lb_policy leader"
	field  string
	msg    string
}

// Error names the module and the field.
func (e *settingError) Error() string { return e.module + ": " + e.field + " " + e.msg }

// badSetting is a settingError of module's field.
func badSetting(module, field, format string, args ...any) error {
	return &settingError{module: module, field: field, msg: fmt.Sprintf(format, args...)}
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

// storeArg reads `store memory|redis|postgres { … }`.
func storeArg(d *caddyfile.Dispenser) (json.RawMessage, error) {
	return moduleArg(d, "ha.stores", "backend")
}
