package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// printTable writes one line per fault run and a legend.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\ttime\trequests\tclient errors\tunexplained errors\tfollower writes\twrites twice\tmisrouted chunks\tuploads intact\tlimits exact\tidentities\tsign-ins kept\tstatus page\tcloudflare\tover bound\tcanary max (caddy proxied redis pg)\t")
	for _, r := range rows {
		name := r.fault.name
		if r.fault.planned {
			name += " (planned)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, r.took.Round(100*time.Millisecond), r.requests,
			clientErrors(r.errors), loadVerdict(r.unexplained, r.loadErrors), verdict(r.followerWrites), verdict(r.writesTwice),
			verdict(r.misrouted), verdict(r.uploadsBroken), limitVerdict(r.limitWindows, r.limitInexact),
			verdict(r.identities), verdict(r.signInsLost), verdict(r.statusBad), verdict(r.cloudflareWrong),
			loadVerdict(r.overBound, r.overLoad), canaries(r.canaryMax))
	}
	tw.Flush()
	for _, r := range rows {
		for _, note := range r.notes {
			fmt.Fprintf(w, "%s: %s\n", r.fault.name, note)
		}
	}
	fmt.Fprint(w, `
client errors: status >= 500, "conn" (a transport error) or "timeout" (the client's, set past the bound), by kind; upload steps failed are sent again.
unexplained errors: client errors the fault does not explain. A planned event explains none (config reloads: but for
  new connections reset in the old socket's accept queue where the host does not move it, tcp_migrate_req=0, noted
  apart); a leader crash or hang
  and the database down explain those of the leader's traffic (Windows SSO's included); Redis down explains the upload
  requests; PostgreSQL down its zone's 503s with Retry-After (on_store_error deny); a dead upload server explains its
  own uploads' requests and those in flight as it died, not later creations (two servers are up). "+n load": n more
  that the machine's load explains: a canary (Caddy answering itself or proxying to a trivial backend; for the stores'
  requests also the suite's own PING or SELECT 1 to that store) waited 500ms or more while it was under way or, before
  it, within a second or the stall's own length.
follower writes: writes a node executed without holding the lease of their epoch (its Executed records and the
  cluster's acquisitions). writes twice: extra executions of one X-Request-Id on any node.
misrouted chunks: chunks, completions and aborts that reached a server other than the upload's owner (the servers'
  request records). uploads intact: uploads that their client could not complete (it sends a failed step again for
  20s) or that are not complete and byte-exact on their owner.
limits exact: windows ("w") of the Redis zone + the PostgreSQL zone in which the store counted every request (no
  fallback decision), each letting exactly the limit through to the backend: no more, none refused before it.
identities: Windows SSO answers as another user, backend connections with credentials serving two browsers, split
  handshakes (the nodes' records). sign-ins kept: browsers that signed in again or reconnected when no new leader
  elsewhere and no reload ended their backend connection, or whose last answer was not theirs.
status page: scrapes of ha_status and /ha/status that were not a 200 with a view, or showed Cloudflare's ranges gone,
  and 1 if no scrape showed the fault (leader gone or moved, store down, owner_down, failed refreshes).
cloudflare: CF-Connecting-IP from the edge not resolved as the client, or from outside it believed.
over bound: requests that took longer than their bound (hold + response_header_timeout, store_timeout, or
  store_timeout + discovery; each + 500ms); "+n load": n more, within it once the longest wait of a canary meanwhile
  is taken out (proxied, or for the status and Cloudflare's requests Caddy's own). canary max: the slowest canary of
  each kind, the machine's load (a store's own fault shows as its canary's timeout).
`)
}

func verdict(violations int) string {
	if violations == 0 {
		return "ok"
	}
	return fmt.Sprintf("FAIL %d", violations)
}

func limitVerdict(windows, inexact [2]int) string {
	if inexact[0]+inexact[1] == 0 {
		return fmt.Sprintf("ok %d+%dw", windows[0], windows[1])
	}
	return fmt.Sprintf("FAIL %d/%d+%d/%dw", inexact[0], windows[0], inexact[1], windows[1])
}

func canaries(slowest [len(canaryKinds)]time.Duration) string {
	parts := make([]string, len(slowest))
	for i, d := range slowest {
		parts[i] = d.Round(time.Millisecond).String()
	}
	return strings.Join(parts, " ")
}

// loadVerdict: the violations, and those the machine's load explains.
func loadVerdict(violations, load int) string {
	v := verdict(violations)
	if load > 0 {
		v += fmt.Sprintf(" +%d load", load)
	}
	return v
}

func clientErrors(byKind map[string]int) string {
	if len(byKind) == 0 {
		return "0"
	}
	total := 0
	for _, n := range byKind {
		total += n
	}
	return fmt.Sprintf("%d (%s)", total, byCount(byKind))
}

// byCount lists counts by name, "502:3 conn:1", in the names' order.
func byCount(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for name, n := range counts {
		parts = append(parts, fmt.Sprintf("%s:%d", name, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
