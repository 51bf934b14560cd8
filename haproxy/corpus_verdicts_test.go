package haproxy

import (
	"bytes"
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-ha/caddy-ha/internal/tools"
)

// corpusVerdictsFile is HAProxy's own verdict (haproxy -c) on each
// configuration of the corpus, written by verdicts.sh beside it.
const corpusVerdictsFile = "testdata/corpus/VERDICTS.tsv"

// corpusVerdict is one row of VERDICTS.tsv.
type corpusVerdict struct {
	status int    // haproxy -c's exit status
	class  string // http-only, mixed or tcp
	error  string // haproxy -c's first [ALERT] line, trimmed; "" when accepted
}

// readCorpusVerdicts reads VERDICTS.tsv: the HAProxy version of its
// header line ("2.6"), and its rows by file name.
func readCorpusVerdicts(t *testing.T) (version string, rows map[string]corpusVerdict) {
	t.Helper()
	b, err := os.ReadFile(corpusVerdictsFile)
	if err != nil {
		t.Fatalf("%v: run sh haproxy/testdata/corpus/verdicts.sh", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	m := regexp.MustCompile(`^# HAProxy (\d+\.\d+) verdicts `).FindStringSubmatch(lines[0])
	if m == nil || len(lines) < 2 || lines[1] != "file\tstatus\tclass\terror" {
		t.Fatalf("%s: want the header line naming the HAProxy version, then file, status, class, error", corpusVerdictsFile)
	}
	rows = map[string]corpusVerdict{}
	for i, line := range lines[2:] {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("%s:%d: %d columns, want 4: %q", corpusVerdictsFile, i+3, len(f), line)
		}
		status, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("%s:%d: status %q", corpusVerdictsFile, i+3, f[1])
		}
		if _, dup := rows[f[0]]; dup {
			t.Fatalf("%s:%d: %s has two rows", corpusVerdictsFile, i+3, f[0])
		}
		rows[f[0]] = corpusVerdict{status, f[2], f[3]}
	}
	return m[1], rows
}

// corpusClass is whether text's proxies (frontend, backend, listen) are
// all in mode http ("http-only"), all in mode tcp ("tcp") or both
// ("mixed"): a proxy's mode is its own mode line, else that of the
// defaults section above it, else HAProxy's default, tcp. It is
// verdicts.sh's reading, written again so that each checks the other.
func corpusClass(text string) string {
	var c modeCounter
	for line := range strings.SplitSeq(text, "\n") {
		if f := strings.Fields(withoutComment(line)); len(f) > 0 {
			c.take(f)
		}
	}
	c.endProxy()
	switch {
	case c.tcp == 0:
		return "http-only"
	case c.http == 0:
		return "tcp"
	}
	return "mixed"
}

// withoutComment is a line without its comment (a '#' at its start or
// after white space).
func withoutComment(line string) string {
	if i := strings.Index(line, "#"); i == 0 || i > 0 && (line[i-1] == ' ' || line[i-1] == '\t') {
		return line[:i]
	}
	return line
}

// modeCounter counts the proxies in mode http and in mode tcp, a line's
// words at a time.
type modeCounter struct {
	http, tcp           int
	inDefaults, inProxy bool
	defaultsMode, mode  string
}

func (c *modeCounter) take(f []string) {
	switch f[0] {
	case "defaults":
		c.endProxy()
		c.inDefaults, c.inProxy, c.defaultsMode = true, false, "tcp"
	case "frontend", "backend", "listen":
		c.endProxy()
		c.inDefaults, c.inProxy, c.mode = false, true, cmp.Or(c.defaultsMode, "tcp")
	case "global", "resolvers", "userlist", "peers", "cache", "fcgi-app", "mailers", "program", "http-errors", "ring", "crt-store", "traces":
		c.endProxy()
		c.inDefaults, c.inProxy = false, false
	case "mode":
		c.setMode(f)
	}
}

func (c *modeCounter) setMode(f []string) {
	if len(f) > 1 && c.inDefaults {
		c.defaultsMode = f[1]
	}
	if len(f) > 1 && c.inProxy {
		c.mode = f[1]
	}
}

// endProxy counts the proxy whose lines end here, if one does.
func (c *modeCounter) endProxy() {
	switch {
	case !c.inProxy:
	case c.mode == "http":
		c.http++
	default:
		c.tcp++
	}
}

// Every configuration of the corpus has one row in VERDICTS.tsv and
// every row a configuration; a row says accepted (status 0) without an
// error, refused with one; its class is the file's, read again here; and
// the corpus is the size issue 28 asks for, most of it valid for HAProxy.
func TestCorpusVerdictsCoverEveryFile(t *testing.T) {
	_, rows := readCorpusVerdicts(t)
	files, err := filepath.Glob("testdata/corpus/*.cfg")
	if err != nil || len(files) < 60 {
		t.Fatalf("corpus %d files %v: issue 28 wants 60 at least", len(files), err)
	}
	accepted := 0
	for _, file := range files {
		name := filepath.Base(file)
		row, ok := rows[name]
		if !ok {
			t.Errorf("%s has no row in %s: run sh haproxy/testdata/corpus/verdicts.sh", name, corpusVerdictsFile)
			continue
		}
		if (row.status == 0) != (row.error == "") {
			t.Errorf("%s: status %d with error %q", name, row.status, row.error)
		}
		if row.status == 0 {
			accepted++
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if class := corpusClass(string(b)); row.class != class {
			t.Errorf("%s: class %s in %s, the file's modes say %s", name, row.class, corpusVerdictsFile, class)
		}
	}
	for name := range rows {
		if !slices.Contains(files, filepath.Join("testdata/corpus", name)) {
			t.Errorf("%s has a row in %s but is not in testdata/corpus", name, corpusVerdictsFile)
		}
	}
	if accepted*4 < len(files)*3 {
		t.Errorf("HAProxy accepts %d of %d configurations: most of the corpus should be valid", accepted, len(files))
	}
}

// VERDICTS.tsv is what verdicts.sh writes today: HAProxy's verdict on
// each configuration, checked with the haproxy on PATH when it is the
// version the file names. Without haproxy (or openssl, for the
// throwaway certificate) it is skipped, unless CADDY_HA_REQUIRE_TOOLS is
// set (make test), where it fails; so does another HAProxy version there.
func TestCorpusVerdicts(t *testing.T) {
	version, _ := readCorpusVerdicts(t)
	haproxy, ok := tools.Find(t, "haproxy", "VERDICTS.tsv is not checked against haproxy -c")
	if !ok {
		t.Skip()
	}
	if _, ok := tools.Find(t, "openssl", "VERDICTS.tsv is not checked against haproxy -c (verdicts.sh makes its certificate with openssl)"); !ok {
		t.Skip()
	}
	v, err := exec.Command(haproxy, "-v").Output()
	if err != nil {
		t.Fatalf("haproxy -v: %v", err)
	}
	if !bytes.HasPrefix(v, []byte("HAProxy version "+version+".")) {
		msg := "VERDICTS.tsv holds HAProxy " + version + "'s verdicts, and " + haproxy + " is " + strings.SplitN(string(v), "\n", 2)[0]
		if os.Getenv(tools.RequireEnv) != "" || os.Getenv("CI") != "" {
			t.Fatal(msg + ": install Debian 12's haproxy, or rerun verdicts.sh with this one and say so")
		}
		t.Skip(msg)
	}
	want, err := os.ReadFile(corpusVerdictsFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "testdata/corpus/verdicts.sh", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("verdicts.sh: %v\n%s", err, stderr.Bytes())
	}
	if bytes.Equal(got, want) {
		return
	}
	wantLines, gotLines := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for _, line := range gotLines {
		if !slices.Contains(wantLines, line) {
			t.Errorf("haproxy -c today:  %q", line)
		}
	}
	for _, line := range wantLines {
		if !slices.Contains(gotLines, line) {
			t.Errorf("VERDICTS.tsv says: %q", line)
		}
	}
	t.Errorf("%s is not HAProxy's verdict today: rerun sh haproxy/testdata/corpus/verdicts.sh", corpusVerdictsFile)
}

// docs/haproxy.md's counts of the corpus are VERDICTS.tsv's and
// corpusOutcomes': the files HAProxy accepts, their classes, and how many
// of the valid HTTP-only ones translate.
func TestCorpusCountsInDocs(t *testing.T) {
	_, rows := readCorpusVerdicts(t)
	valid, classes, validHTTP, translated := 0, map[string]int{}, 0, 0
	for name, v := range rows {
		classes[v.class]++
		if v.status != 0 {
			continue
		}
		valid++
		if v.class == "http-only" {
			validHTTP++
			if corpusOutcomes[name].line == 0 {
				translated++
			}
		}
	}
	doc, err := os.ReadFile("../docs/haproxy.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	for _, want := range []string{
		"Today HAProxy accepts " + strconv.Itoa(valid) + " of the " + strconv.Itoa(len(rows)) + " files",
		strconv.Itoa(classes["http-only"]) + " are HTTP only, " + strconv.Itoa(classes["mixed"]) + " mixed, " + strconv.Itoa(classes["tcp"]) + " TCP; " +
			strconv.Itoa(validHTTP) + " are both valid and HTTP only, and " + strconv.Itoa(translated) + " of those translate (" + strconv.Itoa(translated*100/validHTTP) + " %;",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("docs/haproxy.md's Corpus section does not say %q", want)
		}
	}
}
