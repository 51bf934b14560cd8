// Command fakecluster serves a simulated cluster on loopback for demos and
// benchmarks: see package fakecluster. In the default active-passive mode
// it serves nodes sharing a lease and a control API; in active-active mode
// (-mode active-active) it serves -servers upload servers, each with
// uploads of its own, on consecutive ports from -base-port.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
)

func main() {
	mode := flag.String("mode", "active-passive", "active-passive (nodes sharing a lease) or active-active (upload servers)")
	nodes := flag.Int("nodes", 2, "number of nodes (active-passive)")
	servers := flag.Int("servers", 3, "number of upload servers (active-active)")
	basePort := flag.Int("base-port", 9001, "node or server i listens on 127.0.0.1:base-port+i (0: free ports)")
	control := flag.String("control", "127.0.0.1:9000", "address of the control API (active-passive)")
	ttl := flag.Duration("lease-ttl", 0, "lease TTL (default 30s)")
	renew := flag.Duration("renew", 0, "renew interval (default 10s)")
	drain := flag.Duration("stop-drain", 250*time.Millisecond, "how long a stopping node serves as a follower after releasing its lease")
	tlsDir := flag.String("tls-dir", "", "serve the nodes over TLS (active-passive), with a certificate for "+fakecluster.NodeName+
		" from a private CA written to DIR/ca.pem, and a frontend certificate for 127.0.0.1 with its key in DIR/frontend.pem")
	flag.Parse()

	switch *mode {
	case "active-passive":
	case "active-active":
		activeActive(*servers, *basePort)
		return
	default:
		log.Fatalf("-mode %q: want active-passive or active-active", *mode)
	}

	cfg := fakecluster.Config{LeaseTTL: *ttl, RenewInterval: *renew, BasePort: *basePort, StopDrain: *drain}
	if *tlsDir != "" {
		var err error
		if cfg.TLS, err = fakecluster.WriteDemoPKI(*tlsDir); err != nil {
			log.Fatal(err)
		}
	}
	c, err := fakecluster.New(cfg, *nodes)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	for _, n := range c.Nodes() {
		fmt.Printf("node %s on %s\n", n.ID(), n.URL())
	}
	fmt.Printf("control API on http://%s (GET /state, POST /nodes/{id}/kill?mode=refuse|hang, /stop, /start, /claim?epoch=N, /forge?epoch=N&lease=D, POST /database/down|up|reseed, POST /reset?leader=ID)\n", *control)

	srv := &http.Server{Addr: *control, Handler: c.ControlHandler()}
	go func() {
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	waitSignal()
	srv.Close()
	c.Close()
}

// activeActive serves n upload servers named srv-1..srv-n until a signal.
func activeActive(n, basePort int) {
	if n < 1 {
		log.Fatalf("-servers %d: want at least 1", n)
	}
	var started []*fakecluster.UploadServer
	closeAll := func() {
		for _, s := range started {
			s.Close()
		}
	}
	for i := range n {
		s := fakecluster.NewUploadServer(fmt.Sprintf("srv-%d", i+1))
		var err error
		if basePort == 0 {
			err = s.Start()
		} else {
			err = s.StartOn(fmt.Sprintf("127.0.0.1:%d", basePort+i))
		}
		if err != nil {
			closeAll()
			log.Fatal(err)
		}
		started = append(started, s)
		fmt.Printf("upload server %s on http://%s\n", s.ID(), s.Addr())
	}
	fmt.Println("API: POST /api/uploads, PATCH /api/uploads/{id}, PUT /api/uploads/{id}/chunks/{n}, HEAD|GET|DELETE /api/uploads/{id}, POST /api/uploads/{id}/complete")
	waitSignal()
	closeAll()
}

func waitSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
