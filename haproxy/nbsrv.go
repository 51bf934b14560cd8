package haproxy

import "strings"

// nbsrv(<backend>): how many of a backend's servers are usable now.
// HAProxy 2.6 counts the active servers up (checked and passing, or not
// checked) and not disabled, with a weight; a checked backend's count is
// dynamic checked's, published under the backend's name (name) and read
// by caddy-ha's usable_servers CEL function; an unchecked one's is a
// constant.

// serverCount is how nbsrv counts a backend's usable servers: the count
// dynamic checked publishes under published, or constant.
type serverCount struct {
	published string
	constant  int
}

// countedBackends are the proxies an nbsrv(<name>) of the configuration
// names: each is checked by dynamic checked, which publishes its count,
// rather than by reverse_proxy's own health checks, which keep theirs.
func countedBackends(cfg *Config) map[string]bool {
	counted := map[string]bool{}
	for _, s := range cfg.Sections {
		for _, l := range s.Lines {
			for _, w := range l.Words {
				if name, ok := strings.CutPrefix(w, "nbsrv("); ok && strings.HasSuffix(name, ")") {
					counted[strings.TrimSuffix(name, ")")] = true
				}
			}
		}
	}
	return counted
}

// serverCount is how the frontend's nbsrv(name) at line l counts: the
// backend must be one it sends to.
func (fe *frontend) serverCount(name string, l Line) (*serverCount, error) {
	var be *backend
	for _, b := range fe.backends() {
		if b.section.Name == name {
			be = b
		}
	}
	switch {
	case be == nil:
		return nil, refuse(l, "nbsrv(%s) of a backend this %s does not send to is not translated yet", name, fe.section.Kind)
	case be.leader:
		return nil, refuse(l, "nbsrv(%s) of the leader's pool (lb_policy leader) is not translated", name)
	case len(be.selection.backups) > 0:
		return nil, refuse(l, "nbsrv(%s) of a backend with backup servers is not translated yet (HAProxy counts the backups only while no active server is up, and the first alone without option allbackups)", name)
	case be.checked != "":
		return &serverCount{published: name}, nil
	}
	n := 0
	for _, s := range be.servers {
		if w, _ := be.weightOf(s); w != 0 {
			n++ // HAProxy counts no server of weight 0
		}
	}
	return &serverCount{constant: n}, nil
}
