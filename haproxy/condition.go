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
	// "!{" is "!" before "{" (HAProxy reads "if !{ ssl_fc }", the most
	// common line of its configurations, so).
	if slices.Contains(words, "!{") {
		var split []string
		for _, w := range words {
			if w == "!{" {
				split = append(split, "!", "{")
			} else {
				split = append(split, w)
			}
		}
		words = split
	}
	c := &Condition{}
	var terms []Term
	not := false
	for i := 0; i < len(words); i++ {
		switch w := words[i]; w {
		case "||", "or":
			if not || len(terms) == 0 {
				return nil, errAt(pos, "%q without a term before it", w)
			}
			c.Any = append(c.Any, terms)
			terms = nil
		case "!":
			if not {
				return nil, errAt(pos, `"!" twice`)
			}
			not = true
		case "{":
			end := indexOf(words[i:], "}")
			if end < 0 {
				return nil, errAt(pos, `an anonymous ACL's "{" is not closed`)
			}
			anon := words[i+1 : i+end]
			if len(anon) == 0 {
				return nil, errAt(pos, "an empty anonymous ACL")
			}
			terms = append(terms, Term{Not: not, Anon: anon})
			not = false
			i += end
		case "}", "&&", "and":
			return nil, errAt(pos, "unexpected %q in a condition", w)
		default:
			if len(w) > 1 && w[0] == '!' { // "!name"
				terms = append(terms, Term{Not: !not, ACL: w[1:]})
			} else {
				terms = append(terms, Term{Not: not, ACL: w})
			}
			not = false
		}
	}
	if not || len(terms) == 0 {
		return nil, errAt(pos, "a condition ends without a term")
	}
	c.Any = append(c.Any, terms)
	return c, nil
}
