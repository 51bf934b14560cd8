package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-ha/caddy-ha/status"
)

// scrape is one status the load read, from the page or the admin API.
type scrape struct {
	at   time.Time
	view status.View
}

// scrapeStatus reads the status, in turn from the admin API's /ha/status
// and from the ha_status page as JSON. An answer is wrong unless it is a
// 200 with a view, whose Cloudflare ranges are all still loaded: the
// suite's lists were loaded before the first run, and a failing refresh
// keeps them.
func (l *load) scrapeStatus(seq int) {
	url := "http://" + l.rig.admin + "/ha/status"
	if seq%2 == 1 {
		url = l.rig.url("/ha-status?format=json")
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	l.do(l.clients.quick, classStatus, "", req, func(code int, body []byte) bool {
		var v status.View
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil || len(v.CloudflareRanges) == 0 {
			return true
		}
		for _, set := range v.CloudflareRanges {
			if set.Ranges == 0 {
				return true
			}
		}
		l.mu.Lock()
		l.views = append(l.views, scrape{at: time.Now(), view: v})
		l.mu.Unlock()
		return false
	})
}

// statusView reads the admin API's view now, for a fault to compare with:
// up to three tries of 2s each, so that a machine too loaded to answer one
// scrape in time (the scrapes under load count those) does not stop the
// suite.
func (r *rig) statusView() (status.View, error) {
	var (
		v   status.View
		err error
	)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var body []byte
		body, err = r.adminGet(ctx, "/ha/status")
		cancel()
		if err == nil {
			return v, json.Unmarshal(body, &v)
		}
	}
	return v, err
}

// checkStatus counts the scrapes that were wrong, or failed where no
// stall of canaries explains it, and whether one since the fault began
// showed it (shows nil: nothing to show).
func checkStatus(l *load, canaries []result, since time.Time, shows func(status.View) bool) (bad int, shown bool) {
	for _, res := range l.results {
		if res.class == classStatus && (res.wrong || res.failed() && !stalledAround(canaries, res)) {
			bad++
		}
	}
	shown = shows == nil
	for _, s := range l.views {
		if !shown && !s.at.Before(since) && shows(s.view) {
			shown = true
		}
	}
	return bad, shown
}

// The faults as the status shows them.

// leaderNot: a leader pool is led by another node than addr, or by none.
func leaderNot(addr string) func(status.View) bool {
	return func(v status.View) bool {
		for _, p := range v.LeaderPools {
			if p.Leader != addr {
				return true
			}
		}
		return false
	}
}

// storeDown: a store of the kind ("redis", "postgres") is down.
func storeDown(kind string) func(status.View) bool {
	return func(v status.View) bool {
		for _, s := range v.Stores {
			if strings.HasPrefix(s.Store, kind+" ") && !s.Up {
				return true
			}
		}
		return false
	}
}
