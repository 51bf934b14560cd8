package healthcheck

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/internal/poll"
)

// HAProxy's http-check expect rules: status lists and ranges, rstatus,
// string and rstring (on the body, whatever the status), each negated by
// !.
func TestHTTPCheckExpect(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		expect Expect
		pass   bool
	}{
		{200, "", Expect{Match: "status", Pattern: "200,301-302"}, true},
		{302, "", Expect{Match: "status", Pattern: "200,301-302"}, true},
		{303, "", Expect{Match: "status", Pattern: "200,301-302"}, false},
		{503, "", Expect{Match: "status", Pattern: "200", Negate: true}, true},
		{200, "", Expect{Match: "status", Pattern: "200", Negate: true}, false},
		{204, "", Expect{Match: "rstatus", Pattern: "^2"}, true},
		{404, "", Expect{Match: "rstatus", Pattern: "^2"}, false},
		{500, `{"installed":true}`, Expect{Match: "string", Pattern: "installed"}, true},
		{200, `{"maintenance":true}`, Expect{Match: "string", Pattern: "installed"}, false},
		{200, `{"maintenance":true}`, Expect{Match: "string", Pattern: "maintenance", Negate: true}, false},
		{200, `ok`, Expect{Match: "string", Pattern: "maintenance", Negate: true}, true},
		{200, "", Expect{Match: "string", Pattern: "maintenance", Negate: true}, false}, // no body: HAProxy fails the check
		{200, "", Expect{Match: "rstring", Pattern: "^$"}, false},
		{200, "state: UP\n", Expect{Match: "rstring", Pattern: `state: (UP|READY)`}, true},
		{200, "state: DOWN\n", Expect{Match: "rstring", Pattern: `state: (UP|READY)`}, false},
		{200, strings.Repeat("x", MaxCheckBody) + "installed", Expect{Match: "string", Pattern: "installed"}, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		e := tc.expect
		r := checkOnce(t, srv.Listener.Addr().String(), ServerCheck{HTTP: &HTTPCheck{Expect: &e}, Timeout: 5 * time.Second})
		srv.Close()
		if (r.Err == nil) != tc.pass {
			t.Errorf("status %d, body %.20q, expect %+v: passed=%v (%v), want %v", tc.status, tc.body, tc.expect, r.Err == nil, r.Err, tc.pass)
		}
	}
}

func TestHTTPCheckExpectValidate(t *testing.T) {
	for _, e := range []Expect{{Match: "status", Pattern: "2xx"}, {Match: "status", Pattern: "302-301"}, {Match: "rstring", Pattern: "("}, {Match: "hdr", Pattern: "x"}} {
		if err := (ServerCheck{HTTP: &HTTPCheck{Expect: &e}}).Validate(); err == nil {
			t.Errorf("expect %+v: valid, want an error", e)
		}
	}
	if err := (ServerCheck{HTTP: &HTTPCheck{ExpectStatus: 200, Expect: &Expect{Match: "string", Pattern: "x"}}}).Validate(); err == nil {
		t.Error("expect_status and expect: valid, want an error")
	}
}

// With DisableOn404 a server that is up and answers 404 passes but is no
// upstream (HAProxy's soft stop), and is one again at its first answer
// that passes; a server that is down and answers 404 stays down.
func TestHTTPCheckDisableOn404(t *testing.T) {
	var status atomic.Int64
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	events := &checkEvents{}
	c := startChecker(t, []string{addr}, ServerCheck{HTTP: &HTTPCheck{DisableOn404: true, ExpectStatus: 200}, Interval: 10 * time.Millisecond, Timeout: time.Second, Fall: 3, Rise: 2}, events)
	checked := func() int { return len(events.all()) }
	waitChecks := func(what string, n int) {
		from := checked()
		poll.Until(t, 5*time.Second, what, func() bool { return checked() >= from+n })
	}
	waitChecks("a check", 1)

	status.Store(404)
	poll.Until(t, 5*time.Second, "drained at a 404", func() bool { return len(c.Up()) == 0 })
	if h, _ := c.Health(addr); h != 4 {
		t.Fatalf("health %d after a 404, want 4 (full: a 404 is a pass)", h)
	}
	status.Store(200)
	poll.Until(t, 5*time.Second, "back at a 200", func() bool { return slices.Equal(c.Up(), []string{addr}) })
	ev := events.all()
	for i := len(ev) - 1; i > 0; i-- {
		if ev[i].status == 200 && ev[i-1].status == 404 && !ev[i].up {
			t.Fatalf("not up at the first 200 after a 404: %+v", ev[i])
		}
	}

	status.Store(500)
	poll.Until(t, 5*time.Second, "down at 500s", func() bool { h, _ := c.Health(addr); return h == 0 })
	status.Store(404)
	waitChecks("404s to a server that is down", 4)
	if h, _ := c.Health(addr); h != 0 || len(c.Up()) != 0 {
		t.Fatalf("a down server answering 404s: health %d, up %v; want down (the 404 fails expect status 200)", h, c.Up())
	}
}
