package haproxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whatever the text, Parse and Translate never panic, and a refusal names
// the file and line it is about, and that line's keyword. The seeds are
// the configurations of testdata and of testdata/corpus.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"frontend fe\n\tbind :443 ssl crt \"${CRT}\"\n", "defaults d\nbackend b from d\n\tserver a 1:2 \\\n check\n",
		"global\n\tlog-format \"%{+Q}o\"' %s'\\ x # c\n", "frontend f\n\thttp-request deny if { src 10.0.0.0/8 } || !ok\n",
		"frontend 0\n``\n"} { // a keyword that strconv.Unquote reads as a raw string
		f.Add(s)
	}
	cfgs, _ := filepath.Glob("testdata/*.cfg")
	corpus, _ := filepath.Glob("testdata/corpus/*.cfg")
	if len(corpus) == 0 {
		f.Fatal("no testdata/corpus/*.cfg")
	}
	for _, file := range append(cfgs, corpus...) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := Parse(strings.NewReader(text), "f.cfg", lookup)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.cfg:") {
				t.Fatalf("error without its position: %v", err)
			}
			return
		}
		for _, s := range cfg.Sections {
			for _, l := range s.Lines {
				if len(l.Words) == 0 || l.Pos.Line < 1 {
					t.Fatalf("line %+v", l)
				}
				SplitCondition(l.Words, l.Pos)
			}
		}
		_, err = caddyfileOf(cfg)
		var r Refusals
		if !errors.As(err, &r) {
			r = Refusals{err}
		}
		for _, err := range r {
			checkFuzzRefusal(t, cfg, err)
		}
	})
}

// checkFuzzRefusal checks that a refusal (nil: none) names a line of cfg
// and its keyword.
func checkFuzzRefusal(t *testing.T, cfg *Config, err error) {
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Pos.File != "f.cfg" {
		t.Fatalf("refusal without its position: %v", err)
	}
	l, ok := cfg.lineAt(e.Pos)
	if !ok {
		t.Fatalf("refusal at %s, which is no line of the configuration: %v", e.Pos, err)
	}
	kw := l.Words[0]
	if l.fromEnv(0) || l.modernized != "" {
		kw = l.Source[0] // a message shows it as written, never the environment's value nor the 2.x keyword read
	}
	if plainKeyword(kw) && !namesKeyword(e.Msg, kw) {
		t.Fatalf("refusal that does not name its line's keyword %s: %v", kw, err)
	}
}

// plainKeyword tells whether a line's first word reads back as one word
// in a message: not empty, no space or quote in it, no colon after it.
func plainKeyword(w string) bool {
	f := strings.Fields(w)
	return len(f) == 1 && f[0] == w && !strings.ContainsAny(w, "\"'") && !strings.HasSuffix(w, ":")
}
