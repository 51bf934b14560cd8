package affinity

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"01HZX3K9Q7M2V8W4T6R5Y1N0PB", true},
		{"upload_1-A", true},
		{"-", true},
		{"_", true},
		{strings.Repeat("z", MaxIDLen), true},
		{"", false},
		{strings.Repeat("z", MaxIDLen+1), false},
		{strings.Repeat("z", 1<<20), false},
		{".", false},
		{"..", false},
		{"a.b", false},
		{"a/b", false},
		{"/", false},
		{`a\b`, false},
		{"%2e%2e", false},
		{"%2F", false},
		{"%", false},
		{"a b", false},
		{"a\x00", false},
		{"a\r\nSet-Cookie: x", false},
		{"a\t", false},
		{"\x7f", false},
		{"é", false},
		{"ａ", false}, // fullwidth a
		{"a\u200bb", false},
		{"\xff\xfe", false},
		{"a:b", false},
		{"{a}", false},
		{"a*", false},
		{"a?b", false},
		{"a#b", false},
		{"a+b", false},
		{"a=b", false},
	} {
		if got := ValidID(tc.id); got != tc.ok {
			t.Errorf("ValidID(%.40q) = %v, want %v", tc.id, got, tc.ok)
		}
	}
}

func TestIDFromLocation(t *testing.T) {
	p := mustCompile(t, "/api/uploads/{id}")
	for _, tc := range []struct {
		location string
		id       string // "" when none
	}{
		{"/api/uploads/abc", "abc"},
		{"https://example.com/api/uploads/abc", "abc"},
		{"http://10.0.0.7:9101/api/uploads/abc", "abc"},
		{"https://example.com/api/uploads/abc?token=x#frag", "abc"},
		{"//example.com/api/uploads/abc", "abc"},
		{"/api/uploads/abc/chunks", "abc"},
		{"/api/uploads/01HZX3K9Q7M2V8W4T6R5Y1N0PB", "01HZX3K9Q7M2V8W4T6R5Y1N0PB"},
		{"", ""},
		{"uploads/abc", ""},     // relative to the request: not resolved
		{"api/uploads/abc", ""}, // idem
		{"abc", ""},
		{"https://example.com/other/abc", ""},
		{"https://example.com", ""},
		{"https://example.com/api/uploads/", ""},
		{"/api/uploads/..", ""},
		{"/api/uploads/%2e%2e", ""},
		{"/api/uploads/a%2Fb", ""},
		{"/api/uploads/a%2fb/chunks", ""},
		{"/api/uploads/abc/../def", ""}, // upload def, once resolved
		{"/api/uploads/abc/..", ""},     // the collection, once resolved
		{"/api/uploads/abc/%2e%2e/def", ""},
		{"https://example.com/api/uploads/abc/./chunks", "abc"},
		{"/api/uploads/%zz", ""}, // malformed escape
		{"/api/uploads/a b", ""},
		{"/api/uploads/a\x00b", ""},
		{"/api/uploads/é", ""},
		{"/api/uploads/" + strings.Repeat("a", 200), ""},
		{"HTTPS://example.com/api/uploads/abc", "abc"},
		{"mailto:/api/uploads/abc", ""}, // not http(s)
		{"javascript:/api/uploads/abc", ""},
		{"urn:api/uploads/abc", ""}, // opaque
		{"/api/uploads/abc\r\nX: y", ""},
		{"/" + strings.Repeat("a", 10<<10), ""},
	} {
		id, ok := IDFromLocation(tc.location, p)
		if id != tc.id || ok != (tc.id != "") {
			t.Errorf("IDFromLocation(%.60q) = %q, %v; want %q", tc.location, id, ok, tc.id)
		}
	}
}

func TestIDFromJSON(t *testing.T) {
	big := `{"pad":"` + strings.Repeat("x", MaxJSONBody) + `","id":"abc"}`
	for _, tc := range []struct {
		body  string
		field string
		id    string // "" when none
	}{
		{`{"id":"abc"}`, "id", "abc"},
		{` { "id" : "abc" , "size": 5 } `, "id", "abc"},
		{`{"uploadId":"01HZX3K9Q7M2V8W4T6R5Y1N0PB"}`, "uploadId", "01HZX3K9Q7M2V8W4T6R5Y1N0PB"},
		{`{"data":{"id":"abc"}}`, "data.id", "abc"},
		{`{"data":{"upload":{"id":"x_1"}}}`, "data.upload.id", "x_1"},
		{`{"id":"\u0061bc"}`, "id", "abc"}, // escapes decoded, then validated
		{`{"id":"abc"}`, "ID", ""},         // names are case-sensitive
		{`{"Id":"abc"}`, "id", ""},
		{`{"id":"abc"}`, "", ""},
		{`{"id":"abc"}`, "id.", ""},
		{`{"id":"abc"}`, ".id", ""},
		{`{"data":{"id":"abc"}}`, "data..id", ""},
		{`{"data":{"id":"abc"}}`, "id", ""},
		{`{"data":"abc"}`, "data.id", ""},
		{`{"data":["abc"]}`, "data.id", ""},
		{`{"data":null}`, "data.id", ""},
		{`{"id":123}`, "id", ""},
		{`{"id":null}`, "id", ""},
		{`{"id":true}`, "id", ""},
		{`{"id":{"v":"abc"}}`, "id", ""},
		{`{"id":["abc"]}`, "id", ""},
		{`{"id":""}`, "id", ""},
		{`{"id":".."}`, "id", ""},
		{`{"id":"\u002e\u002e"}`, "id", ""},
		{`{"id":"%2e%2e"}`, "id", ""},
		{`{"id":"a/b"}`, "id", ""},
		{`{"id":"a\u0000b"}`, "id", ""},
		{`{"id":"a\nb"}`, "id", ""},
		{`{"id":"é"}`, "id", ""},
		{`{"id":"` + strings.Repeat("a", MaxIDLen+1) + `"}`, "id", ""},
		{`{"id":"abc"`, "id", ""},           // truncated
		{`{"id":"abc"} trailing`, "id", ""}, // not one JSON value
		{`["abc"]`, "id", ""},
		{`"abc"`, "id", ""},
		{`null`, "id", ""},
		{``, "id", ""},
		{big, "id", ""}, // over MaxJSONBody
	} {
		id, ok := IDFromJSON([]byte(tc.body), tc.field)
		if id != tc.id || ok != (tc.id != "") {
			t.Errorf("IDFromJSON(%.60q, %q) = %q, %v; want %q", tc.body, tc.field, id, ok, tc.id)
		}
	}
}

func TestIDFromJSONTakesABodyOfExactlyTheLimit(t *testing.T) {
	head, tail := `{"id":"abc","pad":"`, `"}`
	body := head + strings.Repeat("x", MaxJSONBody-len(head)-len(tail)) + tail
	if id, ok := IDFromJSON([]byte(body), "id"); !ok || id != "abc" {
		t.Fatalf("IDFromJSON of a %d-byte body = %q, %v", len(body), id, ok)
	}
}
