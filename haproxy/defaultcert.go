package haproxy

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// sniNote is a TLS bind's line and what its first crt is to clients
// without a known SNI; name, if not "", is the default certificate's
// name, Caddy's default_sni and fallback_sni.
type sniNote struct {
	line Line
	what string
	name string
}

// readDefaultSNI reads HAProxy's default certificate, a bind's first crt,
// as the name of it that gives it to a client whose SNI names none of the
// certificates, or that sends none: default_sni without SNI, fallback_sni
// for an unknown one, taken from a directory's; of several files, whose
// tls directives select among them first, Caddy serves one in no set
// order (noted). The two options are one for every site: with binds whose
// first crt differ, the first bind's stands and the others' are noted.
func (t *translator) readDefaultSNI(frontends []*frontend) []sniNote {
	var notes []sniNote
	var first *bind
	for _, fe := range frontends {
		for i := range fe.binds {
			b := &fe.binds[i]
			if len(b.crts) == 0 {
				continue
			}
			path := resolve(t.global.crtBase, b.crts[0])
			if first == nil {
				first = b
				notes = append(notes, t.defaultCert(b, path))
				continue
			}
			if firstPath := resolve(t.global.crtBase, first.crts[0]); path != firstPath {
				notes = append(notes, sniNote{line: b.line, what: fmt.Sprintf("its first crt, %s, is not the default certificate here as in HAProxy: Caddy's default_sni and fallback_sni are one for every site, %s's (line %d); "+
					"a client whose SNI names none of this bind's certificates, or that sends none, fails its handshake", path, firstPath, first.line.Pos.Line)})
			}
		}
	}
	return notes
}

// defaultCert is the note of the first TLS bind, whose first crt (at
// path) is the default certificate.
func (t *translator) defaultCert(b *bind, path string) sniNote {
	name, err := defaultCertName(t.cfg.files(), path)
	if err != nil {
		return sniNote{line: b.line, what: fmt.Sprintf("HAProxy's default certificate is its first crt, %s, which cannot be read here (%v): "+
			"write default_sni and fallback_sni with a name of that certificate, or a client whose SNI names no certificate, or that sends none, fails its handshake", path, err)}
	}
	what := fmt.Sprintf("a client whose SNI names no certificate, or that sends none, gets the first crt's, %s (HAProxy's default certificate): Caddy takes it by its name", path)
	if len(b.crts) > 1 && !isDir(t.cfg.files(), path) {
		what = fmt.Sprintf("HAProxy's default certificate is the first crt's, %s; with several crt files, Caddy serves a client whose SNI names none of them, or that sends none, one of them in no set order (each file's tls directive selects among the files, before default_sni)", path)
	}
	return sniNote{line: b.line, what: what, name: name}
}

// defaultCertName is a name of the certificate that HAProxy serves by
// default from a crt: the file's, or for a directory the first file's in
// alphabetical order (HAProxy's loading order) but for the key, OCSP,
// issuer and SCT files it loads beside a certificate. The name is the
// certificate's first DNS name, else its first IP address, else its
// common name.
func defaultCertName(files Files, path string) (string, error) {
	info, err := files.Stat(path)
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		entries, err := files.ReadDir(path)
		if err != nil {
			return "", err
		}
		for _, e := range entries { // ReadDir sorts by name
			if e.IsDir() || slices.Contains([]string{".key", ".ocsp", ".issuer", ".sctl"}, filepath.Ext(e.Name())) {
				continue
			}
			return defaultCertName(files, filepath.Join(path, e.Name()))
		}
		return "", errors.New("no certificate file in the directory")
	}
	cert, err := leafCertificate(files, path)
	if err != nil {
		return "", err
	}
	switch {
	case len(cert.DNSNames) > 0:
		return strings.ToLower(cert.DNSNames[0]), nil
	case len(cert.IPAddresses) > 0:
		return cert.IPAddresses[0].String(), nil
	case cert.Subject.CommonName != "":
		return strings.ToLower(cert.Subject.CommonName), nil
	}
	return "", errors.New("a certificate with no name")
}

// leafCertificate is the first certificate of the PEM file at path.
func leafCertificate(files Files, path string) (*x509.Certificate, error) {
	data, err := readBounded(files, path, maxCertificate)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil, errors.New("no PEM certificate in the file")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// certificateNames are the names Caddy picks a certificate by (its
// common name, DNS names and IP addresses), in lower case: HAProxy's
// too, where no SNI filter names others.
func certificateNames(cert *x509.Certificate) []string {
	var names []string
	if cn := cert.Subject.CommonName; cn != "" {
		names = append(names, strings.ToLower(cn))
	}
	for _, n := range cert.DNSNames {
		names = append(names, strings.ToLower(n))
	}
	for _, ip := range cert.IPAddresses {
		names = append(names, ip.String())
	}
	slices.Sort(names)
	return slices.Compact(names)
}
