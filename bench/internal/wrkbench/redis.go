package wrkbench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// StartRedis starts bin (redis-server) on a free loopback port, without
// persistence, working in dir, and waits until it answers PING. It is
// stopped at exit like every process the bench starts.
func StartRedis(dir, bin string) (addr string, err error) {
	if _, err := exec.LookPath(bin); err != nil {
		return "", fmt.Errorf("redis-server not found (apt-get install redis-server): %v", err)
	}
	addr = loopback.FreeAddr()
	p, err := StartProcess("redis-server", filepath.Join(dir, "redis.log"), bin,
		"--bind", "127.0.0.1", "--port", Port(addr), "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return "", err
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(interrupted, 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		switch {
		case err == nil:
			return addr, nil
		case interrupted.Err() != nil:
			return "", interrupted.Err()
		case p.Exited():
			return "", fmt.Errorf("redis-server exited: %s", p.LogTail())
		case time.Now().After(deadline):
			p.Stop()
			return "", fmt.Errorf("redis-server on %s did not answer within 10s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RedisReadsProcessed returns Redis's count of read events (one per request
// batch a client sends), from INFO stats.
func RedisReadsProcessed(rdb *redis.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(interrupted, 2*time.Second)
	defer cancel()
	text, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_reads_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no total_reads_processed")
}

// RedisCommandStats returns the calls of each command (lowercase) from INFO
// commandstats, without INFO itself (the bench's own).
func RedisCommandStats(rdb *redis.Client) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(interrupted, 2*time.Second)
	defer cancel()
	text, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return parseCommandStats(text)
}

// parseCommandStats reads INFO commandstats's
// cmdstat_<name>:calls=<n>,usec=...,... lines.
func parseCommandStats(text string) (map[string]int64, error) {
	stats := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", line, err)
				}
				stats[name] = n
			}
		}
	}
	delete(stats, "info")
	return stats, nil
}

// CallsDelta returns the calls of each command between two
// RedisCommandStats, leaving out those with none.
func CallsDelta(before, after map[string]int64) map[string]int64 {
	calls := map[string]int64{}
	for cmd, n := range after {
		if d := n - before[cmd]; d > 0 {
			calls[cmd] = d
		}
	}
	return calls
}

// Sum returns the sum of m's values.
func Sum(m map[string]int64) int64 {
	var t int64
	for _, v := range m {
		t += v
	}
	return t
}

// PerRequest breaks calls down per request, most called first:
// "  get 1.000  pexpire 1.000"; commands called less than once in a
// thousand requests are given as totals.
func PerRequest(calls map[string]int64, requests int64) string {
	cmds := make([]string, 0, len(calls))
	for cmd := range calls {
		cmds = append(cmds, cmd)
	}
	sort.Slice(cmds, func(i, j int) bool {
		if calls[cmds[i]] != calls[cmds[j]] {
			return calls[cmds[i]] > calls[cmds[j]]
		}
		return cmds[i] < cmds[j]
	})
	var b strings.Builder
	for _, cmd := range cmds {
		if perReq := float64(calls[cmd]) / float64(requests); perReq >= 0.001 {
			fmt.Fprintf(&b, "  %s %.3f", cmd, perReq)
		} else {
			fmt.Fprintf(&b, "  %s (%d calls in all)", cmd, calls[cmd])
		}
	}
	return b.String()
}

// HARedis is the ha global option's block for the Redis store at addr,
// with the bench's key prefix.
func HARedis(addr string) string {
	return fmt.Sprintf("\tha {\n\t\tstore redis {\n\t\t\taddress %s\n\t\t\tprefix bench:\n\t\t}\n\t}\n", addr)
}

// PrepareRedis is a Prepare's part for the contender named name among
// selected, on the Redis store, unless it is skipped already: it starts
// redis-server (bin) in dir for it, skipping it if redis-server does not
// start, and gives it a RedisProbe that reports as report says. It returns
// redis-server's address ("" if it does not run) and the header's notes.
func PrepareRedis(dir, bin, name string, selected []*Contender, report RedisReport) (addr string, headerNotes []string) {
	for _, c := range selected {
		if c.Skipped != "" || c.Name != name {
			continue
		}
		a, err := StartRedis(dir, bin)
		if err != nil {
			c.Skipped = err.Error()
			continue
		}
		addr = a
		rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		AddCleanup(func() { rdb.Close() })
		c.Probe = &RedisProbe{RedisReport: report, contender: c, rdb: rdb, calls: map[string]int64{}}
	}
	if addr == "" {
		return "", nil
	}
	return addr, []string{"redis-server " + addr}
}

// RedisReport says what a RedisProbe reports besides Redis commands and
// round trips per request.
type RedisReport struct {
	// Breakdown adds each command's calls per request to each run's note.
	Breakdown bool
	// Transactions adds transactions (EXEC calls) per request.
	Transactions bool
	// Explain is printed below the figures of all rounds, a line each: how
	// to read them.
	Explain []string
}

// RedisProbe reads INFO commandstats and INFO stats around each run of a
// contender on the Redis store: Redis commands and round trips (Redis's
// read events) per request, for each run and for all rounds. The bench's
// own INFO calls are left out.
type RedisProbe struct {
	RedisReport
	contender *Contender
	rdb       *redis.Client

	// Over the successful runs:
	requests int64
	calls    map[string]int64
	reads    int64
}

func (p *RedisProbe) Measure(wrk func() (Run, error)) (Run, []string, error) {
	callsBefore, readsBefore, err := p.counters()
	if err != nil {
		return Run{}, nil, err
	}
	r, err := wrk()
	if err != nil {
		return Run{}, nil, err
	}
	callsAfter, readsAfter, err := p.counters()
	if err != nil {
		return Run{}, nil, err
	}
	calls := CallsDelta(callsBefore, callsAfter)
	reads := readsAfter - readsBefore - 2 // the bench's own two INFO calls
	var notes []string
	if r.Requests > 0 {
		notes = append(notes, p.figures(calls, reads, r.Requests, p.Breakdown, "transactions"))
	}
	p.requests += r.Requests
	p.reads += reads
	for cmd, n := range calls {
		p.calls[cmd] += n
	}
	return r, notes, nil
}

// counters returns the calls of each command (INFO commandstats) and the
// read events (INFO stats) so far.
func (p *RedisProbe) counters() (map[string]int64, int64, error) {
	calls, err := RedisCommandStats(p.rdb)
	if err != nil {
		return nil, 0, fmt.Errorf("INFO commandstats: %v", err)
	}
	reads, err := RedisReadsProcessed(p.rdb)
	if err != nil {
		return nil, 0, fmt.Errorf("INFO stats: %v", err)
	}
	return calls, reads, nil
}

// figures gives calls and reads per request: "4.00 Redis commands/req,
// 1.00 transactions/req, 0.23 round trips/req", with each command's share
// in parentheses after the commands when breakdown, and transactions
// (with Transactions) named txName.
func (p *RedisProbe) figures(calls map[string]int64, reads, requests int64, breakdown bool, txName string) string {
	perReq := func(n int64) float64 { return float64(n) / float64(requests) }
	s := fmt.Sprintf("%.2f Redis commands/req", perReq(Sum(calls)))
	if breakdown {
		s += " (" + strings.TrimSpace(PerRequest(calls, requests)) + ")"
	}
	if p.Transactions {
		s += fmt.Sprintf(", %.2f %s/req", perReq(calls["exec"]), txName)
	}
	return s + fmt.Sprintf(", %.2f round trips/req", perReq(reads))
}

func (p *RedisProbe) Problems() (column, warning string) { return "", "" }

// PrintReport gives the figures of all rounds, each command's calls per
// request, and Explain.
func (p *RedisProbe) PrintReport() {
	if p.requests == 0 {
		return
	}
	fmt.Printf("\n%s, all rounds: %d requests, %s\n", p.contender.Name, p.requests,
		p.figures(p.calls, p.reads, p.requests, false, "transactions (EXEC)"))
	fmt.Println("  per request:" + PerRequest(p.calls, p.requests))
	for _, line := range p.Explain {
		fmt.Println("  " + line)
	}
}
