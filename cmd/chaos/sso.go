package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/ntlmclient"
)

// Windows SSO's load: ssoBrowsers go-ntlmssp browsers, signed in once
// through transport pinned and kept signed in across the whole suite, each
// sending a GET every ssoEvery on its kept-alive connection.
const (
	ssoBrowsers = 8
	ssoEvery    = 200 * time.Millisecond
)

// browser is one user's browser; a browser is used by one goroutine at a
// time (its load's, or the suite's between runs).
type browser struct {
	*ntlmclient.Browser
	// At the start of a run: its sign-ins and connections until then.
	signIns, dials int
}

func newBrowsers(site string) []*browser {
	bs := make([]*browser, ssoBrowsers)
	for i := range bs {
		user := fmt.Sprintf("chaos-user%d", i)
		bs[i] = &browser{Browser: &ntlmclient.Browser{
			Name: fmt.Sprintf("chaos-browser%d", i), User: user, Password: fakecluster.SSOPassword(user),
			Addr: site, Timeout: clientTimeout(classSSO),
		}}
	}
	return bs
}

// signIn signs every browser in before the first run.
func signIn(bs []*browser) error {
	for _, b := range bs {
		resp, err := b.Fetch(http.MethodGet, "/sso/me")
		if err != nil {
			return fmt.Errorf("%s signing in: %v", b.Name, err)
		}
		if resp.Status != http.StatusOK || resp.User() != b.User {
			return fmt.Errorf("%s signing in: %d as %q", b.Name, resp.Status, resp.User())
		}
	}
	return nil
}

// browse runs b's requests until stopLoad, one at a time: a request that
// takes long delays the browser's next, as in a browser's tab.
func (l *load) browse(b *browser, start time.Time) {
	b.signIns, b.dials = b.SignIns, b.Dials
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for seq := 0; ; seq++ {
			t := time.NewTimer(time.Until(start.Add(time.Duration(seq) * ssoEvery)))
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-t.C:
			}
			res := result{class: classSSO, id: b.Name, sent: time.Now()}
			resp, err := b.Fetch(http.MethodGet, fmt.Sprintf("/sso/%s/%d", l.run, seq))
			res.done, res.err = time.Now(), err
			if err == nil {
				res.status, res.retryAfter = resp.Status, resp.Header.Get("Retry-After")
				res.wrong = resp.Status == http.StatusOK && resp.User() != b.User
			}
			l.record(res)
		}
	}()
}

// checkSSO checks Windows SSO over a run that began at start: identities
// that crossed (an answer to a browser as someone else; a backend
// connection that carried credentials or a user serving two browsers, by
// the nodes' own records; a handshake split across connections) and
// browsers that lost their signed-in connection, which only a fault that
// ends backend connections explains: a new leader elsewhere, or a reload
// (lost explained). A browser that lost it must be signed in again by its
// last answer.
func checkSSO(c *fakecluster.Cluster, l *load, start time.Time, splitMarks map[string]int, lostExplained bool) (crossed, lost int, notes []string) {
	userOf := map[string]string{}
	for _, b := range l.clients.browsers {
		userOf[b.Name] = b.User
	}
	last := map[string]result{}
	for _, res := range l.results {
		if res.class != classSSO {
			continue
		}
		if res.wrong {
			crossed++
		}
		if res.sent.After(last[res.id].sent) {
			last[res.id] = res
		}
	}
	for _, n := range c.Nodes() {
		clientsOf := map[string]map[string]bool{} // by backend connection
		bound := map[string]bool{}                // connections that carried credentials or a user
		for _, s := range n.Served() {
			if s.At.Before(start) {
				continue
			}
			if user, ours := userOf[s.Client]; ours && s.User != "" && s.User != user {
				crossed++
			}
			if s.Credentials || s.User != "" {
				bound[s.Conn] = true
			}
			if s.Client != "" {
				if clientsOf[s.Conn] == nil {
					clientsOf[s.Conn] = map[string]bool{}
				}
				clientsOf[s.Conn][s.Client] = true
			}
		}
		for conn := range bound {
			if len(clientsOf[conn]) > 1 {
				crossed++
				notes = append(notes, fmt.Sprintf("backend connection %s served %d browsers", conn, len(clientsOf[conn])))
			}
		}
		faults := n.SSOFaults()
		for _, f := range faults[min(splitMarks[n.ID()], len(faults)):] {
			if f.Reason == "split" {
				crossed++
				notes = append(notes, "split handshake on "+f.Conn+" of "+f.Client)
			}
		}
	}
	for _, b := range l.clients.browsers {
		again, redialled := b.SignIns-b.signIns, b.Dials-b.dials
		end := last[b.Name]
		signedIn := end.err == nil && end.status == http.StatusOK && !end.wrong
		if !signedIn || (!lostExplained && (again > 0 || redialled > 0)) {
			lost++
			notes = append(notes, fmt.Sprintf("%s: signed in %d more times on %d new connections, last answer %s", b.Name, again, redialled, end.describe()))
		}
	}
	return crossed, lost, notes
}

// ssoFaultMarks are how many refused handshakes each node had recorded.
func ssoFaultMarks(c *fakecluster.Cluster) map[string]int {
	marks := map[string]int{}
	for _, n := range c.Nodes() {
		marks[n.ID()] = len(n.SSOFaults())
	}
	return marks
}
