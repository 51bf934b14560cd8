package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-ha/caddy-ha/affinity"
	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/store"
)

// uploadServers starts n active/active servers with uploads of their own.
func uploadServers(t testing.TB, n int) []*fakecluster.UploadServer {
	t.Helper()
	servers, err := fakecluster.StartUploadServers(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		t.Cleanup(s.Close)
	}
	return servers
}

func affinitySite(servers []*fakecluster.UploadServer, policy string) string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return "reverse_proxy " + strings.Join(addrs, " ") + " {\n\t\tlb_policy upload_affinity" + policy + "\n\t}"
}

// uploadClient is a client of chunked uploads through one or more proxies.
type uploadClient struct {
	proxies []string // base URLs; requests alternate between them
	clients []*http.Client
	n       int
	mu      sync.Mutex
}

func newUploadClient(proxies ...string) *uploadClient {
	return &uploadClient{proxies: proxies, clients: []*http.Client{{Timeout: 10 * time.Second}}}
}

// also sends every other pair of requests from another loopback address:
// with two proxies, each sees both addresses.
func (c *uploadClient) fromTwoAddresses() *uploadClient {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c.clients = append(c.clients, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}})
	return c
}

// closeIdle drops kept-alive connections, which a reloaded server closes.
func (c *uploadClient) closeIdle() {
	for _, cl := range c.clients {
		cl.CloseIdleConnections()
	}
}

// do sends one request, through the next proxy in turn (and from the next
// address every two requests).
func (c *uploadClient) do(method, path string, body []byte, hdr ...string) (*http.Response, []byte, error) {
	c.mu.Lock()
	i := c.n
	c.n++
	c.mu.Unlock()
	req, err := http.NewRequest(method, c.proxies[i%len(c.proxies)]+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for j := 0; j+1 < len(hdr); j += 2 {
		req.Header.Set(hdr[j], hdr[j+1])
	}
	client := c.clients[i/2%len(c.clients)]
	resp, err := client.Do(req)
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		// A connection reset while Caddy's reload hands its listener over:
		// nothing was sent, so it is sent again, as an upload client would.
		req.Body = io.NopCloser(bytes.NewReader(body))
		resp, err = client.Do(req)
	}
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, nil
}

func (c *uploadClient) create(key string, length int) (string, error) {
	resp, _, err := c.do("POST", "/api/uploads", nil, "Idempotency-Key", key, "Upload-Length", strconv.Itoa(length))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 201 && resp.StatusCode != 200 {
		return "", fmt.Errorf("create: %d", resp.StatusCode)
	}
	return resp.Header.Get("Location"), nil
}

// send writes data[from:to] in chunks, in a shuffled order, alternating
// between the two chunk styles.
func (c *uploadClient) send(location string, data []byte, chunk, from, to int, r *rand.Rand) error {
	var offsets []int
	for off := from; off < to; off += chunk {
		offsets = append(offsets, off)
	}
	r.Shuffle(len(offsets), func(i, j int) { offsets[i], offsets[j] = offsets[j], offsets[i] })
	for i, off := range offsets {
		end := min(off+chunk, to)
		var resp *http.Response
		var err error
		// Chunk numbers name chunks of the full size (or the last one).
		byNumber := i%2 == 1 && off%chunk == 0 && (end-off == chunk || end == len(data))
		if !byNumber {
			resp, _, err = c.do("PATCH", location, data[off:end], "Upload-Offset", strconv.Itoa(off))
		} else {
			resp, _, err = c.do("PUT", location+"/chunks/"+strconv.Itoa(off/chunk), data[off:end], "Chunk-Size", strconv.Itoa(chunk))
		}
		if err != nil {
			return err
		}
		if resp.StatusCode != 204 {
			return fmt.Errorf("chunk at %d: %d (Retry-After %q)", off, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	return nil
}

func (c *uploadClient) complete(location string) error {
	resp, _, err := c.do("POST", location+"/complete", nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("complete: %d", resp.StatusCode)
	}
	return nil
}

// anUpload is one upload a test makes.
type anUpload struct {
	key      string
	data     []byte
	chunk    int
	location string
}

func randomUploads(n int, r *rand.Rand) []*anUpload {
	ups := make([]*anUpload, n)
	for i := range ups {
		data := make([]byte, 1+r.IntN(48<<10))
		for j := range data {
			data[j] = byte(r.IntN(256))
		}
		ups[i] = &anUpload{key: fmt.Sprintf("key-%d-%d", i, r.Int64()), data: data, chunk: 1 + len(data)/(1+r.IntN(10))}
	}
	return ups
}

// runUploads makes every upload concurrently: create, the first half, then
// between(), the rest and completion. It returns the errors by upload.
func runUploads(t *testing.T, c *uploadClient, ups []*anUpload, between func()) map[*anUpload]error {
	errs := map[*anUpload]error{}
	var mu sync.Mutex
	fail := func(u *anUpload, err error) {
		mu.Lock()
		errs[u] = err
		mu.Unlock()
	}
	var half, all sync.WaitGroup
	half.Add(len(ups))
	all.Add(len(ups))
	release := make(chan struct{})
	for i, u := range ups {
		go func() {
			defer all.Done()
			r := rand.New(rand.NewPCG(uint64(i), 9))
			var err error
			if u.location, err = c.create(u.key, len(u.data)); err == nil {
				err = c.send(u.location, u.data, u.chunk, 0, len(u.data)/2, r)
			}
			half.Done()
			<-release
			if err == nil {
				err = c.send(u.location, u.data, u.chunk, len(u.data)/2, len(u.data), r)
			}
			if err == nil {
				err = c.complete(u.location)
			}
			if err != nil {
				fail(u, err)
			}
		}()
	}
	half.Wait()
	if between != nil {
		between()
	}
	close(release)
	all.Wait()
	return errs
}

// checkServers proves from the servers' own records that no request
// reached a server without the upload (no 404) and that every upload not
// in failed is complete and byte-exact on exactly one server.
func checkServers(t *testing.T, servers []*fakecluster.UploadServer, ups []*anUpload, failed map[*anUpload]error) {
	t.Helper()
	where := map[string][]fakecluster.UploadRecord{}
	for _, s := range servers {
		for _, r := range s.Requests() {
			if r.Status == 404 && r.Method != "HEAD" { // discovery asks every server with HEAD
				t.Errorf("%s answered 404 to %s %s: a request reached a server without the upload", s.ID(), r.Method, r.Path)
			}
		}
		for _, u := range s.Uploads() {
			where[u.IdempotencyKey] = append(where[u.IdempotencyKey], u)
		}
	}
	for _, u := range ups {
		if failed[u] != nil {
			continue
		}
		recs := where[u.key]
		if len(recs) != 1 {
			t.Errorf("upload %s exists on %d servers", u.key, len(recs))
			continue
		}
		if !recs[0].Completed || !bytes.Equal(recs[0].Data, u.data) {
			t.Errorf("upload %s: completed %v, %d of %d bytes, byte-exact %v", u.key, recs[0].Completed, recs[0].Received, len(u.data), bytes.Equal(recs[0].Data, u.data))
		}
	}
}

// affinityEvent is the count of an upload_affinity event.
func affinityEvent(tc *testCaddy, event string) float64 {
	return counterValue(tc, `caddy_ha_upload_affinity_events_total{event="`+event+`"}`)
}

// 1 and 6. 50 concurrent uploads through one Caddy, from two client
// addresses: all complete and byte-exact on their owners, no 404.
func TestUploadAffinityConcurrentUploads(t *testing.T) {
	servers := uploadServers(t, 3)
	tc := startCaddy(t, nil, "", affinitySite(servers, ""))
	event := func(e string) float64 { return affinityEvent(tc, e) }
	learned, hits, removed := event("learned"), event("hit"), event("removed")
	ups := randomUploads(50, rand.New(rand.NewPCG(1, 1)))
	errs := runUploads(t, newUploadClient("http://"+tc.addr).fromTwoAddresses(), ups, nil)
	for u, err := range errs {
		t.Errorf("upload %s: %v", u.key, err)
	}
	checkServers(t, servers, ups, nil)
	perServer := make([]int, len(servers))
	for i, s := range servers {
		perServer[i] = len(s.Uploads())
	}
	t.Logf("uploads per server: %v", perServer)
	chunks := 0
	for _, u := range ups {
		chunks += (len(u.data)+u.chunk-1)/u.chunk + 1 // with the first half's split, at least this many
	}
	if v := event("learned") - learned; v != 50 {
		t.Errorf("learned bindings rose by %v, want 50", v)
	}
	if v := event("hit") - hits; v < float64(chunks) {
		t.Errorf("binding hits rose by %v, want at least the %d chunks and completions", v, chunks)
	}
	if v := event("removed") - removed; v != 50 {
		t.Errorf("removed bindings rose by %v, want 50 (one per completion)", v)
	}
}

// A creation response that names the upload in its JSON body, with learn
// json: the fake servers answer {"id": …}.
func TestUploadAffinityLearnsFromJSON(t *testing.T) {
	servers := uploadServers(t, 3)
	tc := startCaddy(t, nil, "", affinitySite(servers, " {\n\t\t\tlearn json id\n\t\t}"))
	event := func(e string) float64 { return affinityEvent(tc, e) }
	learned, discovered := event("learned"), event("discovered")
	ups := randomUploads(10, rand.New(rand.NewPCG(6, 6)))
	for u, err := range runUploads(t, newUploadClient("http://"+tc.addr), ups, nil) {
		t.Errorf("upload %s: %v", u.key, err)
	}
	checkServers(t, servers, ups, nil)
	if l, d := event("learned")-learned, event("discovered")-discovered; l != 10 || d != 0 {
		t.Errorf("learned %v and discovered %v bindings, want 10 learned from the JSON and none discovered", l, d)
	}
}

// 2 and 6. Two Caddy instances sharing Redis, requests alternating between
// them and between two client addresses: with Redis as the ha app's store,
// and as the policy's own.
func TestUploadAffinityTwoInstancesSharingRedis(t *testing.T) {
	srv := redistest.Start(t)
	// unknown reject: a binding missing from Redis would be refused, not
	// found by asking the servers.
	policy := " {\n\t\t\tunknown reject\n\t\t\t%s\n\t\t}"
	t.Run("ha store", func(t *testing.T) {
		testUploadsThroughTwoInstances(t, redisValue(srv), "ha:", redisOption(srv, "ha:"), fmt.Sprintf(policy, ""))
	})
	t.Run("own store", func(t *testing.T) {
		testUploadsThroughTwoInstances(t, redisValue(srv), "own:", "", fmt.Sprintf(policy, redisStore(srv, "own:")))
	})
}

func testUploadsThroughTwoInstances(t *testing.T, value func(fullKey string) string, prefix, globalOpts, policy string) {
	servers := uploadServers(t, 3)
	a := startCaddy(t, nil, globalOpts, affinitySite(servers, policy))
	b := startCaddyProcess(t, globalOpts, affinitySite(servers, policy))
	ups := randomUploads(30, rand.New(rand.NewPCG(2, 2)))
	c := newUploadClient("http://"+a.addr, b.url("")).fromTwoAddresses()
	errs := runUploads(t, c, ups, nil)
	for u, err := range errs {
		t.Errorf("upload %s: %v", u.key, err)
	}
	checkServers(t, servers, ups, nil)

	// An upload left open keeps its binding in the store, under the prefix.
	location, err := c.create("left-open", 10)
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + "ua:" + path.Base(location)
	if value(key) == "" {
		t.Fatalf("no binding %s in the store", key)
	}
}

// 3. A server added to the pool and a config reload, both mid-upload: no
// upload moves. With unknown reject, a binding lost in the reload would be
// refused, not found again by asking the servers.
func TestUploadAffinityPoolChangeAndReloadMidUpload(t *testing.T) {
	servers := uploadServers(t, 4)
	const policy = " {\n\t\t\tunknown reject\n\t\t}"
	tc := startCaddy(t, nil, "", affinitySite(servers[:3], policy))
	misses, discovered := affinityEvent(tc, "miss"), affinityEvent(tc, "discovered")
	ups := randomUploads(30, rand.New(rand.NewPCG(3, 3)))
	c := newUploadClient("http://" + tc.addr)
	errs := runUploads(t, c, ups, func() {
		tc.load(nil, "", affinitySite(servers, policy)) // srv-4 joins; a reload
		c.closeIdle()
	})
	for u, err := range errs {
		t.Errorf("upload %s: %v", u.key, err)
	}
	checkServers(t, servers, ups, nil)
	if m, d := affinityEvent(tc, "miss")-misses, affinityEvent(tc, "discovered")-discovered; m != 0 || d != 0 {
		t.Errorf("%v misses and %v discoveries: bindings were lost", m, d)
	}
}

// checkVictimsUploadsRefused checks that the uploads a server out of
// service owned (by idempotency key) failed with 503 and Retry-After 7,
// and that every other upload went through.
func checkVictimsUploadsRefused(t *testing.T, ups []*anUpload, errs map[*anUpload]error, owned map[string]bool) {
	t.Helper()
	if len(owned) == 0 {
		t.Fatal("the victim owned no upload: the test proves nothing")
	}
	for _, u := range ups {
		err := errs[u]
		switch {
		case owned[u.key] && (err == nil || !strings.Contains(err.Error(), `503 (Retry-After "7")`)):
			t.Errorf("upload %s on the server out of service: %v, want 503 with Retry-After 7", u.key, err)
		case !owned[u.key] && err != nil:
			t.Errorf("upload %s on a server in service: %v", u.key, err)
		}
	}
}

// 4. The owner killed: its uploads get 503 with Retry-After, never another
// server; the others complete.
func TestUploadAffinityOwnerKilled(t *testing.T) {
	servers := uploadServers(t, 3)
	tc := startCaddy(t, nil, "", affinitySite(servers, " {\n\t\t\tretry_after 7s\n\t\t}"))
	ups := randomUploads(30, rand.New(rand.NewPCG(4, 4)))
	victim := servers[0]
	owned := map[string]bool{}
	errs := runUploads(t, newUploadClient("http://"+tc.addr), ups, func() {
		for _, u := range victim.Uploads() {
			owned[u.IdempotencyKey] = true
		}
		victim.Kill()
	})
	checkVictimsUploadsRefused(t, ups, errs, owned)
	checkServers(t, servers[1:], ups, errs)
	if v := metricValue(tc, `caddy_ha_upload_affinity_events_total{event="owner_down"}`); v < 1 {
		t.Errorf("owner_down events: %v", v)
	}
}

// uploadRequests counts the requests a server received for uploads (health
// checks aside).
func uploadRequests(s *fakecluster.UploadServer) int {
	n := 0
	for _, r := range s.Requests() {
		if strings.HasPrefix(r.Path, "/api/uploads") {
			n++
		}
	}
	return n
}

// 4. The owner taken out of service while it still runs, by a reload
// without it or by active health checks: its uploads get 503 with
// Retry-After (it would have answered), none of their requests reaches it,
// the others complete.
func TestUploadAffinityOwnerOutOfService(t *testing.T) {
	const policy = " {\n\t\t\tunknown reject\n\t\t\tretry_after 7s\n\t\t}"
	for _, tt := range []struct {
		name string
		site func(servers []*fakecluster.UploadServer) string
	}{
		{"gone from the pool", func(servers []*fakecluster.UploadServer) string {
			return affinitySite(servers[1:], policy)
		}},
		{"down by health checks", func(servers []*fakecluster.UploadServer) string {
			// The health answer names its server: srv-1 fails health_body.
			return affinitySite(servers, policy+"\n\t\thealth_uri /healthz\n\t\thealth_body srv-[23]\n\t\thealth_interval 50ms")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			servers := uploadServers(t, 3)
			tc := startCaddy(t, nil, "", affinitySite(servers, policy))
			ups := randomUploads(30, rand.New(rand.NewPCG(7, 7)))
			victim := servers[0]
			owned := map[string]bool{}
			var victimRequests int
			c := newUploadClient("http://" + tc.addr)
			errs := runUploads(t, c, ups, func() {
				recs := victim.Uploads()
				for _, u := range recs {
					owned[u.IdempotencyKey] = true
				}
				if len(recs) == 0 {
					return
				}
				tc.load(nil, "", tt.site(servers))
				c.closeIdle()
				poll.Until(t, 5*time.Second, "the victim to be out of service", func() bool {
					resp, _, err := c.do("HEAD", "/api/uploads/"+recs[0].ID, nil)
					return err == nil && resp.StatusCode == 503
				})
				victimRequests = uploadRequests(victim)
			})
			checkVictimsUploadsRefused(t, ups, errs, owned)
			if n := uploadRequests(victim) - victimRequests; n != 0 {
				t.Errorf("the server out of service received %d upload requests", n)
			}
			checkServers(t, servers, ups, errs)
		})
	}
}

// An abort (DELETE of the upload) through the proxy removes its binding:
// with unknown reject, the upload's next request is a miss, answered 404
// by the proxy without reaching any server.
func TestUploadAffinityAbortRemovesBinding(t *testing.T) {
	servers := uploadServers(t, 3)
	tc := startCaddy(t, nil, "", affinitySite(servers, " {\n\t\t\tunknown reject\n\t\t}"))
	c := newUploadClient("http://" + tc.addr)
	location, err := c.create("to-abort", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.send(location, []byte("0123456789"), 5, 0, 5, rand.New(rand.NewPCG(8, 8))); err != nil {
		t.Fatal(err)
	}
	removed, misses := affinityEvent(tc, "removed"), affinityEvent(tc, "miss")
	if resp, _, err := c.do("DELETE", location, nil); err != nil || resp.StatusCode != 204 {
		t.Fatalf("abort: %v %v", resp, err)
	}
	if v := affinityEvent(tc, "removed") - removed; v != 1 {
		t.Errorf("removed bindings rose by %v, want 1", v)
	}
	total := func() (n int) {
		for _, s := range servers {
			n += len(s.Requests())
		}
		return n
	}
	before := total()
	if resp, _, err := c.do("HEAD", location, nil); err != nil || resp.StatusCode != 404 {
		t.Fatalf("a request of the aborted upload: %v %v", resp, err)
	}
	if v := affinityEvent(tc, "miss") - misses; v != 1 {
		t.Errorf("misses rose by %v, want 1", v)
	}
	if n := total() - before; n != 0 {
		t.Errorf("the servers received %d requests for the aborted upload", n)
	}
}

// The store failing: a hung (paused) Redis makes an upload's requests 503
// store_error with Retry-After within store_timeout, a stopped one at
// once; never another server. Once Redis answers again the upload goes on.
func TestUploadAffinityStoreDown(t *testing.T) {
	servers := uploadServers(t, 3)
	srv := redistest.Start(t)
	const storeTimeout = 200 * time.Millisecond
	tc := startCaddy(t, nil, redisOption(srv, "down:"), affinitySite(servers, " {\n\t\t\tstore_timeout 200ms\n\t\t}"))
	c := newUploadClient("http://" + tc.addr)
	data := []byte("0123456789")
	location, err := c.create("store-down", len(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.send(location, data, 5, 0, 5, rand.New(rand.NewPCG(9, 9))); err != nil {
		t.Fatal(err)
	}
	secondHalf := func() (*http.Response, time.Duration) {
		start := time.Now()
		resp, _, err := c.do("PATCH", location, data[5:], "Upload-Offset", "5")
		if err != nil {
			t.Fatal(err)
		}
		return resp, time.Since(start)
	}
	wantStoreError := func(what string) {
		t.Helper()
		storeErrors := affinityEvent(tc, "store_error")
		resp, took := secondHalf()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || took > storeTimeout+time.Second {
			t.Errorf("Redis %s: %d, Retry-After %q, in %v; want 503 with Retry-After 5 within store_timeout",
				what, resp.StatusCode, resp.Header.Get("Retry-After"), took)
		}
		if v := affinityEvent(tc, "store_error") - storeErrors; v != 1 {
			t.Errorf("Redis %s: store errors rose by %v, want 1", what, v)
		}
	}

	srv.Pause()
	wantStoreError("paused")
	srv.Resume()
	poll.Until(t, 10*time.Second, "the upload to go on once Redis answers", func() bool {
		resp, _ := secondHalf()
		return resp.StatusCode == 204
	})
	srv.Kill()
	wantStoreError("stopped")
	for _, s := range servers {
		for _, r := range s.Requests() {
			if r.Status == 404 {
				t.Errorf("%s answered 404 to %s %s", s.ID(), r.Method, r.Path)
			}
		}
	}
}

// Discovery with a server down: the upload may be on it, so the answer is
// 503 with Retry-After, not 404, and it is not remembered: once the
// server is back, the upload is found there.
func TestUploadAffinityDiscoveryWithAServerDown(t *testing.T) {
	servers := uploadServers(t, 3)
	location, err := newUploadClient(servers[2].URL()).create("before-the-proxy", 10)
	if err != nil {
		t.Fatal(err)
	}
	tc := startCaddy(t, nil, "", affinitySite(servers, ""))
	c := newUploadClient("http://" + tc.addr)
	servers[2].Kill()
	for range 2 { // the second would find a remembered "not found"
		if resp, _, err := c.do("HEAD", location, nil); err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" {
			t.Fatalf("an unknown upload while a server is down: %v %v, want 503 with Retry-After 5", resp, err)
		}
	}
	if err := servers[2].Start(); err != nil {
		t.Fatal(err)
	}
	discovered := affinityEvent(tc, "discovered")
	if resp, _, err := c.do("HEAD", location, nil); err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Server-Id") != servers[2].ID() {
		t.Fatalf("the upload once its server is back: %v %v", resp, err)
	}
	if v := affinityEvent(tc, "discovered") - discovered; v != 1 {
		t.Errorf("discoveries rose by %v, want 1", v)
	}
}

// Discovery with a server that answers neither "here" (2xx) nor "not here"
// (404, 410) — throttling, wanting other credentials, redirecting,
// refusing the request: it may have the upload, so an unknown one is
// answered 503 with Retry-After, and not remembered: once that server
// answers 404 too, the upload is answered 404.
func TestUploadAffinityDiscoveryWithAServerThatDoesNotSay(t *testing.T) {
	servers := uploadServers(t, 1)
	var status atomic.Int32
	undecided := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(undecided.Close)
	tc := startCaddy(t, nil, "", "reverse_proxy "+servers[0].Addr()+" "+strings.TrimPrefix(undecided.URL, "http://")+
		" {\n\t\tlb_policy upload_affinity\n\t}")
	c := newUploadClient("http://" + tc.addr)
	const location = "/api/uploads/known-to-nobody"
	for _, code := range []int{http.StatusTooManyRequests, http.StatusUnauthorized, http.StatusForbidden, http.StatusTemporaryRedirect, http.StatusBadRequest} {
		status.Store(int32(code))
		if resp, _, err := c.do("HEAD", location, nil); err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" {
			t.Fatalf("an unknown upload while a server answers %d: %v %v, want 503 with Retry-After 5", code, resp, err)
		}
	}
	for _, notHere := range []struct {
		code int
		path string
	}{{http.StatusNotFound, location}, {http.StatusGone, location + "-gone"}} {
		status.Store(int32(notHere.code))
		if resp, _, err := c.do("HEAD", notHere.path, nil); err != nil || resp.StatusCode != 404 {
			t.Fatalf("an unknown upload while the servers answer 404 and %d: %v %v, want 404", notHere.code, resp, err)
		}
	}
}

// A binding that cannot be stored (the memory store full): the creation is
// answered 503 with Retry-After, not 201 with an upload nothing would
// route. Retried with the same idempotency key once there is room, it gets
// the same upload, bound.
func TestUploadAffinityBindingNotStored(t *testing.T) {
	servers := uploadServers(t, 3)
	tc := startCaddy(t, nil, "ha {\n\t\tstore memory {\n\t\t\tmax_keys 1\n\t\t}\n\t}", affinitySite(servers, " {\n\t\t\tunknown reject\n\t\t}"))
	c := newUploadClient("http://" + tc.addr)
	first, err := c.create("fills-the-store", 10)
	if err != nil {
		t.Fatal(err)
	}
	resp, _, err := c.do("POST", "/api/uploads", nil, "Idempotency-Key", "no-room", "Upload-Length", "10")
	if err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("a creation whose binding cannot be stored: %v %v, want 503 with Retry-After 5", resp, err)
	}
	if n := len(tc.logLines("storing an upload binding failed")); n != 1 {
		t.Errorf("%d log lines about the binding not stored, want 1", n)
	}
	if resp, _, err := c.do("DELETE", first, nil); err != nil || resp.StatusCode != 204 {
		t.Fatalf("abort of the first upload: %v %v", resp, err)
	}
	location, err := c.create("no-room", 10)
	if err != nil {
		t.Fatalf("the creation retried: %v", err)
	}
	var same []string
	for _, s := range servers {
		for _, u := range s.Uploads() {
			if u.IdempotencyKey == "no-room" {
				same = append(same, s.ID()+" "+u.ID)
			}
		}
	}
	if len(same) != 1 || !strings.HasSuffix(same[0], " "+path.Base(location)) {
		t.Fatalf("uploads of the retried creation: %v, want one, %s", same, location)
	}
	data := []byte("0123456789")
	if err := c.send(location, data, 5, 0, len(data), rand.New(rand.NewPCG(10, 10))); err != nil {
		t.Fatal(err)
	}
	if err := c.complete(location); err != nil {
		t.Fatal(err)
	}
}

// 5. A retried creation (same idempotency key) through either instance gets
// the same upload.
func TestUploadAffinityRetriedCreation(t *testing.T) {
	servers := uploadServers(t, 3)
	srv := redistest.Start(t)
	opt := redisOption(srv, "retried:")
	a := startCaddy(t, nil, opt, affinitySite(servers, ""))
	b := startCaddyProcess(t, opt, affinitySite(servers, ""))
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("retry-%d", i)
		first, err := newUploadClient("http://"+a.addr).create(key, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, via := range []string{"http://" + a.addr, b.url("")} {
			again, err := newUploadClient(via).create(key, 100)
			if err != nil || again != first {
				t.Fatalf("creation %s retried through %s: %q, %v; first %q", key, via, again, err, first)
			}
		}
	}
}

// An upload whose binding is unknown (created before this proxy, with its
// memory store, existed) is found by asking the servers; with unknown
// reject it is refused.
func TestUploadAffinityUnknownBinding(t *testing.T) {
	servers := uploadServers(t, 3)
	direct := newUploadClient(servers[2].URL())
	location, err := direct.create("before-the-proxy", 10)
	if err != nil {
		t.Fatal(err)
	}
	tc := startCaddy(t, nil, "", affinitySite(servers, ""))
	c := newUploadClient("http://" + tc.addr)
	if err := c.send(location, []byte("0123456789"), 5, 0, 10, rand.New(rand.NewPCG(5, 5))); err != nil {
		t.Fatal(err)
	}
	if err := c.complete(location); err != nil {
		t.Fatal(err)
	}
	checkServers(t, servers, nil, nil)
	tc.load(nil, "", affinitySite(servers, " {\n\t\t\tunknown reject\n\t\t}"))
	other, _ := direct.create("another", 10)
	if resp, _, err := newUploadClient("http://"+tc.addr).do("HEAD", other, nil); err != nil || resp.StatusCode != 404 {
		t.Fatalf("unknown reject: %v %v", resp, err)
	}
}

// 7. Hostile ids are refused without touching the store or a server.
func TestUploadAffinityHostileIDs(t *testing.T) {
	servers := uploadServers(t, 3)
	srv := redistest.Start(t)
	tc := startCaddy(t, nil, redisOption(srv, "hostile:"), affinitySite(servers, ""))
	// The store's commands, less the health check's (PING, and TIME for
	// the clock offset) and this test's own.
	stats := func() string {
		var out []string
		for _, l := range strings.Split(srv.Client().Info(context.Background(), "commandstats").Val(), "\r\n") {
			if strings.HasPrefix(l, "cmdstat_") && !strings.HasPrefix(l, "cmdstat_info") && !strings.HasPrefix(l, "cmdstat_ping") && !strings.HasPrefix(l, "cmdstat_time") && !strings.HasPrefix(l, "cmdstat_client") && !strings.HasPrefix(l, "cmdstat_hello") {
				name, _, _ := strings.Cut(l, ",")
				out = append(out, name)
			}
		}
		return strings.Join(out, " ")
	}
	before := stats()
	c := newUploadClient("http://" + tc.addr)
	for _, id := range []string{
		strings.Repeat("a", 10000), "..", "%2e%2e", "a%2Fb", "a%00b", "a%0d%0aX-Injected:%201", "%C3%BC", "a.b", "a%20b", "%25",
	} {
		resp, _, err := c.do("PATCH", "/api/uploads/"+id, []byte("x"), "Upload-Offset", "0")
		if err != nil {
			t.Fatalf("%.40q: %v", id, err)
		}
		if resp.StatusCode != 400 && resp.StatusCode != 404 && resp.StatusCode != 414 && resp.StatusCode != 431 {
			t.Errorf("%.40q: status %d", id, resp.StatusCode)
		}
	}
	// Paths that name an upload, or the collection, only once decoded (as
	// a server reads them): matched undecoded, they would go anywhere.
	for _, req := range [][2]string{
		{"PUT", "/api/upload%73/abc/chunks/1"}, {"PATCH", "/api/uploads%2Fabc"}, {"PATCH", "/api/x/../uploads/abc"},
		{"PATCH", "/api//uploads/abc"}, {"PATCH", "/api/uploads/abc/%2e%2e/xyz"}, {"POST", "/api/upload%73"},
		// Or once ASCII case is folded, as ASP.NET Core's routing reads them.
		{"PATCH", "/API/uploads/abc"}, {"PUT", "/api/Uploads/abc/chunks/1"}, {"POST", "/API/UPLOADS"},
		{"PATCH", "/api/upload%53/abc"}, {"POST", "/Api/Uploads/"},
	} {
		resp, _, err := c.do(req[0], req[1], []byte("x"), "Upload-Offset", "0", "Chunk-Size", "1", "Idempotency-Key", "k", "Upload-Length", "1")
		if err != nil || resp.StatusCode != 400 {
			t.Errorf("%s %s: %v %v, want 400", req[0], req[1], resp, err)
		}
	}
	if after := stats(); after != before {
		t.Fatalf("hostile ids reached the store: commands %s, then %s", before, after)
	}
	for _, s := range servers {
		if n := len(s.Requests()); n != 0 {
			t.Fatalf("%s received %d requests for hostile ids", s.ID(), n)
		}
	}
}

// Bad settings fail at adapt time with their line; the adapted JSON of
// every option is in testdata/caddyfile_adapt.
func TestUploadAffinityConfig(t *testing.T) {
	for _, tt := range []struct{ block, want string }{
		{"path /uploads", `path "/uploads" is not an upload pattern`},
		{"path /a/{id}/b", `path "/a/{id}/b" is not an upload pattern`},
		{"learn header", "learn_from must be location or json"},
		{"learn json", "wrong argument count"},
		{"unknown guess", "unknown must be discover or reject"},
		{"complete finish", "complete_path must start with /"},
		{"ttl -1s", "ttl must be positive"},
		{"fallback nosuch", "selection_policies.nosuch"},
		{"store etcd", "ha.stores.etcd"},
		{"store redis", "at least one address"},
		{"frobnicate", "unrecognized lb_policy upload_affinity option 'frobnicate'"},
	} {
		cf := "http://127.0.0.1:1 {\n\treverse_proxy 127.0.0.1:2 {\n\t\tlb_policy upload_affinity {\n\t\t\t" + tt.block + "\n\t\t}\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Caddyfile:4") {
			t.Errorf("%q: error %v, want %q at Caddyfile:4", tt.block, err, tt.want)
		}
	}
	// Only on reverse_proxy's HTTP transport.
	err := caddy.Validate(mustConfig(t, `{"admin":{"disabled":true},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:0"],"routes":[{"handle":[{"handler":"reverse_proxy","transport":{"protocol":"fastcgi"},"upstreams":[{"dial":"127.0.0.1:2"}],"load_balancing":{"selection_policy":{"policy":"upload_affinity"}}}]}]}}}}}`))
	if err == nil || !strings.Contains(err.Error(), "needs reverse_proxy's http transport") {
		t.Errorf("fastcgi transport: %v", err)
	}
}

// Refusals count against no server: with passive health checks that take
// a 404 as a failure, refusing an unknown upload marks nobody down.
func TestUploadAffinityRefusalsAreNobodysFailure(t *testing.T) {
	servers := uploadServers(t, 2)
	tc := startCaddy(t, nil, "", "reverse_proxy "+servers[0].Addr()+" "+servers[1].Addr()+` {
		lb_policy upload_affinity {
			unknown reject
			fallback round_robin
		}
		unhealthy_status 404
		max_fails 1
		fail_duration 1m
	}`)
	c := newUploadClient("http://" + tc.addr)
	for i := 0; i < 3; i++ {
		if resp, _, err := c.do("HEAD", "/api/uploads/unknown"+strconv.Itoa(i), nil); err != nil || resp.StatusCode != 404 {
			t.Fatalf("unknown upload: %v %v", resp, err)
		}
	}
	for i := 0; i < 10; i++ { // no idempotency key: round_robin over both
		if _, err := c.create("", 10); err == nil {
			t.Fatal("a creation without Idempotency-Key succeeded")
		}
	}
	for _, s := range servers {
		if n := len(s.Requests()); n < 4 {
			t.Errorf("%s got %d of 10 balanced requests: it was marked down by refusals", s.ID(), n)
		}
	}
}

// BenchmarkUploadAffinitySelectChunk is Select for a chunk of a bound
// upload with the memory store: the path checks, the binding's lookup and
// renewal, and the route handed to the transport.
func BenchmarkUploadAffinitySelectChunk(b *testing.B) {
	mem := store.NewMemory(0, 0)
	defer mem.Close()
	s := &UploadAffinity{varKey: "ha.upload_affinity.bench"}
	s.setDefaults()
	s.pattern, _ = affinity.CompilePattern(s.Path)
	s.bindings = &affinity.Bindings{Store: mem, Prefix: "ua:", TTL: time.Hour}
	pool := reverseproxy.UpstreamPool{}
	for _, dial := range []string{"10.0.0.1:9101", "10.0.0.2:9101", "10.0.0.3:9101"} {
		pool = append(pool, &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: dial})
	}
	const id = "01hzx3k9q7m2v8w4t6r5y1n0pb"
	if err := s.bindings.Bind(context.Background(), id, pool[1].Dial); err != nil {
		b.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{})
	r := httptest.NewRequestWithContext(ctx, http.MethodPut, "/api/uploads/"+id+"/chunks/17", nil)
	b.ReportAllocs()
	for b.Loop() {
		if u := s.Select(pool, r, nil); u != pool[1] {
			b.Fatalf("routed to %v", u)
		}
	}
}

// Two servers naming the same upload: the second creation is answered 502,
// never bound, and the upload stays routed to the server that named it first.
func TestUploadAffinityUploadNamedByTwoServers(t *testing.T) {
	var hits [2]atomic.Int32
	addrs := make([]string, 2)
	for i := range addrs {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			if r.Method == http.MethodPost {
				w.Header().Set("Location", "/api/uploads/the-same-id")
				w.WriteHeader(http.StatusCreated)
			}
		}))
		t.Cleanup(srv.Close)
		addrs[i] = strings.TrimPrefix(srv.URL, "http://")
	}
	// Policy "first" sends creations without a key to the pool's first
	// server: one, then, after a reload that reorders the pool, the other.
	site := func(pool ...string) string {
		return "reverse_proxy " + strings.Join(pool, " ") + " {\n\t\tlb_policy upload_affinity {\n\t\t\tfallback first\n\t\t}\n\t}"
	}
	tc := startCaddy(t, nil, "", site(addrs...))
	c := newUploadClient("http://" + tc.addr)
	if resp, _, err := c.do("POST", "/api/uploads", nil); err != nil || resp.StatusCode != 201 {
		t.Fatalf("first creation: %v %v", resp, err)
	}
	tc.load(nil, "", site(addrs[1], addrs[0])) // the second server first now
	c.closeIdle()
	resp, _, err := c.do("POST", "/api/uploads", nil)
	if err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("the same upload named by another server: %v %v, want 502", resp, err)
	}
	before := hits[0].Load()
	if resp, _, err := c.do("HEAD", "/api/uploads/the-same-id", nil); err != nil || resp.StatusCode != 200 || hits[0].Load() != before+1 {
		t.Fatalf("the upload after the conflict: %v %v, want routed to the server that named it first", resp, err)
	}
}

// A server that dies gets no new uploads: 50 uploads through two instances
// sharing Redis, the busiest server killed halfway. Its uploads get 503
// with Retry-After and none of their requests reaches another server;
// every upload created after the kill completes, those whose key hashes
// to the dead server included; once it is back it gets creations again.
func TestUploadAffinityDeadServerGetsNoCreations(t *testing.T) {
	srv := redistest.Start(t)
	servers := uploadServers(t, 3)
	const policy = " {\n\t\t\tunknown reject\n\t\t\tretry_after 7s\n\t\t}"
	opts := redisOption(srv, "ha:")
	a := startCaddy(t, nil, opts, affinitySite(servers, policy))
	b := startCaddyProcess(t, opts, affinitySite(servers, policy))
	c := newUploadClient("http://"+a.addr, b.url("")).fromTwoAddresses()
	ups := randomUploads(50, rand.New(rand.NewPCG(11, 11)))
	before, after := ups[:25], ups[25:]

	var victim *fakecluster.UploadServer
	owned := map[string]bool{}
	errs := runUploads(t, c, before, func() {
		victim = servers[0]
		for _, s := range servers {
			if len(s.Uploads()) > len(victim.Uploads()) {
				victim = s
			}
		}
		for _, u := range victim.Uploads() {
			owned[u.IdempotencyKey] = true
		}
		victim.Kill()
	})
	checkVictimsUploadsRefused(t, before, errs, owned)

	dials := make([]string, len(servers))
	for i, s := range servers {
		dials[i] = s.Addr()
	}
	hashesToVictim := func(key string) bool { return dials[affinity.Rendezvous(key, dials)] == victim.Addr() }
	moved := 0
	for _, u := range after {
		if hashesToVictim(u.key) {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no upload created after the kill hashes to the dead server: the test proves nothing")
	}
	for u, err := range runUploads(t, c, after, nil) {
		t.Errorf("upload %s, created after the kill: %v", u.key, err)
	}
	checkServers(t, servers, ups, errs)
	if v := affinityEvent(a, "unreachable"); v < 1 {
		t.Errorf("unreachable events: %v", v)
	}

	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	attempt := 0
	victimKey := func() string {
		for {
			attempt++
			if key := fmt.Sprintf("after-restart-%d", attempt); hashesToVictim(key) {
				return key
			}
		}
	}
	poll.Until(t, 10*time.Second, "both instances to send creations to the restarted server", func() bool {
		for _, proxy := range []string{"http://" + a.addr, b.url("")} {
			key := victimKey()
			if _, err := newUploadClient(proxy).create(key, 10); err != nil || !hasUpload(victim, key) {
				return false
			}
		}
		return true
	})
}

func hasUpload(s *fakecluster.UploadServer, key string) bool {
	for _, u := range s.Uploads() {
		if u.IdempotencyKey == key {
			return true
		}
	}
	return false
}
