package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/pinning"
)

// Both contenders run the Caddyfile of the transport's documentation, on a
// server that speaks HTTP/1.1 only.
func TestConfig(t *testing.T) {
	const want = `{
	admin off
	persist_config off
	log {
		level ERROR
	}
	servers {
		protocols h1
	}
}
:8080 {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:9090 {
		transport pinned {
			max_pinned 4096
			max_pinned_per_client 4096
		}
	}
}
`
	if got := config(pinned)("127.0.0.1:8080", "off", "127.0.0.1:9090"); got != want {
		t.Errorf("config(pinned):\n%s\nwant:\n%s", got, want)
	}
	// The stock contender differs only in its transport.
	stock := strings.Replace(want, pinned, "transport http", 1)
	if got := config(pooled)("127.0.0.1:8080", "off", "127.0.0.1:9090"); got != stock {
		t.Errorf("config(pooled):\n%s\nwant:\n%s", got, stock)
	}
}

// memConns is how many client connections a batch of BenchmarkPinnedMemory
// holds open at once.
const memConns = 500

// upstreamEnv, when set in the environment, makes the test binary the
// trivial upstream, listening on its value: a process of its own, so that
// the upstream's side of each connection is not counted as the proxy's.
const upstreamEnv = "PINNED_BENCH_UPSTREAM"

func TestMain(m *testing.M) {
	if addr := os.Getenv(upstreamEnv); addr != "" {
		serveUpstream(addr)
		return
	}
	os.Exit(m.Run())
}

// serveUpstream answers every request with 200 and a 2-byte body, as
// wrkbench's backend does, until the benchmark ends.
func serveUpstream(addr string) {
	wrkbench.ExitWithParent()
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
	os.Exit(1)
}

// BenchmarkPinnedMemory measures what a client connection costs a proxy in
// this process, in front of the trivial upstream in a process of its own:
//
//   - pooled: a single shared http.Transport, as stock Caddy's transport
//     http, whose upstream connections serve every client;
//   - pinned: a pinning.Pool, as transport pinned, which gives each client
//     connection that sends credentials (here an NTLM NEGOTIATE message,
//     which the upstream ignores) an upstream connection of its own;
//   - pinned-anonymous: the same pool, with requests without credentials,
//     which share its upstream connections as pooled does.
//
// An op is a new client connection (a raw one, this process's only other
// part) and its first request, proxied and answered; ns/op, B/op and
// allocs/op are those of opening it, the client's side included. The
// connections are opened one after the other in batches of memConns and
// held open, kept alive; once a batch's are all idle, bytes/conn (pooled)
// and bytes/pin (pinned) are the growth of the heap and the stacks in use
// (HeapInuse + StackInuse, after GC) per held connection, goroutines/conn
// and goroutines/pin the growth of the goroutines. The difference between
// the two is what a pin holds: its upstream connection's buffers and the
// goroutine that reads it while idle.
func BenchmarkPinnedMemory(b *testing.B) {
	upstream := loopback.FreeAddr()
	p, err := wrkbench.StartSelf("upstream", filepath.Join(b.TempDir(), "upstream.log"), upstreamEnv+"="+upstream)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	if err := wrkbench.WaitHTTP("http://"+upstream+"/", p, 10*time.Second); err != nil {
		b.Fatal(err)
	}

	b.Run("pooled", func(b *testing.B) {
		shared := &http.Transport{}
		b.Cleanup(shared.CloseIdleConnections)
		roundTrip := func(_ net.Conn, req *http.Request) (*http.Response, error) { return shared.RoundTrip(req) }
		front := startFront(b, upstream, roundTrip, nil)
		measureHeld(b, front, nil, "conn", false)
	})
	for _, credentials := range []bool{true, false} {
		name, unit := "pinned", "pin"
		if !credentials {
			name, unit = "pinned-anonymous", "conn"
		}
		b.Run(name, func(b *testing.B) {
			pool := pinning.New(&http.Transport{}, pinning.Config{Max: memConns})
			b.Cleanup(pool.Close)
			front := startFront(b, upstream, pool.RoundTrip, pool.ConnState)
			measureHeld(b, front, pool, unit, credentials)
		})
	}
}

// front is a proxy's HTTP server, with counts of its connections' states.
type front struct {
	addr string
	open atomic.Int64
	// answered counts connections that went idle: done with a request, the
	// server waits for their next one.
	answered atomic.Int64
}

// clientConnKey holds, in a request's context, the client connection it
// arrived on, as transport pinned's server hook does.
type clientConnKey struct{}

// startFront serves on loopback a proxy that sends every request to
// upstream by roundTrip, with the connection it arrived on; connState, if
// set, hears of the server's connections. It is closed when b ends.
func startFront(b *testing.B, upstream string, roundTrip func(net.Conn, *http.Request) (*http.Response, error), connState func(net.Conn, http.ConnState)) *front {
	f := &front{}
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, _ := r.Context().Value(clientConnKey{}).(net.Conn)
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.RequestURI = "http", upstream, ""
		resp, err := roundTrip(client, out)
		if refusal, ok := errors.AsType[*pinning.Refusal](err); ok {
			resp, err = refusal.Response(out), nil
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
	srv := &http.Server{
		Handler:           proxy,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, clientConnKey{}, c)
		},
		ConnState: func(c net.Conn, s http.ConnState) {
			if connState != nil {
				connState(c, s)
			}
			switch s {
			case http.StateNew:
				f.open.Add(1)
			case http.StateIdle:
				f.answered.Add(1)
			case http.StateClosed, http.StateHijacked:
				f.open.Add(-1)
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	f.addr = ln.Addr().String()
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return f
}

// measureHeld opens b.N client connections to front in batches of
// memConns, each with one request, and reports what a held connection
// costs as bytes/<unit> and goroutines/<unit>. pool, if set, is the front's
// pinning pool: each held connection is to have a pin if its request
// carries credentials, else none.
func measureHeld(b *testing.B, front *front, pool *pinning.Pool, unit string, credentials bool) {
	// One connection first, unmeasured: the shared transport's upstream
	// connection and the servers' first allocations are not a connection's.
	c, err := openConn(front.addr, false)
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	settle(b, func() bool { return front.open.Load() == 0 }, "the warm-up connection to close")

	var grown, goroutines, held int64
	conns := make([]net.Conn, 0, memConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	b.ResetTimer()
	for opened := 0; opened < b.N; {
		b.StopTimer()
		batch := min(memConns, b.N-opened)
		baseAnswered := front.answered.Load()
		baseGoroutines := runtime.NumGoroutine()
		baseBytes := inUse()
		b.StartTimer()
		for range batch {
			c, err := openConn(front.addr, credentials)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		b.StopTimer()
		opened += batch

		settle(b, func() bool { return front.answered.Load()-baseAnswered == int64(batch) }, "the server's connections to wait for their next request")
		wantPinned := 0
		if credentials {
			wantPinned = batch
		}
		if pool != nil && pool.Len() != wantPinned {
			b.Fatalf("%d connections held, %d pinned, want %d", batch, pool.Len(), wantPinned)
		}
		grown += int64(inUse()) - int64(baseBytes)
		goroutines += int64(runtime.NumGoroutine() - baseGoroutines)
		held += int64(batch)

		for _, c := range conns {
			c.Close()
		}
		conns = conns[:0]
		// Before the next batch's baseline: everything this one held is
		// gone, pins and their upstream connections' goroutines too.
		settle(b, func() bool {
			return front.open.Load() == 0 && (pool == nil || pool.Len() == 0) && runtime.NumGoroutine() <= baseGoroutines
		}, "the batch's connections to close")
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(grown)/float64(held), "bytes/"+unit)
	b.ReportMetric(float64(goroutines)/float64(held), "goroutines/"+unit)
}

// openConn opens a client connection to addr and sends one request on it,
// with credentials if asked, reading the answer, which is to be 200; the
// connection stays open. It keeps nothing but the connection, so that a
// held connection costs the client's side as little as it can.
func openConn(addr string, credentials bool) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	req := "GET / HTTP/1.1\r\nHost: bench\r\n"
	if credentials {
		req += credentialsHeader + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// inUse returns the bytes of heap and stacks in use once garbage is
// collected. Twice: the first GC moves sync.Pool's buffers to its victim
// cache, the second frees them.
func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// settle waits up to 10s for done, failing b with what it waited for.
func settle(b *testing.B, done func() bool, what string) {
	for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("waited 10s for %s", what)
		}
	}
}
