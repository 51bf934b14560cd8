package haproxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whatever the text, Parse and Translate never panic, and a refusal names
// the file and line it is about.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"frontend fe\n\tbind :443 ssl crt \"${CRT}\"\n", "defaults d\nbackend b from d\n\tserver a 1:2 \\\n check\n",
		"global\n\tlog-format \"%{+Q}o\"' %s'\\ x # c\n", "frontend f\n\thttp-request deny if { src 10.0.0.0/8 } || !ok\n"} {
		f.Add(s)
	}
	cfgs, _ := filepath.Glob("testdata/*.cfg")
	for _, file := range cfgs {
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
		if _, err := Translate(cfg); err != nil && !strings.HasPrefix(err.Error(), "f.cfg:") {
			t.Fatalf("refusal without its position: %v", err)
		}
	})
}
