package fakecluster

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// WriteResult is what one client of a Writes stream saw.
type WriteResult struct {
	ID         string
	Sent, Done time.Time
	Status     int   // 0 if Err
	Err        error // transport error or client timeout
}

// Writes is an open-loop stream of POSTs with unique X-Request-Id values,
// each sent by its own goroutine, as independent clients do: a stuck
// request does not slow the others. The nodes' Executed records tell which
// writes ran, and where.
type Writes struct {
	mu      sync.Mutex
	results []WriteResult
	stop    chan struct{}
	wg      sync.WaitGroup
}

// maxWritesInFlight bounds the goroutines of a stream.
const maxWritesInFlight = 4096

// StartWrites posts to url once every interval, each write with the given
// client timeout, until Stop.
func StartWrites(url string, every, timeout time.Duration, transport *http.Transport) *Writes {
	w := &Writes{stop: make(chan struct{})}
	client := &http.Client{Timeout: timeout, Transport: transport}
	inflight := make(chan struct{}, maxWritesInFlight)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			inflight <- struct{}{}
			w.wg.Add(1)
			go func() {
				defer func() { <-inflight; w.wg.Done() }()
				r := WriteResult{ID: fmt.Sprintf("w%d", seq), Sent: time.Now()}
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"id":"`+r.ID+`"}`))
				req.Header.Set("X-Request-Id", r.ID)
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.Status = resp.StatusCode
				}
				r.Err, r.Done = err, time.Now()
				w.mu.Lock()
				w.results = append(w.results, r)
				w.mu.Unlock()
			}()
		}
	}()
	return w
}

// Count returns how many writes have completed.
func (w *Writes) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.results)
}

// Stop stops sending, waits for the writes in flight and returns them all.
func (w *Writes) Stop() []WriteResult {
	close(w.stop)
	w.wg.Wait()
	return w.results
}

// ExecutedIDs counts, per request id, how often any node executed it.
func (c *Cluster) ExecutedIDs() map[string]int {
	out := map[string]int{}
	for _, n := range c.nodes {
		for _, e := range n.Executed() {
			out[e.RequestID]++
		}
	}
	return out
}
