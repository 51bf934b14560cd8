// Command forwarded measures, side by side in one run, what the forwarded
// handler costs a Caddy that proxies to a trivial backend on loopback:
//
//	(i)   none: plain reverse_proxy, no handler
//	(ii)  forwarded: the forwarded handler (proto https) in front of
//	      reverse_proxy
//	(iii) forwarded-rfc7239: the same with emit_forwarded, so that it also
//	      sends an RFC 7239 Forwarded header upstream
//
// Every request, to every contender, carries the same typical chain, so
// that all of them parse the same request:
//
//	X-Forwarded-For: 203.0.113.9, 198.51.100.7, 127.0.0.1
//	X-Forwarded-Proto: https
//	X-Forwarded-Host: app.example.com
//
// All trust 127.0.0.1/32 (the server's trusted_proxies, which reverse_proxy
// reads too, so the handler is the only difference): wrk's connection and
// the last hop are trusted, and the handler resolves the client to
// 198.51.100.7. wrk loads each contender in turn, interleaved within each
// round (i, ii, iii, i, ii, ...) so that machine noise spreads over all of
// them; every run is checked for non-2xx responses and socket errors. It
// reports per contender the median req/s and p99 latency over rounds and
// the median, over rounds, of its req/s as a share of (i)'s in the same
// round, next to the goal: forwarded >= 97%; forwarded-rfc7239 has none.
//
// Everything runs on loopback, and every process it starts is stopped on
// exit, on error and on Ctrl-C.
package main

import (
	"fmt"
	"strings"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
)

// forwardedGoal is the least req/s (ii) is to keep as a share of (i)'s in
// the same round.
const forwardedGoal = 0.97

func main() {
	b := &wrkbench.Bench{
		Name: "forwarded",
		Title: []string{
			"Cost of the forwarded handler in Caddy: req/s and p99 latency through Caddy to a",
			"trivial backend (200, 2-byte body) on loopback, every request with the same",
			"3-hop X-Forwarded-* chain. Contenders run interleaved within each round.",
		},
		CostOf: "the forwarded handler",
		Headers: []string{
			"X-Forwarded-For: 203.0.113.9, 198.51.100.7, 127.0.0.1",
			"X-Forwarded-Proto: https",
			"X-Forwarded-Host: app.example.com",
		},
		Contenders: []*wrkbench.Contender{
			{Name: "none", Label: "(i) plain reverse_proxy", Config: config("")},
			{Name: "forwarded", Label: "(ii) forwarded { proto https }, then reverse_proxy",
				Config: config("proto https"), Handler: "forwarded", Goal: forwardedGoal},
			{Name: "forwarded-rfc7239", Label: "(iii) the same with emit_forwarded (also sends Forwarded)",
				Config: config("proto https", "emit_forwarded"), Handler: "forwarded"},
		},
	}
	b.DefineFlags()
	b.Main()
}

// config returns a contender's Caddyfile: the forwarded handler with
// subdirectives in front of reverse_proxy, or reverse_proxy alone when
// there are none.
func config(subdirectives ...string) func(listen, admin, backend string) string {
	return func(listen, admin, backend string) string {
		var site strings.Builder
		if len(subdirectives) > 0 {
			site.WriteString("\tforwarded {\n")
			for _, s := range subdirectives {
				fmt.Fprintf(&site, "\t\t%s\n", s)
			}
			site.WriteString("\t}\n")
		}
		fmt.Fprintf(&site, "\treverse_proxy %s\n", backend)
		return wrkbench.Caddyfile(listen, admin, "\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}\n", site.String())
	}
}
