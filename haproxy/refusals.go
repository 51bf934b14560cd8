package haproxy

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// errRefused is what a section's reader returns when lines of it were
// refused (and recorded): the section's own checks, which would only
// repeat them, are skipped.
var errRefused = errors.New("lines of the section were refused")

// refusals are the lines a translation refuses, each once (a defaults
// line read by several proxies, a backend by each frontend that sends to
// it): reading goes on after a refused line, so that one run names every
// line to change.
type refusals struct {
	errs []error
	at   map[Position]bool
}

func (r *refusals) add(err error) {
	if err == nil || errors.Is(err, errRefused) {
		return
	}
	var e *Error
	if errors.As(err, &e) {
		if r.at[e.Pos] {
			return
		}
		if r.at == nil {
			r.at = map[Position]bool{}
		}
		r.at[e.Pos] = true
	}
	r.errs = append(r.errs, err)
}

// count is how many lines were refused so far: a reader compares it
// before and after a section's lines.
func (r *refusals) count() int { return len(r.errs) }

// err is the refusals as one error, in the order written.
func (r *refusals) err() error {
	if len(r.errs) == 1 {
		return r.errs[0]
	}
	errs := Refusals(r.errs)
	slices.SortStableFunc(errs, func(a, b error) int { return comparePos(posOf(a), posOf(b)) })
	return errs
}

// Refusals is the error of a configuration with several refused lines:
// each, in the order written. Its text names them one a line, the first
// maxRefusalsShown of them.
type Refusals []error

// maxRefusalsShown bounds the lines a Refusals' text names.
const maxRefusalsShown = 30

func (r Refusals) Error() string {
	var b strings.Builder
	for i, err := range r {
		if i == maxRefusalsShown {
			b.WriteString("\n… and " + strconv.Itoa(len(r)-i) + " more refused lines")
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap gives each refusal, so that errors.As finds the first *Error.
func (r Refusals) Unwrap() []error { return r }

// posOf is the position an error names (the zero Position if none).
func posOf(err error) Position {
	var e *Error
	if errors.As(err, &e) {
		return e.Pos
	}
	return Position{}
}

func comparePos(a, b Position) int {
	return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
}

// Warning is a line translated with a difference from HAProxy: its
// position, and what differs.
type Warning struct {
	Pos Position
	Msg string
}
