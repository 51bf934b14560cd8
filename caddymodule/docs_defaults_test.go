package caddymodule

// The defaults documented in docs/*.md are the ones the modules set: each
// table under a heading "Defaults: `<module>`" is compared, row by row,
// with that module's entry in testdata/defaults.json (which TestDefaults
// keeps equal to the code). The table's "JSON" column names the field
// (a.b for a nested one); its "default" column is either one code span,
// the value the module sets, or prose (none, off, the transport's) for a
// field the module leaves unset.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"
)

const docsDefaultsDir = "../docs"

var (
	docsDefaultsHeading = regexp.MustCompile("^#{1,6} Defaults\\b[^`]*`([^`]+)`")
	docsCodeSpan        = regexp.MustCompile("`([^`]+)`")
	docsOneCodeSpan     = regexp.MustCompile("^`([^`]*)`$")
)

func TestDocsDefaultsMatch(t *testing.T) {
	defaults := readDefaultsJSON(t)
	files, err := filepath.Glob(filepath.Join(docsDefaultsDir, "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no pages in %s: %v", docsDefaultsDir, err)
	}
	pages := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pages[filepath.Base(f)] = string(b)
	}
	for _, p := range checkDocsDefaults(pages, defaults) {
		t.Error(p)
	}

	// The check catches each kind of mistake put into the real pages.
	for _, m := range []struct{ page, old, new, want string }{
		{"leader.md", "| `interval` | `interval` | `1s` |", "| `interval` | `interval` | `2s` |", "says 2s"},
		{"store.md", "| `health_interval` | `health_interval` | `2s` |", "| `health_interval` | `health_interval_x` | `2s` |", "health_interval: not documented"},
		{"pinned.md", "| `pin_wait` | `pin_wait` | `5s` |", "| `pin_wait` | `pin_wait` | five seconds |", "pin_wait: not documented"},
		{"edge-rate-limit.md", "| `headers` | `hide_headers` | on |", "| `headers` | `hide_headers` | `false` |", "hide_headers: documented as `false`"},
		{"upload-affinity.md", "| `ttl` | `ttl` | `24h` |", "| `ttl` | `ttl` | `12h` |", "says 12h"},
		{"operations.md", "### Defaults: `http.handlers.ha_status`", "### Defaults: `http.handlers.ha_page`", "http.handlers.ha_status: no page documents"},
		{"forwarded.md", "| `refresh` | `refresh` | `1m` |", "| `refresh` | `refresh` | `1m` |\n| `refresh` | `refresh` | `1m` |", "refresh: documented twice"},
	} {
		if !strings.Contains(pages[m.page], m.old) {
			t.Errorf("mutation of %s: %q is not in the page", m.page, m.old)
			continue
		}
		mutated := maps.Clone(pages)
		mutated[m.page] = strings.Replace(pages[m.page], m.old, m.new, 1)
		got := checkDocsDefaults(mutated, defaults)
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, m.want) }) {
			t.Errorf("%s with %q instead of %q: no problem with %q found, got %q", m.page, m.new, m.old, m.want, got)
		}
	}
}

// readDefaultsJSON reads testdata/defaults.json as module → field path →
// value, nested objects flattened to a.b.
func readDefaultsJSON(t *testing.T) map[string]map[string]any {
	data, err := os.ReadFile("testdata/defaults.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var modules map[string]map[string]any
	if err := dec.Decode(&modules); err != nil {
		t.Fatal(err)
	}
	flat := map[string]map[string]any{}
	for module, fields := range modules {
		flat[module] = map[string]any{}
		flattenDefaults(flat[module], "", fields)
	}
	return flat
}

func flattenDefaults(into map[string]any, prefix string, fields map[string]any) {
	for k, v := range fields {
		if obj, ok := v.(map[string]any); ok {
			flattenDefaults(into, prefix+k+".", obj)
			continue
		}
		into[prefix+k] = v
	}
}

// checkDocsDefaults compares the defaults tables of pages (name → text)
// with defaults, and returns the problems found.
func checkDocsDefaults(pages map[string]string, defaults map[string]map[string]any) []string {
	var problems []string
	documentedIn := map[string]string{}
	names := slices.Sorted(maps.Keys(pages))
	for _, name := range names {
		lines := strings.Split(pages[name], "\n")
		for i, line := range lines {
			m := docsDefaultsHeading.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			module, where := m[1], fmt.Sprintf("%s:%d", name, i+1)
			if prev, ok := documentedIn[module]; ok {
				problems = append(problems, fmt.Sprintf("%s: defaults of %s documented again (first in %s)", where, module, prev))
				continue
			}
			documentedIn[module] = where
			want, ok := defaults[module]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: defaults of %s, which testdata/defaults.json does not have", where, module))
				continue
			}
			problems = append(problems, checkDefaultsTable(where, module, docsTableAfter(lines, i+1), want)...)
		}
	}
	for _, module := range slices.Sorted(maps.Keys(defaults)) {
		if _, ok := documentedIn[module]; !ok {
			problems = append(problems, fmt.Sprintf("%s: no page documents its defaults (a heading \"Defaults: `%s`\" in %s)", module, module, docsDefaultsDir))
		}
	}
	return problems
}

// docsTableAfter returns the rows (cells trimmed) of the first table after
// line from, before the next heading.
func docsTableAfter(lines []string, from int) [][]string {
	var rows [][]string
	for _, line := range lines[from:] {
		switch {
		case strings.HasPrefix(line, "|"):
			rows = append(rows, docsTableCells(line))
		case len(rows) > 0, strings.HasPrefix(line, "#"):
			return rows
		}
	}
	return rows
}

// docsTableCells splits a table row at the pipes outside code spans.
func docsTableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cell strings.Builder
	inCode := false
	for _, r := range line {
		switch {
		case r == '`':
			inCode = !inCode
		case r == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// checkDefaultsTable compares one module's table with its defaults.
func checkDefaultsTable(where, module string, rows [][]string, want map[string]any) []string {
	if len(rows) < 2 {
		return []string{fmt.Sprintf("%s: no defaults table under the heading of %s", where, module)}
	}
	jsonCol, defaultCol := slices.Index(rows[0], "JSON"), slices.Index(rows[0], "default")
	if jsonCol < 0 || defaultCol < 0 {
		return []string{fmt.Sprintf("%s: the defaults table of %s has no \"JSON\" and \"default\" columns: %q", where, module, rows[0])}
	}
	var problems []string
	seen := map[string]bool{}
	for _, row := range rows[2:] {
		if len(row) <= max(jsonCol, defaultCol) {
			problems = append(problems, fmt.Sprintf("%s: %s: a row with too few cells: %q", where, module, row))
			continue
		}
		var fields []string
		for _, m := range docsCodeSpan.FindAllStringSubmatch(row[jsonCol], -1) {
			fields = append(fields, m[1])
		}
		literal := docsOneCodeSpan.FindStringSubmatch(row[defaultCol])
		for _, field := range fields {
			if seen[field] {
				problems = append(problems, fmt.Sprintf("%s: %s: %s: documented twice", where, module, field))
			}
			seen[field] = true
			value, set := want[field]
			switch {
			case literal == nil && set:
				problems = append(problems, fmt.Sprintf("%s: %s: %s: not documented as the value the module sets (%v), but as %q", where, module, field, value, row[defaultCol]))
			case literal != nil && !set:
				problems = append(problems, fmt.Sprintf("%s: %s: %s: documented as `%s`, but the module sets no default there", where, module, field, literal[1]))
			case literal != nil && len(fields) > 1:
				problems = append(problems, fmt.Sprintf("%s: %s: one default for several fields %q", where, module, fields))
			case literal != nil && !defaultMatches(literal[1], value):
				problems = append(problems, fmt.Sprintf("%s: %s: %s: the page says %s, testdata/defaults.json %v", where, module, field, literal[1], value))
			}
		}
	}
	for _, field := range slices.Sorted(maps.Keys(want)) {
		if !seen[field] {
			problems = append(problems, fmt.Sprintf("%s: %s: %s: not documented (testdata/defaults.json: %v)", where, module, field, want[field]))
		}
	}
	return problems
}

// defaultMatches reports whether a documented default, as a Caddyfile
// writes it, is the JSON value: a number may be written as an integer, a
// duration (ns in JSON) or a size (1MiB); a list as its items separated by
// spaces.
func defaultMatches(doc string, value any) bool {
	switch v := value.(type) {
	case string:
		return doc == v
	case bool:
		return doc == strconv.FormatBool(v)
	case json.Number:
		want, err := v.Int64()
		if err != nil {
			return false
		}
		if n, err := strconv.ParseInt(doc, 10, 64); err == nil {
			return n == want
		}
		if d, err := caddy.ParseDuration(doc); err == nil {
			return int64(d) == want
		}
		if b, err := humanize.ParseBytes(doc); err == nil && strings.ContainsAny(doc, "BKMGTPE") {
			return int64(b) == want
		}
		return false
	case []any:
		items := make([]string, len(v))
		for i, item := range v {
			items[i] = fmt.Sprint(item)
		}
		return doc == strings.Join(items, " ")
	}
	return false
}
