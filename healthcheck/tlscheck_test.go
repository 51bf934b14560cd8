package healthcheck

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
)

// tlsServer is an HTTP server over TLS, its certificate from a CA of its
// own for app.internal and 127.0.0.1, that answers GET /health 200 and
// records the SNI each handshake sent; pool trusts its CA.
func tlsServer(t *testing.T) (srv *httptest.Server, pool *x509.CertPool, sni chan string) {
	t.Helper()
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := ca.Issue("app.internal", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	sni = make(chan string, 16)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/health" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		sni <- hello.ServerName
		return nil, nil
	}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused are the test's
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	return srv, pool, sni
}

// A check with TLS speaks it to a real TLS server: verified against the
// CA given, by the ServerName (sent as SNI) or else the server's address;
// refused with another CA or a name the certificate lacks; passed with
// verification off. Without TLS, the same HTTP check fails.
func TestCheckOverTLS(t *testing.T) {
	srv, pool, sni := tlsServer(t)
	_, otherPool, _ := tlsServer(t) // another CA
	addr := srv.Listener.Addr().String()
	health := &HTTPCheck{Method: http.MethodGet, URI: "/health"}
	for _, tc := range []struct {
		name    string
		check   ServerCheck
		wantErr string // "": passes
		wantSNI string // the SNI the server saw, if it saw a handshake
	}{
		{"right CA, the address verified", ServerCheck{HTTP: health, TLS: &tls.Config{RootCAs: pool}}, "", ""},
		{"right CA, a name verified and sent", ServerCheck{HTTP: health, TLS: &tls.Config{RootCAs: pool, ServerName: "app.internal"}}, "", "app.internal"},
		{"connect check, right CA", ServerCheck{TLS: &tls.Config{RootCAs: pool}}, "", ""},
		{"wrong CA", ServerCheck{HTTP: health, TLS: &tls.Config{RootCAs: otherPool}}, "certificate signed by unknown authority", ""},
		{"connect check, wrong CA", ServerCheck{TLS: &tls.Config{RootCAs: otherPool, ServerName: "app.internal"}}, "certificate signed by unknown authority", "app.internal"},
		{"wrong name", ServerCheck{HTTP: health, TLS: &tls.Config{RootCAs: pool, ServerName: "other.example"}}, "not other.example", "other.example"},
		{"verification off", ServerCheck{HTTP: health, TLS: &tls.Config{InsecureSkipVerify: true, ServerName: "other.example"}}, "", "other.example"},
		{"plain HTTP to the TLS server", ServerCheck{HTTP: health}, "status 400", ""},
	} {
		tc.check.Timeout = 5 * time.Second
		r := checkOnce(t, addr, tc.check)
		switch {
		case tc.wantErr == "" && r.Err != nil:
			t.Errorf("%s: %v, want a pass", tc.name, r.Err)
		case tc.wantErr != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want an error with %q", tc.name, r.Err, tc.wantErr)
		case tc.wantErr == "" && tc.check.HTTP != nil && r.Status != http.StatusOK:
			t.Errorf("%s: status %d, want 200", tc.name, r.Status)
		}
		if tc.check.TLS == nil {
			continue
		}
		if got := <-sni; got != tc.wantSNI {
			t.Errorf("%s: the server saw SNI %q, want %q", tc.name, got, tc.wantSNI)
		}
	}
}

// A check with TLS of a server that accepts and never answers the
// handshake ends at its timeout, as the connection's does.
func TestTLSCheckTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // open, silent
		}
	}()
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	for _, check := range []ServerCheck{
		{TLS: &tls.Config{InsecureSkipVerify: true}, Timeout: 150 * time.Millisecond},
		{HTTP: &HTTPCheck{}, TLS: &tls.Config{InsecureSkipVerify: true}, ConnectTimeout: 50 * time.Millisecond, Timeout: 150 * time.Millisecond},
	} {
		r := checkOnce(t, ln.Addr().String(), check)
		if r.Err == nil || r.Duration < 150*time.Millisecond || r.Duration > 2*time.Second {
			t.Errorf("TLS check (http %v) of a silent server: err %v after %v, want a timeout after 150ms", check.HTTP != nil, r.Err, r.Duration)
		}
	}
}
