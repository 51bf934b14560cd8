package haproxy

import (
	"strings"
	"testing"
)

const (
	cacheHead = "defaults\n\tmode http\ncache assets\n\ttotal-max-size 4\n\tmax-age 60\nfrontend f\n\tbind :80\n\tacl static path_beg /static/\n"
	cacheTail = "\tdefault_backend b\nbackend b\n\thttp-response cache-store assets\n\tserver s 10.0.0.1:80\n"
)

// translateCache translates a frontend with the rules (from line 9) of
// cache assets (line 3), and a backend that stores to it.
func translateCache(t *testing.T, rules string) (Translation, error) {
	t.Helper()
	cfg, err := Parse(strings.NewReader(cacheHead+rules+cacheTail), "c.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	return Translate(cfg)
}

// Issue 28: a cache section is translated as no cache (Caddy has none in
// this build), with a warning at the section; its settings, cache-use,
// cache-store, and filter cache and compression are comments, so every
// request reaches the server.
func TestCacheIsNotCached(t *testing.T) {
	translate := func(rules string) (Translation, error) { return translateCache(t, rules) }
	tr, err := translate("\thttp-request cache-use assets if static\n\thttp-response cache-store assets\n")
	if err != nil {
		t.Fatal(err)
	}
	if warned := warnedLines(tr, "cache assets: Caddy has no cache in this build"); len(warned) != 1 || warned[0] != 3 {
		t.Errorf("cache warnings at lines %v, want 3: %+v", warned, tr.Warnings)
	}
	for _, want := range []string{
		"c.cfg:9: http-request cache-use assets if static  (ignored: nothing is cached (see cache assets))",
		"c.cfg:10: http-response cache-store assets  (ignored: nothing is cached (see cache assets))",
		"c.cfg:13: http-response cache-store assets  (ignored: nothing is cached (see cache assets))",
		"c.cfg:5: max-age 60  (ignored: how long a copy is answered: nothing is cached)",
	} {
		if !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
		}
	}
	if strings.Contains(oneLine(tr.Caddyfile), "cache") {
		t.Errorf("something of the cache is written:\n%s", tr.Caddyfile)
	}
	tr, err = translate("\tfilter compression\n\tfilter cache assets\n\thttp-request cache-use assets\n")
	if err != nil || !strings.Contains(tr.Caddyfile, "c.cfg:10: filter cache assets  (ignored: nothing is cached (see cache assets))") || !strings.Contains(tr.Caddyfile, "c.cfg:9: filter compression  (ignored: it orders HAProxy's filters") {
		t.Errorf("filter cache and compression: %v\n%s", err, tr.Caddyfile)
	}
}

// A cache-use or filter of a cache no section defines, another filter,
// and a line no cache section takes are refused with the line.
func TestCacheRefusals(t *testing.T) {
	for _, tt := range []struct{ rules, want string }{
		{"\tfilter cache other\n", "c.cfg:9: filter cache: no cache section other"},
		{"\tfilter spoe engine x config /etc/haproxy/spoe.conf\n", "c.cfg:9: filter spoe: SPOE has no counterpart in Caddy"},
		{"\thttp-request cache-use other\n", "c.cfg:9: http-request cache-use: no cache section other (HAProxy refuses it too)"},
		{"\thttp-response cache-store\n", "c.cfg:9: http-response cache-store: takes a cache's name, and maybe a condition"},
	} {
		if _, err := translateCache(t, tt.rules); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.rules, err, tt.want)
		}
	}
	cfg, err := Parse(strings.NewReader("cache c\n\tmaxconn 4\n"+cacheHead[len("defaults\n\tmode http\n"):]), "c.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Translate(cfg); err == nil || !strings.Contains(err.Error(), "c.cfg:2: maxconn 4: not a cache section's keyword") {
		t.Errorf("maxconn in a cache section: %v", err)
	}
}
