// Package ntlmclient is a browser doing Windows SSO over NTLM, for tests
// and benchmarks: one kept-alive TCP connection at a time, the real
// NTLMSSP messages of github.com/Azure/go-ntlmssp, and a browser's
// recovery (a fresh challenge starts the handshake again; a kept-alive
// connection closed before any answer is dialled again).
package ntlmclient

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/go-ntlmssp"
)

// Browser is one user's browser talking to Addr.
type Browser struct {
	// Name goes in every request's X-Client header.
	Name           string
	User, Password string
	Addr           string
	// Dialer, if set, makes the connections (a fixed local port, say).
	Dialer *net.Dialer
	// TLS, if set, makes the browser speak HTTPS with this client config.
	TLS *tls.Config
	// Timeout bounds each request. Default: 10s.
	Timeout time.Duration

	conn   net.Conn
	br     *bufio.Reader
	reused bool // the connection has answered before

	// Dials counts the connections made, SignIns the handshakes begun.
	Dials, SignIns int
}

// Response is an answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   string
	// Local is the client connection's local address.
	Local string
}

// User returns the identity the upstream answered with.
func (r *Response) User() string { return r.Header.Get("X-Authenticated-User") }

// errClosedBeforeAnswer: a kept-alive connection closed with no answer,
// which a browser takes as the keep-alive race and sends again.
var errClosedBeforeAnswer = errors.New("ntlmclient: connection closed before an answer")

// Do sends one request on the current connection (dialling one if there is
// none) and reads its answer. It closes the connection when the answer
// says so or the exchange fails.
func (b *Browser) Do(method, path string, header http.Header) (*Response, error) {
	if b.conn == nil {
		if err := b.dial(); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequest(method, "http://"+b.Addr+path, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("X-Client", b.Name)
	timeout := b.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	_ = b.conn.SetDeadline(time.Now().Add(timeout))
	local := b.conn.LocalAddr().String()
	if err := req.Write(b.conn); err != nil {
		return nil, b.fail(err)
	}
	resp, err := http.ReadResponse(b.br, req)
	if err != nil {
		return nil, b.fail(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, b.fail(err)
	}
	b.reused = true
	if resp.Close {
		b.Close()
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: string(body), Local: local}, nil
}

func (b *Browser) dial() error {
	d := b.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 5 * time.Second}
	}
	c, err := d.Dial("tcp", b.Addr)
	if err != nil {
		return err
	}
	if b.TLS != nil {
		c = tls.Client(c, b.TLS)
	}
	b.conn, b.br, b.reused = c, bufio.NewReader(c), false
	b.Dials++
	return nil
}

func (b *Browser) fail(err error) error {
	reused := b.reused
	b.Close()
	if reused && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err)) {
		return fmt.Errorf("%w: %v", errClosedBeforeAnswer, err)
	}
	return err
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }

// Close closes the current connection.
func (b *Browser) Close() {
	if b.conn != nil {
		b.conn.Close()
		b.conn, b.br = nil, nil
	}
}

// Conn returns the current connection, or nil.
func (b *Browser) Conn() net.Conn { return b.conn }

// Negotiate sends the handshake's first leg (NEGOTIATE) for path and
// returns the upstream's answer, a 401 with the CHALLENGE when it works.
func (b *Browser) Negotiate(path string) (*Response, error) {
	b.SignIns++
	msg, err := ntlmssp.NewNegotiateMessage("", "")
	if err != nil {
		return nil, err
	}
	return b.Do(http.MethodGet, path, http.Header{"Authorization": {"NTLM " + base64.StdEncoding.EncodeToString(msg)}})
}

// Authenticate answers the CHALLENGE of a Negotiate answer (the
// handshake's second leg) with a GET of path.
func (b *Browser) Authenticate(challenge *Response, path string) (*Response, error) {
	return b.authenticate(challenge, http.MethodGet, path)
}

func (b *Browser) authenticate(challenge *Response, method, path string) (*Response, error) {
	tok, err := challengeOf(challenge)
	if err != nil {
		return nil, err
	}
	msg, err := ntlmssp.NewAuthenticateMessage(tok, b.User, b.Password, nil)
	if err != nil {
		return nil, err
	}
	return b.Do(method, path, http.Header{"Authorization": {"NTLM " + base64.StdEncoding.EncodeToString(msg)}})
}

// challengeOf returns the NTLM CHALLENGE a 401 carries.
func challengeOf(r *Response) ([]byte, error) {
	if r.Status != http.StatusUnauthorized {
		return nil, fmt.Errorf("ntlmclient: want 401 with a challenge, got %d", r.Status)
	}
	for _, v := range r.Header.Values("WWW-Authenticate") {
		scheme, tok, ok := strings.Cut(v, " ")
		if ok && (strings.EqualFold(scheme, "NTLM") || strings.EqualFold(scheme, "Negotiate")) {
			return base64.StdEncoding.DecodeString(strings.TrimSpace(tok))
		}
	}
	return nil, fmt.Errorf("ntlmclient: a 401 without a challenge: %v", r.Header.Values("WWW-Authenticate"))
}

// SignIn runs the whole handshake for path on the current connection and
// returns the answer to its last leg.
func (b *Browser) SignIn(path string) (*Response, error) {
	ch, err := b.Negotiate(path)
	if err != nil {
		return nil, err
	}
	return b.Authenticate(ch, path)
}

// asksCredentials: a 401 offering NTLM or Negotiate without a token.
func asksCredentials(r *Response) bool {
	if r.Status != http.StatusUnauthorized {
		return false
	}
	for _, v := range r.Header.Values("WWW-Authenticate") {
		for part := range strings.SplitSeq(v, ",") {
			s := strings.TrimSpace(part)
			if strings.EqualFold(s, "NTLM") || strings.EqualFold(s, "Negotiate") {
				return true
			}
		}
	}
	return false
}

// Fetch sends method to path as a browser does: a fresh challenge starts
// a handshake (on the same connection, or a new one if the answer closed
// it) and then sends the request again; a kept-alive connection closed
// before any answer is dialled again. It gives up after three handshakes.
func (b *Browser) Fetch(method, path string) (*Response, error) {
	resp, err := b.retried(func() (*Response, error) { return b.Do(method, path, nil) })
	for tries := 0; err == nil && asksCredentials(resp) && tries < 3; tries++ {
		resp, err = b.retried(func() (*Response, error) {
			ch, err := b.Negotiate(path)
			if err != nil {
				return nil, err
			}
			if ch.Status != http.StatusUnauthorized || !hasChallenge(ch) {
				return ch, nil
			}
			return b.authenticate(ch, method, path)
		})
	}
	return resp, err
}

func hasChallenge(r *Response) bool {
	_, err := challengeOf(r)
	return err == nil
}

// retried runs f again, once, on a fresh connection when a kept-alive one
// closed before answering.
func (b *Browser) retried(f func() (*Response, error)) (*Response, error) {
	resp, err := f()
	if errors.Is(err, errClosedBeforeAnswer) {
		return f()
	}
	return resp, err
}

// Upgrade asks for a WebSocket on the current connection and, on 101,
// returns the stream: writes go to the connection, reads come from it.
func (b *Browser) Upgrade(path string) (*Response, io.ReadWriter, error) {
	resp, err := b.Do(http.MethodGet, path, http.Header{
		"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="},
	})
	if err != nil || resp.Status != http.StatusSwitchingProtocols {
		return resp, nil, err
	}
	_ = b.conn.SetDeadline(time.Time{})
	return resp, struct {
		io.Reader
		io.Writer
	}{b.br, b.conn}, nil
}
