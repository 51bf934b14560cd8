package affinity

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// idPlaceholder marks the path segment that holds the upload id.
const idPlaceholder = "{id}"

// Pattern is a compiled upload path pattern such as /api/uploads/{id}. It
// matches the upload's own path and every path under it
// (/api/uploads/{id}/chunks/3, /api/uploads/{id}/complete), because every
// request about one upload must reach the same server.
type Pattern struct {
	// prefix is everything before the id, ending in "/": /api/uploads/.
	prefix string
}

// CompilePattern checks and compiles a pattern: it starts with "/", holds
// {id} exactly once as a whole path segment, and ends right after it. The
// text before {id} must be a plain path that a request can have: no empty or
// dot segments, no other {…}, no query, fragment, space or control character,
// and only characters a request path carries unencoded (so the pattern reads
// the same in a request's escaped and decoded path).
func CompilePattern(pattern string) (*Pattern, error) {
	fail := func(why string) (*Pattern, error) {
		return nil, fmt.Errorf("affinity: upload path pattern %q: %s", pattern, why)
	}
	if !strings.HasPrefix(pattern, "/") {
		return fail("must start with /")
	}
	if n := strings.Count(pattern, idPlaceholder); n != 1 {
		return fail("must hold {id} exactly once")
	}
	prefix, rest, _ := strings.Cut(pattern, idPlaceholder)
	if rest != "" {
		return fail("must end with {id}: the paths under it match by themselves")
	}
	if !strings.HasSuffix(prefix, "/") {
		return fail("{id} must be a whole path segment, right after a /")
	}
	if err := checkPrefix(prefix); err != nil {
		return fail(err.Error())
	}
	return &Pattern{prefix: prefix}, nil
}

// checkPrefix refuses prefixes no cleaned request path can start with, so a
// typo fails at configuration instead of silently matching nothing.
func checkPrefix(prefix string) error {
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; {
		case c <= ' ' || c == 0x7f:
			return errors.New("holds a space or control character")
		case c == '{' || c == '}':
			return errors.New("holds a { or } other than {id}")
		case c == '?' || c == '#':
			return errors.New("holds a query or fragment")
		case !isPathChar(c):
			return fmt.Errorf("holds %q, which request paths carry percent-encoded", c)
		}
	}
	if prefix == "/" {
		return nil // the pattern /{id}: no segments before the id
	}
	// The segments between the leading and the trailing "/".
	for seg := range strings.SplitSeq(prefix[1:len(prefix)-1], "/") {
		switch seg {
		case "":
			return errors.New("holds an empty path segment (//)")
		case ".", "..":
			return errors.New("holds a dot segment")
		}
	}
	return nil
}

// isPathChar reports whether c stands for itself in an escaped path: RFC
// 3986's pchar and "/", without percent-encodings.
func isPathChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}

// ID returns the upload id in path, which should be the request's escaped
// path (r.URL.EscapedPath()) so that an encoded slash (%2F) cannot move
// segment boundaries. It reports false when path is not the pattern's or
// under it, and when the id is not valid (see ValidID), which includes any
// id holding a percent-encoding. It does not allocate: the id is a part of
// path.
func (p *Pattern) ID(path string) (id string, ok bool) {
	if len(path) <= len(p.prefix) || path[:len(p.prefix)] != p.prefix {
		return "", false
	}
	id = path[len(p.prefix):]
	if i := strings.IndexByte(id, '/'); i >= 0 {
		id = id[:i]
	}
	if !ValidID(id) {
		return "", false
	}
	return id, true
}

// Under returns what follows the upload's own path in path, the escaped
// path as for ID: "" for the upload itself, "/" with a trailing slash,
// "/chunks/3" for a chunk; ok is false when path is not an upload's.
func (p *Pattern) Under(path string) (rest string, ok bool) {
	id, ok := p.ID(path)
	if !ok {
		return "", false
	}
	return path[len(p.prefix)+len(id):], true
}

// Unambiguous reports whether a request path names the same thing of the
// pattern in its escaped form (escaped, which ID is given) and in its
// decoded form (decoded) with dot segments and doubled slashes resolved, as
// a server may read it: the same upload, the collection, something invalid
// under it, or nothing of it. Paths such as /api/upload%73/ID or
// /api/x/../uploads/ID are not, and routing them by the escaped form could
// send an upload's request to a server that does not have it. Nor are
// paths that name the collection or something under it only once ASCII
// case is folded (/API/uploads/ID), as servers whose routing ignores case
// (ASP.NET Core's, by default) read them: ids are case-sensitive, so such a
// path cannot be routed by its upload. It allocates only for a path that
// needs cleaning.
func (p *Pattern) Unambiguous(escaped, decoded string) bool {
	clean := path.Clean(decoded)
	if clean == escaped || clean != "/" && clean == strings.TrimSuffix(escaped, "/") {
		// The same path, bar a trailing slash: the usual case. "//" is
		// not: under the pattern /{id} it holds an empty id, cleaned it
		// is the collection.
		return !p.underOnceFolded(escaped)
	}
	target := p.Target(escaped)
	return target.Kind != TargetFolded && target == p.Target(clean)
}

// Target is what a path names in a pattern.
type Target struct {
	Kind TargetKind
	ID   string // of TargetUpload
}

// TargetKind is the kind of thing a path names in a pattern.
type TargetKind int

const (
	TargetNothing    TargetKind = iota
	TargetCollection            // where creations go
	TargetUpload                // an upload or something under it
	TargetInvalid               // under the collection, without a valid id
	TargetFolded                // the collection or under it, once ASCII case is folded
)

// Target returns what path, the request's escaped path as for ID, names.
func (p *Pattern) Target(path string) Target {
	if id, ok := p.ID(path); ok {
		return Target{Kind: TargetUpload, ID: id}
	}
	switch {
	case p.IsCollection(path):
		return Target{Kind: TargetCollection}
	case strings.HasPrefix(path, p.prefix):
		return Target{Kind: TargetInvalid}
	case p.underOnceFolded(path):
		return Target{Kind: TargetFolded}
	}
	return Target{Kind: TargetNothing}
}

// underOnceFolded reports whether path is the collection or under it only
// when ASCII case is folded. The prefix is ASCII, so strings.EqualFold over
// as many bytes folds ASCII case only, as ASP.NET Core's routing does.
func (p *Pattern) underOnceFolded(path string) bool {
	prefix := p.prefix
	if len(path) < len(prefix) {
		prefix = p.prefix[:len(p.prefix)-1] // the collection without a slash
		if len(path) != len(prefix) {
			return false
		}
	}
	head := path[:len(prefix)]
	return head != prefix && strings.EqualFold(head, prefix)
}

// Collection returns the path creations are POSTed to: the pattern's text
// before /{id}, such as /api/uploads; "/" for the pattern /{id}.
func (p *Pattern) Collection() string {
	if p.prefix == "/" {
		return "/"
	}
	return p.prefix[:len(p.prefix)-1]
}

// Path returns the path of upload id: the pattern with id in place.
func (p *Pattern) Path(id string) string { return p.prefix + id }

// IsCollection reports whether path is where creations are POSTed: the
// collection, with or without a trailing slash.
func (p *Pattern) IsCollection(path string) bool {
	return path != "" && (path == p.prefix || path+"/" == p.prefix)
}

// String returns the pattern as it was written.
func (p *Pattern) String() string { return p.prefix + idPlaceholder }
