package haproxy

import (
	"slices"
	"strings"
)

// HAProxy's proxies have a frontend side (the clients': bind, the client
// timeouts, use_backend), a backend side (the servers': balance, checks,
// the server timeouts), or both (listen). A defaults section holds
// settings of both sides, and each proxy that takes it applies those of
// its own side (the keyword matrix, section 4.1 of HAProxy's
// configuration manual): a frontend skips the backend keywords of its
// defaults, a backend the frontend keywords. A proxy's own line of the
// other side is one HAProxy ignores with a warning: refused here.

// side is the proxies HAProxy takes a keyword in.
type side int

const (
	bothSides side = iota
	frontendSide
	backendSide
)

// twoWordKeywords are the keywords whose second word names the setting.
var twoWordKeywords = map[string]bool{"option": true, "timeout": true, "stats": true, "capture": true,
	"tcp-request": true, "tcp-response": true, "monitor": true, "external-check": true, "persist": true,
	"rate-limit": true, "stick": true, "email-alert": true, "declare": true}

// keywordOf is a line's keyword as HAProxy's matrix names it: "balance",
// "option httpchk", "timeout server" (a "no" or "default" prefix dropped).
func keywordOf(l Line) string {
	w := l.Words
	if (w[0] == "no" || w[0] == "default") && len(w) > 1 {
		w = w[1:]
	}
	if twoWordKeywords[w[0]] && len(w) > 1 {
		return w[0] + " " + w[1]
	}
	return w[0]
}

// frontendOnly are the keywords HAProxy takes in frontends (and listen,
// defaults), not in backends.
var frontendOnly = setOf("backlog", "bind", "capture cookie", "capture request", "capture response",
	"clitcpka-cnt", "clitcpka-idle", "clitcpka-intvl", "declare capture", "default_backend",
	"error-log-format", "log-format", "log-format-sd", "maxconn", "monitor fail", "monitor-uri",
	"option accept-invalid-http-request", "option clitcpka", "option contstats", "option disable-h2-upgrade",
	"option dontlog-normal", "option dontlognull", "option h1-case-adjust-bogus-client",
	"option http-ignore-probes", "option http-use-proxy-header", "option httplog", "option httpslog",
	"option log-separate-errors", "option logasap", "option socket-stats", "option tcp-smart-accept",
	"option idle-close-on-response", "rate-limit sessions", "tcp-request connection", "tcp-request session",
	"timeout client", "timeout client-fin", "unique-id-format", "unique-id-header", "use_backend")

// backendOnly are the keywords HAProxy takes in backends (and listen,
// defaults), not in frontends.
var backendOnly = setOf("balance", "cookie", "default-server", "dispatch", "force-persist", "fullconn",
	"hash-type", "http-check", "http-reuse", "http-send-name-header", "ignore-persist",
	"load-server-state-from-file", "max-keep-alive-queue", "option abortonclose",
	"option accept-invalid-http-response", "option allbackups", "option checkcache",
	"option h1-case-adjust-bogus-server", "option http-pretend-keepalive", "option httpchk",
	"option ldap-check", "option external-check", "option log-health-checks", "option mysql-check",
	"option persist", "option pgsql-check", "option prefer-last-server", "option redispatch",
	"option redis-check", "option smtpchk", "option spop-check", "option srvtcpka", "option ssl-hello-chk",
	"option tcp-check", "option tcp-smart-connect", "option transparent", "external-check command",
	"external-check path", "persist rdp-cookie", "retries", "retry-on", "server", "server-state-file-name",
	"server-template", "source", "srvtcpka-cnt", "srvtcpka-idle", "srvtcpka-intvl", "stick match", "stick on",
	"stick store-request", "stick store-response", "tcp-check", "tcp-response content",
	"tcp-response inspect-delay", "timeout check", "timeout connect", "timeout queue", "timeout server",
	"timeout server-fin", "timeout tunnel", "transparent", "use-fcgi-app", "use-server")

// connectionModes are HAProxy's connection-handling options other than
// http-keep-alive (its default, and Caddy's way): each translated as
// Caddy's keep-alive, with what differs. Caddy keeps a connection alive
// where each of them closes one; none changes what a request gets.
var connectionModes = map[string]note{
	"http-server-close":      {what: "Caddy keeps its connections to the servers alive and reuses them, where HAProxy closes each after its answer; client connections are kept alive in both", approximated: true},
	"httpclose":              {what: "Caddy keeps client and server connections alive, where HAProxy closes both after each answer (Connection: close)", approximated: true},
	"forceclose":             {what: "as httpclose, which replaced it in HAProxy 2.0 (2.6 refuses it): Caddy keeps client and server connections alive, where HAProxy closed both after each answer", approximated: true},
	"http-pretend-keepalive": {what: "ignored: it has HAProxy tell a server that it keeps the connection alive while it closes it; Caddy keeps it alive for real"},
	"abortonclose":           {what: "Caddy cancels a request whose client went away, queued or already sent (its request context), where HAProxy drops it only while it is queued", approximated: true},
}

// notInDefaults are the keywords HAProxy refuses in a defaults section.
var notInDefaults = setOf("bind", "capture cookie", "capture request", "capture response", "declare capture",
	"description", "dispatch", "filter", "force-persist", "id", "ignore-persist", "monitor fail", "redirect",
	"server", "server-template", "stats admin", "stats http-request", "stick match", "stick on",
	"stick store-request", "stick store-response", "stick-table", "use_backend", "use-fcgi-app", "use-server")

// rulesKeywords are the rules HAProxy takes only in a named defaults
// section, which frontends and backends then cannot both take.
var rulesKeywords = setOf("http-request", "http-response", "http-after-response", "tcp-request connection",
	"tcp-request content", "tcp-request inspect-delay", "tcp-request session", "tcp-response content",
	"tcp-response inspect-delay")

func setOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// keywordSide is the side of the proxies that take the line's keyword.
func keywordSide(l Line) side {
	switch k := keywordOf(l); {
	case frontendOnly[k]:
		return frontendSide
	case backendOnly[k] || strings.HasPrefix(k, "http-check") || strings.HasPrefix(k, "tcp-check"):
		return backendSide
	}
	return bothSides
}

// ownLine tells whether l is written in s itself, not in its defaults.
func ownLine(s *Section, l Line) bool {
	return s.cfg != nil && s.cfg.sectionOf[l.Pos] == s
}

// fromDefaultsNote is what becomes of a defaults line of the other side:
// HAProxy applies it to the proxies of that side that take the defaults.
func fromDefaultsNote(l Line, kind string) string {
	switch {
	case keywordSide(l) == backendSide && kind == "listen":
		return "a backend's: this listen section has no server"
	case keywordSide(l) == backendSide:
		return "a backend's: see its reverse_proxy"
	case isLogLine(l):
		return "a frontend's: see the site's log"
	case l.Words[0] == "timeout" || l.Words[0] == "maxconn":
		return "a frontend's: see the servers option"
	}
	return "a frontend's: see the site"
}

// checkDefaults refuses what HAProxy refuses in a defaults section: a
// keyword it does not take there, rules in an anonymous one, and a
// defaults section with rules that frontends and backends both take.
func (c *Config) checkDefaults() error {
	for _, s := range c.Sections {
		if s.Kind != "defaults" {
			continue
		}
		for _, l := range s.Lines {
			k := keywordOf(l)
			if notInDefaults[k] {
				return refuse(l, "HAProxy does not take %s in a defaults section", k)
			}
			if (rulesKeywords[k] || k == "acl") && s.Name == "" {
				return refuse(l, "HAProxy takes %s only in a named defaults section, not in an anonymous one", k)
			}
		}
	}
	// A defaults section with rules: the first proxy that takes it.
	takenBy := map[*Section]*Section{}
	for _, s := range c.Sections {
		if s.Kind != "frontend" && s.Kind != "backend" && s.Kind != "listen" {
			continue
		}
		var seen []*Section
		for d := c.DefaultsOf(s); d != nil && !slices.Contains(seen, d); d = c.DefaultsOf(d) {
			seen = append(seen, d)
			if !slices.ContainsFunc(d.Lines, func(l Line) bool { return rulesKeywords[keywordOf(l)] }) {
				continue
			}
			if first, ok := takenBy[d]; s.Kind == "listen" || ok && first.Kind != s.Kind {
				return errAt(s.Pos, "%s %s: frontends and backends cannot take one defaults section with rules (defaults %s at %s): HAProxy refuses it too", s.Kind, s.Name, d.Name, d.Pos)
			}
			takenBy[d] = s
		}
	}
	return nil
}
