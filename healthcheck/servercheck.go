package healthcheck

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/recovered"
)

// ServerCheck is HAProxy's health check of a server (the server option
// "check"): a TCP connect check, or with HTTP set an HTTP check (option
// httpchk), counted with HAProxy's rise and fall. The zero values of the
// timing fields are HAProxy 2.6's defaults; see WithDefaults.
type ServerCheck struct {
	// Off: no server is checked, each is up (HAProxy's server without
	// check); the other fields are unused.
	Off bool
	// HTTP, if set, sends a request on each check's connection; nil is
	// a connect check: a connection established passes.
	HTTP *HTTPCheck
	// TLS, if set, makes each check's connection a TLS client's with it
	// (HAProxy's check-ssl, which ssl implies): a connect check passes
	// once the handshake completes, an HTTP check's request goes over it.
	// Without a ServerName, the server's host is the name sent and
	// verified, as Go's HTTP transport does. Not part of the JSON.
	TLS *tls.Config `json:"-"`
	// Interval between the end of one check of a server and the start of
	// the next (HAProxy's inter).
	Interval time.Duration
	// FastInterval replaces Interval while a server is transitional: up
	// but failing, down but passing, or not checked yet (fastinter).
	FastInterval time.Duration
	// DownInterval replaces Interval while a server is fully down
	// (downinter).
	DownInterval time.Duration
	// Timeout bounds a whole check, connection and answer, unless
	// ConnectTimeout is set; then it bounds the answer, from the
	// connection on (HAProxy's "timeout check"). Default: Interval, as
	// HAProxy without "timeout check".
	Timeout time.Duration
	// ConnectTimeout, if set, bounds the connection alone (HAProxy with
	// "timeout check" set: min("timeout connect", inter)).
	ConnectTimeout time.Duration
	// Fall is how many failed checks in a row take an up server down.
	Fall int
	// Rise is how many passed checks in a row bring a down server up.
	Rise int
}

// HTTPCheck is the request of an HTTP check and the answer that passes.
type HTTPCheck struct {
	// Method of the request; default OPTIONS, as HAProxy's.
	Method string
	// URI requested; default /.
	URI string
	// Host header; default the server's address.
	Host string
	// ExpectStatus, if set, is the one status that passes (http-check
	// expect status); without it (and without Expect) any 2xx or 3xx
	// passes.
	ExpectStatus int
	// Expect, if set, is the answer that passes instead of ExpectStatus's
	// (HAProxy's other http-check expect rules).
	Expect *Expect
	// DisableOn404: a 404 answer from a server that is up passes, and
	// takes the server out of the upstreams until an answer that passes
	// otherwise (http-check disable-on-404, HAProxy's soft stop: no new
	// request); a server that is down is checked as without it.
	DisableOn404 bool
}

// Expect is an HTTP check's http-check expect rule: the answer passes
// when its status or body matches the pattern (or, negated, does not).
type Expect struct {
	// Match is what is matched: status (Pattern a comma-separated list
	// of codes and ranges <low>-<high>), rstatus (a regular expression
	// the status code, as three digits, matches), string (the body holds
	// Pattern), rstring (a regular expression the body matches). A body
	// is read up to MaxCheckBody bytes; the status is not looked at; an
	// answer without a body fails, negated or not, as in HAProxy.
	Match string `json:"match"`
	// Pattern is the codes, the string or the regular expression (RE2).
	Pattern string `json:"pattern"`
	// Negate: the answer passes when it does not match (HAProxy's !).
	Negate bool `json:"negate,omitempty"`
}

// MaxCheckBody bounds the body a check reads to match a string: the size
// of HAProxy's check buffer (tune.bufsize).
const MaxCheckBody = 16384

// matcher is e compiled: whether a status and body match (negation
// aside), and whether the body is needed.
func (e *Expect) matcher() (match func(status int, body []byte) bool, needsBody bool, err error) {
	switch e.Match {
	case "status":
		ranges, err := StatusRanges(e.Pattern)
		if err != nil {
			return nil, false, err
		}
		return func(status int, _ []byte) bool {
			return slices.ContainsFunc(ranges, func(r [2]int) bool { return r[0] <= status && status <= r[1] })
		}, false, nil
	case "rstatus", "rstring":
		re, err := regexp.Compile(e.Pattern)
		if err != nil {
			return nil, false, err
		}
		if e.Match == "rstatus" {
			return func(status int, _ []byte) bool { return re.MatchString(strconv.Itoa(status)) }, false, nil
		}
		return func(_ int, body []byte) bool { return re.Match(body) }, true, nil
	case "string":
		return func(_ int, body []byte) bool { return bytes.Contains(body, []byte(e.Pattern)) }, true, nil
	}
	return nil, false, fmt.Errorf("match %q: want status, rstatus, string or rstring", e.Match)
}

// StatusRanges reads a list of codes and ranges: 200,301-308 (HAProxy's
// http-check expect status list, which the HAProxy adapter checks with it).
func StatusRanges(list string) ([][2]int, error) {
	var ranges [][2]int
	for item := range strings.SplitSeq(list, ",") {
		low, high, isRange := strings.Cut(item, "-")
		if !isRange {
			high = low
		}
		lo, errLow := strconv.Atoi(low)
		hi, errHigh := strconv.Atoi(high)
		if errLow != nil || errHigh != nil || lo < 100 || hi > 599 || hi < lo {
			return nil, fmt.Errorf("status %q: want codes (100 to 599) and ranges <low>-<high>, comma-separated", item)
		}
		ranges = append(ranges, [2]int{lo, hi})
	}
	return ranges, nil
}

// HAProxy 2.6's check defaults (configuration.txt: inter, rise, fall;
// option httpchk).
const (
	DefaultCheckInterval = 2 * time.Second
	DefaultCheckFall     = 3
	DefaultCheckRise     = 2
	DefaultCheckMethod   = http.MethodOptions
	DefaultCheckURI      = "/"
)

// WithDefaults returns c with HAProxy's default for every unset field.
func (c ServerCheck) WithDefaults() ServerCheck {
	if c.Interval == 0 {
		c.Interval = DefaultCheckInterval
	}
	if c.Timeout == 0 {
		c.Timeout = c.Interval
	}
	if c.Fall == 0 {
		c.Fall = DefaultCheckFall
	}
	if c.Rise == 0 {
		c.Rise = DefaultCheckRise
	}
	if c.HTTP != nil {
		h := *c.HTTP
		if h.Method == "" {
			h.Method = DefaultCheckMethod
		}
		if h.URI == "" {
			h.URI = DefaultCheckURI
		}
		c.HTTP = &h
	}
	return c
}

// Validate reports a check that cannot work, as a *SettingError named as
// the Caddyfile writes it; unset fields count as their defaults.
func (c ServerCheck) Validate() error {
	bad := func(setting, format string, args ...any) error {
		return &SettingError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
	}
	for _, d := range []struct {
		setting string
		v       time.Duration
	}{{"interval", c.Interval}, {"fast_interval", c.FastInterval}, {"down_interval", c.DownInterval}, {"timeout", c.Timeout}, {"connect_timeout", c.ConnectTimeout}} {
		if d.v < 0 {
			return bad(d.setting, "must be positive")
		}
	}
	switch {
	case c.Fall < 0:
		return bad("fall", "must be at least 1")
	case c.Rise < 0:
		return bad("rise", "must be at least 1")
	}
	if c.HTTP != nil {
		return c.HTTP.validate(bad)
	}
	return nil
}

// validate reports an HTTP check that cannot work, through bad.
func (h *HTTPCheck) validate(bad func(setting, format string, args ...any) error) error {
	switch {
	case h.Method != "" && !isToken(h.Method):
		return bad("method", "%q is not an HTTP method", h.Method)
	case h.URI != "" && h.URI != "*" && !strings.HasPrefix(h.URI, "/"):
		return bad("uri", "%q must start with / (or be *)", h.URI)
	case h.URI != "" && strings.ContainsFunc(h.URI, isSpaceOrControl):
		return bad("uri", "%q holds a space or a control character", h.URI)
	case strings.ContainsFunc(h.Host, isSpaceOrControl):
		return bad("host", "%q holds a space or a control character", h.Host)
	}
	return h.validateExpect(bad)
}

// validateExpect reports an expect_status or Expect that cannot work.
func (h *HTTPCheck) validateExpect(bad func(setting, format string, args ...any) error) error {
	switch {
	case h.ExpectStatus != 0 && (h.ExpectStatus < 100 || h.ExpectStatus > 599):
		return bad("expect_status", "%d is not an HTTP status (100 to 599)", h.ExpectStatus)
	case h.ExpectStatus != 0 && h.Expect != nil:
		return bad("expect", "replaces expect_status: set one")
	case h.Expect != nil:
		if _, _, err := h.Expect.matcher(); err != nil {
			return bad("expect", "%v", err)
		}
	}
	return nil
}

func isToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, r)
	})
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// next is a server's check health after a check, as HAProxy counts it: a
// server is up at rise or more; a pass raises health by one, and at rise
// it jumps to rise+fall-1 (fully up), so that fall failures in a row take
// it down; a failure lowers it by one, and below rise to 0 (fully down),
// so that rise passes in a row bring it up.
func (c ServerCheck) next(health int, passed bool) int {
	full := c.Rise + c.Fall - 1
	switch {
	case passed && health < full:
		if health++; health >= c.Rise {
			health = full
		}
	case !passed && health > 0:
		if health--; health < c.Rise {
			health = 0
		}
	}
	return health
}

// interval is the wait before the next check of a server of that health.
func (c ServerCheck) interval(health int) time.Duration {
	switch {
	case health == c.Rise+c.Fall-1:
		return c.Interval
	case health == 0 && c.DownInterval > 0:
		return c.DownInterval
	case health != 0 && c.FastInterval > 0:
		return c.FastInterval
	}
	return c.Interval
}

// CheckResult is the outcome of one check of a server.
type CheckResult struct {
	Started  time.Time
	Duration time.Duration
	// Status is the HTTP check's answer (0: none, or a connect check).
	Status int
	// Err says why the check failed; nil: it passed.
	Err error
	// Drained: a 404 that DisableOn404 took as a soft stop (passed).
	Drained bool
}

// ServerChecker checks a set of servers, one check loop per server, and
// tells which are up. The set can change while it runs (SetServers).
type ServerChecker struct {
	check ServerCheck
	// expect is the HTTP check's Expect compiled (nil: none), and
	// readBody whether it reads the answer's body.
	expect   func(status int, body []byte) bool
	readBody bool
	health   func(addr string) (int, bool)
	obs      ServerObserver
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	servers []*checkedServer
	// usable counts the servers that are up (Usable), recounted as one
	// goes up or down and as the servers change.
	usable atomic.Int64
}

// ServerObserver is told of a ServerChecker's events; it must not block.
type ServerObserver interface {
	// Checked: a check of addr ended with r, after which the server is up
	// or not; changed if the check took it up or down.
	Checked(addr string, r CheckResult, up, changed bool)
	// Panicked: a check of addr panicked with v (in the check or in
	// Checked); the server is checked again an Interval later.
	Panicked(addr string, v any, stack []byte)
}

type checkedServer struct {
	addr   string
	health atomic.Int64
	// drained: its last check passed with a 404 that DisableOn404 takes
	// as a soft stop; it is no upstream while up.
	drained atomic.Bool
	stop    context.CancelFunc // ends its check loop (nil: not started)
}

// NewServerChecker checks the servers at addrs (host:port) with check
// (its unset fields HAProxy's defaults) once Start is called. A server
// starts at the health that health (if not nil) gives it, such as an
// earlier checker's; else as in HAProxy, at rise: up, and down at its
// first failed check.
func NewServerChecker(addrs []string, check ServerCheck, health func(addr string) (int, bool), obs ServerObserver) (*ServerChecker, error) {
	if err := check.Validate(); err != nil {
		return nil, err
	}
	c := &ServerChecker{check: check.WithDefaults(), health: health, obs: obs}
	if h := c.check.HTTP; h != nil && h.Expect != nil {
		c.expect, c.readBody, _ = h.Expect.matcher() // Validate compiled it
	}
	for _, addr := range addrs {
		c.servers = append(c.servers, c.newServer(addr))
	}
	c.recountLocked()
	return c, nil
}

// newServer is addr at its starting health.
func (c *ServerChecker) newServer(addr string) *checkedServer {
	s := &checkedServer{addr: addr}
	h, ok := 0, false
	if c.health != nil {
		h, ok = c.health(addr)
	}
	if !ok || h < 0 || h > c.check.Rise+c.check.Fall-1 {
		h = c.check.Rise
	}
	s.health.Store(int64(h))
	return s
}

// Start starts one check loop per server; the first checks at once.
func (c *ServerChecker) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, s := range c.servers {
		c.startLoop(s)
	}
}

// startLoop starts s's check loop (none with the check off); c.mu is
// held.
func (c *ServerChecker) startLoop(s *checkedServer) {
	if c.check.Off {
		return
	}
	ctx, stop := context.WithCancel(c.ctx)
	s.stop = stop
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		recovered.Loop(func(v any, stack []byte) {
			if c.obs != nil {
				c.obs.Panicked(s.addr, v, stack)
			}
		}, c.check.Interval, ctx.Done(), func() { c.checkLoop(ctx, s) })
	}()
}

// SetServers makes addrs the servers, in that order: a server already
// checked keeps its health and its loop, a new one starts as in
// NewServerChecker (checked at once if the checker is started), one no
// longer in addrs is no longer checked.
func (c *ServerChecker) SetServers(addrs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := map[string]*checkedServer{}
	for _, s := range c.servers {
		old[s.addr] = s
	}
	servers := make([]*checkedServer, 0, len(addrs))
	for _, addr := range addrs {
		s, ok := old[addr]
		if !ok {
			s = c.newServer(addr)
			if c.ctx != nil && c.ctx.Err() == nil {
				c.startLoop(s)
			}
		}
		delete(old, addr)
		servers = append(servers, s)
	}
	for _, s := range old {
		if s.stop != nil {
			s.stop()
		}
	}
	c.servers = servers
	c.recountLocked()
}

// Close stops the check loops, a check under way included, and waits
// for them.
func (c *ServerChecker) Close() {
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Up returns the servers that are up, in the order given.
func (c *ServerChecker) Up() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []string
	for _, s := range c.servers {
		if c.isUp(s, int(s.health.Load())) {
			up = append(up, s.addr)
		}
	}
	return up
}

// Usable is how many servers are up: Up's length, read without a lock.
func (c *ServerChecker) Usable() int { return int(c.usable.Load()) }

// recountLocked counts the servers that are up into usable; c.mu is held.
func (c *ServerChecker) recountLocked() {
	n := 0
	for _, s := range c.servers {
		if c.isUp(s, int(s.health.Load())) {
			n++
		}
	}
	c.usable.Store(int64(n))
}

// Health returns addr's check health (see ServerCheck.next) and whether
// addr is one of the servers.
func (c *ServerChecker) Health(addr string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.servers {
		if s.addr == addr {
			return int(s.health.Load()), true
		}
	}
	return 0, false
}

// checkLoop checks s at once, then an interval after each check ends,
// until ctx ends (the checker is closed, or s is no longer a server).
func (c *ServerChecker) checkLoop(ctx context.Context, s *checkedServer) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		r := c.checkOnce(ctx, s.addr)
		if ctx.Err() != nil {
			return
		}
		before := int(s.health.Load())
		wasUp := c.isUp(s, before)
		if h := c.check.HTTP; h != nil && h.DisableOn404 && r.Status == 404 && before >= c.check.Rise {
			// HAProxy's soft stop, before any expect rule, of a server
			// that is not down: a pass that takes no new request.
			r.Err, r.Drained = nil, true
		}
		health := c.check.next(before, r.Err == nil)
		s.health.Store(int64(health))
		if r.Err == nil {
			s.drained.Store(r.Drained)
		}
		up := c.isUp(s, health)
		if up != wasUp {
			c.mu.Lock()
			c.recountLocked()
			c.mu.Unlock()
		}
		if c.obs != nil {
			c.obs.Checked(s.addr, r, up, up != wasUp)
		}
		timer.Reset(c.check.interval(health))
	}
}

// isUp tells whether s, at that health, is an upstream: up, and not
// drained.
func (c *ServerChecker) isUp(s *checkedServer, health int) bool {
	return health >= c.check.Rise && !s.drained.Load()
}

// checkOnce runs one check of addr.
func (c *ServerChecker) checkOnce(ctx context.Context, addr string) (r CheckResult) {
	r.Started = time.Now()
	defer func() { r.Duration = time.Since(r.Started) }()
	connectBy := r.Started.Add(c.check.Timeout)
	if c.check.ConnectTimeout > 0 {
		connectBy = r.Started.Add(c.check.ConnectTimeout)
	}
	dctx, cancel := context.WithDeadline(ctx, connectBy)
	defer cancel()
	conn, err := new(net.Dialer).DialContext(dctx, "tcp", addr)
	if err != nil {
		r.Err = err
		return r
	}
	defer conn.Close()
	if c.check.HTTP == nil && c.check.TLS == nil {
		return r
	}
	answerBy := connectBy
	if c.check.ConnectTimeout > 0 {
		answerBy = time.Now().Add(c.check.Timeout)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // Close ends a check that waits for its answer
	defer stop()
	if err := conn.SetDeadline(answerBy); err != nil {
		r.Err = err
		return r
	}
	var speaker net.Conn = conn // what the check speaks through
	if c.check.TLS != nil {
		if speaker, r.Err = c.handshake(conn, addr); r.Err != nil || c.check.HTTP == nil {
			return r
		}
	}
	var body []byte
	if r.Status, body, r.Err = c.check.HTTP.exchange(speaker, addr, c.readBody); r.Err == nil {
		r.Err = c.judge(r.Status, body)
	}
	return r
}

// handshake makes conn, whose deadline is set, a TLS client's with the
// check's TLS: the name sent and verified is its ServerName, else addr's
// host.
func (c *ServerChecker) handshake(conn net.Conn, addr string) (net.Conn, error) {
	cfg := c.check.TLS
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// judge tells why an HTTP check's answer fails (nil: it passes): the
// Expect, else the ExpectStatus, else not a 2xx or 3xx.
func (c *ServerChecker) judge(status int, body []byte) error {
	h := c.check.HTTP
	switch e := h.Expect; {
	case e != nil && c.readBody && len(body) == 0:
		// HAProxy fails a body match without a body, negated or not.
		return fmt.Errorf("status %d: no body for expect %s", status, e.Match)
	case e != nil && c.expect(status, body) == e.Negate:
		negation := ""
		if e.Negate {
			negation = "! "
		}
		return fmt.Errorf("status %d: the answer fails expect %s%s %q", status, negation, e.Match, e.Pattern)
	case e != nil:
	case h.ExpectStatus != 0 && status != h.ExpectStatus:
		return fmt.Errorf("status %d, not the expected %d", status, h.ExpectStatus)
	case h.ExpectStatus == 0 && (status < 200 || status > 399):
		return fmt.Errorf("status %d, not 2xx or 3xx", status)
	}
	return nil
}

// exchange sends the check's request on conn and reads the answer's
// status, and with readBody its body up to MaxCheckBody bytes.
func (h *HTTPCheck) exchange(conn net.Conn, addr string, readBody bool) (int, []byte, error) {
	host := h.Host
	if host == "" {
		host = addr
	}
	// The request line is written as configured (a URI with a query, or
	// OPTIONS *), which http.Request would rewrite.
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", h.Method, h.URI, host)
	if _, err := conn.Write([]byte(req)); err != nil {
		return 0, nil, fmt.Errorf("sending the check: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: h.Method})
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	if !readBody {
		return resp.StatusCode, nil, nil // the connection closes after the check
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxCheckBody))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading the body: %w", err)
	}
	return resp.StatusCode, body, nil
}
