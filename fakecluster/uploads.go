package fakecluster

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Active/active mode: upload servers in the shape of the cluster's toolkit
// (chunked uploads). Each server keeps its uploads in its own memory, with
// no shared store, so every request of an upload must reach the server that
// created it: any other answers 404.
//
// The HTTP API of a server, all under /api/uploads:
//
//	POST   /api/uploads                  Idempotency-Key, Upload-Length → 201, Location
//	PATCH  /api/uploads/{id}             Upload-Offset, chunk as body   → 204, Upload-Offset
//	PUT    /api/uploads/{id}/chunks/{n}  Chunk-Size, chunk as body      → 204, Upload-Offset
//	HEAD   /api/uploads/{id}             → 200, Upload-Offset, Upload-Length
//	GET    /api/uploads/{id}             → 200, the same and a JSON body
//	POST   /api/uploads/{id}/complete    → 200, or 409 while bytes are missing
//	DELETE /api/uploads/{id}             → 204 (abort)
//	GET    /healthz                      → 200
//
// Upload-Offset in answers counts the distinct bytes received so far. Every
// answer carries X-Server-Id.

const (
	// MaxUploadLength is the largest Upload-Length a server accepts (1 GiB).
	MaxUploadLength int64 = 1 << 30
	// MaxUploadsPerServer bounds the uploads a server holds over its
	// lifetime, aborted ones included: further creations get 507.
	MaxUploadsPerServer = 10_000
	// MaxUploadBytesPerServer bounds the sum of the Upload-Length of the
	// uploads a server holds: further creations get 507. Data is allocated
	// as it is written, never beyond an upload's length, so this bounds a
	// server's memory.
	MaxUploadBytesPerServer int64 = 1 << 30
	// MaxRequestRecords bounds a server's request log: later requests are
	// served but not recorded (see RequestsDropped).
	MaxRequestRecords = 100_000

	maxIdempotencyKeyLen = 255
	uploadsPath          = "/api/uploads"
)

// UploadRecord is a snapshot of one upload of a server.
type UploadRecord struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotencyKey"`
	Length         int64  `json:"length"`
	// Data holds the bytes written so far at their offsets, up to the end
	// of the furthest write; bytes never written read as zero. Once the
	// upload is complete it has Length bytes.
	Data []byte `json:"data"`
	// Received counts the distinct bytes written.
	Received  int64 `json:"received"`
	Completed bool  `json:"completed"`
	Aborted   bool  `json:"aborted"`
	// Chunks counts the accepted writes with a body, re-sent ones included.
	Chunks int `json:"chunks"`
}

// RequestRecord is one request a server received.
type RequestRecord struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Status is the answer's status; 0 while the request is in flight.
	Status int `json:"status"`
	// UploadID is the id the path names (known or not), or the id created.
	UploadID string `json:"uploadId,omitempty"`
	// Offset is where a write starts (Upload-Offset, or n × Chunk-Size).
	Offset int64 `json:"offset"`
	// Bytes is how many body bytes a write read.
	Bytes int `json:"bytes"`
	// ClientAddr is the client's address as the server saw it (ip:port).
	ClientAddr string    `json:"clientAddr"`
	At         time.Time `json:"at"`
}

// span is a written range [start, end) of an upload.
type span struct{ start, end int64 }

type upload struct {
	id, key   string
	length    int64
	data      []byte
	spans     []span // sorted, disjoint, not touching
	received  int64
	completed bool
	aborted   bool
	chunks    int
}

// write puts p at off; the caller has checked that it fits in the length.
func (u *upload) write(off int64, p []byte) {
	end := off + int64(len(p))
	if end > int64(len(u.data)) {
		if end <= int64(cap(u.data)) {
			u.data = u.data[:end]
		} else {
			grown := make([]byte, end, min(max(2*int64(cap(u.data)), end), u.length))
			copy(grown, u.data)
			u.data = grown
		}
	}
	copy(u.data[off:end], p)

	// Merge [off, end) into the written spans and recount.
	start := off
	spans := make([]span, 0, len(u.spans)+1)
	i := 0
	for ; i < len(u.spans) && u.spans[i].end < start; i++ {
		spans = append(spans, u.spans[i])
	}
	for ; i < len(u.spans) && u.spans[i].start <= end; i++ {
		start, end = min(start, u.spans[i].start), max(end, u.spans[i].end)
	}
	spans = append(spans, span{start, end})
	spans = append(spans, u.spans[i:]...)
	u.spans = spans
	u.received = 0
	for _, s := range spans {
		u.received += s.end - s.start
	}
}

func (u *upload) record() UploadRecord {
	return UploadRecord{
		ID: u.id, IdempotencyKey: u.key, Length: u.length,
		Data:     append([]byte(nil), u.data...),
		Received: u.received, Completed: u.completed, Aborted: u.aborted, Chunks: u.chunks,
	}
}

// UploadServer is one active/active server with uploads of its own.
type UploadServer struct {
	id string

	mu       sync.Mutex
	addr     string
	server   *http.Server
	down     bool // killed or closed: changes nothing until started again
	uploads  []*upload
	byID     map[string]*upload // live uploads
	byKey    map[string]*upload // live uploads by idempotency key
	reserved int64              // sum of the lengths of all uploads held
	requests []RequestRecord
	dropped  int
}

// NewUploadServer returns a server with the given id, not started. Its
// Handler serves in-process without a listener too.
func NewUploadServer(id string) *UploadServer {
	return &UploadServer{id: id, byID: map[string]*upload{}, byKey: map[string]*upload{}}
}

// StartUploadServers starts n servers named srv-1..srv-n, each on a free
// loopback port.
func StartUploadServers(n int) ([]*UploadServer, error) {
	if n < 1 {
		return nil, fmt.Errorf("fakecluster: %d upload servers", n)
	}
	servers := make([]*UploadServer, 0, n)
	for i := range n {
		s := NewUploadServer(fmt.Sprintf("srv-%d", i+1))
		if err := s.Start(); err != nil {
			for _, started := range servers {
				started.Kill()
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// ID returns the server's id.
func (s *UploadServer) ID() string { return s.id }

// Addr returns the server's host:port once started ("" before).
func (s *UploadServer) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL returns the server's base URL, http://host:port.
func (s *UploadServer) URL() string { return "http://" + s.Addr() }

// Start listens on a free 127.0.0.1 port, or, if the server was started
// before, on its previous address again (its uploads are kept, as on disk).
func (s *UploadServer) Start() error {
	addr := s.Addr()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return s.StartOn(addr)
}

// StartOn listens on the given address.
func (s *UploadServer) StartOn(addr string) error {
	s.mu.Lock()
	running := s.server != nil
	s.mu.Unlock()
	if running {
		return fmt.Errorf("upload server %s: already running", s.id)
	}
	ln, err := listen(addr)
	if err != nil {
		return fmt.Errorf("upload server %s: %w", s.id, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	if s.server != nil {
		s.mu.Unlock()
		ln.Close()
		return fmt.Errorf("upload server %s: already running", s.id)
	}
	s.server, s.addr, s.down = srv, ln.Addr().String(), false
	s.mu.Unlock()
	go srv.Serve(ln) //nolint:errcheck // returns when the server is killed or closed
	return nil
}

// Kill closes the listener and every connection at once, as a crash does:
// the port refuses connections. Requests still being handled change
// nothing (they get 503 on connections that are already closed). Start
// brings the server back with its uploads.
func (s *UploadServer) Kill() {
	s.mu.Lock()
	srv := s.server
	s.server, s.down = nil, true
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Close shuts the server down gracefully: it lets requests in flight finish
// (for at most 2 s), then closes every connection.
func (s *UploadServer) Close() {
	s.mu.Lock()
	srv := s.server
	s.server = nil
	s.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		s.mu.Lock()
		if s.server == nil {
			s.down = true
		}
		s.mu.Unlock()
	}
}

// Uploads returns a snapshot of the server's uploads in creation order,
// aborted ones included.
func (s *UploadServer) Uploads() []UploadRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]UploadRecord, 0, len(s.uploads))
	for _, u := range s.uploads {
		out = append(out, u.record())
	}
	return out
}

// Upload returns a snapshot of the upload with the given id, aborted or not.
func (s *UploadServer) Upload(id string) (UploadRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.uploads {
		if u.id == id {
			return u.record(), true
		}
	}
	return UploadRecord{}, false
}

// Requests returns every request the server received, in order of arrival
// (up to MaxRequestRecords).
func (s *UploadServer) Requests() []RequestRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestRecord(nil), s.requests...)
}

// RequestsDropped returns how many requests were served but not recorded
// because the log was full.
func (s *UploadServer) RequestsDropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Handler returns the server's HTTP API, which records every request.
func (s *UploadServer) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *UploadServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Server-Id", s.id)
	rec := RequestRecord{Method: r.Method, Path: r.URL.Path, ClientAddr: r.RemoteAddr, At: time.Now()}
	s.mu.Lock()
	idx := -1
	if len(s.requests) < MaxRequestRecords {
		idx = len(s.requests)
		s.requests = append(s.requests, rec)
	} else {
		s.dropped++
	}
	s.mu.Unlock()

	rec.Status = s.route(w, r, &rec)

	if idx >= 0 {
		s.mu.Lock()
		s.requests[idx] = rec
		s.mu.Unlock()
	}
}

// route answers the request and returns the status it answered with.
func (s *UploadServer) route(w http.ResponseWriter, r *http.Request, rec *RequestRecord) int {
	p := r.URL.Path
	switch {
	case p == "/healthz":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return methodNotAllowed(w, "GET, HEAD")
		}
		return answer(w, http.StatusOK, map[string]any{"status": "ok", "serverId": s.id})
	case p == uploadsPath:
		if r.Method != http.MethodPost {
			return methodNotAllowed(w, "POST")
		}
		return s.create(w, r, rec)
	}
	rest, ok := strings.CutPrefix(p, uploadsPath+"/")
	if !ok {
		return answerError(w, http.StatusNotFound, "not found")
	}
	parts := strings.Split(rest, "/")
	rec.UploadID = parts[0]
	s.mu.Lock()
	u := s.byID[parts[0]]
	s.mu.Unlock()
	if u == nil {
		return s.answerNoSuchUpload(w)
	}
	switch {
	case len(parts) == 1:
		switch r.Method {
		case http.MethodPatch:
			off, err := parseCount(r.Header.Get("Upload-Offset"))
			if err != nil {
				return answerError(w, http.StatusBadRequest, "Upload-Offset: "+err.Error())
			}
			rec.Offset = off
			if off > u.length {
				return answerError(w, http.StatusBadRequest, "Upload-Offset beyond the upload's length")
			}
			return s.write(w, r, rec, u, off, u.length-off, false)
		case http.MethodGet, http.MethodHead:
			return s.status(w, r, u)
		case http.MethodDelete:
			return s.abort(w, u)
		}
		return methodNotAllowed(w, "GET, HEAD, PATCH, DELETE")
	case len(parts) == 2 && parts[1] == "complete":
		if r.Method != http.MethodPost {
			return methodNotAllowed(w, "POST")
		}
		return s.complete(w, u)
	case len(parts) == 3 && parts[1] == "chunks":
		if r.Method != http.MethodPut {
			return methodNotAllowed(w, "PUT")
		}
		n, err := parseCount(parts[2])
		if err != nil {
			return answerError(w, http.StatusBadRequest, "chunk number: "+err.Error())
		}
		size, err := parseCount(r.Header.Get("Chunk-Size"))
		if err != nil || size == 0 {
			return answerError(w, http.StatusBadRequest, "Chunk-Size: a positive integer is required")
		}
		if n > (u.length-1)/size {
			return answerError(w, http.StatusBadRequest, "chunk beyond the upload's length")
		}
		rec.Offset = n * size
		// Every chunk but the last has Chunk-Size bytes; the last one ends the upload.
		return s.write(w, r, rec, u, rec.Offset, min(size, u.length-rec.Offset), true)
	}
	return answerError(w, http.StatusNotFound, "not found")
}

type createdJSON struct {
	ID     string `json:"id"`
	Length int64  `json:"length"`
	Offset int64  `json:"offset"`
}

type statusJSON struct {
	ID        string `json:"id"`
	Length    int64  `json:"length"`
	Offset    int64  `json:"offset"`
	Completed bool   `json:"completed"`
}

func (s *UploadServer) create(w http.ResponseWriter, r *http.Request, rec *RequestRecord) int {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > maxIdempotencyKeyLen {
		return answerError(w, http.StatusBadRequest, fmt.Sprintf("Idempotency-Key: 1 to %d bytes are required", maxIdempotencyKeyLen))
	}
	length, err := parseCount(r.Header.Get("Upload-Length"))
	if err != nil || length == 0 || length > MaxUploadLength {
		return answerError(w, http.StatusBadRequest, fmt.Sprintf("Upload-Length: an integer in 1..%d is required", MaxUploadLength))
	}
	s.mu.Lock()
	if status, refused := s.refuseChange(w, nil); refused {
		s.mu.Unlock()
		return status
	}
	u := s.byKey[key]
	switch {
	case u != nil && u.length != length:
		s.mu.Unlock()
		return answerError(w, http.StatusUnprocessableEntity, "Idempotency-Key already used with another Upload-Length")
	case u != nil:
		w.Header().Set("Idempotent-Replayed", "true")
	case len(s.uploads) >= MaxUploadsPerServer:
		s.mu.Unlock()
		return answerError(w, http.StatusInsufficientStorage, "too many uploads")
	case s.reserved+length > MaxUploadBytesPerServer:
		s.mu.Unlock()
		return answerError(w, http.StatusInsufficientStorage, "too many bytes")
	default:
		u = &upload{id: newUploadID(), key: key, length: length}
		for s.byID[u.id] != nil {
			u.id = newUploadID()
		}
		s.uploads = append(s.uploads, u)
		s.byID[u.id], s.byKey[key] = u, u
		s.reserved += length
	}
	body := createdJSON{ID: u.id, Length: u.length, Offset: u.received}
	s.mu.Unlock()
	rec.UploadID = u.id
	w.Header().Set("Location", uploadsPath+"/"+u.id)
	setUploadHeaders(w, body.Offset, body.Length)
	return answer(w, http.StatusCreated, body)
}

// write reads a chunk of at most limit bytes (exactly limit if exact) and
// writes it at off.
func (s *UploadServer) write(w http.ResponseWriter, r *http.Request, rec *RequestRecord, u *upload, off, limit int64, exact bool) int {
	if r.ContentLength > limit {
		return answerError(w, http.StatusBadRequest, "chunk beyond the upload's length")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	rec.Bytes = len(body)
	switch {
	case err != nil:
		return answerError(w, http.StatusBadRequest, "reading the chunk: "+err.Error())
	case int64(len(body)) > limit:
		return answerError(w, http.StatusBadRequest, "chunk beyond the upload's length")
	case exact && int64(len(body)) != limit:
		return answerError(w, http.StatusBadRequest, fmt.Sprintf("chunk of %d bytes, want %d", len(body), limit))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if status, refused := s.refuseChange(w, u); refused {
		return status
	}
	if u.completed {
		return answerError(w, http.StatusConflict, "upload already completed")
	}
	if len(body) > 0 {
		u.write(off, body)
		u.chunks++
	}
	w.Header().Set("Upload-Offset", strconv.FormatInt(u.received, 10))
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

func (s *UploadServer) status(w http.ResponseWriter, r *http.Request, u *upload) int {
	s.mu.Lock()
	body := statusJSON{ID: u.id, Length: u.length, Offset: u.received, Completed: u.completed}
	aborted := u.aborted
	s.mu.Unlock()
	if aborted {
		return s.answerNoSuchUpload(w)
	}
	setUploadHeaders(w, body.Offset, body.Length)
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	return answer(w, http.StatusOK, body)
}

func (s *UploadServer) complete(w http.ResponseWriter, u *upload) int {
	s.mu.Lock()
	if status, refused := s.refuseChange(w, u); refused {
		s.mu.Unlock()
		return status
	}
	done := u.received == u.length
	u.completed = u.completed || done
	body := statusJSON{ID: u.id, Length: u.length, Offset: u.received, Completed: u.completed}
	s.mu.Unlock()
	setUploadHeaders(w, body.Offset, body.Length)
	if !done {
		return answer(w, http.StatusConflict, map[string]any{
			"error": "upload incomplete", "id": body.ID, "length": body.Length, "offset": body.Offset, "completed": false,
		})
	}
	return answer(w, http.StatusOK, body)
}

func (s *UploadServer) abort(w http.ResponseWriter, u *upload) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status, refused := s.refuseChange(w, u); refused {
		return status
	}
	u.aborted = true
	delete(s.byID, u.id)
	if s.byKey[u.key] == u {
		delete(s.byKey, u.key)
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// refuseChange answers the refusal of a request that would change u (nil
// for a creation) and reports it, or reports that the server can serve it:
// a server that is down changes nothing, and an aborted upload is gone.
// The caller holds s.mu.
func (s *UploadServer) refuseChange(w http.ResponseWriter, u *upload) (status int, refused bool) {
	switch {
	case s.down:
		return answerError(w, http.StatusServiceUnavailable, "server down"), true
	case u != nil && u.aborted:
		return s.answerNoSuchUpload(w), true
	}
	return 0, false
}

// answerNoSuchUpload refuses a request on an upload the server does not
// hold: created on another server, never created, or aborted.
func (s *UploadServer) answerNoSuchUpload(w http.ResponseWriter) int {
	return answerError(w, http.StatusNotFound, "no such upload on "+s.id)
}

// setUploadHeaders sets the headers that tell a client where an upload
// stands: the distinct bytes received and the length.
func setUploadHeaders(w http.ResponseWriter, offset, length int64) {
	w.Header().Set("Upload-Offset", strconv.FormatInt(offset, 10))
	w.Header().Set("Upload-Length", strconv.FormatInt(length, 10))
}

// newUploadID returns 26 characters of lowercase base32: 128 random bits.
func newUploadID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// parseCount parses a non-negative decimal integer.
func parseCount(v string) (int64, error) {
	if v == "" {
		return 0, errors.New("missing")
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, errors.New("not a non-negative integer")
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errors.New("out of range")
	}
	return n, nil
}

func answer(w http.ResponseWriter, status int, v any) int {
	writeJSON(w, status, v)
	return status
}

func answerError(w http.ResponseWriter, status int, msg string) int {
	return answer(w, status, map[string]string{"error": msg})
}

func methodNotAllowed(w http.ResponseWriter, allow string) int {
	w.Header().Set("Allow", allow)
	return answerError(w, http.StatusMethodNotAllowed, "method not allowed")
}
