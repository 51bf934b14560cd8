package haproxy

import (
	"slices"
	"strings"

	"github.com/go-crypt/crypt/algorithm/shacrypt"
)

// userlist is a userlist section: the accounts an http_auth(<name>) ACL
// checks, which http-request auth asks for: Caddy's basic_auth.
type userlist struct {
	section *Section
	users   []statsUser // each with its bcrypt or SHA-crypt hash
	notes   []note      // its other lines (groups)
	// crypt: a user's hash is SHA-256 or SHA-512 crypt, which
	// basic_auth_crypt checks (Caddy's basic_auth checks bcrypt only).
	crypt bool
}

// readUserlists reads every userlist section, each refused line recorded.
func (t *translator) readUserlists() {
	t.userlists = map[string]*userlist{}
	for _, s := range t.cfg.Sections {
		if s.Kind != "userlist" {
			continue
		}
		u := &userlist{section: s}
		t.userlists[s.Name] = u
		for _, l := range s.Lines {
			k := keywordAt(l)
			if k == nil || k.userlist == nil {
				t.refused.add(refuse(l, "not a userlist's keyword (user and group are)"))
				continue
			}
			t.refused.add(k.userlist(u, l))
		}
	}
}

// readUser reads user <name> password <hash> | insecure-password
// <password> [groups <group>,…]: an account of basic_auth, its password
// a bcrypt hash (one computed at adapt time for insecure-password, as for
// stats auth).
func (u *userlist) readUser(l Line) error {
	w := l.Words
	if len(w) < 4 || len(w)%2 != 0 {
		return refuse(l, "takes a name, password <hash> or insecure-password <password>, and maybe groups <groups>")
	}
	name, user := w[1], statsUser{line: l, name: w[1]}
	if strings.ContainsAny(name, "{}") || strings.ContainsFunc(name, isControlOrSpace) {
		return refuse(l, "a user with braces, a space or a control character is not translated")
	}
	for i := 2; i < len(w); i += 2 {
		switch v := w[i+1]; w[i] {
		case "insecure-password":
			if len(v) > statsMaxPassword {
				return refuse(l, "a password longer than %d bytes is not translated: bcrypt reads %d, and would take any password that begins with these", statsMaxPassword, statsMaxPassword)
			}
			user.hash = statsPasswordHash("userlist "+u.section.Name, name, v)
		case "password":
			crypt, err := readHash(v, l)
			if err != nil {
				return err
			}
			u.crypt = u.crypt || crypt
			user.hash = v
		case "groups":
		default:
			return refuse(l, "%s is not translated (password, insecure-password and groups are)", w[i])
		}
	}
	if user.hash == "" {
		return refuse(l, "a user without a password is not translated (basic_auth wants one)")
	}
	if slices.ContainsFunc(u.users, func(o statsUser) bool { return o.name == name }) {
		return refuse(l, "user %s twice in one userlist: not translated", name)
	}
	u.users = append(u.users, user)
	return nil
}

// readHash checks a user's password hash: bcrypt, or SHA-256 or SHA-512
// crypt (crypt tells which), as go-crypt/crypt reads them for
// basic_auth_crypt; another crypt(3) hash is refused.
func readHash(hash string, l Line) (crypt bool, err error) {
	switch {
	case isBcrypt(hash):
		return false, nil
	case !strings.HasPrefix(hash, "$5$") && !strings.HasPrefix(hash, "$6$"):
		return false, refuse(l, "a crypt(3) hash other than bcrypt ($2a$, $2b$, $2y$) or SHA-256 and SHA-512 crypt ($5$, $6$) is not translated: give the user one of those (mkpasswd -m sha-512, or caddy hash-password), which HAProxy takes too")
	}
	if _, err := shacrypt.Decode(hash); err != nil {
		return false, refuse(l, "not a SHA-crypt hash (%v): HAProxy would let no password through; write the user's hash as crypt(3) gives it", err)
	}
	return true, nil
}

// isBcrypt tells whether hash is a bcrypt hash as x/crypto/bcrypt, which
// Caddy's basic_auth uses, reads it: $2a$, $2b$ or $2y$, a cost, 53
// characters of bcrypt's base64.
func isBcrypt(hash string) bool {
	if len(hash) != 60 || !slices.Contains([]string{"$2a$", "$2b$", "$2y$"}, hash[:4]) || hash[6] != '$' {
		return false
	}
	_, err := bcryptEncoding.DecodeString(hash[7:29])
	return err == nil && strings.Trim(hash[4:6], "0123456789") == "" &&
		strings.Trim(hash[7:], "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == ""
}

// readGroup notes a group line: only http_auth_group tests groups, which
// is not translated; http_auth takes any user of the list.
func (u *userlist) readGroup(l Line) error {
	u.notes = append(u.notes, note{line: l, what: "a group: http_auth takes any user of the list"})
	return nil
}

// readAuth reads a frontend's http-request auth (see authAnswer): its
// realm is the frontend's name by default.
func (fe *frontend) readAuth(l Line, args []string, cond *Condition) error {
	a, when, err := fe.authAnswer(l, args, cond, fe.userlists, fe.section.Name)
	if err != nil {
		return err
	}
	fe.answers = append(fe.answers, answerRule{line: l, answer: a, when: when})
	return nil
}

// readAuth reads a backend's http-request auth (see authAnswer), which
// HAProxy runs on the requests the backend gets, in the order of its
// rules: its realm is the backend's name by default.
func (be *backend) readAuth(l Line, args []string, cond *Condition) error {
	a, when, err := be.authAnswer(l, args, cond, be.userlists, be.section.Name)
	if err != nil {
		return err
	}
	be.requestRules = append(be.requestRules, requestRule{line: l, answer: &a, when: when})
	return nil
}

// authAnswer reads http-request auth [realm <realm>] unless <http_auth
// ACL> (or if !<it>) with the proxy's ACLs (s) and the userlist sections:
// basic_auth with the userlist's accounts, where HAProxy answers 401 to a
// request without them; when holds the http_auth ACL lines it uses. The
// realm is realm (the proxy's name) unless the rule names one.
func (s *aclScope) authAnswer(l Line, args []string, cond *Condition, userlists map[string]*userlist, realm string) (answer, matcher, error) {
	switch {
	case len(args) == 2 && args[0] == "realm":
		realm = args[1]
	case len(args) != 0:
		return answer{}, matcher{}, refuse(l, "only [realm <realm>] is translated")
	}
	if cond == nil || len(cond.Any) != 1 || len(cond.Any[0]) != 1 || cond.Any[0][0].Not == cond.Unless {
		return answer{}, matcher{}, refuse(l, "only http-request auth unless <ACL of http_auth(<userlist>)> (or if !<it>) is translated: basic_auth asks for the userlist's accounts")
	}
	t := cond.Any[0][0]
	alts, err := s.termACLs(t, l)
	if err != nil {
		return answer{}, matcher{}, err
	}
	var list *userlist
	var lines []Line
	for _, a := range alts {
		if a.userlist == "" || list != nil && a.userlist != list.section.Name {
			return answer{}, matcher{}, refuse(l, "only an ACL of http_auth(<userlist>) of one userlist is translated as its condition")
		}
		if list = userlists[a.userlist]; list == nil {
			return answer{}, matcher{}, refuse(l, "no userlist %s", a.userlist)
		}
		if t.Anon == nil {
			s.usedACLs[a.line.Pos] = true
			lines = append(lines, a.line)
		}
	}
	return answer{kind: authAnswer, status: "401", realm: realm, userlist: list}, matcher{acls: lines}, nil
}
