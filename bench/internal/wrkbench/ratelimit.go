package wrkbench

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimitProbe reads, around each run of a contender with
// edge_rate_limit, the handler's metrics from /metrics on the contender's
// admin endpoint (AdminEndpoint): its store calls per request (decisions
// that asked the store, caddy_ha_rate_limit_store_duration_seconds' count:
// one a request without leases, one a lease with them), and its fallback
// decisions, which are flagged: requests decided without the store
// (store_timeout missed) would make the store look cheaper than it is.
type RateLimitProbe struct {
	Contender *Contender
	// Over the successful runs:
	fallbacks  int64
	storeCalls int64
	requests   int64
}

const (
	fallbackMetric   = "caddy_ha_rate_limit_fallback_decisions_total"
	storeCallsMetric = "caddy_ha_rate_limit_store_duration_seconds_count"
)

func (p *RateLimitProbe) Measure(wrk func() (Run, error)) (Run, []string, error) {
	metricsURL := "http://" + p.Contender.AdminAddr + "/metrics"
	before := metricSums(metricsURL, fallbackMetric, storeCallsMetric)
	r, err := wrk()
	if err != nil {
		return Run{}, nil, err
	}
	after := metricSums(metricsURL, fallbackMetric, storeCallsMetric)
	var notes []string
	// -1 when unknown: the endpoint did not answer or has no such series.
	delta := func(i int) int64 {
		if before[i] < 0 || after[i] < 0 {
			return -1
		}
		return after[i] - before[i]
	}
	if calls := delta(1); calls >= 0 && r.Requests > 0 {
		notes = append(notes, perRequestText(calls, r.Requests)+" store calls/req")
		p.storeCalls += calls
		p.requests += r.Requests
	}
	// The decisions on_store_error took because the store missed
	// store_timeout or was known to be down: requests not counted in the
	// store.
	if fallbacks := delta(0); fallbacks > 0 {
		notes = append(notes, fmt.Sprintf("!! %d fallback decisions (not counted in the store)", fallbacks))
		p.fallbacks += fallbacks
	}
	return r, notes, nil
}

func (p *RateLimitProbe) Problems() (column, warning string) {
	if p.fallbacks == 0 {
		return "", ""
	}
	return fmt.Sprintf("!! fallbacks %d", p.fallbacks),
		fmt.Sprintf("%s: %d requests were decided by on_store_error (the store missed store_timeout or was down), not counted in the store", p.Contender.Name, p.fallbacks)
}

// PrintReport gives the store calls per request over all rounds.
func (p *RateLimitProbe) PrintReport() {
	if p.requests == 0 {
		return
	}
	fmt.Printf("\n%s, all rounds: %d requests, %d store calls: %s store calls/req (edge_rate_limit's decisions that asked the store)\n",
		p.Contender.Name, p.requests, p.storeCalls, perRequestText(p.storeCalls, p.requests))
}

// perRequestText is n/requests with four decimals, or, under 0.001 (a call
// per lease), in scientific notation: 1.2e-05.
func perRequestText(n, requests int64) string {
	v := float64(n) / float64(requests)
	if v > 0 && v < 0.001 {
		return fmt.Sprintf("%.1e", v)
	}
	return fmt.Sprintf("%.4f", v)
}

// metricSums sums each of names' series at metricsURL (a Prometheus text
// page); -1 for a name without a series, every one when it does not answer.
func metricSums(metricsURL string, names ...string) []int64 {
	sums := make([]int64, len(names))
	for i := range sums {
		sums[i] = -1
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(metricsURL)
	if err != nil {
		return sums
	}
	defer resp.Body.Close()
	totals := make([]float64, len(names))
	found := make([]bool, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		for i, name := range names {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
				continue
			}
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				totals[i] += v
				found[i] = true
			}
		}
	}
	for i := range names {
		if found[i] {
			sums[i] = int64(totals[i])
		}
	}
	return sums
}
