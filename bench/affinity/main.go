// Command affinity measures, side by side in one run, what lb_policy
// upload_affinity costs a Caddy that proxies the chunks of an upload to
// active/active upload servers on loopback:
//
//	(i)   none: plain reverse_proxy with one upstream, the server that owns
//	      the upload (so every chunk is accepted)
//	(ii)  memory: reverse_proxy to the three servers with lb_policy
//	      upload_affinity, memory store (no ha global option)
//	(iii) redis: the same with the Redis store (ha { store redis }), on a
//	      redis-server this program starts on a free loopback port
//
// The backends are three fakecluster upload servers, each keeping its
// uploads to itself, in a process of their own (this program run again).
// Before anything is measured, each contender gets an upload of 1 MiB:
// (ii) and (iii) create it through their Caddy (POST /api/uploads with an
// Idempotency-Key of their own), so that the policy learns its binding from
// the response; (i)'s is created on server 1 directly, the server (i)
// proxies to. The keys are chosen so that rendezvous hashing puts (ii)'s
// and (iii)'s uploads on server 1 too: every contender loads the same
// server. wrk then sends PATCH <upload> with Upload-Offset: 0 and a 4 KiB
// chunk: re-writing the same bytes at offset 0 is idempotent, so every
// request is a valid chunk, answered 204. Every run is checked for non-2xx
// responses (404: a chunk reached a server without the upload; 503: the
// policy refused it, its owner or the store being unavailable) and socket
// errors.
//
// wrk loads each contender in turn, interleaved within each round (i, ii,
// iii, i, ii, ...) so that machine noise spreads over all of them. It
// reports per contender the median req/s and p99 latency over rounds and
// the median, over rounds, of its req/s as a share of (i)'s in the same
// round, next to the goals (memory >= 95%, Redis >= 80%). For Redis it also
// reads INFO commandstats around each run: commands and round trips per
// chunk (GET and PEXPIRE of the binding: 2, or 1 with GETEX).
//
// Everything runs on loopback, and every process it starts is stopped on
// exit, on error and on Ctrl-C.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-ha/caddy-ha/affinity"
	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

var redisBin = flag.String("redis-server", "redis-server", "redis-server binary")

// The goals: req/s of a contender as a share of (i)'s in the same round.
const (
	memoryGoal = 0.95
	redisGoal  = 0.80
)

const (
	// uploadLength is the length of each contender's upload.
	uploadLength = 1 << 20
	// chunkSize is the body of every request wrk sends.
	chunkSize = 4 << 10
	// serversEnv, when set in the environment, makes the program the
	// upload servers, listening on its comma-separated addresses.
	serversEnv = "AFFINITY_UPLOAD_SERVERS"
	policyID   = "http.reverse_proxy.selection_policies.upload_affinity"
)

// script shapes every request: a chunk of chunkSize bytes at offset 0 of
// the upload the contender's URL names.
var script = fmt.Sprintf(`wrk.method = "PATCH"
wrk.body = string.rep("x", %d)
wrk.headers["Upload-Offset"] = "0"
wrk.headers["Content-Type"] = "application/offset+octet-stream"
`, chunkSize)

func main() {
	if addrs := os.Getenv(serversEnv); addrs != "" {
		serveUploads(strings.Split(addrs, ","))
		return
	}
	var servers []string // the upload servers' addresses, server 1 first
	var redisAddr string // set once redis-server runs
	b := &wrkbench.Bench{
		Name: "affinity",
		Title: []string{
			"Cost of lb_policy upload_affinity in Caddy: req/s and p99 latency of 4 KiB upload",
			"chunks (PATCH at offset 0, answered 204) through Caddy to fakecluster upload servers",
			"on loopback, each contender's upload on server 1. Contenders run interleaved within",
			"each round.",
		},
		CostOf:    "the upload_affinity policy",
		Script:    script,
		ReadyPath: "/healthz",
		Backend: func(dir string) (string, error) {
			var err error
			servers, err = startUploadServers(dir, 3)
			return strings.Join(servers, " "), err
		},
		Contenders: contenders(&servers, &redisAddr),
		Prepare: func(dir string, selected []*wrkbench.Contender) ([]string, error) {
			return prepare(dir, selected, &redisAddr)
		},
	}
	b.DefineFlags()
	b.Main()
}

func contenders(servers *[]string, redisAddr *string) []*wrkbench.Contender {
	return []*wrkbench.Contender{
		{Name: "none", Label: "(i) plain reverse_proxy to the upload's server", Config: config("", false),
			Setup: func(c *wrkbench.Contender) error { return setUp(c, *servers, false) }},
		{Name: "memory", Label: "(ii) lb_policy upload_affinity, memory store", Config: config("", true),
			Handler: policyID, Goal: memoryGoal,
			Setup: func(c *wrkbench.Contender) error { return setUp(c, *servers, true) }},
		{Name: "redis", Label: "(iii) lb_policy upload_affinity, Redis store",
			Config: func(listen, admin, backend string) string {
				return config(wrkbench.HARedis(*redisAddr), true)(listen, admin, backend)
			},
			Handler: policyID, Goal: redisGoal,
			Setup: func(c *wrkbench.Contender) error { return setUp(c, *servers, true) }},
	}
}

// config returns a contender's Caddyfile; backends are the upload servers'
// addresses, space-separated, server 1 first. ha is the ha global option's
// block ("" for the memory store, the default). Without the policy, it
// proxies to server 1 alone.
func config(ha string, policy bool) func(listen, admin, backends string) string {
	return func(listen, admin, backends string) string {
		site := fmt.Sprintf("\treverse_proxy %s {\n\t\tlb_policy upload_affinity\n\t}\n", backends)
		if !policy {
			first, _, _ := strings.Cut(backends, " ")
			site = fmt.Sprintf("\treverse_proxy %s\n", first)
		}
		return wrkbench.Caddyfile(listen, admin, ha, site)
	}
}

// redisReport is what the Redis contender's probe reports: commands per
// chunk in each run's note too.
var redisReport = wrkbench.RedisReport{
	Breakdown: true,
	Explain: []string{
		"(INFO commandstats deltas over each run: a chunk reads its binding and extends its TTL,",
		"GET + PEXPIRE = 2, or GETEX = 1; round trips are Redis's read events, INFO stats",
		"total_reads_processed; the bench's own INFO calls are left out)",
	},
}

// prepare starts redis-server for the Redis store, skipping its contender
// if it cannot, and gives that contender its probe.
func prepare(dir string, selected []*wrkbench.Contender, redisAddr *string) ([]string, error) {
	var notes []string
	*redisAddr, notes = wrkbench.PrepareRedis(dir, *redisBin, "redis", selected, redisReport)
	return notes, nil
}

// startUploadServers runs n upload servers, srv-1..srv-n, in a process of
// their own (this program again) and returns their addresses.
func startUploadServers(dir string, n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = loopback.FreeAddr()
	}
	p, err := wrkbench.StartSelf("upload servers", filepath.Join(dir, "uploads.log"), serversEnv+"="+strings.Join(addrs, ","))
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := wrkbench.WaitHTTP("http://"+a+"/healthz", p, 10*time.Second); err != nil {
			return nil, fmt.Errorf("upload servers: %v", err)
		}
	}
	return addrs, nil
}

// serveUploads is the upload servers' process: srv-i on addrs[i-1], until
// the bench ends.
func serveUploads(addrs []string) {
	wrkbench.ExitWithParent()
	for i, a := range addrs {
		s := fakecluster.NewUploadServer(fmt.Sprintf("srv-%d", i+1))
		if err := s.StartOn(a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "upload server %s on %s\n", s.ID(), s.Addr())
	}
	select {}
}

var client = &http.Client{Timeout: 5 * time.Second}

// setUp creates c's upload of uploadLength bytes, through c's Caddy when
// throughCaddy, else on server 1 directly, points c's URL at it and checks
// that a chunk sent there is answered 204 by server 1.
func setUp(c *wrkbench.Contender, servers []string, throughCaddy bool) error {
	if len(servers) == 0 {
		return errors.New("no upload servers")
	}
	caddy := strings.TrimSuffix(c.URL, "/")
	key := ownedKey(c.Name, servers)
	create := "http://" + servers[0]
	if throughCaddy {
		create = caddy
	}
	req, _ := http.NewRequest(http.MethodPost, create+"/api/uploads", nil)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Upload-Length", strconv.Itoa(uploadLength))
	resp, err := do(req)
	if err != nil {
		return fmt.Errorf("creating the upload: %v", err)
	}
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(loc, "/api/uploads/") {
		return fmt.Errorf("creating the upload: %s, Location %q", resp.Status, loc)
	}
	owner := resp.Header.Get("X-Server-Id")
	c.URL = caddy + loc

	// One chunk, as wrk will send it, through the contender's Caddy.
	req, _ = http.NewRequest(http.MethodPatch, c.URL, strings.NewReader(strings.Repeat("x", chunkSize)))
	req.Header.Set("Upload-Offset", "0")
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	if resp, err = do(req); err != nil {
		return fmt.Errorf("sending a chunk: %v", err)
	}
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Server-Id") != owner {
		return fmt.Errorf("a chunk of an upload created on %s: %s from %q", owner, resp.Status, resp.Header.Get("X-Server-Id"))
	}
	c.Label += fmt.Sprintf("; upload on %s", owner)
	if owner != "srv-1" {
		c.Label += " (not srv-1: the policy's hashing changed?)"
	}
	return nil
}

func do(req *http.Request) (*http.Response, error) {
	resp, err := client.Do(req.WithContext(wrkbench.Interrupted()))
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// ownedKey returns an idempotency key, unique to the contender and this
// run, that upload_affinity's rendezvous hashing sends to server 1.
func ownedKey(name string, servers []string) string {
	base := fmt.Sprintf("bench-%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())
	for i := 0; ; i++ {
		key := fmt.Sprintf("%s-%d", base, i)
		if affinity.Rendezvous(key, servers) == 0 || i == 1000 {
			return key
		}
	}
}
