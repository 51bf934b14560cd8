package haproxy

import "slices"

// Condition is a rule's "if" or "unless" condition: alternatives (joined
// by "||" or "or") of terms that must all hold, as HAProxy reads it.
type Condition struct {
	Unless bool
	Any    [][]Term
}

// Term is one named ACL, or an anonymous one ("{ path_beg /api }"), maybe
// negated ("!").
type Term struct {
	Not  bool
	ACL  string   // a named ACL
	Anon []string // an anonymous ACL's words: the fetch, its flags and values
}

// SplitCondition splits a rule's words at its "if" or "unless": the words
// before it, and the condition, nil if the rule has none.
func SplitCondition(words []string, pos Position) ([]string, *Condition, error) {
	for i, w := range words {
		if w == "if" || w == "unless" {
			c, err := parseCondition(words[i+1:], pos)
			if err != nil {
				return nil, nil, err
			}
			c.Unless = w == "unless"
			return words[:i], c, nil
		}
	}
	return words, nil, nil
}

func parseCondition(words []string, pos Position) (*Condition, error) {
	if len(words) == 0 {
		return nil, errAt(pos, "a condition without a term")
	}
	r := conditionReader{pos: pos, c: &Condition{}}
	words = splitNegatedBraces(words)
	for i := 0; i < len(words); i++ {
		n, err := r.word(words[i:])
		if err != nil {
			return nil, err
		}
		i += n
	}
	if r.not || len(r.terms) == 0 {
		return nil, errAt(pos, "a condition ends without a term")
	}
	r.c.Any = append(r.c.Any, r.terms)
	return r.c, nil
}

// splitNegatedBraces reads "!{" as "!" before "{" (HAProxy reads
// "if !{ ssl_fc }", the most common line of its configurations, so).
func splitNegatedBraces(words []string) []string {
	if !slices.Contains(words, "!{") {
		return words
	}
	var split []string
	for _, w := range words {
		if w == "!{" {
			split = append(split, "!", "{")
		} else {
			split = append(split, w)
		}
	}
	return split
}

// conditionReader is parseCondition's state: the condition's alternatives
// so far, the terms of the one being read, and whether a "!" waits for its
// term.
type conditionReader struct {
	pos   Position
	c     *Condition
	terms []Term
	not   bool
}

// word reads the first of words, and returns how many words after it it
// took too.
func (r *conditionReader) word(words []string) (int, error) {
	switch w := words[0]; w {
	case "||", "or":
		return 0, r.alternative(w)
	case "!":
		if r.not {
			return 0, errAt(r.pos, `"!" twice`)
		}
		r.not = true
	case "{":
		return r.anonymous(words)
	case "}", "&&", "and":
		return 0, errAt(r.pos, "unexpected %q in a condition", w)
	default:
		if len(w) > 1 && w[0] == '!' { // "!name"
			r.terms = append(r.terms, Term{Not: !r.not, ACL: w[1:]})
		} else {
			r.terms = append(r.terms, Term{Not: r.not, ACL: w})
		}
		r.not = false
	}
	return 0, nil
}

// alternative ends the alternative being read at its "||" or "or" (op).
func (r *conditionReader) alternative(op string) error {
	if r.not || len(r.terms) == 0 {
		return errAt(r.pos, "%q without a term before it", op)
	}
	r.c.Any = append(r.c.Any, r.terms)
	r.terms = nil
	return nil
}

// anonymous reads the anonymous ACL that words begin with ("{ … }"), and
// returns how many words after its "{" it took.
func (r *conditionReader) anonymous(words []string) (int, error) {
	end := indexOf(words, "}")
	if end < 0 {
		return 0, errAt(r.pos, `an anonymous ACL's "{" is not closed`)
	}
	anon := words[1:end]
	if len(anon) == 0 {
		return 0, errAt(r.pos, "an empty anonymous ACL")
	}
	r.terms = append(r.terms, Term{Not: r.not, Anon: anon})
	r.not = false
	return end, nil
}
