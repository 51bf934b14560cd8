package affinity

import (
	"strings"
	"testing"
)

func TestCompilePattern(t *testing.T) {
	for _, tc := range []struct {
		pattern    string
		ok         bool
		collection string
	}{
		{"/api/uploads/{id}", true, "/api/uploads"},
		{"/uploads/{id}", true, "/uploads"},
		{"/{id}", true, "/"},
		{"/v1/files/uploads/{id}", true, "/v1/files/uploads"},
		{"", false, ""},
		{"api/uploads/{id}", false, ""},           // not absolute
		{"/api/uploads", false, ""},               // no {id}
		{"/api/uploads/{id}/{id}", false, ""},     // twice
		{"/api/uploads/{id}/chunks", false, ""},   // text after {id}
		{"/api/uploads/{id}/", false, ""},         // text after {id}
		{"/api/uploads/x{id}", false, ""},         // not a whole segment
		{"/api/uploads{id}", false, ""},           // not a whole segment
		{"/api/{tenant}/uploads/{id}", false, ""}, // another placeholder
		{"/api//uploads/{id}", false, ""},         // empty segment
		{"/api/../uploads/{id}", false, ""},       // dot segment
		{"/api/./uploads/{id}", false, ""},        // dot segment
		{"/api/up loads/{id}", false, ""},         // space
		{"/api/up\x00loads/{id}", false, ""},      // control character
		{"/api/uploads?x=1/{id}", false, ""},      // query
		{"/api/uploads#x/{id}", false, ""},        // fragment
		{"/api/uploads/{ID}", false, ""},          // placeholder is case-sensitive
		{"/api/up%6Coads/{id}", false, ""},        // percent-encoded
		{"/api/té/{id}", false, ""},               // non-ASCII: encoded in requests
		{"/api/a<b/{id}", false, ""},              // idem
		{"/v1:files/~me/{id}", true, "/v1:files/~me"},
	} {
		p, err := CompilePattern(tc.pattern)
		if (err == nil) != tc.ok {
			t.Errorf("CompilePattern(%q) error = %v, want ok %v", tc.pattern, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if got := p.Collection(); got != tc.collection {
			t.Errorf("CompilePattern(%q).Collection() = %q, want %q", tc.pattern, got, tc.collection)
		}
		if got := p.String(); got != tc.pattern {
			t.Errorf("CompilePattern(%q).String() = %q", tc.pattern, got)
		}
	}
}

func TestPatternID(t *testing.T) {
	p := mustCompile(t, "/api/uploads/{id}")
	root := mustCompile(t, "/{id}")
	long := strings.Repeat("a", MaxIDLen)
	for _, tc := range []struct {
		p    *Pattern
		path string
		id   string // "" when no match
	}{
		{p, "/api/uploads/abc123", "abc123"},
		{p, "/api/uploads/01HZX3K9Q7M2V8W4T6R5Y1N0PB", "01HZX3K9Q7M2V8W4T6R5Y1N0PB"},
		{p, "/api/uploads/abc/", "abc"},
		{p, "/api/uploads/abc/chunks/3", "abc"},
		{p, "/api/uploads/abc/complete", "abc"},
		{p, "/api/uploads/a_b-C", "a_b-C"},
		{p, "/api/uploads/" + long, long},
		{p, "/api/uploads/" + long + "a", ""}, // too long
		{p, "/api/uploads", ""},               // the collection itself
		{p, "/api/uploads/", ""},              // empty id
		{p, "/api/uploads//chunks", ""},       // empty id
		{p, "/api/uploadsabc", ""},
		{p, "/api/uploadsx/abc", ""},
		{p, "/API/uploads/abc", ""}, // paths are case-sensitive
		{p, "/other/api/uploads/abc", ""},
		{p, "api/uploads/abc", ""},
		{p, "", ""},
		{p, "/api/uploads/..", ""},
		{p, "/api/uploads/../admin", ""},
		{p, "/api/uploads/.", ""},
		{p, "/api/uploads/%2e%2e", ""},
		{p, "/api/uploads/%2E%2E/admin", ""},
		{p, "/api/uploads/abc%2Fdef", ""}, // an encoded slash cannot hide in the id
		{p, "/api/uploads/abc%2fdef/chunks", ""},
		{p, "/api/uploads/%61bc", ""}, // even an encoded plain letter
		{p, "/api/uploads/ab%00c", ""},
		{p, "/api/uploads/ab\x00c", ""},
		{p, "/api/uploads/ab\nc", ""},
		{p, "/api/uploads/ab c", ""},
		{p, "/api/uploads/ab:c", ""},
		{p, "/api/uploads/{ab}", ""},
		{p, "/api/uploads/ab;c", ""},
		{p, "/api/uploads/ab?c", ""},
		{p, "/api/uploads/é", ""},
		{p, "/api/uploads/\xff", ""},
		{root, "/abc", "abc"},
		{root, "/abc/chunks/1", "abc"},
		{root, "/", ""},
		{root, "//abc", ""},
	} {
		id, ok := tc.p.ID(tc.path)
		if id != tc.id || ok != (tc.id != "") {
			t.Errorf("%s: ID(%q) = %q, %v; want %q", tc.p, tc.path, id, ok, tc.id)
		}
	}
}

func TestPatternUnambiguous(t *testing.T) {
	p := mustCompile(t, "/api/uploads/{id}")
	for _, tc := range []struct {
		escaped, decoded string
		ok               bool
	}{
		{"/api/uploads/abc/chunks/1", "/api/uploads/abc/chunks/1", true},
		{"/api/uploads/abc/", "/api/uploads/abc/", true},
		{"/api/uploads", "/api/uploads", true},
		{"/api/uploads/", "/api/uploads/", true},
		{"/other/a%20b", "/other/a b", true},
		{"/other//x/../y", "/other//x/../y", true},
		{"/api/uploads/abc/name%20x", "/api/uploads/abc/name x", true},
		{"/api/uploads/abc//chunks/1", "/api/uploads/abc//chunks/1", true},
		{"/api/uploads/a%2Fb", "/api/uploads/a/b", false},                   // upload a, decoded
		{"/api/upload%73/abc/chunks/1", "/api/uploads/abc/chunks/1", false}, // the escaped path names nothing
		{"/api/upload%73", "/api/uploads", false},                           // nor the collection
		{"/api/uploads%2Fabc", "/api/uploads/abc", false},
		{"/api/x/../uploads/abc", "/api/x/../uploads/abc", false},
		{"/api//uploads/abc", "/api//uploads/abc", false},
		{"/api/uploads/abc/../xyz", "/api/uploads/abc/../xyz", false}, // another upload
		{"/api/uploads/abc/%2e%2e/%2e%2e/admin", "/api/uploads/abc/../../admin", false},
		{"/api/uploads/%2e%2e", "/api/uploads/..", false},
		// A server whose routing ignores case reads these as the uploads'.
		{"/API/uploads/abc", "/API/uploads/abc", false},
		{"/api/Uploads/abc/chunks/1", "/api/Uploads/abc/chunks/1", false},
		{"/API/x/../uploads/abc", "/API/x/../uploads/abc", false},
		{"/api/upload%53/abc", "/api/uploadS/abc", false},
		{"/API/UPLOADS", "/API/UPLOADS", false},
		{"/api/Uploads/", "/api/Uploads/", false},
		{"/api/Uploads/a%2Fb", "/api/Uploads/a/b", false},
		{"/API/other/abc", "/API/other/abc", true},
		{"/API/UPLOADSX/abc", "/API/UPLOADSX/abc", true},
		{"/API", "/API", true},
		{"/other/API/uploads/abc", "/other/API/uploads/abc", true},
	} {
		if got := p.Unambiguous(tc.escaped, tc.decoded); got != tc.ok {
			t.Errorf("Unambiguous(%q, %q) = %v, want %v", tc.escaped, tc.decoded, got, tc.ok)
		}
	}
	if root := mustCompile(t, "/{id}"); root.Unambiguous("//", "//") {
		t.Errorf("/{id}: Unambiguous(%q) = true: an empty id, read as the collection", "//")
	}
	if n := testing.AllocsPerRun(100, func() {
		p.Unambiguous("/api/uploads/01HZX3K9Q7M2V8W4T6R5Y1N0PB/chunks/7", "/api/uploads/01HZX3K9Q7M2V8W4T6R5Y1N0PB/chunks/7")
	}); n != 0 {
		t.Fatalf("Unambiguous of a clean path allocates %v times", n)
	}
}

func TestPatternIDDoesNotAllocate(t *testing.T) {
	p := mustCompile(t, "/api/uploads/{id}")
	if n := testing.AllocsPerRun(100, func() { p.ID("/api/uploads/01HZX3K9Q7M2V8W4T6R5Y1N0PB/chunks/7") }); n != 0 {
		t.Fatalf("ID allocates %v times", n)
	}
}

func mustCompile(t testing.TB, pattern string) *Pattern {
	t.Helper()
	p, err := CompilePattern(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPatternPathAndCollection(t *testing.T) {
	for _, tt := range []struct {
		pattern, id, path string
		collections       []string
		notCollections    []string
	}{
		{"/api/uploads/{id}", "abc", "/api/uploads/abc", []string{"/api/uploads", "/api/uploads/"}, []string{"/api", "/api/uploads/abc", "/"}},
		{"/{id}", "abc", "/abc", []string{"/"}, []string{"", "//", "/abc"}},
	} {
		p := mustCompile(t, tt.pattern)
		if got := p.Path(tt.id); got != tt.path {
			t.Errorf("%s: Path(%s) = %s", tt.pattern, tt.id, got)
		}
		for _, c := range tt.collections {
			if !p.IsCollection(c) {
				t.Errorf("%s: %q is its collection", tt.pattern, c)
			}
		}
		for _, c := range tt.notCollections {
			if p.IsCollection(c) {
				t.Errorf("%s: %q is not its collection", tt.pattern, c)
			}
		}
	}
}

func TestPatternUnder(t *testing.T) {
	p, err := CompilePattern("/api/uploads/{id}")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/api/uploads/abc":          "",
		"/api/uploads/abc/":         "/",
		"/api/uploads/abc/chunks/3": "/chunks/3",
		"/api/uploads/abc/complete": "/complete",
	} {
		if got, ok := p.Under(path); !ok || got != want {
			t.Errorf("Under(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
	for _, path := range []string{"/api/uploads", "/api/uploads/", "/api/other/abc", "/api/uploads/a%2Fb"} {
		if got, ok := p.Under(path); ok {
			t.Errorf("Under(%q) = %q, true; want not an upload's path", path, got)
		}
	}
}
