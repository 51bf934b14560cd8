package haproxy

import (
	"strings"
	"testing"
)

// Issue 28: bind … crt-list <file> is read through the Files seam, each
// line's certificate a crt of its own in its place (the first the default
// certificate): SNI filters naming exactly the certificate's names are
// translated, a filter that leaves names out a warning, a name the
// certificate does not hold and ssl options for one certificate refused,
// each naming the list's line.
func TestCrtList(t *testing.T) {
	out, warnings, err := translateCrtList(t, "ssl crt-list /etc/ok.list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "tls /certs/a.pem /certs/a.pem") || !strings.Contains(out, "tls /certs/b.pem /certs/b.pem") || !strings.Contains(out, "default_sni a.example") || len(warnings) > 1 {
		t.Errorf("ok.list: want both certificates, a.pem's the default, no warning but the forwarding headers'; warnings %v:\n%s", warnings, out)
	}
	out, _, err = translateCrtList(t, "ssl crt /certs/b.pem crt-list /etc/ok.list")
	if err != nil || !strings.Contains(out, "default_sni b.example") {
		t.Errorf("a crt before the list is the default certificate: %v\n%s", err, out)
	}
	_, warnings, err = translateCrtList(t, "ssl crt-list /etc/sub.list")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warnings {
		got = append(got, w.Msg)
	}
	for _, want := range []string{"crt-list /etc/sub.list line 1: Caddy serves /certs/a.pem for a.example too", "crt-list /etc/sub.list line 2: Caddy serves /certs/w.pem for secure.w.example too"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("sub.list: warnings %q, want %q", got, want)
		}
	}
}

// The crt-list lines that Caddy cannot serve as HAProxy does are refused
// at the bind's line, naming the list's line.
func TestCrtListRefusals(t *testing.T) {
	for bind, want := range map[string]string{
		"ssl crt-list /etc/bad.list":  "k.cfg:4: bind :443: crt-list /etc/bad.list line 2: SNI filter c.example, a name /certs/b.pem does not hold",
		"ssl crt-list /etc/opt.list":  "k.cfg:4: bind :443: crt-list /etc/opt.list line 1: ssl options [alpn h2 ssl-min-ver TLSv1.2] for one certificate",
		"ssl crt-list /etc/none.list": "k.cfg:4: bind :443: crt-list /etc/none.list: ",
	} {
		if _, _, err := translateCrtList(t, bind); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", bind, err, want)
		}
	}
}

// translateCrtList translates a frontend whose bind :443 has the options
// bind, with certificates and crt-lists to read.
func translateCrtList(t *testing.T, bind string) (string, []Warning, error) {
	t.Helper()
	files := mapFiles{
		"/certs/a.pem":  string(selfSigned(t, "", []string{"a.example", "www.a.example"}, nil)),
		"/certs/b.pem":  string(selfSigned(t, "", []string{"b.example"}, nil)),
		"/certs/w.pem":  string(selfSigned(t, "", []string{"*.w.example"}, nil)),
		"/etc/ok.list":  "# the sites\n\n/certs/a.pem\n/certs/b.pem b.example\r\n",
		"/etc/sub.list": "/certs/a.pem www.a.example\n/certs/w.pem *.w.example !secure.w.example\n",
		"/etc/bad.list": "/certs/a.pem\n/certs/b.pem c.example\n",
		"/etc/opt.list": "/certs/a.pem [alpn h2 ssl-min-ver TLSv1.2] a.example\n",
	}
	cfg, err := Parse(strings.NewReader("defaults\n\tmode http\nfrontend f\n\tbind :443 "+bind+"\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"), "k.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Files = files
	tr, err := Translate(cfg)
	return tr.Caddyfile, tr.Warnings, err
}

// countedFiles is mapFiles that counts the reads of each file.
type countedFiles struct {
	mapFiles
	reads map[string]int
}

func (f countedFiles) ReadFile(name string) ([]byte, error) {
	f.reads[name]++
	return f.mapFiles.ReadFile(name)
}

// A crt-list that names one certificate with SNI filters on each of its
// lines reads that certificate once: read for each line, a list of a MiB
// naming a certificate of a MiB took minutes to adapt.
func TestCrtListReadsEachCertificateOnce(t *testing.T) {
	files := countedFiles{mapFiles{
		"/certs/a.pem": string(selfSigned(t, "", []string{"a.example"}, nil)),
		"/etc/a.list":  strings.Repeat("/certs/a.pem a.example\n", 1000),
	}, map[string]int{}}
	cfg, err := Parse(strings.NewReader("defaults\n\tmode http\nfrontend f\n\tbind :443 ssl crt-list /etc/a.list\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"), "k.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Files = files
	if _, err := Translate(cfg); err != nil {
		t.Fatal(err)
	}
	// Once for the filters, once for the default certificate's name.
	if n := files.reads["/certs/a.pem"]; n > 2 {
		t.Errorf("/certs/a.pem read %d times, want at most 2", n)
	}
}
