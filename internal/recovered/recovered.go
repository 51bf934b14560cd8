// Package recovered runs the work of a background goroutine so that a
// panic in it is reported with its stack and the work goes on, as Caddy's
// active health checker recovers its own, instead of taking the whole
// process down.
package recovered

import (
	"runtime/debug"
	"time"
)

// Reporter is told of a panic: its value and the stack it happened on.
type Reporter func(v any, stack []byte)

// Loop calls run, a goroutine's whole loop that returns once stop is
// closed. If run panics, the panic goes to report and run is called again
// after pause (at once if pause is 0), unless stop is closed by then.
func Loop(report Reporter, pause time.Duration, stop <-chan struct{}, run func()) {
	for !Call(report, run) {
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// Call calls fn and reports whether it returned without panicking; a
// panic goes to report (if not nil).
func Call(report Reporter, fn func()) (returned bool) {
	defer func() {
		if v := recover(); v != nil && report != nil {
			report(v, debug.Stack())
		}
	}()
	fn()
	return true
}
