package haproxy

import (
	"slices"
	"strings"
)

// compression is what a proxy's compression lines say: HAProxy compresses
// an answer with the backend's algorithms and types if it has them, else
// the frontend's (flt_http_comp.c: "Backend has the priority").
type compression struct {
	lines   []Line
	algos   []string // as written: gzip, deflate, raw-deflate, identity
	types   []string // Content-Type prefixes, matched without case
	offload bool     // the client's Accept-Encoding removed before the server
}

// readCompression reads compression algo, type or offload into c. A
// proxy's algorithms and types are those of each of its lines, its
// defaults' included: HAProxy adds each line's to the list it inherits.
func readCompression(c *compression, l Line) error {
	what := arg(l, 1)
	args := l.Words[2:]
	var err error
	switch {
	case what == "offload" && len(args) == 0:
		c.offload = true
	case what == "offload":
		return refuse(l, "takes no value")
	case len(args) == 0:
		return refuse(l, "takes at least one value")
	case what == "algo":
		err = checkAlgos(args, l)
		c.algos = append(c.algos, args...)
	case what == "type":
		err = checkTypes(args, l)
		c.types = append(c.types, args...)
	default:
		return refuse(l, "compression %s is not translated (algo, type and offload are)", what)
	}
	c.lines = append(c.lines, l)
	return err
}

// checkAlgos refuses what Caddy's encode cannot do of a compression
// algo line: deflate alone (it has gzip).
func checkAlgos(algos []string, l Line) error {
	for _, a := range algos {
		if a != "gzip" && a != "deflate" && a != "raw-deflate" && a != "identity" {
			return refuse(l, "algorithm %q: HAProxy knows gzip, deflate, raw-deflate and identity", a)
		}
	}
	if !contains(algos, "gzip") && (contains(algos, "deflate") || contains(algos, "raw-deflate")) {
		return refuse(l, "Caddy's encode has no deflate: write compression algo gzip (every client that takes deflate takes gzip)")
	}
	return nil
}

// checkTypes refuses a type that would not match as written: Caddy's
// header matcher reads a '*' as a wildcard.
func checkTypes(types []string, l Line) error {
	for _, t := range types {
		if strings.ContainsAny(t, "*{}") {
			return refuse(l, "type %q: a '*' or a brace is not translated (HAProxy matches the type's first bytes as written)", t)
		}
	}
	return nil
}

func (fe *frontend) readCompression(l Line) error { return readCompression(&fe.compression, l) }
func (be *backend) readCompression(l Line) error  { return readCompression(&be.compression, l) }

// effectiveCompression is what compresses the backend's answers to the
// frontend's clients: each of algorithms and types the backend's if it
// has them, else the frontend's; offload either's.
func effectiveCompression(fe *frontend, be *backend) compression {
	c := be.compression
	c.lines = slices.Clone(fe.compression.lines)
	for _, l := range be.compression.lines {
		if !slices.ContainsFunc(c.lines, func(f Line) bool { return f.Pos == l.Pos }) { // a defaults line both read
			c.lines = append(c.lines, l)
		}
	}
	if c.algos == nil {
		c.algos = fe.compression.algos
	}
	if c.types == nil {
		c.types = fe.compression.types
	}
	c.offload = c.offload || fe.compression.offload
	return c
}

// gzip tells whether the algorithms hold gzip, the one Caddy's encode
// has of HAProxy's; the others are dropped (deflate's clients get the
// answer as it is).
func (c compression) gzip() bool { return contains(c.algos, "gzip") }
