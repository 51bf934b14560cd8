package caddymodule

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-ha/caddy-ha/healthcheck"
)

// followerRefusal is the retry_match entry that lets Caddy replay a
// request: the node answered 503 with Retry-After and a probe sent after
// that answer gets 503 too (the node is a follower), so the request never
// executed.
type followerRefusal struct{ s *LeaderSelection }

// MatchWithError reports whether the response is a confirmed follower
// refusal of a request that may be replayed.
func (m followerRefusal) MatchWithError(r *http.Request) (bool, error) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return false, nil
	}
	if transportErr, _ := repl.Get("http.reverse_proxy.is_transport_error"); transportErr == true {
		return false, nil
	}
	if refused, _ := caddyhttp.GetVar(r.Context(), pinRefusedVar).(bool); refused {
		return false, nil // the pinned transport's own answer: no node was asked
	}
	if status, _ := repl.Get("http.reverse_proxy.status_code"); status != http.StatusServiceUnavailable {
		return false, nil
	}
	tried := m.s.requestOf(r.Context()).triedNode()
	if tried == nil {
		return false, nil
	}
	since := time.Now()
	mon := m.s.pool.mon
	mon.Doubt(tried, "answered 503 to a request")
	if !m.s.isReplayable(r) {
		return false, nil
	}
	if _, hasRetryAfter := repl.Get("http.reverse_proxy.header.Retry-After"); !hasRetryAfter {
		return false, nil
	}
	if !mon.ConfirmFollower(r.Context(), tried, since, m.s.heldUntil(r)) {
		return false, nil
	}
	m.s.pool.obs.replayedRefusal.Inc()
	return true, nil
}

// Match implements caddyhttp.RequestMatcher.
func (m followerRefusal) Match(r *http.Request) bool {
	ok, _ := m.MatchWithError(r)
	return ok
}

// plannedStopClose is the retry_match entry that lets Caddy replay a
// request whose kept-alive connection a planned stop closed under it
// before it executed (see closedByPlannedStop). Caddy evaluates it on
// transport errors only.
type plannedStopClose struct{ s *LeaderSelection }

// MatchWithError reports whether the request's transport error is a
// connection a planned stop closed before it executed.
func (m plannedStopClose) MatchWithError(r *http.Request) (bool, error) {
	tried := m.s.requestOf(r.Context()).triedNode()
	if tried == nil {
		return false, nil
	}
	return m.s.closedByPlannedStop(r, tried), nil
}

// Match implements caddyhttp.RequestMatcher.
func (m plannedStopClose) Match(r *http.Request) bool {
	ok, _ := m.MatchWithError(r)
	return ok
}

// closedByPlannedStop reports whether a request that failed on tried with a
// transport error never executed there, waiting (within hold) for the
// proof. The node is put in doubt in any case. The proof:
//  1. the attempt failed before any response byte, sooner than any of the
//     transport's timeouts could fire: the connection closed under it
//     (reset or EOF), before or after the request was written. That is
//     HTTP/1.1's keep-alive race on a kept-alive connection, or a new one
//     still in the listen queue when the node closed its listener;
//  2. a graceful shutdown answers every request it has read;
//  3. the node turns out to have released its lease early, which a
//     crashed node cannot do (healthcheck.Monitor.ReleasedEarly).
//
// In any other case, including every crash, Caddy's 502 stands.
func (s *LeaderSelection) closedByPlannedStop(r *http.Request, tried *healthcheck.Node) bool {
	mon := s.pool.mon
	mon.Doubt(tried, "a request to it failed")
	var at *attemptTrace
	if lr := s.requestOf(r.Context()); lr != nil {
		at = lr.attempt
	}
	if at == nil || !s.isReplayable(r) || !at.connClosedUnderRequest(time.Now(), s.timeouts) {
		return false
	}
	if !mon.ReleasedEarly(r.Context(), tried, s.heldUntil(r)) {
		return false
	}
	s.pool.obs.replayedClosed.Inc()
	return true
}

// heldUntil is when hold ends for r: hold after its arrival (Caddy's
// start_time), so that a failed attempt does not extend it.
func (s *LeaderSelection) heldUntil(r *http.Request) time.Time {
	if start, ok := caddyhttp.GetVar(r.Context(), "start_time").(time.Time); ok {
		return start.Add(s.holdFor)
	}
	return time.Now().Add(s.holdFor)
}

// transportTimeouts are the transport's timeouts that can end a request
// that a node has read (0: none).
type transportTimeouts struct {
	// responseHeader runs from the request written to the response's headers.
	responseHeader time.Duration
	// read bounds each read of the connection, including the one a
	// kept-alive connection waits in while idle.
	read time.Duration
}

// attemptTrace follows one attempt of a request to a node through the
// transport's httptrace hooks.
type attemptTrace struct {
	mu        sync.Mutex
	idle      time.Duration // how long the connection had been idle (kept alive)
	gotConnAt time.Time
	wrote     bool  // the transport finished writing the request
	writeErr  error // and the error that ended the writing, if any
	wroteAt   time.Time
	responded bool // a response byte arrived
}

// traceAttempts makes the transport report r's attempts to at. It puts a
// client trace in r's context, in place: Caddy passes the request that the
// selection policy saw on to its transport (see docs/couplings.md).
func traceAttempts(r *http.Request, at *attemptTrace) {
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			at.mu.Lock()
			at.idle, at.gotConnAt = info.IdleTime, time.Now()
			at.mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			at.mu.Lock()
			at.wrote, at.writeErr, at.wroteAt = true, info.Err, time.Now()
			at.mu.Unlock()
		},
		GotFirstResponseByte: func() {
			at.mu.Lock()
			at.responded = true
			at.mu.Unlock()
		},
	}
	*r = *r.WithContext(httptrace.WithClientTrace(r.Context(), trace))
}

// reset starts a new attempt.
func (at *attemptTrace) reset() {
	at.mu.Lock()
	at.idle, at.gotConnAt, at.wrote, at.writeErr, at.wroteAt, at.responded = 0, time.Time{}, false, nil, time.Time{}, false
	at.mu.Unlock()
}

// connClosedUnderRequest reports whether the attempt, failed at now, had
// its connection closed under it before any response byte came (while or
// after the request was written), sooner than a timeout could have ended
// it.
func (at *attemptTrace) connClosedUnderRequest(now time.Time, t transportTimeouts) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	var timeout net.Error
	switch {
	case at.responded:
		return false
	case errors.As(at.writeErr, &timeout) && timeout.Timeout():
		return false
	case at.wrote && at.writeErr == nil && t.responseHeader > 0 && now.Sub(at.wroteAt) >= t.responseHeader:
		return false
	case t.read > 0 && at.idle+now.Sub(at.gotConnAt) >= t.read:
		return false // the idle connection's pending read may have timed out
	}
	return true
}

// Interface guards
var (
	_ caddyhttp.RequestMatcherWithError = followerRefusal{}
	_ caddyhttp.RequestMatcherWithError = plannedStopClose{}
)
