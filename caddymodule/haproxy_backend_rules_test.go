package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// haproxy/testdata/backend-rules.cfg (a backend's own acl, http-request
// and redirect rules: deny, set-header, del-header, replace-path, return,
// set-path, redirect; http-response with a condition) run by HAProxy 2.6 and by caddy-ha on the same
// plain backends: each request is answered alike (status, Location,
// Content-Type, body, the backend's response header), and the server
// that gets it sees the same request line and headers. Issue 28: a
// backend's own rules were refused.
func TestHAProxyDifferentialBackendRules(t *testing.T) {
	// Each server answers with its name, the request line's URI and the
	// headers the rules set or delete, as it saw them.
	hapAddr, caddyAddr := startNamedServersPair(t, "../haproxy/testdata/backend-rules.cfg", func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s %s gateway=%q prefix=%q proto=%q", name, r.Method, r.RequestURI,
				r.Header.Values("X-Gateway"), r.Header.Values("X-Forwarded-Prefix"), r.Header.Values("X-Forwarded-Proto"))
		}
	})

	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct{ method, uri, want string }{
		{"GET", "/billing/x?q=1", `200 b1 GET /x?q=1 gateway=[] prefix=["/billing"] proto=["https"]`},
		{"GET", "/billing/", `200 b1 GET / gateway=[]`},
		{"POST", "/billing/admin/y", "405 "},
		{"GET", "/billing/admin/y", "200 b1 GET /admin/y "},
		{"GET", "/billing/health", "200 ok"},
		{"GET", "/billing/old/z?a=b", "301 "},
		{"GET", "/billing/a/billing/b", "200 b1 GET /a/billing/b "}, // the leftmost match, whole path replaced
		{"GET", "/", `200 p1 GET /index.html gateway=["edge"] prefix=["/client"] proto=[]`},
		{"GET", "/?x=1", "200 p1 GET /index.html?x=1 "},
		{"GET", "/legacy/a", `302 |Location="/moved" Content-Type="" X-Backend="" X-Rewritten=[]`}, // no http-response rule on a redirect
		{"GET", "/billing", "200 p1 GET /billing "},
		{"GET", "/x/billing/y", `200 p1 GET /x/billing/y gateway=["edge"] prefix=[] proto=[]`},
		{"GET", "/x/v1/abc/def?q", `200 p1 GET /api/abc?q gateway=["edge"] prefix=[] proto=[]|Location="" Content-Type="text/plain; charset=utf-8" X-Backend="portal" X-Rewritten=["yes"]`}, // the whole path replaced by the format
		{"GET", "/keep/v1/abc", `200 p1 GET /keep/v1/abc gateway=["edge"] prefix=["/client"] proto=["gopher"]`},
	} {
		var answers [2]string
		for i, addr := range []string{hapAddr, caddyAddr} {
			req, _ := http.NewRequest(tt.method, "http://"+addr+tt.uri, nil)
			req.Header.Set("X-Forwarded-Prefix", "/client")
			if tt.uri == "/keep/v1/abc" {
				req.Header.Set("X-Forwarded-Proto", "gopher") // as the request has it, the set-header's condition false
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers[i] = fmt.Sprintf("%d %s|Location=%q Content-Type=%q X-Backend=%q X-Rewritten=%q", resp.StatusCode, body,
				resp.Header.Get("Location"), resp.Header.Get("Content-Type"), resp.Header.Get("X-Backend"), resp.Header.Values("X-Rewritten"))
		}
		if answers[0] != answers[1] {
			t.Errorf("%s %s: HAProxy answered %s, caddy-ha %s", tt.method, tt.uri, answers[0], answers[1])
		}
		if !strings.HasPrefix(answers[0], tt.want) {
			t.Errorf("%s %s: HAProxy answered %s, want it to begin %s", tt.method, tt.uri, answers[0], tt.want)
		}
	}
}
