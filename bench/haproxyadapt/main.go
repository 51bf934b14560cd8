// Command haproxyadapt measures caddy adapt --adapter haproxy on a block
// list (one ACL of generated addresses, 50 a line, as threat feeds are)
// at 2,000 and 20,000 lines, beside haproxy -c on the same file, in one
// run, rounds interleaved: the time of each (median of the rounds), their
// ratio, and how the time grows from 2,000 to 20,000 lines (10 for linear).
// Goals (issue 27.5): within 5x of haproxy -c at 20,000 lines, and growth
// under 15 (quadratic was 50 and more).
//
//	go run ./bench/haproxyadapt [-caddy bin/caddy] [-rounds 3]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/blocklist"
)

func main() {
	caddyBin := flag.String("caddy", "bin/caddy", "the custom Caddy (make build)")
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	flag.Parse()
	dir, err := os.MkdirTemp("", "haproxyadapt-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	sizes := []int{2000, 20000}
	files := map[int]string{}
	for _, n := range sizes {
		files[n] = filepath.Join(dir, fmt.Sprintf("blocklist-%d.cfg", n))
		if err := os.WriteFile(files[n], []byte(blocklist.Config(n, 50)), 0o644); err != nil {
			fail(err)
		}
	}
	adapt := map[int][]time.Duration{}
	check := map[int][]time.Duration{}
	for range *rounds {
		for _, n := range sizes {
			adapt[n] = append(adapt[n], timed(*caddyBin, "adapt", "--adapter", "haproxy", "--config", files[n]))
			check[n] = append(check[n], timed("haproxy", "-c", "-q", "-f", files[n]))
		}
	}
	fmt.Printf("%-8s %12s %12s %8s\n", "lines", "caddy adapt", "haproxy -c", "ratio")
	for _, n := range sizes {
		a, c := median(adapt[n]), median(check[n])
		fmt.Printf("%-8d %12s %12s %7.1fx\n", n, a.Round(time.Millisecond), c.Round(time.Millisecond), float64(a)/float64(c))
	}
	big, small := median(adapt[sizes[1]]), median(adapt[sizes[0]])
	ratio := float64(big) / float64(median(check[sizes[1]]))
	growth := float64(big) / float64(small)
	verdict := "PASS"
	if ratio > 5 || growth > 15 {
		verdict = "FAIL"
	}
	fmt.Printf("growth from %d to %d lines: %.1fx (10x is linear); goal: within 5x of haproxy -c at %d lines and growth under 15x: %s\n",
		sizes[0], sizes[1], growth, sizes[1], verdict)
}

// timed runs the command (its output discarded) and returns how long it
// took; a failure ends the benchmark.
func timed(name string, args ...string) time.Duration {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		fail(fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String()))
	}
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "haproxyadapt:", err)
	os.Exit(1)
}
