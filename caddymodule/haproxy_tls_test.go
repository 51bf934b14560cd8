package caddymodule

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
)

// A bind with several crt files serves each: the client's SNI picks the
// certificate, as in HAProxy (the translation loaded only the last one,
// and a client asking for the first name got the other's certificate).
func TestHAProxyBindServesEachCrt(t *testing.T) {
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var crts []string
	for _, name := range []string{"a.example", "b.example"} {
		_, pemBytes, err := ca.Issue(name)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name+".pem")
		if err := os.WriteFile(f, pemBytes, 0o600); err != nil {
			t.Fatal(err)
		}
		crts = append(crts, f)
	}
	app := startAppServer(t)
	addr := loopback.FreeAddr()
	runHAProxyConfig(t, fmt.Sprintf("defaults\n\tmode http\n\ttimeout connect 2s\n\ttimeout client 10s\n\ttimeout server 10s\n"+
		"frontend web\n\tbind %s ssl crt %s crt %s\n\tdefault_backend app\nbackend app\n\tserver app1 %s\n", addr, crts[0], crts[1], app.addr))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	for _, name := range []string{"a.example", "b.example"} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, RootCAs: pool})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := conn.ConnectionState().PeerCertificates[0].DNSNames
		conn.Close()
		if !slices.Contains(got, name) {
			t.Errorf("SNI %s: the certificate of %v", name, got)
		}
	}
}
