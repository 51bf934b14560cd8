package haproxy

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
)

// crtListRef is a bind's crt-list: its file, and where its certificates
// go among the bind's crts (HAProxy loads them in the order written, and
// the bind's first is its default certificate).
type crtListRef struct {
	path string
	at   int
}

// crtListEntry is a line of a crt-list: <crt> [[<ssl options>]] [<sni
// filter>…].
type crtListEntry struct {
	crt     string
	options string   // the ssl options between the brackets, as written
	filters []string // the SNI filters, !<name> to leave a name out
}

// readCrtLists reads the bind's crt-lists (through the Files seam, when
// the configuration is read, as HAProxy reads them when it starts) into
// its crts: each line's certificate where Caddy, which picks a
// certificate by the names it holds, picks as HAProxy does.
func (fe *frontend) readCrtLists(b *bind) error {
	for i := len(b.crtLists) - 1; i >= 0; i-- { // the later first: the earlier's places stand
		ref := b.crtLists[i]
		crts, err := fe.readCrtList(ref.path, b.line)
		if err != nil {
			return err
		}
		b.crts = slices.Insert(b.crts, ref.at, crts...)
	}
	return nil
}

// readCrtList reads the crt-list at path of bind line l: its
// certificates, in order. Empty lines and # comments are skipped, as
// HAProxy skips them.
func (fe *frontend) readCrtList(path string, l Line) ([]string, error) {
	data, err := readBounded(fe.cfg.files(), path, maxCrtList)
	if err != nil {
		return nil, refuse(l, "crt-list %s: %v (HAProxy refuses a crt-list it cannot read too)", path, err)
	}
	var crts []string
	// Each certificate read once: a list of a MiB may name one on every
	// line (a certificate read for each took minutes).
	leaves := map[string]*x509.Certificate{}
	leaf := func(path string) (*x509.Certificate, error) {
		if cert, ok := leaves[path]; ok {
			return cert, nil
		}
		cert, err := leafCertificate(fe.cfg.files(), path)
		leaves[path] = cert
		return cert, err
	}
	for n, text := range strings.Split(string(data), "\n") {
		at := fmt.Sprintf("crt-list %s line %d", path, n+1)
		e, err := parseCrtListLine(text)
		switch {
		case err != nil:
			return nil, refuse(l, "%s: %v", at, err)
		case e.crt == "":
			continue
		case e.options != "":
			return nil, refuse(l, "%s: ssl options [%s] for one certificate: Caddy's TLS options are the site's, whichever certificate it serves (not translated; write them on the bind line, or give the certificate a bind of its own)", at, e.options)
		case len(e.filters) > 0:
			if err := fe.checkSNIFilters(e, at, l, leaf); err != nil {
				return nil, err
			}
		}
		crts = append(crts, e.crt)
	}
	return crts, nil
}

// parseCrtListLine reads a crt-list line as HAProxy does: words between
// spaces and tabs, the first the certificate, then maybe ssl options in
// brackets, then SNI filters.
func parseCrtListLine(text string) (crtListEntry, error) {
	text = strings.TrimSpace(strings.TrimSuffix(text, "\r"))
	if text == "" || strings.HasPrefix(text, "#") {
		return crtListEntry{}, nil
	}
	words := strings.Fields(text)
	e := crtListEntry{crt: words[0]}
	rest := strings.TrimSpace(strings.TrimPrefix(text, words[0]))
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]")
		if end < 0 {
			return e, fmt.Errorf("ssl options without their closing ] (HAProxy refuses it too)")
		}
		e.options = strings.TrimSpace(rest[1:end])
		rest = rest[end+1:]
	}
	e.filters = strings.Fields(rest)
	return e, nil
}

// checkSNIFilters compares the SNI filters of e with the names its
// certificate holds, by which Caddy picks it: HAProxy serves it for the
// filters' names alone (a !<name> leaving a name out of a wildcard's). A
// name it does not hold is refused: Caddy never serves it for that name.
// Names it holds that the filters leave out are a Warning: Caddy serves
// it for them too, where HAProxy serves another certificate of the bind
// that holds the name, or the default one. leaf reads a certificate.
func (fe *frontend) checkSNIFilters(e crtListEntry, at string, l Line, leaf func(string) (*x509.Certificate, error)) error {
	path := resolve(fe.global.crtBase, e.crt)
	cert, err := leaf(path)
	if err != nil {
		return refuse(l, "%s: %s with SNI filters: its names cannot be read to compare them with the filters (%v)", at, path, err)
	}
	held := certificateNames(cert)
	var served, left []string
	for _, f := range e.filters {
		if name, ok := strings.CutPrefix(f, "!"); ok {
			left = append(left, strings.ToLower(name))
		} else {
			served = append(served, strings.ToLower(f))
		}
	}
	for _, name := range served {
		if !slices.Contains(held, name) {
			return refuse(l, "%s: SNI filter %s, a name %s does not hold: HAProxy serves it for that name, Caddy picks a certificate by the names it holds (not translated; give the name a certificate that holds it, or drop the filter)", at, name, path)
		}
	}
	extra := slices.DeleteFunc(slices.Clone(held), func(n string) bool { return slices.Contains(served, n) })
	if extra = append(extra, left...); len(extra) > 0 {
		fe.notes = append(fe.notes, note{line: l, approximated: true, what: fmt.Sprintf("%s: Caddy serves %s for %s too, which its SNI filters leave out: HAProxy serves another certificate of the bind that holds the name, or the default one", at, path, strings.Join(extra, ", "))})
	}
	return nil
}
