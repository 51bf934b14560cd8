package haproxy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// configLines are the lines of cfg a report has a row for: each
// section's first line, then its settings.
func configLines(cfg *Config) []Line {
	var lines []Line
	for _, s := range cfg.Sections {
		lines = append(append(lines, s.line()), s.Lines...)
	}
	for _, d := range cfg.directives {
		lines = append(lines, d.line)
	}
	slices.SortStableFunc(lines, func(a, b Line) int { return comparePos(a.Pos, b.Pos) })
	return lines
}

// Every golden and every corpus configuration that translates has a row
// per line in Translation.Lines, in the order written, with the line as
// its comment shows it and the status its comment says: none not read,
// each warning's line approximated.
func TestReportSaysWhatBecameOfEveryLine(t *testing.T) {
	goldens, _ := filepath.Glob("testdata/*.cfg")
	corpus, _ := filepath.Glob("testdata/corpus/*.cfg")
	translatedFiles := 0
	for _, file := range append(goldens, corpus...) {
		cfg, err := ParseFile(file)
		if err != nil {
			continue
		}
		tr, err := Translate(cfg)
		if err != nil {
			continue
		}
		translatedFiles++
		checkReportRows(t, file, cfg, tr)
	}
	if translatedFiles < 20 {
		t.Fatalf("%d configurations translate: want the goldens and the corpus's", translatedFiles)
	}
}

// A refused configuration still has a row per line: the refused ones
// with why and what is translated instead, the others read what their
// keyword's entry says they become (foreseen, as no Caddyfile is
// written), and those no reader reached not read, saying why.
// checkReportRows checks a translated configuration's report: a row per
// line, as written, each translated, approximated (a warning's line) or
// ignored, and why where it is not translated.
func checkReportRows(t *testing.T, file string, cfg *Config, tr Translation) {
	lines := configLines(cfg)
	if len(tr.Lines) != len(lines) {
		t.Errorf("%s: %d rows for %d lines", file, len(tr.Lines), len(lines))
		return
	}
	for i, row := range tr.Lines {
		l := lines[i]
		if row.Pos != l.Pos || row.Source != l.source() || row.Foreseen {
			t.Errorf("%s: row %+v, want the line at %s as %q, as written", file, row, l.Pos, l.source())
		}
		if !slices.Contains([]string{"translated", "approximated", "ignored"}, row.Status) {
			t.Errorf("%s: %s %q: status %q (%s), want translated, approximated or ignored", file, row.Pos, row.Source, row.Status, row.Why)
		}
		if row.Status != "translated" && row.Why == "" {
			t.Errorf("%s: %s %q: %s without why", file, row.Pos, row.Source, row.Status)
		}
	}
	for _, w := range tr.Warnings {
		if i := slices.IndexFunc(tr.Lines, func(r LineOutcome) bool { return r.Pos == w.Pos }); i < 0 || tr.Lines[i].Status != "approximated" {
			t.Errorf("%s: the warning %s: %s is not an approximated row", file, w.Pos, w.Msg)
		}
	}
}

// reportRow is a row a report should hold.
type reportRow struct {
	line        int
	status, why string
	instead     string
	foreseen    bool
	source      string
}

// holds tells whether r is the row c wants: its status and source, why
// holding c.why (none for ""), instead beginning with c.instead (none for
// "").
func (c reportRow) holds(r LineOutcome) bool {
	whyOK := strings.Contains(r.Why, c.why) && (c.why != "" || r.Why == "")
	insteadOK := strings.HasPrefix(r.Instead, c.instead) && (c.instead != "" || r.Instead == "")
	return r.Status == c.status && whyOK && insteadOK && r.Foreseen == c.foreseen && r.Source == c.source
}

func TestReportOfARefusedConfiguration(t *testing.T) {
	cfg, err := ParseFile("testdata/corpus/gitea-ssh-mixed.cfg")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if err == nil {
		t.Fatal("translated: want refused at its mode tcp line")
	}
	if len(tr.Lines) != len(configLines(cfg)) {
		t.Fatalf("%d rows for %d lines", len(tr.Lines), len(configLines(cfg)))
	}
	at := func(line int) LineOutcome {
		for _, r := range tr.Lines {
			if r.Pos.Line == line {
				return r
			}
		}
		t.Fatalf("no row for line %d", line)
		return LineOutcome{}
	}
	for _, c := range []reportRow{
		{34, "refused", "frontend ssh_in stays with HAProxy (caddy ha migrate --split-tcp", "what is translated: `mode http` is Caddy's HTTP server", false, "mode tcp"},
		{6, "ignored", "Caddy runs in the foreground", "", true, "daemon"},
		{16, "translated", "", "", true, "mode http"},
		{23, "approximated", "Caddy keeps its connections to the servers alive", "", true, "option http-server-close"},
		{32, NotRead, "its section was refused at line 34", "", false, "frontend ssh_in"},
		{36, NotRead, "its section was refused at line 34", "", false, "timeout client 2h"},
		{39, NotRead, "what would read it (a frontend that sends to it, a proxy that takes it) was refused", "", false, "backend gitea_ssh"},
		{42, NotRead, "what would read it", "", false, "server gitea 127.0.0.1:2222 check"},
	} {
		r := at(c.line)
		if !c.holds(r) {
			t.Errorf("line %d: %+v, want %s %q (why …%s…, instead %s…, foreseen %v)", c.line, r, c.status, c.source, c.why, c.instead, c.foreseen)
		}
	}
}

// A refused line of a translated keyword says what form of it is
// translated instead; one whose refusal gives the entry's hint says it
// once; a password shows redacted in every row.
func TestReportSaysWhatToDoInstead(t *testing.T) {
	text := "global\n\tlua-load /etc/haproxy/auth.lua\ndefaults\n\tmode http\nlisten stats\n\tbind :9000\n\tstats enable\n\tstats auth ops:s3cr3t-ops\n\toption forwardfor header Host\n\tbacklog 100\n"
	cfg, err := Parse(strings.NewReader(text), "k.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Translate(cfg)
	if err == nil {
		t.Fatal("translated: want refused")
	}
	byLine := map[int]LineOutcome{}
	for _, r := range tr.Lines {
		byLine[r.Pos.Line] = r
		if strings.Contains(r.Source+r.Why+r.Instead, "s3cr3t") {
			t.Errorf("a row shows the password: %+v", r)
		}
	}
	if r := byLine[2]; r.Status != "refused" || !strings.Contains(r.Why, "Lua has no counterpart") || r.Instead != "" {
		t.Errorf("lua-load: %+v, want refused with the entry's hint once", r)
	}
	if r := byLine[9]; r.Status != "refused" || !strings.HasPrefix(r.Instead, "what is translated: the `forwarded` handler") {
		t.Errorf("option forwardfor header Host: %+v, want refused with what is translated", r)
	}
	if r := byLine[10]; r.Status != "refused" || r.Why != "backlog 100: not translated yet" {
		t.Errorf("backlog: %+v, want refused, not translated yet", r)
	}
	if r := byLine[8]; r.Source != "stats auth ops:<redacted>" {
		t.Errorf("stats auth: %+v, want its password redacted", r)
	}
}
