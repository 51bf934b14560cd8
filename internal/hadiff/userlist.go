package hadiff

import (
	"strings"

	"github.com/caddy-ha/caddy-ha/haproxy"
)

// userlistAccount is an account of a userlist whose password the
// configuration holds in clear (insecure-password): the only kind the
// harness can send.
type userlistAccount struct {
	user, password string
}

// userlistAccounts are the first such account of each userlist section,
// by the section's name.
func userlistAccounts(cfg *haproxy.Config) map[string]userlistAccount {
	accounts := map[string]userlistAccount{}
	for _, s := range cfg.Sections {
		if s.Kind != "userlist" {
			continue
		}
		for _, l := range s.Lines {
			w := l.Words
			if _, ok := accounts[s.Name]; !ok && len(w) >= 4 && w[0] == "user" && w[2] == "insecure-password" {
				accounts[s.Name] = userlistAccount{user: w[1], password: w[3]}
			}
		}
	}
	return accounts
}

// authTest is an http_auth(<list>) ACL's test: a request with the Basic
// credentials of the list's account (in), and with its user and another
// password (out); a list without a password in clear gives a note.
func (d *deriver) authTest(fetch string) (test, string) {
	list := strings.TrimSuffix(strings.TrimPrefix(fetch, "http_auth("), ")")
	a, ok := d.accounts[list]
	if !ok {
		return test{}, "fetch " + fetch + ": no user of userlist " + list + " has an insecure-password the harness can send: not derived"
	}
	return test{
		in:  []change{func(r *Request) { r.setBasicAuth(a.user, a.password) }},
		out: []change{func(r *Request) { r.setBasicAuth(a.user, a.password+"x") }},
	}, ""
}
