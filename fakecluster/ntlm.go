package fakecluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"golang.org/x/crypto/md4" //nolint:staticcheck // NTLM is built on MD4
)

// Windows SSO as Kestrel's Negotiate handler does it: NTLM authenticates a
// TCP connection, not a request. A NEGOTIATE message gets a CHALLENGE bound
// to the connection it came on; the AUTHENTICATE message must come on that
// same connection, computed for that challenge (NTLMv2); the connection then
// stays authenticated as that user for every later request on it, with or
// without credentials (Kestrel's PersistNtlmCredentials). Every user name is
// known; its password is SSOPassword(name).
//
// Paths under /sso/ need an authenticated connection: an anonymous request
// gets 401 with WWW-Authenticate: Negotiate and NTLM. Every answer on an
// authenticated connection says its user in X-Authenticated-User, whatever
// the path, and every answer names its connection in X-Upstream-Conn, so
// that tests can see which upstream connection served what.

// SSOPassword is the password of a user of the fake cluster's Windows SSO.
func SSOPassword(user string) string { return "pw-" + strings.ToLower(user) }

// Served is one request a node answered, as its Windows SSO saw it.
type Served struct {
	Conn   string `json:"conn"`   // the upstream connection (node/number)
	User   string `json:"user"`   // the connection's user when it was answered; "" for anonymous
	Client string `json:"client"` // the request's X-Client header: the tests' name of the browser
	// Credentials: the request carried NTLM or Negotiate credentials, so
	// its connection must never serve anyone else.
	Credentials bool      `json:"credentials,omitempty"`
	Path        string    `json:"path"`
	At          time.Time `json:"at"`
}

// SSOFault is an AUTHENTICATE message the node refused.
type SSOFault struct {
	Conn   string `json:"conn"`
	Client string `json:"client"`
	User   string `json:"user"`
	// Reason: "split" (no challenge was issued on this connection: the
	// handshake was split across connections) or "bad response" (computed
	// for another challenge, or a wrong password).
	Reason string `json:"reason"`
}

// ssoConn is the authentication state of one TCP connection.
type ssoConn struct {
	id        string
	conn      net.Conn
	mu        sync.Mutex
	challenge []byte // the pending CHALLENGE's server challenge
	user      string
}

type ssoConnKey struct{}

// maxServed bounds the record of answered requests: the oldest go first.
const maxServed = 1 << 16

// ssoLog is what a node's Windows SSO recorded.
type ssoLog struct {
	mu     sync.Mutex
	seq    uint64
	open   map[net.Conn]*ssoConn
	served []Served
	faults []SSOFault
}

func (l *ssoLog) connContext(node string) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open == nil {
			l.open = make(map[net.Conn]*ssoConn)
		}
		l.seq++
		sc := &ssoConn{id: node + "/" + strconv.FormatUint(l.seq, 10), conn: c}
		l.open[c] = sc
		return context.WithValue(ctx, ssoConnKey{}, sc)
	}
}

// connState forgets a connection once it is closed.
func (l *ssoLog) connState(c net.Conn, s http.ConnState) {
	if s == http.StateClosed {
		l.closed(c)
	}
}

func (l *ssoLog) closed(c net.Conn) {
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
}

func (l *ssoLog) record(s Served) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.served) == 2*maxServed {
		l.served = append(l.served[:0], l.served[maxServed:]...)
	}
	l.served = append(l.served, s)
}

// The NTLMSSP messages this node reads and writes ([MS-NLMP] 2.2.1).
const (
	ntlmNegotiateUnicode  = 0x00000001
	ntlmRequestTarget     = 0x00000004
	ntlmNegotiateNTLM     = 0x00000200
	ntlmAlwaysSign        = 0x00008000
	ntlmTargetTypeDomain  = 0x00010000
	ntlmExtendedSecurity  = 0x00080000
	ntlmNegotiateTarget   = 0x00800000
	ntlmNegotiate128      = 0x20000000
	ntlmNegotiate56       = 0x80000000
	ntlmChallengeFlags    = ntlmNegotiateUnicode | ntlmRequestTarget | ntlmNegotiateNTLM | ntlmAlwaysSign | ntlmTargetTypeDomain | ntlmExtendedSecurity | ntlmNegotiateTarget | ntlmNegotiate128 | ntlmNegotiate56
	ntlmDomain            = "FAKECLUSTER"
	ntlmSignature         = "NTLMSSP\x00"
	ntlmAuthenticateFixed = 64
)

// ntlmMessage returns the NTLMSSP message type of a decoded token, or 0.
func ntlmMessage(tok []byte) uint32 {
	if len(tok) < 12 || string(tok[:8]) != ntlmSignature {
		return 0
	}
	return binary.LittleEndian.Uint32(tok[8:12])
}

func utf16le(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u))
	for i, r := range u {
		binary.LittleEndian.PutUint16(b[2*i:], r)
	}
	return b
}

func fromUTF16LE(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// challengeMessage builds a CHALLENGE with target info, which makes clients
// answer with NTLMv2.
func challengeMessage(server []byte, computer string) []byte {
	var info bytes.Buffer
	av := func(id uint16, v []byte) {
		_ = binary.Write(&info, binary.LittleEndian, [2]uint16{id, uint16(len(v))})
		info.Write(v)
	}
	av(2, utf16le(ntlmDomain))                // MsvAvNbDomainName
	av(1, utf16le(strings.ToUpper(computer))) // MsvAvNbComputerName
	ts := make([]byte, 8)
	binary.LittleEndian.PutUint64(ts, uint64(time.Now().UnixNano()/100)+116444736000000000)
	av(7, ts) // MsvAvTimestamp
	av(0, nil)
	target := utf16le(ntlmDomain)
	const fixed = 48
	m := make([]byte, fixed, fixed+len(target)+info.Len())
	copy(m, ntlmSignature)
	binary.LittleEndian.PutUint32(m[8:], 2)
	putField(m[12:], len(target), fixed)
	binary.LittleEndian.PutUint32(m[20:], ntlmChallengeFlags)
	copy(m[24:32], server)
	putField(m[40:], info.Len(), fixed+len(target))
	m = append(m, target...)
	return append(m, info.Bytes()...)
}

func putField(b []byte, n, offset int) {
	binary.LittleEndian.PutUint16(b, uint16(n))
	binary.LittleEndian.PutUint16(b[2:], uint16(n))
	binary.LittleEndian.PutUint32(b[4:], uint32(offset))
}

func field(m []byte, at int) ([]byte, error) {
	n := int(binary.LittleEndian.Uint16(m[at:]))
	off := int(binary.LittleEndian.Uint32(m[at+4:]))
	if off < 0 || off+n > len(m) {
		return nil, errors.New("field out of bounds")
	}
	return m[off : off+n], nil
}

// verifyAuthenticate checks an AUTHENTICATE message against the server
// challenge it must answer, and returns its user.
func verifyAuthenticate(m, server []byte) (user string, ok bool) {
	if len(m) < ntlmAuthenticateFixed {
		return "", false
	}
	nt, err1 := field(m, 20)
	domainB, err2 := field(m, 28)
	userB, err3 := field(m, 36)
	if err := errors.Join(err1, err2, err3); err != nil || len(nt) <= 16 {
		return "", false
	}
	domain, user := string(domainB), string(userB)
	if binary.LittleEndian.Uint32(m[60:])&ntlmNegotiateUnicode != 0 {
		domain, user = fromUTF16LE(domainB), fromUTF16LE(userB)
	}
	h := md4.New()
	h.Write(utf16le(SSOPassword(user)))
	ntowf := hmacMD5(h.Sum(nil), utf16le(strings.ToUpper(user)+domain))
	proof := hmacMD5(ntowf, server, nt[16:])
	return user, hmac.Equal(proof, nt[:16])
}

func hmacMD5(key []byte, data ...[]byte) []byte {
	mac := hmac.New(md5.New, key)
	for _, d := range data {
		mac.Write(d)
	}
	return mac.Sum(nil)
}

// serveSSO runs the connection's handshake for a request. It reports
// whether it answered the request (a 401 of the handshake), and otherwise
// leaves the connection's user for the request.
func (n *Node) serveSSO(w http.ResponseWriter, r *http.Request, sc *ssoConn) (answered bool) {
	scheme, tok := ssoCredentials(r.Header.Get("Authorization"))
	client := r.Header.Get("X-Client")
	sc.mu.Lock()
	defer sc.mu.Unlock()
	switch ntlmMessage(tok) {
	case 1: // NEGOTIATE: a CHALLENGE bound to this connection
		sc.challenge = make([]byte, 8)
		_, _ = rand.Read(sc.challenge)
		sc.user = ""
		w.Header().Set("WWW-Authenticate", scheme+" "+base64.StdEncoding.EncodeToString(challengeMessage(sc.challenge, n.id)))
		n.writeSSO(w, r, sc, http.StatusUnauthorized)
		return true
	case 3: // AUTHENTICATE: only for this connection's challenge
		server := sc.challenge
		sc.challenge = nil
		user, ok := "", false
		reason := "split"
		if server != nil {
			user, ok = verifyAuthenticate(tok, server)
			reason = "bad response"
		}
		if !ok {
			n.sso.mu.Lock()
			n.sso.faults = append(n.sso.faults, SSOFault{Conn: sc.id, Client: client, User: user, Reason: reason})
			n.sso.mu.Unlock()
			askCredentials(w)
			n.writeSSO(w, r, sc, http.StatusUnauthorized)
			return true
		}
		sc.user = user
		return false
	}
	if strings.HasPrefix(r.URL.Path, "/sso/") && sc.user == "" {
		askCredentials(w)
		n.writeSSO(w, r, sc, http.StatusUnauthorized)
		return true
	}
	return false
}

func askCredentials(w http.ResponseWriter) {
	w.Header().Add("WWW-Authenticate", "Negotiate")
	w.Header().Add("WWW-Authenticate", "NTLM")
}

// ssoCredentials splits an Authorization header of scheme NTLM or
// Negotiate (which carries raw NTLMSSP here) into scheme and decoded token.
func ssoCredentials(h string) (scheme string, tok []byte) {
	scheme, b64, ok := strings.Cut(h, " ")
	if !ok || (!strings.EqualFold(scheme, "NTLM") && !strings.EqualFold(scheme, "Negotiate")) {
		return "", nil
	}
	tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return "", nil
	}
	return scheme, tok
}

// writeSSO answers a request of the handshake itself.
func (n *Node) writeSSO(w http.ResponseWriter, r *http.Request, sc *ssoConn, status int) {
	n.identify(w, r, sc)
	writeJSON(w, status, map[string]any{"node": n.id, "conn": sc.id, "user": sc.user, "path": r.URL.Path})
}

// identify sets the identity headers of an answer and records it.
func (n *Node) identify(w http.ResponseWriter, r *http.Request, sc *ssoConn) {
	w.Header().Set("X-Upstream-Conn", sc.id)
	if sc.user != "" {
		w.Header().Set("X-Authenticated-User", sc.user)
	}
	scheme, _ := ssoCredentials(r.Header.Get("Authorization"))
	n.sso.record(Served{Conn: sc.id, User: sc.user, Client: r.Header.Get("X-Client"), Credentials: scheme != "", Path: r.URL.Path, At: time.Now()})
}

// serveWebSocket answers an upgrade with 101 and then echoes what it reads,
// on the connection's identity, until either side closes.
func (n *Node) serveWebSocket(w http.ResponseWriter, r *http.Request, sc *ssoConn) {
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	w.Header().Set("Upgrade", "websocket")
	w.Header().Set("Connection", "Upgrade")
	w.Header().Set("Sec-WebSocket-Accept", base64.StdEncoding.EncodeToString(sum[:]))
	n.identify(w, r, sc)
	w.WriteHeader(http.StatusSwitchingProtocols)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer func() {
		conn.Close()
		n.sso.closed(sc.conn)
	}()
	if err := brw.Flush(); err != nil {
		return
	}
	_, _ = io.Copy(conn, brw)
}

// Served returns every request the node answered with its connection and
// user, in order.
func (n *Node) Served() []Served {
	n.sso.mu.Lock()
	defer n.sso.mu.Unlock()
	return append([]Served(nil), n.sso.served...)
}

// SSOFaults returns the AUTHENTICATE messages the node refused.
func (n *Node) SSOFaults() []SSOFault {
	n.sso.mu.Lock()
	defer n.sso.mu.Unlock()
	return append([]SSOFault(nil), n.sso.faults...)
}

// OpenConns returns the ids of the node's connections that are still open.
func (n *Node) OpenConns() []string {
	n.sso.mu.Lock()
	defer n.sso.mu.Unlock()
	open := make([]string, 0, len(n.sso.open))
	for _, sc := range n.sso.open {
		open = append(open, sc.id)
	}
	return open
}

// CloseConn closes the node's open connection with the given id, as
// Kestrel does when a keep-alive times out. It reports whether it was open.
func (n *Node) CloseConn(id string) bool {
	n.sso.mu.Lock()
	var c net.Conn
	for _, sc := range n.sso.open {
		if sc.id == id {
			c = sc.conn
		}
	}
	n.sso.mu.Unlock()
	return c != nil && c.Close() == nil
}
