package status

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

//go:embed page.html
var pageSource string

var page = template.Must(template.New("status").Funcs(template.FuncMap{
	"rfc3339": func(t time.Time) string { return t.Format(time.RFC3339) },
	"clock":   func(t time.Time) string { return t.Format("2006-01-02 15:04:05 MST") },
	"since":   func(now time.Time, t *time.Time) string { return span(now, t) },
	"until":   func(now time.Time, t *time.Time) string { return spanUntil(now, t) },
	"seconds": func(s float64) string { return duration(time.Duration(s * float64(time.Second))) },
	"num":     number,
	"floor":   floorText,
	"counts":  counts,
	"spaced":  func(pool string) string { return strings.ReplaceAll(pool, ",", ", ") },
}).Parse(pageSource))

// WriteHTML writes the status page, which refreshes itself every refresh
// (0: never). It is plain HTML with its style inline: no script, no
// external asset.
func WriteHTML(w io.Writer, v View, refresh time.Duration) error {
	return page.Execute(w, struct {
		View
		RefreshSeconds int
	}{v, int(refresh.Round(time.Second) / time.Second)})
}

// WriteTable writes the view as terminal tables, one block per capability
// in use, for `caddy ha status`.
func WriteTable(out io.Writer, v View) error {
	t := table{w: tabwriter.NewWriter(out, 0, 0, 2, ' ', 0), now: v.GeneratedAt}
	for _, p := range v.LeaderPools {
		t.leaderPool(p)
	}
	t.rateLimitZones(v.RateLimitZones)
	t.stores(v.Stores)
	t.uploadAffinity(v.UploadAffinity)
	t.cloudflareRanges(v.CloudflareRanges)
	t.pinnedPools(v.PinnedPools)
	return t.w.Flush()
}

// table writes the blocks of WriteTable, each with a title line and a
// header, at the time of the view.
type table struct {
	w   *tabwriter.Writer
	now time.Time
}

func (t table) block(title, detail string, header ...string) {
	fmt.Fprintf(t.w, "\n%s%s\n%s\n", strings.ToUpper(title), detail, strings.Join(header, "\t"))
}

func (t table) leaderPool(p LeaderPool) {
	w, now := t.w, t.now
	state := "leader " + p.Leader + ", epoch " + strconv.FormatInt(p.Epoch, 10)
	switch {
	case p.Leader != "":
	case p.NeverLed():
		state = "NO LEADER YET: none found in the " + span(now, p.NoLeaderFrom) + " since the pool started; requests wait up to hold, then 503"
	case p.InProgress(now):
		state = "FAILOVER IN PROGRESS: no leader for " + span(now, p.NoLeaderFrom)
	default:
		state = "NO LEADER for " + span(now, p.NoLeaderFrom) + ", longer than hold: requests are answered 503"
	}
	t.block("leader pool", " "+p.Pool+": "+state, "NODE", "STATE", "EPOCH", "LEASE VALID FOR", "LAST PROBE", "LATENCY", "LAST ERROR")
	for _, n := range p.Nodes {
		st := string(n.Status)
		if n.InDoubt {
			st += " (in doubt)"
		}
		epoch := ""
		if n.Epoch != 0 {
			epoch = strconv.FormatInt(n.Epoch, 10)
		}
		last := "never"
		if n.LastProbe != nil {
			last = span(now, n.LastProbe) + " ago"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.2f ms\t%s\n", n.Addr, st, epoch, spanUntil(now, n.LeaseValidUntil), last, n.LastProbeMillis, n.LastError)
	}
	fmt.Fprintf(w, "epoch floor %s; failovers %s, holding %s, held %s, replayed %s, 503 for no leader %s\n",
		floorText(now, p.EpochFloor), number(p.Failovers), number(p.HoldingRequests), number(p.HeldRequests), number(p.ReplayedRequests), number(p.NoLeaderResponses))
	for _, c := range p.LastChanges {
		to := c.To
		if to == "" {
			to = "none"
		}
		fmt.Fprintf(w, "  %s ago: %s → %s: %s\n", span(now, &c.At), cmp.Or(c.From, "none"), to, c.Reason)
	}
}

func (t table) rateLimitZones(zones []RateLimitZone) {
	if len(zones) == 0 {
		return
	}
	t.block("rate-limit zones", "", "ZONE", "LIMIT", "STORE", "ON STORE ERROR", "ALLOWED", "LIMITED", "DENIED", "STORE ERRORS", "FALLBACK")
	for _, z := range zones {
		limit := fmt.Sprintf("%d per %s", z.Events, duration(time.Duration(z.WindowSeconds*float64(time.Second))))
		if z.Sliding {
			limit += ", sliding"
		}
		fmt.Fprintf(t.w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", z.Zone, limit, z.Store, z.OnStoreError, number(z.Allowed),
			number(z.Limited), number(z.Denied), number(z.StoreErrors), number(z.FallbackDecisions))
	}
}

func (t table) stores(stores []Store) {
	if len(stores) == 0 {
		return
	}
	t.block("stores", "", "STORE", "STATE", "NEXT TRY", "HEALTH CHECK", "CLOCK OFFSET")
	for _, s := range stores {
		state, next := "up", ""
		switch {
		case !s.Up:
			state, next = "DOWN", "in "+duration(time.Duration(s.RetryInSeconds*float64(time.Second)))
		case s.Degraded:
			state = "DEGRADED (full)"
		}
		ping := "—" // none for a store in this process
		if s.PingMillis > 0 {
			ping = fmt.Sprintf("%.2f ms", s.PingMillis)
		}
		fmt.Fprintf(t.w, "%s\t%s\t%s\t%s\t%+.3f s\n", s.Store, state, next, ping, s.ClockOffsetSeconds)
	}
}

func (t table) uploadAffinity(u UploadAffinity) {
	if happened := u.Happened(); len(happened) > 0 {
		t.block("upload affinity", "", "EVENTS")
		fmt.Fprintln(t.w, counts(happened))
	}
}

func (t table) cloudflareRanges(sets []CloudflareSet) {
	if len(sets) == 0 {
		return
	}
	t.block("cloudflare ranges", "", "FILE", "FROM", "RANGES", "LAST REFRESH", "FAILURES", "LAST ERROR")
	for _, c := range sets {
		refreshed := "NEVER"
		if c.RefreshedAt != nil {
			refreshed = span(t.now, c.RefreshedAt) + " ago"
		}
		fmt.Fprintf(t.w, "%s\t%s\t%d\t%s\t%s\t%s\n", c.File, c.From, c.Ranges, refreshed, number(c.Failures), c.LastError)
	}
}

func (t table) pinnedPools(pools []PinnedPool) {
	if len(pools) == 0 {
		return
	}
	t.block("pinned connections", "", "POOL", "PINNED", "PINS", "ENDED", "REFUSED", "LAST AT A CAP")
	for _, p := range pools {
		var atCap []string
		for _, c := range p.AtCap {
			atCap = append(atCap, fmt.Sprintf("%s %d: %s %s ago", c.Cap, c.Limit, c.Client, span(t.now, c.At)))
		}
		fmt.Fprintf(t.w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Pool, number(p.Connections), number(p.Pins), counts(p.Ended), counts(p.Refused), strings.Join(atCap, "; "))
	}
}

// span is how long before now t was, "" for none.
func span(now time.Time, t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return duration(now.Sub(*t))
}

// floorText is a pool's epoch floor: the epoch, the node whose claim holds
// it, and whether its lease still holds it there at now.
func floorText(now time.Time, f healthcheck.EpochFloor) string {
	s := strconv.FormatInt(f.Epoch, 10)
	if f.Node != "" {
		s += " from " + f.Node
	}
	switch left := spanUntil(now, f.Until); left {
	case "":
	case "ended":
		s += ", its lease ended: a lower epoch may lead"
	default:
		s += ", held " + left + " more by its lease"
	}
	return s
}

// spanUntil is how long after now t is, "" for none, "ended" if past.
func spanUntil(now time.Time, t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	if !t.After(now) {
		return "ended"
	}
	return duration(t.Sub(now))
}

// duration is d rounded to what a person reads: ms under a second, then
// tenths of a second, then seconds.
func duration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	// "1h" and "1m" rather than "1h0m0s" and "1m0s".
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// number is a count without a fraction.
func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// counts lists a map of counts as "a 1, b 2", by key.
func counts(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+number(m[k]))
	}
	return strings.Join(parts, ", ")
}
