package haproxy

import (
	"strings"
	"testing"
)

// h2cConfig is a frontend and one backend with these lines.
func h2cConfig(backend string) string {
	return "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tdefault_backend grpc\nbackend grpc\n" + backend
}

// Servers of proto h2 are spoken to in clear HTTP/2 by prior knowledge:
// the transport's versions h2c alone, with their other options kept (a
// TCP check, send-proxy, alpn, which HAProxy uses over TLS only).
func TestProtoH2IsVersionsH2C(t *testing.T) {
	for _, backend := range []string{
		"\tserver a 10.0.0.1:50051 proto h2\n",
		"\tdefault-server proto h2 check\n\tserver a 10.0.0.1:50051\n\tserver b 10.0.0.2:50051\n",
		"\toption httpchk GET /health\n\thttp-check expect status 200\n\tserver a 10.0.0.1:50051 proto h2 check\n",
		"\tserver a 10.0.0.1:50051 proto h2 send-proxy-v2 alpn h2\n",
	} {
		got, err := translateText(t, h2cConfig(backend))
		if err != nil {
			t.Errorf("%q: %v", backend, err)
			continue
		}
		if text := oneLine(got); !strings.Contains(text, "compression off; ") || !strings.Contains(text, "; versions h2c; }") || strings.Contains(text, "; tls;") {
			t.Errorf("%q: no transport of versions h2c alone:\n%s", backend, got)
		}
	}
}

// What one transport of versions h2c cannot say is refused with its line:
// servers of a backend that speak different protocols (HAProxy speaks
// each one's own), HTTP/2 over TLS (the transport lets ALPN pick),
// maxconn, transport pinned, and dynamic checked's HTTP/1.1 checks.
func TestProtoH2Refusals(t *testing.T) {
	for _, tt := range []struct{ backend, want string }{
		{"\tserver a 10.0.0.1:50051 proto h2\n\tserver b 10.0.0.2:8080\n",
			"b.cfg:8: server b: no proto (HTTP/1.1), where a has proto h2: HAProxy speaks each server's own protocol, but one reverse_proxy has one transport"},
		{"\tserver a 10.0.0.1:8080\n\tserver b 10.0.0.2:50051 proto h2\n",
			"b.cfg:8: server b: proto h2, where a has no proto (HTTP/1.1)"},
		{"\tserver a 10.0.0.1:50051 proto h2 ssl verify none\n",
			"b.cfg:7: server a: proto h2 with ssl is not translated: HAProxy speaks HTTP/2 over TLS whatever ALPN says"},
		{"\tserver a 10.0.0.1:50051 proto h2 maxconn 10\n",
			"b.cfg:7: server a: maxconn over HTTP/2 is not translated"},
		{"\thttp-reuse never\n\tserver a 10.0.0.1:50051 proto h2\n",
			"b.cfg:7: http-reuse never: http-reuse never with proto h2 servers is not translated: transport pinned speaks HTTP/1.1 only"},
		{"\toption httpchk GET /health\n\tserver a 10.0.0.1:50051 proto h2 check\n",
			"b.cfg:7: option httpchk: this HTTP check of proto h2 servers is not translated: dynamic checked checks over HTTP/1.1"},
		{"\tserver a 10.0.0.1:50051 proto quic\n",
			"b.cfg:7: server a: proto quic is not translated (proto fcgi and proto h2 are)"},
	} {
		if _, err := translateText(t, h2cConfig(tt.backend)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.backend, err, tt.want)
		}
	}
}
