package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
	"github.com/caddy-ha/caddy-ha/store"
)

// Every background goroutine of caddy-ha's modules, and of the domain
// packages they use, recovers from a panic, logs it with its stack (as
// Caddy's active health checker does) and goes on, rather than taking the
// whole server down: the leader monitor's probe loops (through
// healthcheck's Observer), dynamic checked's check loops (through its
// ServerObserver), the store's health check, the memory store's
// sweeper and the Redis batch senders (through store.ReportPanic), the
// Cloudflare refresher, the recheck of unreachable upload servers, the
// discovery of an upload's owner, and reload_handoff's accept loops.

// panicLogger is a recovered.Reporter that logs what panicked at ERROR.
func panicLogger(logger *zap.Logger, what string) recovered.Reporter {
	return func(v any, stack []byte) {
		logger.Error(what+" panicked", zap.Any("error", v), zap.ByteString("stack", stack))
	}
}

// goLoop runs run, a loop that returns once stop is closed, in a goroutine
// of its own, starting it again after pause if it panics; done is closed
// when it has returned for good.
func goLoop(logger *zap.Logger, what string, pause time.Duration, stop <-chan struct{}, done chan<- struct{}, run func()) {
	go func() {
		defer close(done)
		recovered.Loop(panicLogger(logger, what), pause, stop, run)
	}()
}

func init() {
	store.ReportPanic = func(what string, v any, stack []byte) {
		panicLogger(caddy.Log().Named("ha.store"), what)(v, stack)
	}
}
