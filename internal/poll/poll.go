// Package poll lets tests wait for a condition by polling it, never by
// sleeping a guessed time.
package poll

import (
	"testing"
	"time"
)

// Until polls cond every 2ms until it holds, or fails the test once
// timeout has passed.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
