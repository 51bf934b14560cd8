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
	fmt.Fprintln(tw, "fault\ttime\trequests\tclient errors\tunexplained errors\tfollower writes\twrites twice\tmisrouted chunks\tuploads intact\tlimits exact\tover bound\t")
	for _, r := range rows {
		name := r.fault.name
		if r.fault.planned {
			name += " (planned)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, r.took.Round(100*time.Millisecond), r.requests,
			clientErrors(r.errors), verdict(r.unexplained), verdict(r.followerWrites), verdict(r.writesTwice),
			verdict(r.misrouted), verdict(r.uploadsBroken), limitVerdict(r.limitWindows, r.limitInexact), verdict(r.overBound))
	}
	tw.Flush()
	for _, r := range rows {
		for _, note := range r.notes {
			fmt.Fprintf(w, "%s: %s\n", r.fault.name, note)
		}
	}
	fmt.Fprint(w, `
client errors: status >= 500, "conn" (a transport error) or "timeout" (the client's, set past the bound), by kind; upload steps failed are sent again.
unexplained errors: client errors the fault does not explain. A planned event explains none; a leader crash or hang
  and the database down explain those of the leader's traffic; Redis down explains the upload requests; a dead upload
  server explains its own uploads' requests and those in flight as it died, not later creations (two servers are up).
follower writes: writes a node executed without holding the lease of their epoch (its Executed records and the
  cluster's acquisitions). writes twice: extra executions of one X-Request-Id on any node.
misrouted chunks: chunks, completions and aborts that reached a server other than the upload's owner (the servers'
  request records). uploads intact: uploads that their client could not complete (it sends a failed step again for
  20s) or that are not complete and byte-exact on their owner.
limits exact: windows ("w") of the rate-limit zone in which Redis counted every request (no fallback decision), each
  letting exactly the limit through to the backend: no more, none refused before it.
over bound: requests that took longer than their bound (hold + response_header_timeout, store_timeout, or
  store_timeout + discovery; each + 500ms).
`)
}

func verdict(violations int) string {
	if violations == 0 {
		return "ok"
	}
	return fmt.Sprintf("FAIL %d", violations)
}

func limitVerdict(windows, inexact int) string {
	if inexact == 0 {
		return fmt.Sprintf("ok %dw", windows)
	}
	return fmt.Sprintf("FAIL %d/%dw", inexact, windows)
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
