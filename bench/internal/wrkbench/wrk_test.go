package wrkbench

import (
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	const out = `Running 5s test @ http://127.0.0.1:40000/
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02ms  512.00us  35.10ms   90.00%
    Req/Sec    24.50k     1.20k   27.00k    70.00%
  Latency Distribution
     50%  827.00us
     75%    1.10ms
     90%    1.50ms
     99%    1.23s
  243980 requests in 5.00s, 30.01MB read
  Socket errors: connect 0, read 3, write 0, timeout 12
  Non-2xx or 3xx responses: 17
Requests/sec:  48786.12
Transfer/sec:      6.00MB
`
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.ReqPerSec != 48786.12 || r.P99 != 1230*time.Millisecond || r.Requests != 243980 || r.Non2xx != 17 ||
		r.SocketErrors != "connect 0, read 3, write 0, timeout 12" ||
		r.Socket != (SocketCounts{Read: 3, Timeout: 12}) || r.ClientErrors() != 32 {
		t.Errorf("parsed %+v", r)
	}
	for _, c := range []struct {
		line string
		want time.Duration
	}{{"99%  850.00us", 850 * time.Microsecond}, {"99%   12.34ms", 12340 * time.Microsecond}, {"99%   32.87ms", 32870 * time.Microsecond}, {"99%    1.50m", 90 * time.Second}} {
		r, err := parseWrk("  Latency Distribution\n     " + c.line + "\n  10 requests in 1.00s, 1KB read\nRequests/sec:     10.00\n")
		if err != nil || r.P99 != c.want || r.Non2xx != 0 || r.SocketErrors != "" || r.ClientErrors() != 0 {
			t.Errorf("%q: %v, %+v", c.line, err, r)
		}
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Error("no error for a report without figures")
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3 = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4 = %v", m)
	}
}

func TestCommandStats(t *testing.T) {
	stats, err := parseCommandStats("# Commandstats\r\ncmdstat_get:calls=10,usec=20,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_pexpire:calls=10,usec=15,usec_per_call=1.50\r\ncmdstat_info:calls=4,usec=100\r\ncmdstat_set:calls=1,usec=3\r\n")
	if err != nil || len(stats) != 3 || stats["get"] != 10 || stats["pexpire"] != 10 || stats["set"] != 1 {
		t.Fatalf("%v, %v", stats, err)
	}
	calls := CallsDelta(map[string]int64{"set": 1, "get": 2}, stats)
	if len(calls) != 2 || calls["get"] != 8 || calls["pexpire"] != 10 || Sum(calls) != 18 {
		t.Errorf("delta %v", calls)
	}
	if got := PerRequest(map[string]int64{"get": 4000, "pexpire": 5000, "set": 1}, 4000); got != "  pexpire 1.250  get 1.000  set (1 calls in all)" {
		t.Errorf("PerRequest: %q", got)
	}
}
