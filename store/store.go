// Package store is the short-lived store of the cluster's toolkit (its
// guide "Running Multiple Servers") in Go: keys with string values that
// expire after a lifetime (rate-limit counters, upload bindings), with
// operations that are each atomic across every process sharing the store.
// Memory keeps everything in this process (bounded); Redis and PostgreSQL
// (a table in the cluster's own database, on its clock) are shared by every
// Caddy instance and by the cluster's own app. Guard turns an outage into
// fast failures, and Health checks a remote store and measures its clock.
package store

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Store is the short-lived store. An expired value behaves as absent.
//
// Keys passed in are only read during the call: callers may reuse the
// memory behind them afterwards, so an implementation copies what it keeps.
type Store interface {
	// TryAdd adds value under key unless the key has a value, and reports
	// whether it did: of several callers adding one key, one succeeds.
	TryAdd(ctx context.Context, key, value string, lifetime time.Duration) (bool, error)
	// Get returns the value of key, and whether it has one.
	Get(ctx context.Context, key string) (string, bool, error)
	// Take gets and removes the value of key: a value is returned at most
	// once, even to callers taking it at the same moment.
	Take(ctx context.Context, key string) (string, bool, error)
	// Remove removes the value of key.
	Remove(ctx context.Context, key string) error
	// GetAndTouch is Get that also sets a key with a value to expire after
	// lifetime from now; an absent or expired key is not created. Bindings
	// that must live as long as they are used (an upload's chunks) are read
	// and renewed with it in one round trip.
	GetAndTouch(ctx context.Context, key string, lifetime time.Duration) (string, bool, error)
	// Increment adds amount to the counter under key and returns the new
	// count. A key without a value counts from 0; every increment sets the
	// counter to expire after lifetime. The count is stored as decimal
	// text, so Get reads it like any other value.
	Increment(ctx context.Context, key string, amount int64, lifetime time.Duration) (int64, error)
	// IncrementAndCount is Increment plus the counts of the keys in
	// others (0 for absent ones) written into counts, read in the same
	// round trip (in the same transaction on Redis; in memory under the
	// same lock when they share key's {hash tag}, else just after).
	// Sliding rate limits use it.
	IncrementAndCount(ctx context.Context, key string, amount int64, lifetime time.Duration, others []string, counts []int64) (int64, error)
	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	// Close releases the store's connections and goroutines.
	Close() error
}

// Clock is implemented by the stores that have a clock of their own, the
// remote ones: the server's time, which every process sharing the store
// reads alike, so that windows counted by several instances (rate limits)
// agree whatever the instances' own clocks say. The memory store has none:
// its process's clock is the only one that counts there.
type Clock interface {
	// Now returns the store's current time.
	Now(ctx context.Context) (time.Time, error)
}

// Bounded is implemented by a store with a bound on its keys (memory):
// how it copes with the bound.
type Bounded interface {
	Fullness() Fullness
}

// ErrFull is returned when a bounded store has no room for a new key.
var ErrFull = errors.New("store: full")

// ErrNotCounter is returned when Increment meets a value that is not a
// decimal count.
var ErrNotCounter = errors.New("store: value is not a counter")

// IsLocal reports whether s answers from this process's memory: its calls
// cannot hang, so callers need no deadline for them.
func IsLocal(s Store) bool {
	l, ok := s.(interface{ Local() bool })
	return ok && l.Local()
}

// ErrLifetime is returned for a lifetime that is not positive.
var ErrLifetime = errors.New("store: lifetime must be positive")

func checkLifetime(d time.Duration) error {
	if d <= 0 {
		return ErrLifetime
	}
	return nil
}

// hashTag returns the part of key that decides where it lives: the text
// inside the first {…} when there is one, as in Redis Cluster, so the keys of
// one rate-limit counter set sit together in both stores.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						return key[i+1 : j]
					}
					return key
				}
			}
			return key
		}
	}
	return key
}

func parseCount(text string) (int64, error) { return strconv.ParseInt(text, 10, 64) }
