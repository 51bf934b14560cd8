package haproxy

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// HAProxy logs to syslog: the global section's log lines name where its
// own messages go, and a proxy with "log global" sends its traffic logs
// there too (option httplog makes them a line per HTTP request). Caddy's
// counterpart is its logging: each global log line becomes a Caddy logger
// writing there (the first Caddy's default logger), and a frontend with
// log global a site with the log directive, whose access log those loggers
// receive. The messages are Caddy's (JSON), in HAProxy's syslog header
// (the syslog encoder of caddy-ha) so that syslog files them as before.

// logTarget is a global log line as Caddy's logger writes it.
type logTarget struct {
	line     Line
	output   string // "stdout", "stderr", "net <address>"
	format   string // "syslog", "journald" (HAProxy's short), "" (raw)
	facility string
	level    string // Caddy's minimum level, "" for every message
	notes    []string
}

// syslogFacilities are HAProxy's 24 facilities, in syslog's order.
var syslogFacilities = []string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
	"ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}

// syslogLevels are Caddy's minimum levels for HAProxy's maximum levels:
// zap's info is syslog's info, warn its warning, error its err, panic its
// alert and fatal its emerg, so notice (between info and warning) takes
// warn and above. crit has no level of Caddy's to itself.
var syslogLevels = map[string]string{"emerg": "FATAL", "alert": "PANIC", "err": "ERROR", "warning": "WARN",
	"notice": "WARN", "info": "INFO", "debug": "DEBUG"}

// readLogTarget reads log <address> [len <n>] [format <f>] [sample <r>:<n>]
// <facility> [<level> [<minlevel>]].
func readLogTarget(l Line) (logTarget, error) {
	w := l.Words
	lt := logTarget{line: l, format: "syslog"}
	if len(w) < 3 {
		return lt, refuse(l, "takes an address and a facility")
	}
	var err error
	if lt.output, err = logOutput(w[1], l); err != nil {
		return lt, err
	}
	i, err := lt.readOptions(l)
	if err != nil {
		return lt, err
	}
	return lt, lt.readFacility(l, i)
}

// logTargetOptions are the options of a log line before its facility,
// each with its reader of the option's value.
var logTargetOptions = map[string]func(lt *logTarget, l Line, v string) error{
	"len":    (*logTarget).readLen,
	"format": (*logTarget).readFormat,
	"sample": func(_ *logTarget, l Line, _ string) error {
		return refuse(l, "sample is not translated (Caddy's sampling keeps the first entries of each interval, not ranges)")
	},
}

// readOptions reads the options after the address, and returns where the
// word after them (the facility) is.
func (lt *logTarget) readOptions(l Line) (int, error) {
	w := l.Words
	i := 2
	for ; i+1 < len(w); i += 2 {
		read, ok := logTargetOptions[w[i]]
		if !ok {
			break
		}
		if err := read(lt, l, w[i+1]); err != nil {
			return i, err
		}
	}
	return i, nil
}

func (lt *logTarget) readLen(l Line, v string) error {
	if n, err := strconv.Atoi(v); err != nil || n < 80 || n > 65535 {
		return refuse(l, "len %s: HAProxy takes 80 to 65535", v)
	}
	lt.notes = append(lt.notes, "Caddy writes each line whole, where HAProxy cuts it at len "+v)
	return nil
}

func (lt *logTarget) readFormat(l Line, v string) error {
	switch v {
	case "local":
	case "raw":
		lt.format = ""
	case "short":
		lt.format = "journald"
	default:
		return refuse(l, "format %s is not translated yet (local, short and raw are)", v)
	}
	return nil
}

// readFacility reads the facility, the word at i, and the level after it.
func (lt *logTarget) readFacility(l Line, i int) error {
	w := l.Words
	if i >= len(w) || !slices.Contains(syslogFacilities, w[i]) {
		return refuse(l, "%q is not a facility: want one of %s", arg(l, i), strings.Join(syslogFacilities, " "))
	}
	lt.facility = w[i]
	if lvl := arg(l, i+1); lvl != "" {
		if lt.level = syslogLevels[lvl]; lt.level == "" {
			if lvl == "crit" {
				return refuse(l, "level crit: Caddy has no level between error and panic")
			}
			return refuse(l, "level %q: want emerg, alert, err, warning, notice, info or debug", lvl)
		}
		lt.notes = append(lt.notes, "level "+lvl+": Caddy's entries of level "+lt.level+" and above (HAProxy logs traffic at info, Caddy the access line of a 5xx answer at error)")
	}
	if arg(l, i+2) != "" {
		return refuse(l, "a minimum level (%s) is not translated yet", arg(l, i+2))
	}
	if len(w) > i+3 {
		return refuse(l, "%q after the levels", w[i+3])
	}
	return nil
}

// logStreams are the log addresses of the standard streams, as Caddy's
// outputs.
var logStreams = map[string]string{"stdout": "stdout", "fd@1": "stdout", "stderr": "stderr", "fd@2": "stderr"}

// logOutput is Caddy's log output for an HAProxy log address: the standard
// streams, a Unix datagram socket (syslog's /dev/log), or UDP syslog.
func logOutput(a string, l Line) (string, error) {
	if out, ok := logStreams[a]; ok {
		return out, nil
	}
	if p, ok := strings.CutPrefix(a, "unix@"); ok || strings.HasPrefix(a, "/") {
		if !ok {
			p = a
		}
		if !strings.HasPrefix(p, "/") {
			return "", refuse(l, "%s: a relative socket path is not translated (Caddy's working directory is not HAProxy's)", a)
		}
		return "net unixgram/" + p, nil
	}
	return udpLogOutput(a, l)
}

// udpLogOutput is the output of a log address of UDP syslog: an IPv4
// address or a host name, with a port or syslog's.
func udpLogOutput(a string, l Line) (string, error) {
	host := a
	for _, prefix := range []string{"udp@", "udp4@", "ipv4@"} {
		host = strings.TrimPrefix(host, prefix)
	}
	if strings.Contains(host, "@") {
		return "", refuse(l, "%s: only a Unix datagram socket, UDP syslog, stdout and stderr are translated", a)
	}
	if strings.Count(host, ":") > 1 || strings.Contains(host, "[") {
		return "", refuse(l, "%s: an IPv6 syslog address is not translated yet", a)
	}
	port := "514" // syslog's
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = h, p
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" || strings.ContainsAny(host, "/\\") {
		return "", refuse(l, "%s: want host[:port] with a port from 1 to 65535", a)
	}
	return "net udp/" + net.JoinHostPort(host, port), nil
}

func (lt logTarget) describe(tag string) string {
	to := lt.output
	if p, ok := strings.CutPrefix(to, "net unixgram/"); ok {
		to = "the syslog socket " + p
	} else if a, ok := strings.CutPrefix(to, "net udp/"); ok {
		to = "syslog over UDP at " + a
	}
	switch lt.format {
	case "syslog":
		return to + ", as syslog messages of facility " + lt.facility + " and tag " + tag + " whose text is Caddy's JSON entry"
	case "journald":
		return to + ", each entry after its level in <> (HAProxy's short format)"
	}
	return to + ", each entry as it is (HAProxy's raw format)"
}

// isLogLine tells whether a proxy's line is one of the logging lines
// readLog takes.
func isLogLine(l Line) bool {
	switch w := l.Words; w[0] {
	case "log":
		return true
	case "no":
		return arg(l, 1) == "log" || arg(l, 1) == "option" && arg(l, 2) == "dontlognull"
	case "option":
		return arg(l, 1) == "httplog" || arg(l, 1) == "httpslog" || arg(l, 1) == "dontlognull"
	}
	return false
}

// proxyLog is what a proxy's logging lines asked for.
type proxyLog struct {
	lines     []Line
	logGlobal *Line // log global, unless a later no log cleared it
	httplog   *Line // option httplog or httpslog
	// own are the proxy's own log addresses (log <address> …), unless a
	// later no log cleared them: a frontend logs its traffic there too.
	own []logTarget
}

// read takes log global, no log, option httplog, option httpslog, option
// dontlognull and no option dontlognull; a log line with an address of
// the proxy's own is refused.
func (pl *proxyLog) read(l Line) error {
	var err error
	switch l.Words[0] {
	case "log":
		err = pl.readLog(l)
	case "no":
		err = pl.readNo(l)
	case "option":
		err = pl.readOption(l)
	}
	if err != nil {
		return err
	}
	pl.lines = append(pl.lines, l)
	return nil
}

// readLog takes log global, and a log address of the proxy's own, which
// HAProxy adds to those of log global.
func (pl *proxyLog) readLog(l Line) error {
	if len(l.Words) == 2 && l.Words[1] == "global" {
		pl.logGlobal = &l
		return nil
	}
	lt, err := readLogTarget(l)
	if err != nil {
		return err
	}
	pl.own = append(pl.own, lt)
	return nil
}

// readNo takes no log and no option dontlognull.
func (pl *proxyLog) readNo(l Line) error {
	switch len(l.Words) {
	case 2: // no log
		pl.logGlobal, pl.own = nil, nil
	case 3: // no option dontlognull
	default:
		return refuse(l, "takes no argument")
	}
	return nil
}

// readOption takes option httplog, httpslog and dontlognull.
func (pl *proxyLog) readOption(l Line) error {
	w := l.Words
	switch {
	case w[1] == "httplog" && len(w) == 3 && w[2] == "clf":
		return refuse(l, "clf: the Common Log Format is not translated (Caddy's access log is JSON)")
	case len(w) != 2:
		return refuse(l, "takes no argument")
	case w[1] == "httplog" || w[1] == "httpslog":
		pl.httplog = &l
	}
	return nil
}

// logs tells whether the proxy logs its traffic: log global, with a log
// line in the global section, or a log address of its own.
func (pl *proxyLog) logs(g *global) bool {
	return pl.logsGlobal(g) || len(pl.own) > 0
}

// logsGlobal tells whether the proxy logs its traffic to the global
// section's log lines.
func (pl *proxyLog) logsGlobal(g *global) bool {
	return pl.logGlobal != nil && g != nil && len(g.loggers) > 0
}

// ownAt is the proxy's own log address of the line at pos.
func (pl *proxyLog) ownAt(pos Position) (logTarget, bool) {
	for _, lt := range pl.own {
		if lt.line.Pos == pos {
			return lt, true
		}
	}
	return logTarget{}, false
}

// unlogged is what Caddy's access log has no line for.
const unlogged = "not logged: a connection that sends no request (as with option dontlognull), and a malformed request, which Go's server answers itself"

func (pl *proxyLog) note(l Line, g *global) string {
	logs := pl.logs(g)
	w := l.Words
	switch {
	case w[0] == "log" && len(w) > 2:
		return "no log clears it: HAProxy logs no traffic of this frontend there, nor does Caddy"
	case w[0] == "log" && pl.logGlobal == nil:
		return "no log clears it: HAProxy logs no traffic of this frontend, nor does Caddy"
	case w[0] == "log" && !pl.logsGlobal(g):
		return "the global section has no log line: HAProxy logs this frontend's traffic nowhere, nor does Caddy"
	case w[0] == "log" && pl.httplog == nil:
		return "Caddy's access log below, a line per request, where HAProxy without option httplog logs a line per connection with its addresses; " + unlogged
	case w[0] == "log":
		return "Caddy's access log below, a line per request; " + unlogged
	case w[0] == "no" && w[1] == "log":
		return "HAProxy logs no traffic of this frontend, nor does Caddy"
	case !logs:
		return "no log global here: HAProxy logs no traffic of this frontend, nor does Caddy"
	case w[1] == "httplog" || w[1] == "httpslog":
		return "Caddy's access log is JSON: the request (client address and port, protocol, method, host, URI, headers, TLS), status, size and duration; HAProxy's line also names the backend and server, with its timers and termination state"
	}
	// option dontlognull, no option dontlognull
	return "Caddy's access log has a line per request: a connection that sends none is never logged"
}

// backendNote is what a logging line becomes in a backend.
func (pl *proxyLog) backendNote(l Line) string {
	switch {
	case l.Words[0] == "option" || l.Words[0] == "no" && l.Words[1] == "option":
		return "a frontend's: see the site's log"
	case l.Words[0] == "no":
		return "Caddy's health checks log to Caddy's own log whatever a backend says"
	case len(l.Words) > 2:
		return "ignored: a backend's own log address gets what HAProxy logs of its servers (health, state), which Caddy logs to its own log (the global section's loggers); its traffic is logged by the frontend's"
	}
	return "Caddy's health checks log to Caddy's own log: the global section's loggers"
}

// Lines that change how HAProxy logs, not what a request gets: each is a
// note of its frontend (or backend), approximated where Caddy's log says
// otherwise.

// logFormatNote is what becomes of log-format: Caddy's access log keeps
// its own fields.
const logFormatNote = "Caddy's access log is its JSON entry (the request: client address and port, protocol, method, host, URI, headers, TLS; status, size, duration), not a line laid out by this format"

// readLogFormat reads log-format <format>.
func (fe *frontend) readLogFormat(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes one format (quote it, or escape its spaces)")
	}
	fe.notes = append(fe.notes, note{line: l, what: logFormatNote, approximated: true})
	return nil
}

// uniqueIDNote is what becomes of unique-id-header: Caddy's request
// UUID in its place.
const uniqueIDNote = "header_up +%s {http.request.uuid} in each reverse_proxy: a random UUID, where HAProxy sends the ID its unique-id-format makes"

// readUniqueID reads unique-id-format <format> and unique-id-header
// <name>: HAProxy adds the ID to each request it sends to a server under
// that name (once both are set).
func (fe *frontend) readUniqueID(l Line) error {
	if len(l.Words) != 2 {
		return refuse(l, "takes one argument")
	}
	if l.Words[0] == "unique-id-format" {
		fe.uniqueID.format = &l
	} else {
		fe.uniqueID.header = &l
	}
	return nil
}

// uniqueID is what unique-id-format and unique-id-header asked for.
type uniqueID struct{ format, header *Line }

// sentHeader is the header the ID is sent in: none without a format.
func (u uniqueID) sentHeader() string {
	if u.format == nil || u.header == nil || u.format.Words[1] == "" {
		return ""
	}
	return u.header.Words[1]
}

// notes are what became of the lines.
func (u uniqueID) notes() []note {
	var out []note
	if u.format != nil {
		out = append(out, note{line: *u.format, approximated: true,
			what: "Caddy's ID of a request is {http.request.uuid}, a random UUID, not an ID of this format (in the access log too)"})
	}
	switch h := u.sentHeader(); {
	case h != "":
		out = append(out, note{line: *u.header, approximated: true, what: fmt.Sprintf(uniqueIDNote, h)})
	case u.header != nil:
		out = append(out, note{line: *u.header, what: "ignored: without unique-id-format HAProxy sends no ID"})
	}
	return out
}

// readLogOnly reads an http-request action that changes the log line of
// a request only (capture, set-log-level).
func readLogOnly(l Line, args []string) (note, error) {
	if arg(l, 1) == "capture" {
		if len(args) != 3 || args[1] != "len" && args[1] != "id" {
			return note{}, refuse(l, "takes <sample> len <length> or <sample> id <slot>")
		}
		return note{line: l, what: "ignored: a sample kept for the request's log line (%hr): Caddy's access log holds the request's headers"}, nil
	}
	if len(args) != 1 || !slices.Contains([]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "silent"}, args[0]) {
		return note{}, refuse(l, "takes a syslog level or silent")
	}
	at := "logs them at " + args[0]
	if args[0] == "silent" {
		at = "logs none of them"
	}
	return note{line: l, approximated: true, what: "Caddy logs these requests' access lines as any other's (at error for a 5xx answer, else at info), where HAProxy " + at}, nil
}

// readLogOnly reads capture and set-log-level in a frontend: silent
// there is Caddy's log_skip, with the rule's condition (logSkip).
func (fe *frontend) readLogOnly(l Line, args []string, cond *Condition) error {
	n, err := readLogOnly(l, args)
	if err == nil && arg(l, 1) == "set-log-level" && args[0] == "silent" {
		fe.logSkips = append(fe.logSkips, logSkip{line: l, cond: cond, afterAnswers: len(fe.answers) > 0})
		return nil
	}
	fe.notes = append(fe.notes, n)
	return err
}

// logSkip is http-request set-log-level silent in a frontend: Caddy's
// log_skip, when its condition (nil: always) holds.
type logSkip struct {
	line Line
	cond *Condition
	when matcher
	// afterAnswers: rules that answer come before it, whose requests
	// HAProxy logs (it never reaches this rule for them), where
	// log_skip, which runs first, skips them too.
	afterAnswers bool
}

// note is what the rule becomes.
func (s logSkip) note() note {
	what := "log_skip: Caddy writes no access line of these requests, as HAProxy logs none"
	if s.afterAnswers {
		return note{line: s.line, approximated: true, what: what + "; but a request a rule above answers (deny, return, redirect), which HAProxy logs, is not logged either (log_skip runs before them)"}
	}
	return note{line: s.line, what: what}
}

func (be *backend) readLogOnly(l Line, args []string, _ *Condition) error {
	n, err := readLogOnly(l, args)
	be.notes = append(be.notes, n)
	return err
}
