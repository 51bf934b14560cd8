package caddymodule

import (
	"runtime/debug"

	"go.uber.org/zap"
)

// goRecovered runs fn in a goroutine of its own. A panic in it is logged
// with its stack, as Caddy's active health checker does, rather than
// taking the whole server down.
func goRecovered(logger *zap.Logger, what string, fn func()) {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				logger.Error(what+" panicked", zap.Any("error", v), zap.ByteString("stack", debug.Stack()))
			}
		}()
		fn()
	}()
}
