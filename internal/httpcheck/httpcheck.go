// Package httpcheck is what the benchmarks and the fault suite (cmd/chaos)
// ask of HTTP the same way: wait until an endpoint answers 200, and name
// how a request failed.
package httpcheck

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrorKind names how a request ended, for the tables: its status when it
// was answered, "timeout" when the client gave up, "conn" for any other
// transport error.
func ErrorKind(status int, err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return strconv.Itoa(status)
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "conn"
	}
}

// MigratesAcceptQueue reports whether the host moves a closed
// SO_REUSEPORT socket's accept queue to another socket of its group
// (net.ipv4.tcp_migrate_req=1). Caddy listens with a socket per config:
// without it, closing a replaced config's socket resets the connections
// still queued on it (docs/reload-handoff.md), a cost of the host's.
func MigratesAcceptQueue() bool {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// ResetAtConnect reports whether err is a connection reset while it was
// being dialled: a closed listening socket's queue reset it before the
// client could send a byte.
func ResetAtConnect(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNRESET)
}

// pollEvery is how often WaitOK asks.
const pollEvery = 50 * time.Millisecond

// WaitOK sends GET url, each try given up after try, until it is answered
// 200, and fails once timeout has passed or stop (nil: never) returns an
// error, such as a server process that exited or an interrupt, with the
// last failure. A try longer than the server may hold a request (a proxy
// waiting for a leader) lets a held request be answered.
func WaitOK(url string, timeout, try time.Duration, stop func() error) error {
	client := &http.Client{Timeout: try, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		if stop != nil {
			if err := stop(); err != nil {
				return err
			}
		}
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().Add(pollEvery).After(deadline) {
			return fmt.Errorf("%s not answered 200 within %v: %v", url, timeout, err)
		}
		time.Sleep(pollEvery)
	}
}
