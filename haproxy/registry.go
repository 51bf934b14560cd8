package haproxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The registry's entries (see keywords.go), by where HAProxy takes them.

const noDHE = "Go's TLS has no finite-field Diffie-Hellman, so nothing takes DH parameters; a DHE suite is refused"

// sectionKeywords are the keywords that begin a section (in: none).
var sectionKeywords = []keyword{
	{name: "global", status: translated, doc: "the global options, and what the sites take from it (see its keywords)"},
	{name: "defaults", status: translated, doc: "each line where the proxies that take it apply it (`from` and named defaults included); one no proxy takes is read and kept as comments"},
	{name: "frontend", status: translated, doc: "a site (or two: with and without TLS) and the `servers` options of its binds"},
	{name: "backend", status: translated, doc: "a `reverse_proxy` in each site that sends to it"},
	{name: "listen", status: translated, doc: "a frontend, with its own servers as its backend"},
	{name: "userlist", status: translated, doc: "the accounts of the `basic_auth` that `http-request auth` with its `http_auth(<name>)` ACL becomes"},
	{name: "resolvers", status: translated, doc: "the DNS servers and timings of `dynamic checked`'s `resolve`, for the servers that name it (see Resolvers)"},
	{name: "peers", status: refused, doc: "peers sections are not translated: Caddy has no stick-table replication; edge_rate_limit counts in the ha store that every instance shares"},
	{name: "mailers", status: refused, doc: "mailers sections are not translated: alert from Caddy's metrics (docs/operations.md)"},
	{name: "program", status: refused, doc: "program sections are not translated: run the program from the service manager"},
	{name: "http-errors", status: refused, doc: "http-errors sections are not translated yet (errorfile lines are)"},
	{name: "ring", status: refused, doc: "ring sections are not translated: Caddy's loggers write to the network themselves"},
	{name: "cache", status: approximated, doc: "nothing: " + cacheApproximation + "; a copy of the server's answer is what the client gets either way, HAProxy's only older"},
	{name: "fcgi-app", status: translated, doc: "the `transport fastcgi` of the backends that name it (`use-fcgi-app`): see its keywords"},
	{name: "crt-store", status: refused, doc: "crt-store sections (HAProxy 3) are not translated: name each certificate in its bind's crt"},
	{name: "traces", status: refused, doc: "traces sections are not translated"},
}

// globalKeywords are the global section's.
var globalKeywords = []keyword{
	{name: "log", in: inGlobal | proxies, status: translated, doc: "global: a Caddy logger (`format syslog`, a file, stdout or stderr) of the sites' access logs; in a proxy, `log global` is the site's `log`; a frontend's own address a logger in the global options taking its site's access log alone (`include`), and with `log global` the first global line's too; a backend's own is ignored (Caddy logs health to its own log)",
		global: readGlobalLog, frontend: (*frontend).readLog, backend: (*backend).readLog},
	{name: "log-tag", in: inGlobal | proxies, status: translated, doc: "the tag of each format syslog", global: readLogTag},
	{name: "chroot", in: inGlobal, status: ignored, doc: "not a Caddy setting: confine the process with its service manager", global: readChroot},
	{name: "ca-base", in: inGlobal, status: translated, doc: "a relative ca-file resolves against it, as in HAProxy", global: readBaseDir},
	{name: "crt-base", in: inGlobal, status: translated, doc: "a relative crt resolves against it, as in HAProxy", global: readBaseDir},
	{name: "ssl-default-bind-ciphers", in: inGlobal, status: translated, doc: "each TLS site's `tls { ciphers }`, by Go's names (see below)", global: readBindTLS},
	{name: "ssl-default-bind-ciphersuites", in: inGlobal, status: translated, doc: "nothing: Go's TLS 1.3 suites are always all on; a list that leaves one out is refused", global: readBindTLS},
	{name: "ssl-default-server-ciphers", in: inGlobal, status: approximated, doc: "with a server with `ssl`: Go's client's own TLS 1.2 suites (reverse_proxy's transport takes no list), a warning naming those it adds or lacks; without one, ignored", global: readServerTLS},
	{name: "ssl-default-server-ciphersuites", in: inGlobal, status: translated, doc: "nothing: Go's TLS 1.3 suites are always all offered (a list that differs, a warning)", global: readServerTLS},
	{name: "ssl-default-server-options", in: inGlobal, status: translated, doc: "with a server with `ssl`: versions that leave TLS 1.2 and 1.3 on are Go's client's (the transport takes none; other versions are refused), `no-tls-tickets` is what the transport does (it keeps no session); without one, ignored", global: readServerTLS},
	{name: "ssl-default-bind-options", in: inGlobal, status: translated, doc: "each TLS site's `tls { protocols }`; `no-tls-tickets` with TLS 1.2 on, session tickets off in the adapter's JSON (see below)", global: readBindTLS},
	{name: "tune.ssl.default-dh-param", in: inGlobal, status: ignored, doc: noDHE},
	{name: "tune.bufsize", in: inGlobal, status: approximated, doc: "the size of `request_buffers` (option http-buffer-request); HAProxy's bound of a request's line and headers (less tune.maxrewrite, 1024), where Caddy's is its `max_header_size`, 1 MiB by default", global: readTuneBufsize},
	{name: "server-state-file", in: inGlobal, status: ignored, doc: "the file load-server-state-from-file reads (see it)"},
	{name: "server-state-base", in: inGlobal, status: ignored, doc: "the directory of the files load-server-state-from-file reads (see it)"},
	{name: "ssl-dh-param-file", in: inGlobal, status: ignored, doc: noDHE},
	{name: "maxconn", in: inGlobal | frontends, status: translated, doc: "global: `max_connections` with group global in each `servers` option; a frontend's: `max_connections` with the frontend's group; a backend's own is ignored, as HAProxy does",
		global: readGlobalMaxconn, frontend: (*frontend).frontendMaxconn, backend: (*backend).frontendSetting},
	{name: "hard-stop-after", in: inGlobal, status: translated, doc: "the global option `grace_period`", global: readHardStopAfter},
	{name: "daemon", in: inGlobal, status: ignored, doc: "Caddy runs in the foreground; its service manager daemonizes it"},
	{name: "master-worker", in: inGlobal, status: ignored, doc: "Caddy is one process; reloads go through its admin API"},
	{name: "user", in: inGlobal | inUserlist, status: translated, doc: "global: ignored (run Caddy as that user from its service manager); in a userlist: an account of `basic_auth`, `insecure-password` as its bcrypt hash, a bcrypt `password` as it is; with a SHA-256 or SHA-512 crypt hash (`$5$`, `$6$`), `basic_auth_crypt` (another crypt(3) hash is refused)",
		global: ignoredGlobal("run Caddy as that user from its service manager"), userlist: (*userlist).readUser},
	{name: "group", in: inGlobal | inUserlist, status: translated, doc: "global: ignored (run Caddy as that group from its service manager); in a userlist: nothing (`http_auth` takes any user; `http_auth_group` is not translated)",
		global: ignoredGlobal("run Caddy as that group from its service manager"), userlist: (*userlist).readGroup},
	{name: "uid", in: inGlobal, status: ignored, doc: "run Caddy as that user from its service manager"},
	{name: "gid", in: inGlobal, status: ignored, doc: "run Caddy as that group from its service manager"},
	{name: "nbthread", in: inGlobal, status: ignored, doc: "Go schedules Caddy on every CPU (GOMAXPROCS)"},
	{name: "nbproc", in: inGlobal, status: ignored, doc: "Caddy is one process"},
	{name: "strict-limits", in: inGlobal, status: ignored, doc: "Caddy sets no file or memory limit of its own: the service manager's apply"},
	{name: "cpu-map", in: inGlobal, status: ignored, doc: "Go schedules Caddy on every CPU (GOMAXPROCS)"},
	{name: "pidfile", in: inGlobal, status: ignored, doc: "caddy run --pidfile"},
	{name: "ulimit-n", in: inGlobal, status: ignored, doc: "set the open-files limit in the service manager"},
	{name: "stats socket", in: inGlobal, status: ignored, doc: runtimeAPI},
	{name: "stats timeout", in: inGlobal, status: ignored, doc: runtimeAPI},
	{name: "stats maxconn", in: inGlobal, status: ignored, doc: runtimeAPI},
	{name: "stats bind-process", in: inGlobal, status: ignored, doc: runtimeAPI},
	{name: "node", in: inGlobal, status: ignored, doc: notUsed},
	{name: "description", in: inGlobal | inFrontend | inListen | inBackend, status: translated, doc: "global: ignored (not used by Caddy); a backend's holding `caddy-ha:leader` makes it the leader's pool",
		global: readUnusedGlobal, backend: (*backend).readDescription},
	{name: "lua-load", in: inGlobal, status: refused, doc: "Lua has no counterpart in Caddy: port the script to a Caddy module (or a handler in the Caddyfile)"},
	{name: "lua-prepend-path", in: inGlobal, status: refused, doc: "Lua has no counterpart in Caddy: port the script to a Caddy module (or a handler in the Caddyfile)"},
}

const notUsed = "not used by Caddy"

// numericID says why a proxy's or server's id is ignored.
const numericID = "the number HAProxy's stats and runtime API give the proxy or server (its iid, sid): Caddy names its sites and upstreams by address; no request or answer changes"

const runtimeAPI = "the runtime API is Caddy's admin API (and caddy ha status)"

// proxyKeywords are those of both sides (and defaults).
var proxyKeywords = []keyword{
	{name: "mode", in: proxies, status: translated, doc: "`mode http` is Caddy's HTTP server; `mode tcp`, HAProxy's default without a mode line, is refused (Caddy's layer-4 proxying is another module): `caddy ha migrate --split-tcp` writes the tcp proxies of a mixed file out for HAProxy",
		frontend: (*frontend).readMode, backend: (*backend).readMode},
	{name: "option http-keep-alive", in: proxies, status: translated, doc: "Caddy's default", frontend: (*frontend).readKeywordNote, backend: (*backend).readKeywordNote},
	{name: "option http-server-close", in: proxies, status: approximated, doc: "Caddy keeps its connections to the servers alive and reuses them, where HAProxy closes each after its answer; client connections are kept alive in both",
		frontend: (*frontend).readKeywordNote, backend: (*backend).readKeywordNote},
	{name: "option httpclose", in: proxies, status: approximated, doc: "Caddy keeps client and server connections alive, where HAProxy closes both after each answer (Connection: close)",
		frontend: (*frontend).readKeywordNote, backend: (*backend).readKeywordNote},
	{name: "option forceclose", in: proxies, status: approximated, doc: "as httpclose, which replaced it in HAProxy 2.0 (2.6 refuses it): Caddy keeps client and server connections alive, where HAProxy closed both after each answer",
		frontend: (*frontend).readKeywordNote, backend: (*backend).readKeywordNote},
	{name: "timeout http-request", in: proxies, status: translated, doc: "`servers { timeouts { read_header } }`", frontend: (*frontend).timeout, backend: (*backend).readTimeout},
	{name: "timeout http-keep-alive", in: proxies, status: translated, doc: "`servers { timeouts { idle } }`, and the transport's `keepalive` for idle server connections", frontend: (*frontend).timeout, backend: (*backend).readTimeout},
	{name: "http-request", in: proxies, rules: true, status: translated, doc: "in a frontend: `set-header`, `add-header`, `del-header` as `request_header`, and `deny`, `return`, `redirect` as `error`, `respond`, `redir`, each with the condition's `expression` matcher, log-format values as Caddy's placeholders (see Log-format samples); `track-sc<n>` with a rate-limit deny as `edge_rate_limit`; in a backend, those and `set-path`, `replace-path` (`uri path_regexp`) in the order written, in a `route` before its `reverse_proxy` (see the actions below); other actions are refused", frontend: (*frontend).httpRequest, backend: (*backend).httpRequest},
	{name: "http-response", in: proxies, rules: true, status: translated, doc: "`set-header`, `add-header`, `del-header` as `header_down` (the backend's, then the frontend's), log-format values as Caddy's placeholders; `replace-header <name> <regex> <format>` as `header_down <name> ^(?s:.*?)(<regex>)(?s:.*)$ <template>` (each line of the header that the expression matches anywhere replaced whole by the format, as HAProxy does; `\\N` as `${N+1}`, `\\0` its match; an expression RE2 cannot compile or reads otherwise than PCRE, a format with `%[…]`, and a set-header or add-header of the header after it in one header_down (which sets and adds before it replaces), refused); `replace-value` refused (HAProxy rewrites each comma-separated value, Caddy each line whole); with a condition on what HAProxy reads in a response (`src`, `method`, `ssl_fc`, `nbsrv`), a deferred `header` with the condition's matcher; other conditions refused; `cache-store <name>` ignored (nothing is cached: see `cache`)", frontend: (*frontend).readResponseHeader, backend: (*backend).readResponseHeader},
	{name: "http-after-response", in: proxies, rules: true, status: translated, doc: "`set-header`, `add-header`, `del-header`, `replace-header` (as http-response's) without a condition in a frontend (or its defaults): the site's deferred `header`, and the same in each `handle_errors`, as HAProxy applies them to every answer, its own included; a backend's is refused", frontend: (*frontend).readAfterResponse, backend: (*backend).readAfterResponse},
	{name: "errorfile", in: proxies, status: translated, doc: "the site's `handle_errors <code>` answering the file's headers and body; a backend's own is refused", frontend: (*frontend).readErrorFile, backend: (*backend).readErrorFile},
	{name: "stick-table", in: inFrontend | inListen | inBackend, status: translated, doc: "in a frontend, `type ip`, `ipv6` or `string` with `store http_req_rate(<period>)` or `conn_rate(<period>)` (tracked by `http-request`, each request is a stream: it counts requests as `http_req_rate` does): the zone of `edge_rate_limit`, and of type `ip` or `ipv6` with `conn_cur`: `in_flight` of the table's `size` (see Rate limits); in a backend, `type ip`, `ipv6` or `string` with its `stick` rules (see them; its `size` and `expire` are a table's that is not there), `peers` refused", frontend: (*frontend).readStickTable, backend: (*backend).readStickTable},
	{name: "option forwardfor", in: proxies, status: translated, doc: "the `forwarded` handler, or `reverse_proxy`'s X-Forwarded-For as HAProxy sends it (see Forwarded headers), for the requests of each backend it holds for (a frontend's or a backend's, the backend's header if both); `except <network>` and `if-none`: vars that have reverse_proxy's header_up give such a request its own header back (or none)", frontend: (*frontend).readForwardFor, backend: (*backend).readForwardFor},
	{name: "acl", in: proxies | inFcgiApp, status: translated, doc: "a CEL `expression` matcher of the rules that use it (see Conditions); a backend's, of its own rules only; a fcgi-app's refused (the conditions of set-param and pass-header are not translated)", frontend: (*frontend).readACL, backend: (*backend).readACL, fcgiApp: (*fcgiApp).readACL},
	{name: "redirect", in: inFrontend | inListen | inBackend, status: translated, doc: "`redir` with the condition's matcher, its target as written (HAProxy reads log-format in http-request redirect only); in a backend after its http-request rules. Options: `code`; `drop-query` (the path alone) and `append-slash` (a slash unless the location ends with one, after a kept query as HAProxy puts it) by a `map` of `{http.request.uri}` (prefix and scheme; HAProxy sends a location as written); `set-cookie NAME[=value]` and `clear-cookie NAME` as the `Set-Cookie` header HAProxy adds (`NAME=value; path=/;`, `NAME; path=/; Max-Age=0;`); `ignore-empty` with a location of samples refused (Caddy's redir cannot skip an empty one), else nothing to do", frontend: (*frontend).readRedirect, backend: (*backend).readRedirect},
	{name: "stats enable", page: readStatsEnable, in: proxies, status: translated, doc: "`ha_status` at HAProxy's default URI (see The stats page)", frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats uri", page: statsArgument((*statsPage).readURI), in: proxies, status: translated, doc: "the page's matcher", frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats realm", page: statsArgument((*statsPage).readRealm), in: proxies, status: translated, doc: "`basic_auth`'s realm", frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats auth", page: statsArgument((*statsPage).readAuth), in: proxies, status: translated, doc: "`basic_auth` with the password's bcrypt hash", frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats refresh", page: statsArgument((*statsPage).readRefresh), in: proxies, status: translated, doc: "`ha_status { refresh }`", frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats hide-version", page: statsNote("ha_status shows no version"), in: proxies, status: translated, doc: "nothing: `ha_status` shows no version", frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats show-legends", page: statsNote("ignored: " + statsView), in: proxies, status: ignored, doc: statsView, frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats show-node", page: statsNote("ignored: " + statsView), in: proxies, status: ignored, doc: statsView, frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats show-desc", page: statsNote("ignored: " + statsView), in: proxies, status: ignored, doc: statsView, frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats show-modules", page: statsNote("ignored: " + statsView), in: proxies, status: ignored, doc: statsView, frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats admin", page: readStatsAdmin, in: inFrontend | inListen | inBackend, status: approximated, doc: statsAdminDoc, frontend: readByStatsPage, backend: (*backend).frontendSetting},
	{name: "stats scope", in: proxies, status: refused, doc: "ha_status shows the whole process (every leader pool and its servers, rate-limit zones and their keys, stores, pins), which a page limited to some proxies hid: not translated; drop it, and keep the page from those who should not see the rest (stats auth, or a bind on an internal address)"},
	{name: "stats http-request", in: inFrontend | inListen | inBackend, status: refused, doc: "stats http-request rules are not translated yet"},
	{name: "filter", in: inFrontend | inListen | inBackend, status: ignored, doc: "`cache <name>` and `compression`: nothing, as they only order HAProxy's filters (the cache is not there, see `cache`; compression is the `compression` lines'); the others refused: " + otherFilters,
		frontend: (*frontend).readFilter, backend: (*backend).readFilter},
	{name: "compression algo", in: proxies, status: approximated, doc: compressionDoc, frontend: (*frontend).readCompression, backend: (*backend).readCompression},
	{name: "compression type", in: proxies, status: approximated, doc: "`encode`'s `match { header Content-Type <type>* }`: HAProxy matches each type as a prefix, without case; Caddy with case", frontend: (*frontend).readCompression, backend: (*backend).readCompression},
	{name: "compression offload", in: inFrontend | inListen | inBackend, status: approximated, doc: "`header_up -Accept-Encoding`: Caddy removes it from every request, HAProxy from those whose answer it compresses", frontend: (*frontend).readCompression, backend: (*backend).readCompression},
	{name: "option http-buffer-request", in: proxies, status: translated, doc: "`request_buffers 16KiB` in the `reverse_proxy` (the size of `tune.bufsize`, if set): the body, up to HAProxy's buffer, read before it is sent", frontend: (*frontend).readBufferRequest, backend: (*backend).readBufferRequest},
	{name: "tcp-request content", in: proxies, rules: true, status: refused},
	{name: "tcp-request inspect-delay", in: proxies, rules: true, status: refused},
	{name: "unique-id-format", in: frontends, status: approximated, doc: "the ID of a request is Caddy's `{http.request.uuid}`, a random UUID, not one of this format", frontend: (*frontend).readUniqueID},
}

const compressionDoc = "`encode gzip` with `match { status 200 201 202 203 }` before the backend's `reverse_proxy` (the backend's algorithms and types, else the frontend's, as in HAProxy); deflate is dropped (Caddy has none), identity is nothing; Caddy also compresses for HTTP/1.0 clients and User-Agent Mozilla/4, does not compress bodies of one byte, and marks a strong ETag `-gzip` where HAProxy makes it weak"

const statsView = "ha_status shows caddy-ha's view (leader pools, rate-limit zones, stores, pins), not HAProxy's proxies and servers"

// frontendKeywords are the frontend side's (and a listen's, and defaults').
var frontendKeywords = []keyword{
	{name: "bind", in: inFrontend | inListen, status: translated, doc: "a site on the port, `tls` for each `crt`, the `servers` option of its listener (see Binds)", frontend: (*frontend).bind},
	{name: "default_backend", in: frontends, status: translated, doc: "the site's last handler: its backend's `reverse_proxy`", frontend: (*frontend).readDefaultBackend},
	{name: "use_backend", in: inFrontend | inListen, status: translated, doc: "an `expression` matcher and a `handle` with its backend's `reverse_proxy`, in the order written", frontend: (*frontend).readUseBackend},
	{name: "timeout client", in: frontends, status: translated, doc: "`servers { timeouts { read_body } }`: HAProxy's is an inactivity timeout, Caddy's bounds the whole body", frontend: (*frontend).timeout},
	{name: "timeout client-fin", in: frontends, status: ignored, doc: "how long HAProxy waits on a client that shut its side of the connection: Go's server ends the request of such a client at once (its context is cancelled), so nothing waits on one", frontend: (*frontend).readIgnoredTimeout},
	{name: "option httplog", in: frontends, status: translated, doc: "Caddy's access log, a JSON line per request (`clf` is refused)", frontend: (*frontend).readLog},
	{name: "option httpslog", in: frontends, status: translated, doc: "Caddy's access log, a JSON line per request", frontend: (*frontend).readLog},
	{name: "option dontlognull", in: frontends, status: translated, doc: "Caddy's default: a connection that sends no request is never logged", frontend: (*frontend).readLog},
	{name: "id", in: inFrontend | inListen | inBackend, status: ignored, doc: numericID, frontend: (*frontend).readKeywordNote, backend: (*backend).readKeywordNote},
	{name: "option socket-stats", in: frontends, status: ignored, doc: "counters per bind line in HAProxy's stats (Caddy's metrics are per server)", frontend: (*frontend).readKeywordNote},
	{name: "backlog", in: frontends, status: refused},
	{name: "capture cookie", in: inFrontend | inListen, status: refused},
	{name: "capture request", in: inFrontend | inListen, status: refused},
	{name: "capture response", in: inFrontend | inListen, status: refused},
	{name: "clitcpka-cnt", in: frontends, status: refused},
	{name: "clitcpka-idle", in: frontends, status: refused},
	{name: "clitcpka-intvl", in: frontends, status: refused},
	{name: "declare capture", in: inFrontend | inListen, status: refused},
	{name: "error-log-format", in: frontends, status: refused},
	{name: "log-format", in: frontends, status: approximated, doc: logFormatNote, frontend: (*frontend).readLogFormat},
	{name: "log-format-sd", in: frontends, status: refused},
	{name: "monitor fail", in: inFrontend | inListen, status: translated, doc: "`error 503` at the monitor URI while the condition's `expression` matcher holds (any rule's, in the order written), with HAProxy's own 503 page or the errorfile's, as HAProxy 2.6 answers; without a monitor-uri ignored, as HAProxy never tests it", frontend: (*frontend).readMonitorFail},
	{name: "monitor-uri", in: frontends, status: translated, doc: "a matcher of the URI as sent and HAProxy's own 200 (`Service ready.`, `Content-Type: text/html`, `Cache-Control: no-cache`) for any method, before every rule", frontend: (*frontend).readMonitorURI},
	{name: "option accept-invalid-http-request", in: frontends, status: refused},
	{name: "option clitcpka", in: frontends, status: refused},
	{name: "option contstats", in: frontends, status: refused},
	{name: "option disable-h2-upgrade", in: frontends, status: refused},
	{name: "option dontlog-normal", in: frontends, status: refused},
	{name: "option h1-case-adjust-bogus-client", in: frontends, status: refused},
	{name: "option http-ignore-probes", in: frontends, status: refused},
	{name: "option http-use-proxy-header", in: frontends, status: refused},
	{name: "option log-separate-errors", in: frontends, status: approximated, doc: "Caddy's access log writes the line of a 5xx answer at level error, the others at info, with or without it; HAProxy raises to err also a request retried, redispatched, aborted or timed out (which Caddy logs as the 502 or 504 it answers, if it answers)", frontend: (*frontend).readKeywordNote},
	{name: "option logasap", in: frontends, status: refused},
	{name: "option tcp-smart-accept", in: frontends, status: refused},
	{name: "option idle-close-on-response", in: frontends, status: refused},
	{name: "rate-limit sessions", in: frontends, status: refused},
	{name: "tcp-request connection", in: frontends, rules: true, status: approximated, doc: "`reject [if|unless <condition>]` on `src` ACLs: `abort` with the condition's `remote_ip` matcher, first in the site, unless an earlier `accept`'s condition held (the first rule that holds decides, as in HAProxy); Caddy closes the connection once it has read a request (after the TLS handshake), HAProxy as it accepts it (a warning); a condition on anything but `src` (which HAProxy never matches there), a frontend with `accept-proxy` (HAProxy's rules see the peer's address, Caddy's remote_ip the PROXY header's) and the other actions are refused (`track-sc<n>`: a table tracked there counts the client's open connections, which Caddy does not count per client)",
		frontend: (*frontend).readConnectionRule},
	{name: "tcp-request session", in: frontends, rules: true, status: refused},
	{name: "unique-id-header", in: frontends, status: approximated, doc: "with unique-id-format, `header_up +<name> {http.request.uuid}` in each `reverse_proxy`: the header is added after every rule, as HAProxy adds it, its value a random UUID; without, ignored (HAProxy sends none)", frontend: (*frontend).readUniqueID},
}

// backendKeywords are the backend side's (and a listen's, and defaults').
var backendKeywords = []keyword{
	{name: "server", in: inListen | inBackend, status: translated, doc: "an upstream of the `reverse_proxy` (see Servers for its options)", backend: (*backend).readServer},
	{name: "default-server", in: backends, status: translated, doc: "its options in every server below", backend: (*backend).readDefaultServer},
	{name: "balance", in: backends, status: translated, doc: "`lb_policy`: roundrobin and static-rr `round_robin` (`weighted_round_robin` with weights), leastconn `least_conn`, first `first`, source `ip_hash`, uri `uri_hash`, hdr(<name>) `header`, random[(<n>)] `random_choose`", backend: (*backend).readBalance},
	{name: "hash-type", in: backends, status: approximated, doc: "Caddy's hash policies are its own: a client or key keeps its server while the servers stay the same", backend: (*backend).readHashType},
	{name: "cookie", in: backends, status: translated, doc: "`<name> insert [indirect] [nocache]`: `lb_policy cookie`; `<name> prefix [nocache]` and `rewrite [nocache]` approximated: `lb_policy cookie <name>_SERVER`, a cookie of Caddy's own beside the server's, which passes unchanged (HAProxy writes the server's cookie value into the server's own cookie)", backend: (*backend).readCookie},
	{name: "option httpchk", in: backends, status: translated, doc: "with `http-check expect status <code>`, Caddy's active health checks (`health_uri`, `health_method`); without, `dynamic checked { check http }`, which passes any 2xx or 3xx as HAProxy does; `lb_policy leader`'s probe for the leader's path. Servers with `check` and no `option httpchk`: `dynamic checked { check tcp }`, HAProxy's connect check", backend: (*backend).readHTTPCheck},
	{name: "http-check", in: backends, status: translated, doc: "`send meth|uri|hdr Host`, `expect status <code>` (Caddy's active health check); `expect [!] status <codes>|rstatus <regex>|string <text>|rstring <regex>` (one expect line) and `disable-on-404`: `dynamic checked`'s `expect`, `disable_on_404` (with `option httpchk` only)", backend: (*backend).readCheckRule},
	{name: "http-reuse", in: backends, status: translated, doc: "`never`: `transport pinned` (a server connection per client connection, for Windows SSO); the others: Caddy's pool", backend: (*backend).readReuse},
	{name: "retries", in: backends, status: translated, doc: "`lb_retries` (HAProxy's 3 by default)", backend: (*backend).readRetries},
	{name: "option redispatch", in: backends, status: translated, doc: "Caddy picks the server again on each retry", backend: (*backend).readRedispatch},
	{name: "option allbackups", in: backends, status: translated, doc: "`lb_policy backup { all_backups }`", backend: (*backend).readAllBackups},
	{name: "option abortonclose", in: backends, status: approximated, doc: "Caddy cancels a request whose client went away, queued or already sent (its request context), where HAProxy drops it only while it is queued", backend: (*backend).readKeywordNote},
	{name: "option http-pretend-keepalive", in: backends, status: ignored, doc: "it has HAProxy tell a server that it keeps the connection alive while it closes it; Caddy keeps it alive for real", backend: (*backend).readKeywordNote},
	{name: "timeout connect", in: backends, status: translated, doc: "the transport's `dial_timeout`", backend: (*backend).readTimeout},
	{name: "timeout server", in: backends, status: translated, doc: "the transport's `read_timeout` and `write_timeout`", backend: (*backend).readTimeout},
	{name: "timeout tunnel", in: backends, status: approximated, doc: "`stream_timeout`: Caddy closes a stream that long after it began, HAProxy one idle that long", backend: (*backend).readTimeout},
	{name: "timeout check", in: backends, status: translated, doc: "`lb_policy leader { timeout }`, or `health_timeout`", backend: (*backend).readTimeout},
	{name: "timeout queue", in: backends, status: translated, doc: "`lb_policy leader { hold }`", backend: (*backend).readTimeout},
	{name: "timeout server-fin", in: backends, status: ignored, doc: "how long HAProxy waits on a server that shut its side of the connection: Caddy reads an answer to its end, and closes both sides of a tunnel when one side ends, so nothing waits on one", backend: (*backend).readIgnoredTimeout},
	{name: "timeout tarpit", in: proxies, status: ignored, doc: "how long http-request tarpit holds a request, which is not translated (refused at its own line): without one it bounds nothing", frontend: (*frontend).readIgnoredTimeout, backend: (*backend).readIgnoredTimeout},
	{name: "dispatch", in: inListen | inBackend, status: refused},
	{name: "force-persist", in: inListen | inBackend, status: refused},
	{name: "fullconn", in: backends, status: refused},
	{name: "http-send-name-header", in: backends, status: refused},
	{name: "ignore-persist", in: inListen | inBackend, status: refused},
	{name: "load-server-state-from-file", in: backends, status: approximated, doc: "`global`, `local`: " + serverStateNote + "; `none`: ignored", backend: (*backend).readServerState},
	{name: "max-keep-alive-queue", in: backends, status: refused},
	{name: "option accept-invalid-http-response", in: backends, status: refused},
	{name: "option checkcache", in: backends, status: refused},
	{name: "option h1-case-adjust-bogus-server", in: backends, status: refused},
	{name: "option ldap-check", in: backends, status: refused},
	{name: "option external-check", in: backends, status: refused},
	{name: "option log-health-checks", in: backends, status: approximated, doc: "Caddy logs each change of a server's health (up, down) in its own log, not each check's outcome as HAProxy does with it", backend: (*backend).readKeywordNote},
	{name: "option mysql-check", in: backends, status: refused},
	{name: "option persist", in: backends, status: refused},
	{name: "option pgsql-check", in: backends, status: refused},
	{name: "option prefer-last-server", in: backends, status: refused},
	{name: "option redis-check", in: backends, status: refused},
	{name: "option smtpchk", in: backends, status: refused},
	{name: "option spop-check", in: backends, status: refused},
	{name: "option srvtcpka", in: backends, status: refused},
	{name: "option ssl-hello-chk", in: backends, status: refused},
	{name: "option tcp-check", in: backends, status: refused},
	{name: "option tcp-smart-connect", in: backends, status: refused},
	{name: "option transparent", in: backends, status: refused},
	{name: "external-check command", in: backends, status: refused},
	{name: "external-check path", in: backends, status: refused},
	{name: "persist rdp-cookie", in: backends, status: refused},
	{name: "retry-on", in: backends, status: refused},
	{name: "server-state-file-name", in: backends, status: ignored, doc: "the file of load-server-state-from-file local (see it)", backend: (*backend).readServerState},
	{name: "server-template", in: inListen | inBackend, status: translated, doc: "with `resolvers`: `dynamic checked { resolve <fqdn>:<port> <count> }` (an SRV name `_service._proto.name` without port), up to <count> servers from the name's addresses, each checked (see Resolvers)", backend: (*backend).readServerTemplate},
	{name: "source", in: backends, status: refused},
	{name: "srvtcpka-cnt", in: backends, status: refused},
	{name: "srvtcpka-idle", in: backends, status: refused},
	{name: "srvtcpka-intvl", in: backends, status: refused},
	{name: "stick match", in: inListen | inBackend, status: approximated, doc: "`req.cook(<name>)` with `stick store-response res.cook(<name>)`: see `stick store-response`", backend: (*backend).readStick},
	{name: "stick on", in: inListen | inBackend, status: approximated, doc: "`src` with a table of type ip or ipv6: `lb_policy ip_hash` in place of the balance (Caddy hashes the client's address, HAProxy balances a client's first request and remembers its server until the entry expires); `req.cook(<name>)`: see `stick store-response`", backend: (*backend).readStick},
	{name: "stick store-request", in: inListen | inBackend, status: approximated, doc: "`req.cook(<name>)` with `stick store-response res.cook(<name>)`: see `stick store-response`", backend: (*backend).readStick},
	{name: "stick store-response", in: inListen | inBackend, status: approximated, doc: "`res.cook(<name>)` with `stick on` or `stick match req.cook(<name>)` (the server's session cookie learned into a string table, 1.x's appsession): `lb_policy cookie <name>_SERVER`, a cookie of Caddy's own naming the server by a hash of its address, set on the first answer, the server's cookie passing unchanged; other samples, a table of another proxy and conditions are refused", backend: (*backend).readStick},
	{name: "tcp-check", in: backends, status: refused},
	{name: "tcp-response content", in: backends, rules: true, status: refused},
	{name: "tcp-response inspect-delay", in: backends, rules: true, status: refused},
	{name: "transparent", in: backends, status: refused},
	{name: "use-fcgi-app", in: inListen | inBackend, status: approximated, doc: "the `reverse_proxy`'s `transport fastcgi`, as the fcgi-app says (see it); its servers must have `proto fcgi`. " + fcgiParamsDiffer, backend: (*backend).readUseFcgiApp},
	{name: "use-server", in: inListen | inBackend, status: refused},
}

// resolversKeywords are a resolvers section's.
var resolversKeywords = []keyword{
	{name: "nameserver", in: inResolvers, status: translated, doc: "`dynamic checked { resolvers <ip:port> }`: asked in turn until one answers (HAProxy asks all and takes the first valid answer); an address by name, `tcp@` are refused", resolvers: (*resolvers).readNameserver},
	{name: "parse-resolv-conf", in: inResolvers, status: translated, doc: "the system's resolver (dynamic checked without `resolvers`: Go's reads /etc/resolv.conf, and /etc/hosts first, which HAProxy's resolvers do not read)", resolvers: (*resolvers).readParseResolvConf},
	{name: "hold valid", in: inResolvers, status: translated, doc: "`refresh`: the names resolved again that often (10s by default, as HAProxy's)", resolvers: (*resolvers).readHold},
	{name: "hold nx", in: inResolvers, status: approximated, doc: "a name that no longer exists (or no longer has a server's record) loses its servers at the next refresh, where HAProxy keeps them this long", resolvers: (*resolvers).readHold},
	{name: "hold obsolete", in: inResolvers, status: approximated, doc: "a server whose record is gone from an answer is dropped at once, where HAProxy keeps it this long", resolvers: (*resolvers).readHold},
	{name: "hold other", in: inResolvers, status: ignored, doc: holdFailed, resolvers: (*resolvers).readHold},
	{name: "hold refused", in: inResolvers, status: ignored, doc: holdFailed, resolvers: (*resolvers).readHold},
	{name: "hold timeout", in: inResolvers, status: ignored, doc: holdFailed, resolvers: (*resolvers).readHold},
	{name: "timeout resolve", in: inResolvers, status: translated, doc: "`resolve_timeout`: the bound of one name's lookup by one DNS server", resolvers: (*resolvers).readTimeout},
	{name: "timeout retry", in: inResolvers, status: ignored, doc: "Go's resolver retries a query itself within resolve_timeout", resolvers: (*resolvers).readTimeout},
	{name: "resolve_retries", in: inResolvers, status: ignored, doc: "Go's resolver retries a query itself within resolve_timeout", resolvers: (*resolvers).readIgnored},
	{name: "accepted_payload_size", in: inResolvers, status: ignored, doc: "Go's resolver asks over TCP when an answer is too long for UDP, so that no record is lost", resolvers: (*resolvers).readIgnored},
}

const holdFailed = "a lookup that fails keeps the servers of the last answer until one answers (HAProxy keeps them this long, then takes them down)"

// cacheKeywords are a cache section's: the settings of a cache that is not
// there (see cache.go).
var cacheKeywords = []keyword{
	{name: "total-max-size", in: inCache, status: ignored, doc: "the cache's size: nothing is cached"},
	{name: "max-object-size", in: inCache, status: ignored, doc: "the largest answer cached: nothing is cached"},
	{name: "max-age", in: inCache, status: ignored, doc: "how long a copy is answered: nothing is cached"},
	{name: "process-vary", in: inCache, status: ignored, doc: "answers with Vary cached: nothing is cached"},
	{name: "max-secondary-entries", in: inCache, status: ignored, doc: "copies per URL with Vary: nothing is cached"},
}

// fcgiAppKeywords are a fcgi-app section's (see fcgi.go).
var fcgiAppKeywords = []keyword{
	{name: "docroot", in: inFcgiApp, status: translated, doc: "the transport's `root` (absolute and clean: Caddy would make it so)", fcgiApp: (*fcgiApp).readDocroot},
	{name: "index", in: inFcgiApp, status: translated, doc: "`uri path_regexp /$ /<index>` of a path ending in `/` (that path-info's expression does not match), before the `reverse_proxy`: the script name HAProxy appends the index to; REQUEST_URI stays the client's", fcgiApp: (*fcgiApp).readIndex},
	{name: "path-info", in: inFcgiApp, status: approximated, doc: "`^(/.+\\.php)(/.*)?$` and its like (a script name ending in `.<ext>`, then `/…`): the transport's `split .<ext>`; " + fcgiSplitDiffers + "; other expressions refused", fcgiApp: (*fcgiApp).readPathInfo},
	{name: "log-stderr", in: inFcgiApp, status: translated, doc: "`global`: the transport's `capture_stderr`, the app's stderr in Caddy's log (which the global `log` lines write); another target refused", fcgiApp: (*fcgiApp).readLogStderr},
	{name: "set-param", in: inFcgiApp, status: translated, doc: "the transport's `env <name> <value>`, the value's log-format samples as Caddy's placeholders (see Log-format samples); with a condition refused", fcgiApp: (*fcgiApp).readSetParam},
	{name: "pass-header", in: inFcgiApp, status: translated, doc: "`Authorization`: HTTP_AUTHORIZATION passed (without it, `header_up -Authorization`: HAProxy leaves it out); another header: nothing, Caddy passes every header as an HTTP_ param; Proxy-Authorization and the hop-by-hop headers (which Caddy never passes) and a condition refused", fcgiApp: (*fcgiApp).readPassHeader},
	{name: "option keep-conn", in: inFcgiApp, status: ignored, doc: "HAProxy asks the app to keep the connection for the next request; Caddy's transport fastcgi opens one per request: the params of each are the same", fcgiApp: (*fcgiApp).readIgnored},
	{name: "option get-values", in: inFcgiApp, status: ignored, doc: "HAProxy asks the app how many connections and requests it takes; Caddy's transport sends one request per connection", fcgiApp: (*fcgiApp).readIgnored},
	{name: "option mpxs-conns", in: inFcgiApp, status: ignored, doc: "HAProxy multiplexes requests on a connection; Caddy's transport sends one request per connection", fcgiApp: (*fcgiApp).readIgnored},
	{name: "option max-reqs", in: inFcgiApp, status: ignored, doc: "the requests HAProxy multiplexes on a connection; Caddy's transport sends one per connection", fcgiApp: (*fcgiApp).readIgnored},
}

// matrixOnly are the HAProxy 1.x keywords, which HAProxy 2.1 removed
// (2.6 refuses them): those read as their 2.x replacements (see
// modernized) and those refused.
var matrixOnly = []keyword{
	{name: "block", in: proxies, status: approximated, doc: "`block if|unless <condition>` read as `http-request deny if|unless <condition>`, which replaced it with the same syntax (a warning)"},
	{name: "reqsetbe", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `use_backend <backend> if <ACL>` (a `path_reg`, `hdr_reg` or `method` ACL of what the expression matched in the request line)"},
	{name: "reqisetbe", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `use_backend <backend> if <ACL>` (a `path_reg -i`, `hdr_reg -i` or `method` ACL of what the expression matched in the request line)"},
	{name: "reqdeny", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-request deny if <ACL>` (a `path_reg`, `hdr_reg` or `method` ACL of what the expression matched)"},
	{name: "reqideny", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-request deny if <ACL>` (with `-i`)"},
	{name: "reqallow", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-request allow if <ACL>`"},
	{name: "reqiallow", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-request allow if <ACL>` (with `-i`)"},
	{name: "reqtarpit", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-request tarpit if <ACL>`"},
	{name: "reqitarpit", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-request tarpit if <ACL>` (with `-i`)"},
	{name: "rspdeny", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-response deny if <ACL>`"},
	{name: "rspideny", in: proxies, status: refused, doc: "removed in HAProxy 2.1: write `http-response deny if <ACL>` (with `-i`)"},
	{name: "contimeout", in: proxies, status: approximated, doc: "read as `timeout connect`, which replaced it (a warning)"},
	{name: "clitimeout", in: proxies, status: approximated, doc: "read as `timeout client`, which replaced it (a warning)"},
	{name: "srvtimeout", in: proxies, status: approximated, doc: "read as `timeout server`, which replaced it (a warning)"},
	{name: "reqadd", in: proxies, status: approximated, doc: "`<name>: <value>` read as `http-request add-header`, which replaced it (a warning)"},
	{name: "rspadd", in: proxies, status: approximated, doc: "`<name>: <value>` read as `http-response add-header`, which replaced it (a warning)"},
	{name: "reqdel", in: proxies, status: approximated, doc: "`^<name>:` (one whole header) read as `http-request del-header`, which replaced it (a warning); other expressions refused"},
	{name: "reqidel", in: proxies, status: approximated, doc: "`^<name>:` read as `http-request del-header` (a warning); other expressions refused"},
	{name: "rspdel", in: proxies, status: approximated, doc: "`^<name>:` read as `http-response del-header` (a warning); other expressions refused"},
	{name: "rspidel", in: proxies, status: approximated, doc: "`^<name>:` read as `http-response del-header` (a warning); other expressions refused"},
	{name: "reqrep", in: proxies, status: approximated, doc: "`^<name>:\\ <regex> <name>:\\ <format>` (a header's lines) read as `http-request replace-header <name> ^<regex> <format>`, which replaced it (a warning); `^([^\\ :]*)\\ <regex>[\\ HTTP] \\1\\ <format>[\\ HTTP] [<condition>]` (the request line; `[^\\ ]*`, `+` too) as `http-request replace-uri ^<regex> <format>`, its groups one less (a warning; see replace-uri); another expression (a header renamed, another request line's) refused: write http-request replace-path, replace-uri or replace-header"},
	{name: "reqirep", in: proxies, status: approximated, doc: "`^<name>:\\ <regex> <name>:\\ <format>` (a header's lines) read as `http-request replace-header <name> ^<regex> <format>` (the expression without case), which replaced it (a warning); `^([^\\ :]*)\\ <regex>[\\ HTTP] \\1\\ <format>[\\ HTTP] [<condition>]` (the request line; `[^\\ ]*`, `+` too) as `http-request replace-uri ^<regex> <format>`, its groups one less (a warning; see replace-uri); another expression (a header renamed, another request line's) refused: write http-request replace-path, replace-uri or replace-header"},
	{name: "rsprep", in: proxies, status: approximated, doc: "`^<name>:\\ <regex> <name>:\\ <format>` (a header's lines) read as `http-response replace-header <name> ^<regex> <format>`, which replaced it (a warning); another expression (a request line's, a header renamed) refused: write http-response replace-header"},
	{name: "rspirep", in: proxies, status: approximated, doc: "`^<name>:\\ <regex> <name>:\\ <format>` (a header's lines) read as `http-response replace-header <name> ^<regex> <format>` (the expression without case), which replaced it (a warning); another expression (a request line's, a header renamed) refused: write http-response replace-header"},
}

// action is an entry of the registry of http-request actions.
type action struct {
	name        string
	status      status
	doc         string
	conditional bool // it takes an if or unless condition
	// parenthesized: the action is written name(<arguments>), as
	// set-var(<var>); another is written bare.
	parenthesized bool
	read          func(fe *frontend, l Line, args []string, cond *Condition) error

	// read is nil for a backend's action only; backend reads it in a
	// backend (nil: a frontend's only).
	backend func(be *backend, l Line, args []string, cond *Condition) error
}

var requestActions = indexActions([]action{
	{name: "set-header", status: translated, conditional: true, doc: "`request_header [@matcher] <name> <value>`, the value's log-format samples as Caddy's placeholders (see Log-format samples); the forwarded handler's proto for X-Forwarded-Proto http or https without a condition with option forwardfor; in a backend, in its route before its reverse_proxy", read: (*frontend).readRequestHeader, backend: (*backend).readRequestHeader},
	{name: "add-header", status: translated, conditional: true, doc: "`request_header [@matcher] +<name> <value>`, as set-header; in a backend, in its route before its reverse_proxy", read: (*frontend).readRequestHeader, backend: (*backend).readRequestHeader},
	{name: "del-header", status: translated, conditional: true, doc: "`request_header [@matcher] -<name>` (without a condition, the forwarded handler for the forwarded headers with option forwardfor); in a backend, in its route before its reverse_proxy", read: (*frontend).readRequestHeader, backend: (*backend).readRequestHeader},
	{name: "deny", status: translated, conditional: true, doc: "alone or with `deny_status` alone, `error <status>` (403 by default), answered by an errorfile's `handle_errors` (HAProxy's default-errorfiles); with other options (`status`, `content-type`, `string`, `lf-string`, `file`, `errorfile`, `hdr`), the answer HAProxy builds, as return's (403 by default); over `sc_http_req_rate` or `sc_conn_rate`, `edge_rate_limit` (a frontend's); over `sc_conn_cur`, `in_flight` and its count's matcher (a frontend's); `errorfiles`, `lf-file` and `default-errorfiles` refused", read: (*frontend).readAnswer, backend: (*backend).readAnswer},
	{name: "return", status: translated, conditional: true, doc: "`respond` with `status`, `content-type` and `string`, `lf-string` (a log-format string) or `file` (read when adapting, through the same seam as errorfiles, at most 64 KiB; an empty one sends no content-type, as in HAProxy), each `hdr <name> <fmt>` a `header +<name>` (added, a name twice too); `errorfile <file>` (a whole HTTP response, read likewise) sent as it is: its status, headers and body, status and hdr ignored as HAProxy ignores them; `errorfiles`, `lf-file` and `default-errorfiles` refused", read: (*frontend).readAnswer, backend: (*backend).readAnswer},
	{name: "redirect", status: translated, conditional: true, doc: "`redir` (see redirect), its target a log-format string", read: (*frontend).readAnswer, backend: (*backend).readAnswer},
	{name: "replace-header", status: translated, conditional: true, doc: "`request_header [@matcher] <name> <find> <replace>`, as http-response replace-header (see it); of Host and the forwarding headers refused; in a backend, in its route before its reverse_proxy", read: (*frontend).readRequestHeader, backend: (*backend).readRequestHeader},
	{name: "replace-value", status: refused, conditional: true, doc: replaceValueRefusal, read: (*frontend).readRequestHeader, backend: (*backend).readRequestHeader},
	{name: "set-path", status: translated, conditional: true, doc: "`uri path_regexp ^(.*)$ <path>` (the query kept): text (a backslash in it text, as HAProxy sends it, and so refused with the bytes Go sends escaped), `<text>%[path]<text>`, or `%[path,regsub(<regex>,<subst>[,i])]` alone (the path around the expression's first match kept as groups of their own, `\\N` of subst `${N+2}`; `i` as `(?i:…)`; `g` as the expression alone, every match replaced, where it cannot match empty nor holds `\\A`, `\\b`, `\\B`; arguments unquoted or in single quotes); other flags, samples and converters refused; in a frontend, in the order written with the rules that answer, after the header rules (a header rule after it that has a condition or a sample, or after one with a condition, refused); in a backend, in its route before its reverse_proxy", read: (*frontend).readPathRewrite, backend: (*backend).readPathRewrite},
	{name: "replace-path", status: translated, conditional: true, doc: "`uri path_regexp` of the whole path around the expression's leftmost match (HAProxy replaces the whole path with the format), the expression a group of its own, so that `\\N` is `${N+1}` (`\\0` its match, as in HAProxy; a group the expression lacks empty); an expression RE2 cannot compile or reads otherwise than PCRE, `%[…]`, and a byte Go would send escaped where HAProxy sends it as it is (a space, `?`, `#`, `\"`, `\\`, a brace, …) refused; where it runs as set-path's", read: (*frontend).readPathRewrite, backend: (*backend).readPathRewrite},
	{name: "set-uri", status: approximated, conditional: true, doc: "`%[url,regsub(^<regex>,<subst>[,i])]` alone, where the expression cannot match past the path (no `?`, `.`, `$` or `\\b`), as set-path's regsub of the path (the query kept), a warning: a request in absolute form (`GET http://host/…`) begins with its scheme, which HAProxy's expression does not match; text alone, a path (`/…`, of letters, digits and `-_.~$&+,/:;=@`, which Go sends as they are) with or without a query, as `rewrite <path>?<query>` (none: the request's dropped, as HAProxy drops it); another format refused", read: (*frontend).readPathRewrite, backend: (*backend).readPathRewrite},
	{name: "replace-uri", status: approximated, conditional: true, doc: "`^<prefix>(.*)` with a format ending in that last group (the rest of the URI), where the prefix cannot match past the path (as set-uri's), as replace-path of the path (the query kept), a warning as set-uri's; the 1.x `reqrep ^([^\\ :]*)\\ <regex> \\1\\ <format>` of the request line is read as it; another form refused", read: (*frontend).readPathRewrite, backend: (*backend).readPathRewrite},
	{name: "set-query", status: translated, conditional: true, doc: "text alone: `rewrite ?<query>` (the path kept); an empty query (HAProxy keeps the `?`), a sample, and `#`, braces, spaces or bytes Go escapes, refused; where it runs as set-path's", read: (*frontend).readPathRewrite, backend: (*backend).readPathRewrite},
	{name: "auth", status: translated, conditional: true, doc: "`unless <ACL of http_auth(<userlist>)>` (or `if !<it>`): `basic_auth` with the userlist's accounts and the realm (the proxy's name by default); 401 answered with HAProxy's own page; in a backend, in its route before its reverse_proxy", read: (*frontend).readAuth, backend: (*backend).readAuth},
	{name: "track-sc0", status: translated, conditional: true, doc: "`src`, or of a string table `req.hdr(<name>)` or `req.hdr(<name>,-1)` (both the header's last value, `{haproxy.hdr.<name>}`) or `req.cook(<name>)`: the key of `edge_rate_limit`, its condition the zone's `match`; `src` of a table with `conn_cur`, without a condition: what `in_flight` counts (see Rate limits)", read: (*frontend).readTrack},
	{name: "track-sc1", status: translated, conditional: true, doc: "as `track-sc0`, of counter 1", read: (*frontend).readTrack},
	{name: "track-sc2", status: translated, conditional: true, doc: "as `track-sc0`, of counter 2", read: (*frontend).readTrack},
	{name: "cache-use", status: ignored, conditional: true, doc: "nothing: the cache is not there (see `cache`), so every request goes on to its server", read: (*frontend).readCacheUse, backend: (*backend).readCacheUse},
	{name: "set-var", status: translated, parenthesized: true, doc: "`set-var(txn.<name>)` or `req.`, in a frontend, of `hdr(<name>)`/`req.hdr(<name>)` (the last value), `path`, `url`, `query`, `method` or `ssl_fc_sni`, with the converters `lower`, `upper` and `field(<n>,<c>)`, or of a constant, `int(<n>)`, `str(<s>)` or `bool(<b>)`: each ACL of `var(<name>) -m <method>` tests that sample itself (nothing is stored), and a rate limit's `sc_http_req_rate(<n>),sub(<name>)` of an `int` reads its value; refused where a header rule changes the header after the set-var, where an http-request rule before the set-var tests it, and for a variable set twice", read: (*frontend).readSetVar},
	{name: "capture", status: ignored, conditional: true, doc: "a sample kept for the request's log line: Caddy's access log holds the request's headers", read: (*frontend).readLogOnly, backend: (*backend).readLogOnly},
	{name: "set-log-level", status: approximated, conditional: true, doc: "`silent` in a frontend: `log_skip` with the condition's matcher (approximated after rules that answer: log_skip skips their requests too, which HAProxy logs); another level, or in a backend: Caddy logs the access line at its own level (error for a 5xx answer, else info)", read: (*frontend).readLogOnly, backend: (*backend).readLogOnly},
})

// requestAction is the http-request action of the rule l (set-var of
// set-var(<name>)), nil for one the registry has not.
func requestAction(l Line) *action {
	name, _, parenthesized := strings.Cut(arg(l, 1), "(")
	if a := requestActions[name]; a != nil && a.parenthesized == parenthesized {
		return a
	}
	return nil
}

func indexActions(table []action) map[string]*action {
	m := make(map[string]*action, len(table))
	for i := range table {
		m[table[i].name] = &table[i]
	}
	return m
}

// actionsTable is docs/haproxy.md's table of the http-request actions.
func actionsTable(m map[string]*action) string {
	var b strings.Builder
	b.WriteString("| action | status | with a condition | becomes, or why |\n|---|---|---|---|\n")
	for _, name := range slices.Sorted(maps.Keys(m)) {
		a := m[name]
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, a.status, map[bool]string{true: "yes", false: "refused"}[a.conditional], strings.ReplaceAll(a.doc, "|", `\|`))
	}
	return b.String()
}
