package fakecluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// NodeName is the name the nodes' certificates carry, as the seed's
// HAProxy configuration verifies it (sni, check-sni, verifyhost).
const NodeName = "nodepilot.internal.example"

// CA is a private certificate authority for the nodes' TLS (and a demo
// proxy's own), as the cluster's HAProxy trusts one with ca-file.
type CA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
	// PEM is the CA's certificate, for a trust pool or ca-file.
	PEM []byte
}

// NewCA makes a CA whose certificates are valid for validFor from now.
func NewCA(validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "caddy-ha fake cluster CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validFor),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, serial: 1, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a server certificate for names (DNS names or IP addresses).
// It returns it for a tls.Config, and as one PEM holding the certificate
// and its key, as HAProxy's crt file does.
func (ca *CA) Issue(names ...string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: ca.cert.NotBefore, NotAfter: ca.cert.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	both := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, both, nil
}

// NodeTLS is a node's TLS configuration with a certificate for NodeName;
// the nodes offer HTTP/2 as Kestrel does.
func (ca *CA) NodeTLS() (*tls.Config, error) {
	cert, _, err := ca.Issue(NodeName)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}, nil
}

// WriteDemoPKI makes a CA valid for a day, writes it to dir/ca.pem and a
// proxy's frontend certificate for 127.0.0.1 and localhost, with its key,
// to dir/frontend.pem (HAProxy's crt file), and returns the nodes' TLS
// configuration.
func WriteDemoPKI(dir string) (*tls.Config, error) {
	ca, err := NewCA(24 * time.Hour)
	if err != nil {
		return nil, err
	}
	_, frontend, err := ca.Issue("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"ca.pem": ca.PEM, "frontend.pem": frontend} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, fmt.Errorf("writing the demo PKI: %w", err)
		}
	}
	return ca.NodeTLS()
}
