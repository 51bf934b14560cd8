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
)

// StartRedis starts bin (redis-server) on a free loopback port, without
// persistence, working in dir, and waits until it answers PING. It is
// stopped at exit like every process the bench starts.
func StartRedis(dir, bin string) (addr string, err error) {
	if _, err := exec.LookPath(bin); err != nil {
		return "", fmt.Errorf("redis-server not found (apt-get install redis-server): %v", err)
	}
	addr = FreeAddr()
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
