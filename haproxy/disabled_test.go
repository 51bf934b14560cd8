package haproxy

import (
	"strings"
	"testing"
)

// A disabled server (on its line or default-server's, unless a later
// enabled) is not among the upstreams, as HAProxy starts it in
// maintenance; a backend without a server left runs its rules and
// answers 503 with HAProxy's page to the rest.
func TestTranslateDisabledServers(t *testing.T) {
	const head = "defaults\n    mode http\n\nfrontend web\n    bind 127.0.0.1:8080\n    default_backend app\n\nbackend app\n"
	for _, tt := range []struct {
		name, backend string
		want, notWant []string
	}{
		{"one disabled", "    server a 127.0.0.1:9001\n    server b 127.0.0.1:9002 disabled\n",
			[]string{"reverse_proxy 127.0.0.1:9001 {", "not among the upstreams"}, []string{"9002 {"}},
		{"default-server disabled, enabled after it", "    default-server disabled\n    server a 127.0.0.1:9001 enabled\n    server b 127.0.0.1:9002\n",
			[]string{"reverse_proxy 127.0.0.1:9001 {"}, nil},
		{"enabled, then disabled", "    server a 127.0.0.1:9001 enabled disabled\n    server b 127.0.0.1:9002\n",
			[]string{"reverse_proxy 127.0.0.1:9002 {"}, nil},
		{"every server disabled", "    option httpchk\n    server a 127.0.0.1:9001 check disabled\n",
			[]string{"error 503", "No server is available to handle this request.", "option httpchk  (ignored: backend app has no server"}, []string{"reverse_proxy 127"}},
		{"no server, a return", "    http-request return status 404 content-type text/plain string gone\n",
			[]string{`respond gone 404`, "error 503", "handle_errors 503"}, []string{"reverse_proxy 127"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := translateText(t, head+tt.backend)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("want %q in\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("want no %q in\n%s", w, got)
				}
			}
		})
	}
}
