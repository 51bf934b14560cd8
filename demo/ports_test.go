package demo

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The ports the demo prints (run.sh's message) are those docs/testing.md
// lists for TestDemo, which fails where one is in use (issue 29.4: 8443,
// 2020 and 9010-9012 were missing from the page).
func TestDemoPortsMatchDocs(t *testing.T) {
	run, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	msg := string(run)
	start := strings.Index(msg, "cat <<MSG")
	end := strings.Index(msg[start:], "\nMSG")
	if start < 0 || end < 0 {
		t.Fatal("run.sh prints no <<MSG message")
	}
	printed := ports(msg[start:start+end], regexp.MustCompile(`(?:127\.0\.0\.1)?:(\d{4,5})(?:-(\d{4,5}))?`))
	doc, err := os.ReadFile("../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`\(127\.0\.0\.1:([0-9–, ]+):`).FindStringSubmatch(string(doc))
	if list == nil {
		t.Fatal("docs/testing.md lists no demo ports as (127.0.0.1:…:")
	}
	documented := ports(list[1], regexp.MustCompile(`(\d{4,5})(?:–(\d{4,5}))?`))
	if !slices.Equal(printed, documented) {
		t.Errorf("the demo prints ports %v, docs/testing.md lists %v", printed, documented)
	}
}

// ports are the ports re finds in s, each a port or a range (its two
// submatches), sorted and each once.
func ports(s string, re *regexp.Regexp) []int {
	var out []int
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		from, _ := strconv.Atoi(m[1])
		to := from
		if m[2] != "" {
			to, _ = strconv.Atoi(m[2])
		}
		for p := from; p <= to; p++ {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}
