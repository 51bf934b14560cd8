package caddymodule

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-ha/caddy-ha/fakecluster"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
)

// testPKI makes a CA (written to a PEM file) and a node's TLS
// configuration with a certificate it signs for nodepilot.internal.example.
func testPKI(t *testing.T) (caFile string, server *tls.Config) {
	t.Helper()
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if server, err = ca.NodeTLS(); err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, server
}

// crtPEM is cert and its key in one PEM, as HAProxy's crt file holds them.
func crtPEM(t *testing.T, cert tls.Certificate) []byte {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})...)
}

// Probes reach TLS nodes the way proxied requests do (server name, trust
// pool) with the configured Host header, as the cluster's HAProxy checks do
// with verify required; a node whose certificate does not verify is never
// taken for the leader.
func TestProbesOverTLS(t *testing.T) {
	caFile, serverTLS := testPKI(t)
	c := newClusterWith(t, fakecluster.Config{LeaseTTL: 3 * time.Second, RenewInterval: time.Second, TLS: serverTLS}, 2)
	site := `reverse_proxy {upstreams} {
		lb_policy leader {
			host nodepilot.internal.example
			interval 100ms
			hold 500ms
			%s
		}
		transport http {
			tls
			tls_server_name nodepilot.internal.example
			tls_trust_pool file ` + caFile + `
		}
	}`
	tc := startCaddy(t, c, "", fmt.Sprintf(site, ""))
	post := func() *http.Response {
		resp, err := http.Post(tc.url("/api/orders"), "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(); resp.StatusCode != 200 || resp.Header.Get("X-Node-Id") != "node-a" {
		t.Fatalf("status %d from %q, want 200 from node-a", resp.StatusCode, resp.Header.Get("X-Node-Id"))
	}
	// The proxied request itself went over HTTP/2.
	if got := c.Node("node-a").Executed(); len(got) != 1 || got[0].Proto != "HTTP/2.0" {
		t.Fatalf("executed %+v, want one write over HTTP/2", got)
	}
	if h := c.Node("node-a").ProbeHost(); h != "nodepilot.internal.example" {
		t.Fatalf("probe Host %q", h)
	}

	// Probes that trust another CA cannot verify the nodes: no leader.
	otherCA, _ := testPKI(t)
	tc.load(c, "", fmt.Sprintf(site, "tls_ca "+otherCA))
	if resp := post(); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d Retry-After %q with unverifiable nodes, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// A CA file rotated in place under the transport's tls_trust_pool gives
// the probes the new CA at the next reload, as the proxied requests get it.
func TestRotatedTrustPoolReachesProbes(t *testing.T) {
	oldCA, _ := testPKI(t)
	newCA, serverTLS := testPKI(t)
	c := newClusterWith(t, fakecluster.Config{LeaseTTL: 3 * time.Second, RenewInterval: time.Second, TLS: serverTLS}, 1)
	caFile := filepath.Join(t.TempDir(), "backend-ca.pem")
	copyFile := func(from string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(oldCA) // the nodes' certificates do not verify with it yet
	site := `reverse_proxy {upstreams} {
		lb_policy leader {
			interval 100ms
			hold 300ms
		}
		transport http {
			tls
			tls_server_name nodepilot.internal.example
			tls_trust_pool file ` + caFile + `
		}
	}`
	tc := startCaddy(t, c, "", site)
	// A new connection each time: the reload closes idle ones.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	post := func() int {
		resp, err := client.Post(tc.url("/api/orders"), "application/json", strings.NewReader("{}"))
		if err != nil {
			// A connection the old server accepted as the reload closed
			// it: nothing reached a node, so it is sent again, once.
			resp, err = client.Post(tc.url("/api/orders"), "application/json", strings.NewReader("{}"))
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(); st != http.StatusServiceUnavailable {
		t.Fatalf("status %d with an untrusted CA, want 503", st)
	}
	copyFile(newCA)
	tc.load(c, "", site)
	if st := post(); st != http.StatusOK {
		t.Fatalf("status %d after the CA file was rotated and Caddy reloaded, want 200", st)
	}
}

// The Redis store reaches a Redis that wants TLS (verified against a CA
// file, with a server name), a password (from an env placeholder) and
// another database.
func TestRedisStoreWithTLSPasswordAndDB(t *testing.T) {
	caFile, serverTLS := testPKI(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "redis.crt"), filepath.Join(dir, "redis.key")
	leaf := serverTLS.Certificates[0]
	keyDER, err := x509.MarshalECPrivateKey(leaf.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	caPEM, _ := os.ReadFile(caFile)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	clientTLS := &tls.Config{RootCAs: roots, ServerName: "nodepilot.internal.example"}
	srv := redistest.StartWith(t, redistest.Options{Password: "s3cret", CertFile: certFile, KeyFile: keyFile, ClientTLS: clientTLS})

	t.Setenv("CADDYHA_TEST_REDIS_PASSWORD", "s3cret")
	tc := startCaddy(t, nil, `ha {
		store redis {
			address `+srv.Addr+`
			password {env.CADDYHA_TEST_REDIS_PASSWORD}
			db 2
			prefix secure:
			tls {
				server_name nodepilot.internal.example
				ca `+caFile+`
			}
		}
	}`, `edge_rate_limit {
		zone secure {
			key {http.request.remote.host}
			events 1
			window 1h
		}
		on_store_error deny
		store_timeout 5s
	}
	respond "ok"`)
	awayFromWindowEnd(t, time.Hour, 20*time.Second)
	for i, want := range []int{200, 429} {
		if ans := send(t, "GET", tc.url("/")); ans.status != want {
			t.Fatalf("request %d: %d, want %d (503 would mean the store was not reached)", i, ans.status, want)
		}
	}
	db2 := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "s3cret", TLSConfig: clientTLS, DB: 2})
	defer db2.Close()
	key := "secure:rl:{secure:127.0.0.1}:" + strconv.FormatInt(time.Now().Unix()/3600, 10)
	if v := db2.Get(context.Background(), key).Val(); v != "2" {
		t.Fatalf("%s in db 2 = %q, want 2", key, v)
	}
}
