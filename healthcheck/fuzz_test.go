package healthcheck

import (
	"math"
	"math/big"
	"testing"
	"time"
)

func FuzzParseLeaderBody(f *testing.F) {
	for _, seed := range []string{
		`{"status":"leader","nodeId":"n1","leaseExpiresAt":"2026-12-01T10:00:30Z","leaseEpoch":7,"lastRenewAt":"2026-12-01T10:00:00Z"}`,
		`{"status":"leader","nodeId":"n1","leaseExpiresAt":"9999-12-31T23:59:59.999999999Z","leaseEpoch":7,"lastRenewAt":"0001-01-01T00:00:00.000000001Z"}`,
		`{"status":"leader","nodeId":"n1","leaseExpiresAt":"2026-12-01T10:00:00Z","leaseEpoch":7,"lastRenewAt":"2026-12-01T10:00:30Z"}`,
		`{"status":"leader","leaseEpoch":0}`,
		`{"status":"leader","leaseEpoch":-1}`,
		`{"status":"leader","leaseEpoch":-9223372036854775808}`,
		`{"status":"leader","leaseEpoch":9223372036854775807}`,
		`{"status":"leader","leaseEpoch":9223372036854775808}`,
		`{"status":"leader","leaseEpoch":1e3}`,
		`{"status":"leader","leaseEpoch":"7"}`,
		`{"status":"leader","leaseEpoch":null}`,
		`{"status":"leader","leaseEpoch":7,"leaseExpiresAt":"2026-12-01T10:00:30+14:00","lastRenewAt":"2026-12-01T10:00:00-12:00"}`,
		`{"status":"leader","leaseEpoch":7,"leaseExpiresAt":"10000-01-01T00:00:00Z"}`,
		`{"STATUS":"leader","leaseEpoch":7,"status":"follower"}`,
		`{"status":"follower","leaseEpoch":7}`,
		`{"status":"leader","leaseEpoch":7} {}`,
		`null`,
		`[]`,
		`OK`,
		``,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, acceptBare bool) {
		leader, epoch, nodeID, leaseLeft, renewedAt, err := parseLeaderBody(body, acceptBare)
		if err != nil {
			if leader != acceptBare || epoch != 0 || nodeID != "" || leaseLeft != 0 || !renewedAt.IsZero() {
				t.Fatalf("error %v with leader %v (accepting bare 200s: %v), epoch %d, node %q, lease %v, renewed %v",
					err, leader, acceptBare, epoch, nodeID, leaseLeft, renewedAt)
			}
			return
		}
		if !leader || epoch < 0 || leaseLeft < 0 {
			t.Fatalf("leader %v, epoch %d, lease %v", leader, epoch, leaseLeft)
		}
		if leaseLeft > 0 && renewedAt.IsZero() {
			t.Fatalf("lease %v after no renewal", leaseLeft)
		}
	})
}

// unixOrZero is the time unix ns after 1970, with 0 standing for the zero
// Time: an answer without that field or header.
func unixOrZero(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func FuzzLeaseValidUntil(f *testing.F) {
	renewed := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	started := renewed + int64(1200*time.Millisecond)
	for _, seed := range [][4]int64{
		// started, lease left, last renewal, server time (all ns)
		{started, int64(30 * time.Second), renewed, renewed + int64(time.Second)},
		{started, int64(30 * time.Second), renewed, 0},
		{started, int64(30 * time.Second), renewed, renewed - int64(time.Hour)},
		{started, int64(30 * time.Second), renewed, renewed + int64(time.Minute)},
		{started, int64(30 * time.Second), 0, started},
		{started, math.MaxInt64, renewed, renewed},
		{math.MaxInt64, 1, renewed, 0},
		{started, 1, math.MinInt64, math.MaxInt64},
		{started, -int64(time.Second), renewed, 0},
		{started, math.MinInt64, renewed, 0},
		{0, int64(time.Second), 0, 0},
		{1, -1, 0, 0},
		{-int64(time.Hour), int64(time.Second), 0, 0},
		{-int64(time.Hour), int64(2 * time.Hour), 0, 0},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, startedNs, leaseLeft, lastRenewNs, serverNs int64) {
		r := Result{Started: time.Unix(0, startedNs), LeaseLeft: time.Duration(leaseLeft),
			LastRenewAt: unixOrZero(lastRenewNs), ServerTime: unixOrZero(serverNs)}
		got := leaseValidUntil(r)

		// Where the lease ends, in arithmetic that cannot overflow: the
		// lease less the renewal's age (if the node said when it
		// answered), from the probe's start, kept within 1 and the end of
		// time.
		left := big.NewInt(leaseLeft)
		if age := r.ServerTime.Sub(r.LastRenewAt); !r.ServerTime.IsZero() && age > 0 {
			left.Sub(left, big.NewInt(int64(age)))
		}
		over := left.Sign() <= 0
		end := new(big.Int).Add(big.NewInt(startedNs), left)
		switch {
		case end.Cmp(big.NewInt(1)) < 0:
			end.SetInt64(1)
		case !end.IsInt64():
			end.SetInt64(math.MaxInt64)
		}

		if leaseLeft > 0 && got == 0 {
			t.Fatalf("%+v: a lease of %v is valid until 0 (unknown)", r, r.LeaseLeft)
		}
		if !over && got < startedNs {
			t.Fatalf("%+v: valid until %d, before the probe started (%d), though the lease is not over", r, got, startedNs)
		}
		// A lease that is over may say so with 1 or with when it ended.
		if over && (got < 1 || got > end.Int64()) {
			t.Fatalf("%+v: valid until %d, though the lease ended at %v", r, got, end)
		}
		if !over && got != end.Int64() {
			t.Fatalf("%+v: valid until %d, want %v", r, got, end)
		}
	})
}
