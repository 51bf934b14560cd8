package haproxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestZZDump(t *testing.T) {
	files, _ := filepath.Glob("testdata/corpus/*.cfg")
	sort.Strings(files)
	f, _ := os.Create("/tmp/allrefusals.txt")
	defer f.Close()
	for _, file := range files {
		_, err := translateFile(t, file)
		if err == nil {
			continue
		}
		var r Refusals
		errs := []error{err}
		if errors.As(err, &r) {
			errs = r
		}
		fmt.Fprintf(f, "== %s (%d)\n", filepath.Base(file), len(errs))
		for _, e := range errs {
			s := e.Error()
			s = strings.TrimPrefix(s, file+":")
			if len(s) > 160 {
				s = s[:160]
			}
			fmt.Fprintf(f, "   %s\n", s)
		}
	}
}
