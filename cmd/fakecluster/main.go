// Command fakecluster serves a simulated active/passive cluster on loopback
// for demos and benchmarks: see package fakecluster.
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
	nodes := flag.Int("nodes", 2, "number of nodes")
	basePort := flag.Int("base-port", 9001, "node i listens on 127.0.0.1:base-port+i (0: free ports)")
	control := flag.String("control", "127.0.0.1:9000", "address of the control API")
	ttl := flag.Duration("lease-ttl", 0, "lease TTL (default 30s)")
	renew := flag.Duration("renew", 0, "renew interval (default 10s)")
	drain := flag.Duration("stop-drain", 250*time.Millisecond, "how long a stopping node serves as a follower after releasing its lease")
	flag.Parse()

	c, err := fakecluster.New(fakecluster.Config{LeaseTTL: *ttl, RenewInterval: *renew, BasePort: *basePort, StopDrain: *drain}, *nodes)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	for _, n := range c.Nodes() {
		fmt.Printf("node %s on http://%s\n", n.ID(), n.Addr())
	}
	fmt.Printf("control API on http://%s (GET /state, POST /nodes/{id}/kill?mode=refuse|hang, /stop, /start, /claim?epoch=N, POST /database/down|up)\n", *control)

	srv := &http.Server{Addr: *control, Handler: c.ControlHandler()}
	go func() {
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Close()
	c.Close()
}
