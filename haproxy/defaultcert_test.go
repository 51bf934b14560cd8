package haproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned is a PEM bundle (certificate, then key) for the names, or
// with none for the common name alone.
func selfSigned(t *testing.T, cn string, dns []string, ips []net.IP) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, DNSNames: dns, IPAddresses: ips,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
}

// HAProxy's default certificate's name: the first DNS name, else IP
// address, else common name; of a directory, the first file's in
// alphabetical order but a key's, OCSP response's, issuer's or SCT list's.
func TestDefaultCertName(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dns := write("dns.pem", selfSigned(t, "cn.example", []string{"WWW.Example", "other.example"}, []net.IP{net.IPv4(127, 0, 0, 1)}))
	ip := write("ip.pem", selfSigned(t, "cn.example", nil, []net.IP{net.IPv4(127, 0, 0, 2)}))
	cn := write("cn.pem", selfSigned(t, "CN.example", nil, nil))
	noCert := write("key-only.pem", []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	for path, want := range map[string]string{dns: "www.example", ip: "127.0.0.2", cn: "cn.example"} {
		if got, err := defaultCertName(osFiles{}, path); err != nil || got != want {
			t.Errorf("%s: %q, %v, want %q", filepath.Base(path), got, err, want)
		}
	}
	if _, err := defaultCertName(osFiles{}, noCert); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a file without a certificate: %v", err)
	}
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.pem.key", "a.pem.ocsp", "b.pem", "c.pem"} {
		name := strings.TrimSuffix(f, ".pem") + ".example"
		if err := os.WriteFile(filepath.Join(sub, f), selfSigned(t, "", []string{name}, nil), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := defaultCertName(osFiles{}, sub); err != nil || got != "b.example" {
		t.Errorf("directory: %q, %v, want b.example (a.pem.key and a.pem.ocsp are not certificates HAProxy loads)", got, err)
	}
}
