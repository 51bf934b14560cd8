package wrkbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Run is one measured wrk run.
type Run struct {
	Round        int
	ReqPerSec    float64
	P99          time.Duration
	Requests     int64
	Non2xx       int64
	SocketErrors string // wrk's "Socket errors:" line, if any
	Socket       SocketCounts
	// CPU is the processor time the contender's Caddy used during the
	// run (0 when unknown): per request, its cost whatever share of the
	// machine's cores the run got.
	CPU time.Duration
}

// CPUPerRequest is the contender's processor time per request, 0 when
// unknown.
func (r Run) CPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Requests)
}

// SocketCounts are the counts of wrk's "Socket errors:" line.
type SocketCounts struct {
	Connect, Read, Write, Timeout int64
}

// Total is the sum of the counts.
func (s SocketCounts) Total() int64 { return s.Connect + s.Read + s.Write + s.Timeout }

// ClientErrors are the requests that failed as the client saw them: socket
// errors and non-2xx or 3xx responses.
func (r Run) ClientErrors() int64 { return r.Socket.Total() + r.Non2xx }

// runWrk runs wrk against url for d, with the bench's headers, and parses
// its report.
func (b *Bench) runWrk(url string, d time.Duration) (Run, error) {
	ctx, cancel := context.WithTimeout(interrupted, d+30*time.Second)
	defer cancel()
	args := []string{"--latency", "-t", fmt.Sprint(b.Threads), "-c", fmt.Sprint(b.Connections), "-d", wrkSeconds(d)}
	for _, h := range b.Headers {
		args = append(args, "-H", h)
	}
	if b.scriptPath != "" {
		args = append(args, "-s", b.scriptPath)
	}
	cmd := exec.CommandContext(ctx, b.WrkBin, append(args, url)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return Run{}, fmt.Errorf("wrk: %v: %s", err, LastLines(out.String(), 3))
	}
	return parseWrk(out.String())
}

func wrkSeconds(d time.Duration) string {
	return fmt.Sprintf("%ds", max(1, int(d.Round(time.Second)/time.Second)))
}

var (
	reqPerSecRe = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	requestsRe  = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	non2xxRe    = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	socketRe    = regexp.MustCompile(`(?m)^\s*Socket errors:\s*(.+)$`)
	socketsRe   = regexp.MustCompile(`^connect (\d+), read (\d+), write (\d+), timeout (\d+)$`)
	p99Re       = regexp.MustCompile(`(?m)^\s*99(?:\.0+)?%\s+([0-9.]+)(us|ms|s|m|h)\s*$`)
)

// parseWrk reads wrk --latency's report: Requests/sec, the 99% line of
// the Latency Distribution, the requests served, and any errors.
func parseWrk(out string) (Run, error) {
	var r Run
	m := reqPerSecRe.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk's output: %s", LastLines(out, 3))
	}
	r.ReqPerSec, _ = strconv.ParseFloat(m[1], 64)
	_, dist, ok := strings.Cut(out, "Latency Distribution")
	if !ok {
		return r, errors.New("no Latency Distribution in wrk's output (--latency)")
	}
	m = p99Re.FindStringSubmatch(dist)
	if m == nil {
		return r, errors.New("no 99% line in wrk's Latency Distribution")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return r, fmt.Errorf("99%% latency %q: %v", m[1], err)
	}
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	r.P99 = time.Duration(math.Round(v * float64(unit)))
	if m = requestsRe.FindStringSubmatch(out); m == nil {
		return r, errors.New("no request count in wrk's output")
	}
	r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	if m = non2xxRe.FindStringSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = socketRe.FindStringSubmatch(out); m != nil {
		r.SocketErrors = strings.TrimSpace(m[1])
		c := socketsRe.FindStringSubmatch(r.SocketErrors)
		if c == nil {
			return r, fmt.Errorf("wrk's socket errors %q: not connect N, read N, write N, timeout N", r.SocketErrors)
		}
		for i, n := range []*int64{&r.Socket.Connect, &r.Socket.Read, &r.Socket.Write, &r.Socket.Timeout} {
			*n, _ = strconv.ParseInt(c[i+1], 10, 64)
		}
	}
	return r, nil
}
