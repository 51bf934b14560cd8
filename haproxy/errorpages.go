package haproxy

import (
	"slices"
	"strconv"
)

// HAProxy's own answers: the page it sends for a status it answers itself
// (a deny, no server to send to) where no errorfile gives one, as HAProxy
// 2.6 sends it: an HTML body of the status line and a sentence, with
// Content-Type text/html and Cache-Control no-cache. deny_status takes
// these statuses only.

// haproxyPage is the reason phrase and the sentence of a status's page.
type haproxyPage struct{ reason, sentence string }

var haproxyPages = map[string]haproxyPage{
	"400": {"Bad request", "Your browser sent an invalid request."},
	"401": {"Unauthorized", "You need a valid user and password to access this content."},
	"403": {"Forbidden", "Request forbidden by administrative rules."},
	"404": {"Not Found", "The resource could not be found."},
	"405": {"Method Not Allowed", "A request was made of a resource using a request method not supported by that resource"},
	"407": {"Unauthorized", "You need a valid user and password to access this content."},
	"408": {"Request Time-out", "Your browser didn't send a complete request in time."},
	"410": {"Gone", "The resource is no longer available and will not be available again."},
	"413": {"Payload Too Large", "The request entity exceeds the maximum allowed."},
	"425": {"Too Early", "Your browser sent early data."},
	"429": {"Too Many Requests", "You have sent too many requests in a given amount of time."},
	"500": {"Internal Server Error", "An internal server error occurred."},
	"501": {"Not Implemented", ".The server does not support the functionality required to fulfill the request."},
	"502": {"Bad Gateway", "The server returned an invalid or incomplete response."},
	"503": {"Service Unavailable", "No server is available to handle this request."},
	"504": {"Gateway Time-out", "The server didn't respond in time."},
}

// monitorPage is HAProxy's answer at its monitor-uri.
const monitorPage = "<html><body><h1>200 OK</h1>\nService ready.\n</body></html>\n"

// body is the page's HTML, as HAProxy writes it.
func (p haproxyPage) body(status string) string {
	return "<html><body><h1>" + status + " " + p.reason + "</h1>\n" + p.sentence + "\n</body></html>\n"
}

// checkPageStatus refuses a status HAProxy has no page of its own for.
func checkPageStatus(status string, l Line) error {
	if n, err := strconv.Atoi(status); err != nil || n < 400 {
		return refuse(l, "status %s: want 400 to 599", status)
	}
	if _, ok := haproxyPages[status]; !ok {
		return refuse(l, "status %s: HAProxy answers only the statuses it has a page for (400, 401, 403, 404, 405, 407, 408, 410, 413, 425, 429, 500, 501, 502, 503, 504), and refuses this one", status)
	}
	return nil
}

// hasOwnPage tells whether HAProxy answers with its own page (a deny's
// status, http-request auth's 401), unless an errorfile's.
func (a answer) hasOwnPage() bool {
	return a.kind == errorAnswer || a.kind == authAnswer
}

// resolvePages settles which statuses the site answers with HAProxy's own
// page: those its deny rules answer, and 503 where no default_backend
// takes what no rule does, but for an errorfile's.
func (fe *frontend) resolvePages() {
	statuses := map[string]bool{}
	for _, a := range fe.answers {
		if a.answer.hasOwnPage() {
			statuses[a.answer.status] = true
		}
	}
	for _, be := range fe.backends() {
		if len(be.servers) == 0 {
			statuses["503"] = true
		}
		for _, r := range be.requestRules {
			if r.answer != nil && r.answer.hasOwnPage() {
				statuses[r.answer.status] = true
			}
		}
	}
	if fe.backend == nil || fe.monitorURI != nil && len(fe.monitorFails) > 0 {
		statuses["503"] = true
	}
	for status := range statuses {
		if _, ok := fe.errorPages[status]; !ok {
			fe.ownPages = append(fe.ownPages, status)
		}
	}
	slices.Sort(fe.ownPages)
}
