package affinity

import (
	"encoding/json"
	"net/url"
	"path"
	"strings"
	"testing"
)

// fuzzPatterns are the patterns every fuzzed path or id is tried against,
// with the fuzzed pattern when it compiles.
func fuzzPatterns(t *testing.T, pattern string) []*Pattern {
	t.Helper()
	ps := []*Pattern{mustCompile(t, "/api/uploads/{id}"), mustCompile(t, "/{id}"), mustCompile(t, "/v1:files/~Me/{id}")}
	p, err := CompilePattern(pattern)
	if err != nil {
		if p != nil {
			t.Fatalf("CompilePattern(%q): error %v with a pattern", pattern, err)
		}
		return ps
	}
	if p.String() != pattern {
		t.Fatalf("CompilePattern(%q).String() = %q", pattern, p.String())
	}
	if !strings.HasPrefix(p.Path(""), p.Collection()) || !p.IsCollection(p.Collection()) {
		t.Fatalf("%s: collection %q does not head its uploads' paths", p, p.Collection())
	}
	return append(ps, p)
}

// checkID fails t unless id, which p or a creation response gave, is a
// valid id, a bounded store key, and named by the path built from it.
func checkID(t *testing.T, p *Pattern, id string) {
	t.Helper()
	if !ValidID(id) || len(id) > MaxIDLen {
		t.Fatalf("%s: id %q (%d bytes) is not valid", p, id, len(id))
	}
	built := p.Path(id)
	if target := p.Target(built); target != (Target{Kind: TargetUpload, ID: id}) {
		t.Fatalf("%s: the path %q of id %q targets %+v", p, built, id, target)
	}
	if !p.Unambiguous(built, built) {
		t.Fatalf("%s: the path %q of id %q is ambiguous", p, built, id)
	}
	if got, ok := IDFromLocation("https://node.example"+built+"?x=1", p); !ok || got != id {
		t.Fatalf("%s: the Location of id %q gives %q, %v", p, id, got, ok)
	}
}

// asciiLower lowers ASCII letters only, as a server whose routing ignores
// case folds a path.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

func FuzzPattern(f *testing.F) {
	for _, seed := range [][2]string{
		{"/api/uploads/{id}", "/api/uploads/abc/chunks/3"},
		{"/api/uploads/{id}", "/api/uploads/01HZX3K9Q7M2V8W4T6R5Y1N0PB"},
		{"/api/uploads/{id}", "/api/uploads"},
		{"/api/uploads/{id}", "/api/uploads/"},
		{"/api/uploads/{id}", "/api/uploads//chunks"},
		{"/api/uploads/{id}", "/api/uploads/" + strings.Repeat("a", MaxIDLen+1)},
		{"/api/uploads/{id}", "/api/uploads/a%2Fb"},
		{"/api/uploads/{id}", "/api/upload%73/abc"},
		{"/api/uploads/{id}", "/api/uploads/abc/%2e%2e/%2e%2e/admin"},
		{"/api/uploads/{id}", "/api/x/../uploads/abc"},
		{"/api/uploads/{id}", "/API/uploads/abc"},
		{"/api/uploads/{id}", "/api/Uploads"},
		{"/api/uploads/{id}", "/api/uploads/abc?x=/api/uploads/def"},
		{"/api/uploads/{id}", "/api/uploads/é"},
		{"/{id}", "/"},
		{"/{id}", "//abc"},
		{"/{id}", "/abc/../def"},
		{"/v1:files/~me/{id}", "/V1:FILES/~ME/abc"},
		{"/api/uploads/{id}/{id}", "/api/uploads/abc"},
		{"/api/{tenant}/uploads/{id}", "/api/t/uploads/abc"},
		{"/api/./uploads/{id}", "/api/uploads/abc"},
		{"", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, reqPath string) {
		for _, p := range fuzzPatterns(t, pattern) {
			target := p.Target(reqPath)
			id, ok := p.ID(reqPath)
			if ok != (target.Kind == TargetUpload) || id != target.ID {
				t.Fatalf("%s: ID(%q) = %q, %v, but Target = %+v", p, reqPath, id, ok, target)
			}
			if ok {
				checkID(t, p, id)
				if under, found := strings.CutPrefix(reqPath, p.Path(id)); !found || under != "" && under[0] != '/' {
					t.Fatalf("%s: ID(%q) = %q, which is not a whole segment of it", p, reqPath, id)
				}
			}

			// As a request carries it: the escaped path routes it, and
			// the server may read the decoded one, cleaned and, perhaps,
			// case-folded.
			u, err := url.ParseRequestURI(reqPath)
			if err != nil {
				continue
			}
			escaped := u.EscapedPath()
			if !p.Unambiguous(escaped, u.Path) {
				continue
			}
			routed, read := p.Target(escaped), p.Target(path.Clean(u.Path))
			if routed.Kind == TargetFolded || routed != read {
				t.Fatalf("%s: %q is unambiguous, but is routed as %+v and read as %+v", p, reqPath, routed, read)
			}
			folded := mustCompile(t, asciiLower(p.String())).Target(asciiLower(path.Clean(u.Path)))
			if folded.Kind != routed.Kind {
				t.Fatalf("%s: %q is unambiguous, but is routed as %+v and read case-folded as %+v", p, reqPath, routed, folded)
			}
		}
	})
}

func FuzzIDFromLocation(f *testing.F) {
	for _, seed := range [][2]string{
		{"/api/uploads/{id}", "/api/uploads/abc"},
		{"/api/uploads/{id}", "https://example.com/api/uploads/abc?token=x#frag"},
		{"/api/uploads/{id}", "http://10.0.0.7:9101/api/uploads/abc/chunks"},
		{"/api/uploads/{id}", "//example.com/api/uploads/abc"},
		{"/api/uploads/{id}", "HTTPS://example.com/api/uploads/abc"},
		{"/api/uploads/{id}", "uploads/abc"},
		{"/api/uploads/{id}", "/api/uploads/%2e%2e"},
		{"/api/uploads/{id}", "/api/uploads/a%2Fb"},
		{"/api/uploads/{id}", "/api/uploads/abc/../def"},
		{"/api/uploads/{id}", "/api/uploads/abc/.."},
		{"/api/uploads/{id}", "/api/uploads/%zz"},
		{"/api/uploads/{id}", "mailto:/api/uploads/abc"},
		{"/api/uploads/{id}", "urn:api/uploads/abc"},
		{"/api/uploads/{id}", "/api/uploads/abc\r\nX: y"},
		{"/api/uploads/{id}", "/api/uploads/" + strings.Repeat("a", MaxIDLen+1)},
		{"/{id}", "https://example.com/abc"},
		{"/{id}", "https://example.com"},
		{"/{id}", "https://example.com/"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, location string) {
		for _, p := range fuzzPatterns(t, pattern) {
			id, ok := IDFromLocation(location, p)
			if !ok {
				if id != "" {
					t.Fatalf("%s: IDFromLocation(%q) = %q, false", p, location, id)
				}
				continue
			}
			checkID(t, p, id)
			// A client that follows the Location, resolving it against
			// the request's URL, reaches that upload.
			u, err := url.Parse(location)
			if err != nil {
				t.Fatalf("%s: IDFromLocation(%q) = %q from a URL that does not parse: %v", p, location, id, err)
			}
			base := &url.URL{Scheme: "https", Host: "proxy.example", Path: p.Collection()}
			followed := base.ResolveReference(u).EscapedPath()
			if target := p.Target(followed); target != (Target{Kind: TargetUpload, ID: id}) {
				t.Fatalf("%s: IDFromLocation(%q) = %q, but following it reaches %q, which targets %+v", p, location, id, followed, target)
			}
		}
	})
}

// nestedJSON is the body holding id at field, with field's dots as
// nested objects.
func nestedJSON(t *testing.T, field, id string) []byte {
	t.Helper()
	var value any = id
	names := strings.Split(field, ".")
	for i := len(names) - 1; i >= 0; i-- {
		value = map[string]any{names[i]: value}
	}
	body, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func FuzzIDFromJSON(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"id":"abc"}`, "id"},
		{` { "id" : "abc" , "size": 5 } `, "id"},
		{`{"data":{"upload":{"id":"x_1"}}}`, "data.upload.id"},
		{`{"id":"\u0061bc"}`, "id"},
		{`{"id":"\u002e\u002e"}`, "id"},
		{`{"id":"a\u0000b"}`, "id"},
		{`{"id":"abc","id":"def"}`, "id"},
		{`{"ID":"abc"}`, "id"},
		{`{"id":"abc"}`, "id."},
		{`{"data":{"id":"abc"}}`, "data..id"},
		{`{"id":123}`, "id"},
		{`{"id":null}`, "id"},
		{`{"id":["abc"]}`, "id"},
		{`{"id":"` + strings.Repeat("a", MaxIDLen+1) + `"}`, "id"},
		{`{"id":"abc"} trailing`, "id"},
		{`{"id":"\xff"}`, "id"},
		{`{"a.b":"abc"}`, "a.b"},
		{`null`, "id"},
		{``, "id"},
	} {
		f.Add([]byte(seed[0]), seed[1])
	}
	uploads := mustCompile(f, "/api/uploads/{id}")
	f.Fuzz(func(t *testing.T, body []byte, field string) {
		id, ok := IDFromJSON(body, field)
		if !ok {
			if id != "" {
				t.Fatalf("IDFromJSON(%q, %q) = %q, false", body, field, id)
			}
			return
		}
		checkID(t, uploads, id)
		// The id written back at that field is read the same.
		again := nestedJSON(t, field, id)
		if got, ok := IDFromJSON(again, field); !ok || got != id {
			t.Fatalf("IDFromJSON(%q, %q) = %q, but of %s gives %q, %v", body, field, id, again, got, ok)
		}
	})
}
