package haproxy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// mapFiles is Files from a map of absolute paths to contents.
type mapFiles map[string]string

func (m mapFiles) fs() fstest.MapFS {
	out := fstest.MapFS{}
	for name, data := range m {
		out[strings.TrimPrefix(name, "/")] = &fstest.MapFile{Data: []byte(data)}
	}
	return out
}

func (m mapFiles) Stat(name string) (fs.FileInfo, error) {
	return fs.Stat(m.fs(), strings.TrimPrefix(name, "/"))
}

func (m mapFiles) ReadFile(name string) ([]byte, error) {
	return fs.ReadFile(m.fs(), strings.TrimPrefix(name, "/"))
}

func (m mapFiles) ReadDir(name string) ([]fs.DirEntry, error) {
	return fs.ReadDir(m.fs(), strings.TrimPrefix(name, "/"))
}

// Issue 27.4: the files a configuration names are read through one seam,
// which a test fills: an errorfile's body comes from it, and a file it
// lacks is a refusal naming the line that named it.
func TestFilesAreReadThroughOneSeam(t *testing.T) {
	const text = "defaults\n\tmode http\n\terrorfile 503 /etc/haproxy/errors/503.http\n" +
		"frontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	cfg, err := Parse(strings.NewReader(text), "s.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Files = mapFiles{"/etc/haproxy/errors/503.http": "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nfrom the seam\n"}
	out, err := caddyfileOf(cfg)
	if err != nil || !strings.Contains(out, `respond "from the seam`) {
		t.Fatalf("%v\n%s", err, out)
	}
	cfg.Files = mapFiles{}
	_, err = caddyfileOf(cfg)
	var e *Error
	if !errors.As(err, &e) || e.Pos.Line != 3 || !strings.Contains(err.Error(), "errorfile 503") {
		t.Fatalf("a missing errorfile: %v, want a refusal at s.cfg:3", err)
	}
}

// Issue 28: the HAProxy 1.x keywords removed in 2.1 are read as the 2.x
// lines that replaced them, each a warning naming its line, the comment
// keeping the line as written; a form not translated is refused as it is.
func TestLegacyKeywordsReadAsTheir2xReplacements(t *testing.T) {
	cfg, err := Parse(strings.NewReader(legacyText), "l.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# l.cfg:3: contimeout 5s", "dial_timeout 5s", "read_body 30s", `# l.cfg:8: reqadd X-Forwarded-Proto:\ http`,
		"request_header +X-Forwarded-Proto http", "header_up X-Forwarded-Proto {http.request.header.X-Forwarded-Proto}", "# l.cfg:9: rspdel ^Server:.*", "header_down -Server"} {
		if !strings.Contains(tr.Caddyfile, want) {
			t.Errorf("the translation lacks %q:\n%s", want, tr.Caddyfile)
		}
	}
	var lines []int
	for _, w := range tr.Warnings {
		lines = append(lines, w.Pos.Line)
	}
	// Line 6: the frontend's forwarding headers as a client sends them
	// (no option forwardfor) are removed.
	if len(lines) != 6 || lines[0] != 3 || lines[3] != 6 || lines[4] != 8 || lines[5] != 9 || !strings.HasPrefix(tr.Warnings[4].Msg, "reqadd: read as http-request add-header X-Forwarded-Proto") {
		t.Errorf("warnings %+v, want lines 3, 4, 5, 6, 8 and 9", tr.Warnings)
	}
}

// legacyText is a configuration with 1.x keywords, its line 9 a header
// rule that the tests below replace.
const legacyText = "defaults\n\tmode http\n\tcontimeout 5s\n\tclitimeout 30s\n\tsrvtimeout 30s\n" +
	"frontend f\n\tbind :80\n\treqadd X-Forwarded-Proto:\\ http\n\trspdel ^Server:.*\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"

// The 1.x forms not translated are refused at their line with what to
// write; block is read as http-request deny, which has its syntax.
func TestLegacyFormsBlockAndRefusals(t *testing.T) {
	text := legacyText
	cfg, _ := Parse(strings.NewReader(strings.Replace(text, "rspdel ^Server:.*", "rspdel ^Set-Cookie:\\ id=.*", 1)), "l.cfg", lookup)
	if _, err := Translate(cfg); err == nil || !strings.HasPrefix(err.Error(), "l.cfg:9: rspdel") {
		t.Errorf("rspdel of part of a header: %v, want a refusal at l.cfg:9", err)
	}
	// block: http-request deny's syntax, which replaced it; reqideny and
	// the like are refused with what to write.
	cfg, _ = Parse(strings.NewReader(strings.Replace(text, "rspdel ^Server:.*", "block if { path_beg /admin }", 1)), "l.cfg", lookup)
	tr, err := Translate(cfg)
	if err != nil || !strings.Contains(tr.Caddyfile, "# l.cfg:9: block if { path_beg /admin }\n") || !strings.Contains(tr.Caddyfile, "error @answer_9 403") ||
		!slices.ContainsFunc(tr.Warnings, func(w Warning) bool { return w.Pos.Line == 9 && strings.Contains(w.Msg, "read as http-request deny") }) {
		t.Errorf("block: %v %+v\n%s", err, tr.Warnings, tr.Caddyfile)
	}
	out, err := translateK(t, strings.Replace(text, "rspdel ^Server:.*", "reqideny ^GET\\ /admin", 1))
	checkOutcome(t, text, out, err, "k.cfg:9: reqideny ^GET /admin: removed in HAProxy 2.1: write `http-request deny if <ACL>` (with `-i`)")
}

// Issue 28: an ACL's -f pattern files are read through the seam as
// HAProxy 2.6 reads them: '#' at a line's start a comment, leading
// spaces and tabs stripped, a line up to its CR, empty lines left out;
// several files and inline values add up; a file that cannot be read is
// refused at the ACL's line.
func TestACLPatternFiles(t *testing.T) {
	const text = "defaults\n\tmode http\nfrontend f\n\tbind :80\n" +
		"\tacl blocked src -f /etc/haproxy/blocked.lst 192.0.2.7\n\tacl api path_beg -f /etc/haproxy/api.lst -f /etc/haproxy/more.lst\n" +
		"\thttp-request deny if blocked\n\tuse_backend b if api\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	cfg, err := Parse(strings.NewReader(text), "p.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Files = mapFiles{
		"/etc/haproxy/blocked.lst": "# bad networks\n203.0.113.0/24\r\n\n  198.51.100.9\n",
		"/etc/haproxy/api.lst":     "/api/\n #/hash\n",
		"/etc/haproxy/more.lst":    "\t/v2/ \n",
	}
	out, err := caddyfileOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"@answer_7 remote_ip 192.0.2.7 203.0.113.0/24 198.51.100.9\n",
		`startsWith("/api/") || {http.request.uri}.split("?")[0].startsWith("#/hash") || {http.request.uri}.split("?")[0].startsWith("/v2/ ")`} {
		if !strings.Contains(out, want) {
			t.Errorf("the translation lacks %s:\n%s", want, out)
		}
	}
	delete(cfg.Files.(mapFiles), "/etc/haproxy/more.lst")
	if _, err = caddyfileOf(cfg); err == nil || !strings.Contains(err.Error(), "p.cfg:6: acl api: -f /etc/haproxy/more.lst:") {
		t.Errorf("a missing pattern file: %v, want a refusal at p.cfg:6", err)
	}
}

// A file the configuration names is read only as a regular file of a
// bounded size: a device (/dev/zero, which reads forever, ran the adapter
// out of memory through an ACL's -f, a crt and a crt-list's certificate)
// is refused at the line that names it, for every reader of the seam (a
// default certificate that cannot be read is a note: Caddy reads it when
// it starts).
func TestFilesAreRegularAndBounded(t *testing.T) {
	if info, err := (osFiles{}).Stat("/dev/zero"); err != nil || info.Mode().IsRegular() {
		t.Skipf("no /dev/zero here: %v", err)
	}
	list := t.TempDir() + "/zero.list"
	if err := os.WriteFile(list, []byte("/dev/zero zero.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const head = "defaults\n\tmode http\nfrontend f\n"
	const tail = "\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	for _, tt := range []struct{ text, want string }{
		{head + "\tbind :80\n\tacl bad src -f /dev/zero\n\thttp-request deny if bad\n" + tail, "b.cfg:5: acl bad: -f /dev/zero: /dev/zero is not a regular file of at most 64 MiB"},
		{head + "\tbind :443 ssl crt /dev/zero\n" + tail, "(HAProxy's default certificate is its first crt, /dev/zero, which cannot be read here (/dev/zero is not a regular file of at most 1 MiB)"},
		{head + "\tbind :443 ssl crt-list " + list + "\n" + tail, "b.cfg:4: bind :443: crt-list " + list + " line 1: /dev/zero with SNI filters: its names cannot be read to compare them with the filters (/dev/zero is not a regular file of at most 1 MiB)"},
		{head + "\tbind :443 ssl crt-list /dev/zero\n" + tail, "b.cfg:4: bind :443: crt-list /dev/zero: /dev/zero is not a regular file of at most 1 MiB"},
		{head + "\tbind :80\n\terrorfile 503 /dev/zero\n" + tail, "b.cfg:5: errorfile 503: /dev/zero is not a regular file of at most 64 KiB"},
	} {
		got, err := translateText(t, tt.text)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("%q: want %q in\n%s", tt.text, tt.want, got)
		}
	}
}

// A 1.x reqadd's or rspadd's value is sent as written: HAProxy 1.x read
// no log-format in it, so a %[sample] or %ci is text (add-header, which
// replaced it, reads it as a log-format: the client's address went out
// where 1.x sent "%[src]").
func TestLegacyHeaderAddIsText(t *testing.T) {
	for rules, want := range map[string]string{
		"\treqadd X-A:\\ %[src]\n\trspadd X-B:\\ %ci%%\n": "request_header +X-A %[src]; header_down +X-B %ci%%",
		"\treqadd X-A:\\ 100%\n":                          "request_header +X-A 100%",
	} {
		out, err := translateText(t, "defaults\n\tmode http\nfrontend f\n\tbind :80\n"+rules+"\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n")
		for _, w := range strings.Split(want, "; ") {
			if err != nil || !strings.Contains(out, w) {
				t.Errorf("%q: %v, the translation lacks %s:\n%s", rules, err, w, out)
			}
		}
	}
}

// A block list of 20,000 addresses from -f is Caddy's remote_ip matcher
// (negated for unless and !), which takes any number of ranges; the same
// addresses beside another test in the condition make a CEL expression
// longer than Caddy's expression matcher compiles (100,000 code points,
// its placeholders expanded), refused at the rule that tests it: it
// adapted, and Caddy then refused to load the configuration.
func TestACLPatternsPastCELsSize(t *testing.T) {
	var list strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&list, "10.%d.%d.%d\n", i>>16&255, i>>8&255, i&255)
	}
	translate := func(rule string) (string, error) {
		text := "defaults\n\tmode http\nfrontend f\n\tbind :80\n\tacl bad src -f /etc/haproxy/bad.lst\n\t" + rule + "\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
		cfg, err := Parse(strings.NewReader(text), "p.cfg", lookup)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Files = mapFiles{"/etc/haproxy/bad.lst": list.String()}
		return caddyfileOf(cfg)
	}
	for rule, want := range map[string]string{
		"http-request deny if bad":     "\t@answer_6 remote_ip 10.0.0.0 10.0.0.1 10.0.0.2 ",
		"http-request deny unless bad": "\t@answer_6 not remote_ip 10.0.0.0 10.0.0.1 ",
		"http-request deny if !bad":    "\t@answer_6 not remote_ip 10.0.0.0 10.0.0.1 ",
	} {
		out, err := translate(rule)
		if err != nil || !strings.Contains(out, want) || !strings.Contains(out, " 10.0.78.31\n") {
			t.Errorf("%s: %v, want %q … 10.0.78.31", rule, err, want)
		}
	}
	if _, err := translate("http-request deny if bad { path_beg /admin }"); err == nil || !strings.Contains(err.Error(), "p.cfg:6: http-request deny: its condition is a CEL expression of ") {
		t.Errorf("20,000 addresses and a path: %v, want a refusal at p.cfg:6", err)
	}
}
