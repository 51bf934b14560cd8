package haproxy

import (
	"strings"
	"testing"
)

// translateFcgi translates a fcgi-app app (line 3) with the lines app
// (from line 4) and a backend with the lines backend that names it.
func translateFcgi(t *testing.T, app, backend string) (Translation, error) {
	t.Helper()
	text := "defaults\n\tmode http\nfcgi-app app\n" + app + "frontend f\n\tbind :80\n\tdefault_backend php\nbackend php\n" + backend
	cfg, err := Parse(strings.NewReader(text), "f.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	return Translate(cfg)
}

const fcgiServer = "\tuse-fcgi-app app\n\tserver fpm 10.0.0.5:9000 proto fcgi check\n"

// Issue 28: a fcgi-app becomes reverse_proxy's transport fastcgi: docroot
// its root, path-info its split (a warning), set-param its env with
// log-format samples as placeholders, log-stderr global capture_stderr,
// index a rewrite of a path ending in / where path-info's expression does
// not match; Authorization is removed unless pass-header passes it, and
// SERVER_NAME is the Host header as sent.
func TestFcgiAppIsTransportFastCGI(t *testing.T) {
	tr, err := translateFcgi(t, "\tdocroot /var/www/html\n\tindex index.php\n\tpath-info ^(/.+\\.php)(/.*)?$\n\tset-param HTTP_PROXY \"\"\n\tset-param FORWARDED_HOST %[req.hdr(host)]\n\tlog-stderr global\n\toption keep-conn\n", fcgiServer)
	if err != nil {
		t.Fatal(err)
	}
	text := oneLine(tr.Caddyfile)
	for _, want := range []string{
		"@fcgi_index_15 {; path */; not path_regexp \"^(/.+\\.php)(/.*)?$\"; }; uri @fcgi_index_15 path_regexp /$ /index.php",
		"header_up -Authorization; header_up -Via",
		`transport fastcgi {; env SERVER_NAME {http.request.hostport}; root /var/www/html; split .php; env HTTP_PROXY ""; env FORWARDED_HOST `,
		"; capture_stderr; }",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
		}
	}
	if !strings.Contains(text, "env FORWARDED_HOST {http.request.host") && !strings.Contains(text, "env FORWARDED_HOST \"{") {
		t.Errorf("set-param with a sample is not a placeholder:\n%s", tr.Caddyfile)
	}
	if !strings.Contains(tr.Caddyfile, "f.cfg:10: option keep-conn  (ignored:") {
		t.Errorf("option keep-conn is not noted as ignored:\n%s", tr.Caddyfile)
	}
	if warned := warnedLines(tr, "path-info"); len(warned) != 1 || warned[0] != 6 {
		t.Errorf("path-info warnings at lines %v, want 6: %+v", warned, tr.Warnings)
	}
	if warned := warnedLines(tr, "use-fcgi-app app: Caddy's transport fastcgi also sends params HAProxy leaves out: DOCUMENT_URI"); len(warned) != 1 || warned[0] != 15 {
		t.Errorf("use-fcgi-app warnings at lines %v, want 15: %+v", warned, tr.Warnings)
	}
	tr, err = translateFcgi(t, "\tdocroot /srv/app\n\tpass-header Authorization\n\tpass-header X-Token\n", fcgiServer)
	if err != nil {
		t.Fatal(err)
	}
	if text := oneLine(tr.Caddyfile); strings.Contains(text, "header_up -Authorization") || strings.Contains(text, "split") || strings.Contains(text, "fcgi_index") {
		t.Errorf("pass-header Authorization, no path-info, no index:\n%s", tr.Caddyfile)
	}
}

// What transport fastcgi cannot carry, and what HAProxy refuses too, is
// refused with its line.
func TestFcgiAppRefusals(t *testing.T) {
	const root = "\tdocroot /var/www\n"
	for _, tt := range []struct{ app, backend, want string }{
		{"\tindex index.php\n", fcgiServer, "f.cfg:3: fcgi-app app has no docroot"},
		{"\tdocroot www\n", fcgiServer, "f.cfg:4: docroot www: Caddy's root makes a relative directory absolute"},
		{"\tdocroot /var/www/\n", fcgiServer, "docroot /var/www/: Caddy's root makes"},
		{root + "\tpath-info ^(/.+\\.php)(/.*)$ \n\tpath-info ^(.*)(/x)$\n", fcgiServer, "f.cfg:6: path-info ^(.*)(/x)$: only ^(/.+\\.php)(/.*)?$ and its like"},
		{root + "\tset-param A b if TRUE\n", fcgiServer, "f.cfg:5: set-param A: takes a name and a value; a condition is not translated"},
		{root + "\tset-param A %[nbsrv(php)]\n", fcgiServer, "f.cfg:5: set-param A: log-format sample nbsrv"},
		{root + "\tpass-header Proxy-Authorization\n", fcgiServer, "f.cfg:5: pass-header Proxy-Authorization: Caddy's reverse_proxy passes no Proxy-Authorization on"},
		{root + "\tacl a path /x\n", fcgiServer, "f.cfg:5: acl a: a fcgi-app's ACLs serve set-param and pass-header conditions"},
		{root + "\tlog-stderr 127.0.0.1:514 local0\n", fcgiServer, "f.cfg:5: log-stderr 127.0.0.1:514: only log-stderr global"},
		{root + "\toption max-reqs 4\n", fcgiServer, "f.cfg:5: option max-reqs: without option mpxs-conns: HAProxy 2.6 refuses it too"},
		{root + "\tindex ../x.php\n", fcgiServer, "f.cfg:5: index ../x.php: takes one file name"},
		{root, "\tuse-fcgi-app other\n\tserver fpm 10.0.0.5:9000 proto fcgi\n", "f.cfg:9: use-fcgi-app other: no fcgi-app section other"},
		{root, "\tuse-fcgi-app app\n\tserver fpm 10.0.0.5:9000\n", "f.cfg:9: use-fcgi-app app: its servers do not speak FastCGI"},
		{root, "\tserver fpm 10.0.0.5:9000 proto fcgi\n", "f.cfg:9: server fpm: proto fcgi without use-fcgi-app"},
		{root, "\tserver fpm 10.0.0.5:9000 proto h1\n", "f.cfg:9: server fpm: proto h1 is not translated (proto fcgi and proto h2 are)"},
		{root, "\tuse-fcgi-app app\n\tserver fpm 10.0.0.5:9000 proto h2\n", "f.cfg:9: use-fcgi-app app: its servers do not speak FastCGI"},
		{root, fcgiServer + "\tserver fpm2 10.0.0.6:9000 check\n", "f.cfg:11: server fpm2: no proto (HTTP/1.1), where fpm has proto fcgi"},
		{root, "\tuse-fcgi-app app\n\tserver fpm 10.0.0.5:9000 proto fcgi maxconn 10\n", "maxconn, send-proxy and alpn of a FastCGI server are not translated"},
		{root, "\tuse-fcgi-app app\n\toption httpchk GET /ping\n\thttp-check expect status 200\n\tserver fpm 10.0.0.5:9000 proto fcgi check\n", "f.cfg:10: option httpchk: an HTTP check of a FastCGI server is not translated"},
	} {
		if _, err := translateFcgi(t, tt.app, tt.backend); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q %q: %v, want %q", tt.app, tt.backend, err, tt.want)
		}
	}
}

// A fcgi-app no backend names is kept as comments, as HAProxy uses it
// for no request.
func TestFcgiAppUnused(t *testing.T) {
	cfg, err := Parse(strings.NewReader("defaults\n\tmode http\nfcgi-app php\n\tdocroot /var/www\nfrontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"), "f.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"f.cfg:3: fcgi-app php  (ignored: no backend names it (use-fcgi-app))", "f.cfg:4: docroot /var/www  (ignored: no backend names its fcgi-app)"} {
		if !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
		}
	}
	if strings.Contains(tr.Caddyfile, "fastcgi") {
		t.Errorf("an unused fcgi-app is written:\n%s", tr.Caddyfile)
	}
}
