package store

import (
	"log"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// ReportPanic is told of a panic in a store's background goroutine (the
// memory store's sweeper, the Redis batch senders), which then goes on. A
// program sets it to its own logger before opening stores; by default it
// goes to the standard logger.
var ReportPanic = func(what string, v any, stack []byte) {
	log.Printf("store: %s panicked: %v\n%s", what, v, stack)
}

// reporter is ReportPanic for what.
func reporter(what string) recovered.Reporter {
	return func(v any, stack []byte) { ReportPanic(what, v, stack) }
}
