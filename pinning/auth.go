// Package pinning gives each client connection that sends connection-based
// credentials (NTLM, Negotiate, Kerberos) an upstream connection of its
// own, as HAProxy's http-reuse never does, so that such authentication
// never serves one user on another's authenticated connection. Client
// connections that never sent such credentials share upstream connections
// that never carried any, as the stock transport shares them: pins, a
// bounded resource, go only to connections that need them.
//
// NTLM and Negotiate authenticate a TCP connection, not a request: the
// upstream keeps the connection authenticated once a handshake completed on
// it, and later requests on it carry no credentials. A pooled upstream
// connection handed to another client therefore serves that client as the
// first one. A pin binds one client connection to one upstream connection
// at a time. Once the pin has seen connection-based authentication it is
// locked: that upstream connection is never replaced. If it is lost, the
// client connection is closed; if the request must go to another node (a
// failover), the pin starts over there on a fresh connection, and a
// handshake cut in the middle is answered with a fresh challenge.
//
// The package knows nothing of Caddy: it needs the client connection (from
// the HTTP server's ConnContext and ConnState hooks) and an *http.Transport,
// whose dialers and TLS settings pins use and which shared connections
// clone.
package pinning

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
)

// connectionAuthSchemes are the HTTP authentication schemes that
// authenticate a connection rather than a request.
var connectionAuthSchemes = []string{"NTLM", "Negotiate", "Kerberos"}

// scheme returns the connection-based scheme that one credentials or
// challenge names (any case), and whether it carries a token.
func scheme(v string) (name string, token bool) {
	v = strings.TrimSpace(v)
	word, rest, _ := strings.Cut(v, " ")
	for _, s := range connectionAuthSchemes {
		if strings.EqualFold(word, s) {
			return s, strings.TrimSpace(rest) != ""
		}
	}
	return "", false
}

// HasConnectionAuth reports whether any value of header key (Authorization
// or WWW-Authenticate) names a connection-based scheme. WWW-Authenticate
// may list several challenges in one value, separated by commas.
func HasConnectionAuth(h http.Header, key string) bool {
	for _, v := range h.Values(key) {
		for part := range strings.SplitSeq(v, ",") {
			if s, _ := scheme(part); s != "" {
				return true
			}
		}
	}
	return false
}

// continuesHandshake reports whether a response is a challenge in the
// middle of a handshake: 401 with a connection-based scheme and a token,
// which the client's next request answers on the same connection.
func continuesHandshake(resp *http.Response) bool {
	if resp.StatusCode != http.StatusUnauthorized {
		return false
	}
	for _, v := range resp.Header.Values("WWW-Authenticate") {
		for part := range strings.SplitSeq(v, ",") {
			if s, tok := scheme(part); s != "" && tok {
				return true
			}
		}
	}
	return false
}

// offeredSchemes returns the connection-based schemes a response offers,
// in its order, for a fresh challenge later.
func offeredSchemes(h http.Header) []string {
	var out []string
	for _, v := range h.Values("WWW-Authenticate") {
		for part := range strings.SplitSeq(v, ",") {
			if s, _ := scheme(part); s != "" && !containsFold(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// completesHandshake reports whether an answer completes a sign-in: the
// request carried a handshake's last leg (an NTLM AUTHENTICATE message,
// raw or inside SPNEGO, or a Kerberos or SPNEGO token that is not NTLM's
// first message) and the upstream accepted it (a status below 400). Any
// other credentials, however the upstream answers them (a path served
// anonymously answers garbage with 200), keep the handshake timer running,
// so that a client cannot hold a pin without signing in.
func completesHandshake(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode >= 400 {
		return false
	}
	for _, v := range req.Header.Values("Authorization") {
		name, _ := scheme(v)
		_, token, _ := strings.Cut(strings.TrimSpace(v), " ")
		blob, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
		if name == "" || err != nil || len(blob) == 0 {
			continue
		}
		if i := bytes.Index(blob, ntlmSignature); i >= 0 {
			if len(blob) >= i+12 && binary.LittleEndian.Uint32(blob[i+8:]) == ntlmAuthenticate {
				return true
			}
			continue
		}
		// GSS-API's InitialContextToken ([APPLICATION 0]) or SPNEGO's
		// NegTokenResp ([1]): Kerberos signs in with one such message.
		if name != "NTLM" && (blob[0] == 0x60 || blob[0] == 0xa1) {
			return true
		}
	}
	return false
}

// ntlmSignature begins every NTLM message; the message type follows it.
var ntlmSignature = []byte("NTLMSSP\x00")

// ntlmAuthenticate is the type of NTLM's last message.
const ntlmAuthenticate = 3
