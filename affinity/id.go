package affinity

import (
	"encoding/json"
	"net/url"
	"strings"
)

// MaxIDLen is the longest upload id accepted, in bytes.
const MaxIDLen = 128

// MaxJSONBody is the largest creation response body IDFromJSON reads: a
// creation answer is small, and a proxy must not buffer an unbounded one.
const MaxJSONBody = 64 << 10

// ValidID reports whether id may name an upload: 1 to MaxIDLen bytes of
// ASCII letters, digits, '_' and '-'. Ids become store keys and path
// segments, so anything that could mean something else in either is
// refused: '.' (hence ".."), '/', '%' (encoded tricks such as %2e%2e or
// %2F), ':' and '{' (key structure), spaces, control characters, non-ASCII.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// IDFromLocation learns a new upload's id from the Location header of its
// creation response: an absolute http(s) URL (https://host/api/uploads/ID)
// or an absolute path (/api/uploads/ID), whose path must match p. The host
// is not checked: a server may well name itself by an address the proxy
// does not know. A path relative to the request (uploads/ID) is refused, as
// resolving it would need the request; so are other schemes, Locations
// over 8 KiB, and paths that name the upload differently once decoded and
// their dot segments resolved (/api/uploads/ID/../ID2), as a client that
// follows the Location, and the server it reaches, read them. The query and
// fragment are ignored.
func IDFromLocation(location string, p *Pattern) (string, bool) {
	if location == "" || len(location) > 8<<10 {
		return "", false
	}
	u, err := url.Parse(location)
	if err != nil || u.Opaque != "" {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "", "http", "https":
	default:
		return "", false // not a place the upload could be reached at
	}
	path := u.EscapedPath()
	if !strings.HasPrefix(path, "/") || !p.Unambiguous(path, u.Path) {
		return "", false
	}
	id, ok := p.ID(path)
	// A client follows the Location by RFC 3986, whose removal of dot
	// segments keeps the empty ones path.Clean drops: /0/..///0 is //0 to
	// it. It must reach the same upload.
	followed := followingBase.ResolveReference(u).EscapedPath()
	if !ok || p.Target(followed) != (Target{Kind: TargetUpload, ID: id}) {
		return "", false
	}
	return id, true
}

// followingBase is where a creation's Location is resolved from, as a
// client resolves it: only its path matters, and Location paths here are
// absolute.
var followingBase = &url.URL{Scheme: "https", Host: "proxy.invalid", Path: "/"}

// IDFromJSON learns a new upload's id from a JSON creation response body:
// field names a top-level field ("id") or, with dots, a field of nested
// objects ("data.id"). The value must be a JSON string holding a valid id
// (escapes are decoded first, so "\u002e\u002e" is the refused ".."). A body
// over MaxJSONBody bytes, or that is not one JSON object, gives nothing.
func IDFromJSON(body []byte, field string) (string, bool) {
	if len(body) > MaxJSONBody || field == "" {
		return "", false
	}
	raw := json.RawMessage(body)
	for name := range strings.SplitSeq(field, ".") {
		if name == "" {
			return "", false
		}
		var object map[string]json.RawMessage
		if err := json.Unmarshal(raw, &object); err != nil || object == nil {
			return "", false
		}
		var ok bool
		if raw, ok = object[name]; !ok {
			return "", false
		}
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil || !ValidID(id) {
		return "", false // not a string (a number, null, an object) or not valid
	}
	return id, true
}
