package handoff

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// What a Listener costs a kept-alive HTTP/1 request: a small POST and its
// answer through net/http on loopback, plain against wrapped.
func BenchmarkKeptAliveRequest(b *testing.B) {
	for _, wrapped := range []bool{false, true} {
		name := "plain"
		if wrapped {
			name = "handoff"
		}
		b.Run(name, func(b *testing.B) {
			sock, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var ln net.Listener = sock
			if wrapped {
				ln = NewRegistry().Wrap(sock)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = io.WriteString(w, `{"ok":true}`)
			})}
			go srv.Serve(ln) //nolint:errcheck
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			url := "http://" + sock.Addr().String() + "/orders"
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(url, "application/json", strings.NewReader(`{"order":1}`))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
