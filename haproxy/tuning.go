package haproxy

import (
	"net/http"
	"strconv"
)

// Settings of HAProxy's own workings that a request does not see, or
// sees only at a limit: each is a note of its line, ignored where Caddy
// has nothing that differs, approximated (a Warning) where it does.

// maxRewrite is HAProxy's tune.maxrewrite for a buffer of 16 KiB or
// more: the part of the buffer kept for rewriting headers, so that a
// request's line and headers must fit in the rest.
const maxRewrite = 1024

// readTuneBufsize reads tune.bufsize <bytes>: the body option
// http-buffer-request reads, and HAProxy's bound of a request's headers.
func readTuneBufsize(g *global, l Line) error {
	n, err := strconv.Atoi(arg(l, 1))
	if len(l.Words) != 2 || err != nil || n < 2*maxRewrite || n > 1<<30 {
		return refuse(l, "takes a size in bytes from %d (twice tune.maxrewrite, which is not translated)", 2*maxRewrite)
	}
	g.bufsize = n
	g.notes = append(g.notes, note{line: l, approximated: true,
		what: "the body option http-buffer-request reads before a request goes to a server (request_buffers " + strconv.Itoa(n) + "); HAProxy answers 400 to a request whose line and headers take more than about " +
			strconv.Itoa(n-maxRewrite) + " bytes (this less tune.maxrewrite), where Caddy takes them up to its max_header_size, " +
			strconv.Itoa(http.DefaultMaxHeaderBytes>>20) + " MiB by default (Go's, which answers 431 over it)"})
	return nil
}

// requestBuffers is the size of request_buffers: HAProxy's buffer.
func (g *global) requestBuffers() string {
	if g == nil || g.bufsize == 0 {
		return "16KiB" // HAProxy's default tune.bufsize
	}
	return strconv.Itoa(g.bufsize)
}

// timeoutNote is the note of a timeout line that is ignored (its entry's
// why), once its time is read.
func timeoutNote(l Line) (note, error) {
	if len(l.Words) != 3 {
		return note{}, refuse(l, "takes a name and a duration")
	}
	if _, err := duration(l.Words[2], l.Pos); err != nil {
		return note{}, err
	}
	return note{line: l, what: "ignored: " + keywordAt(l).doc}, nil
}

func (fe *frontend) readIgnoredTimeout(l Line) error {
	n, err := timeoutNote(l)
	fe.notes = append(fe.notes, n)
	return err
}

func (be *backend) readIgnoredTimeout(l Line) error {
	n, err := timeoutNote(l)
	be.notes = append(be.notes, n)
	return err
}

// serverStateNote is what becomes of load-server-state-from-file.
const serverStateNote = "Caddy keeps no server state across a reload or restart: a server HAProxy reads as down or in maintenance from the file is in rotation until Caddy's checks find it down (a server set to maintenance through the runtime API is in rotation again)"

// readServerState reads load-server-state-from-file global|local|none
// and server-state-file-name [<file>|use-backend-name].
func (be *backend) readServerState(l Line) error {
	if l.Words[0] == "server-state-file-name" {
		if len(l.Words) > 2 {
			return refuse(l, "takes at most a file name")
		}
		be.notes = append(be.notes, note{line: l, what: "ignored: the file of load-server-state-from-file local (see it)"})
		return nil
	}
	if len(l.Words) != 2 || arg(l, 1) != "global" && arg(l, 1) != "local" && arg(l, 1) != "none" {
		return refuse(l, "takes global, local or none")
	}
	n := note{line: l, what: serverStateNote, approximated: true}
	if arg(l, 1) == "none" {
		n = note{line: l, what: "ignored: HAProxy loads no server state"}
	}
	be.notes = append(be.notes, n)
	return nil
}
