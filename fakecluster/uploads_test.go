package fakecluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func startUploadServers(t *testing.T, n int) []*UploadServer {
	t.Helper()
	servers, err := StartUploadServers(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Close()
		}
	})
	return servers
}

type uploadResp struct {
	status int
	header http.Header
	body   []byte
}

func (r uploadResp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// uploadDo sends one request with the given headers ("Name", "value", …)
// and body (nil: none).
func uploadDo(client *http.Client, method, url string, body []byte, headers ...string) (uploadResp, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return uploadResp{}, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return uploadResp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return uploadResp{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// uploadCall is uploadDo for the test goroutine: it fails the test on a
// transport error.
func uploadCall(t *testing.T, client *http.Client, method, url string, body []byte, headers ...string) uploadResp {
	t.Helper()
	r, err := uploadDo(client, method, url, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func createUpload(t *testing.T, s *UploadServer, key string, length int) string {
	t.Helper()
	r := uploadCall(t, nil, "POST", s.URL()+"/api/uploads", nil, "Idempotency-Key", key, "Upload-Length", strconv.Itoa(length))
	if r.status != http.StatusCreated {
		t.Fatalf("create on %s: %d %s", s.ID(), r.status, r.body)
	}
	return strings.TrimPrefix(r.header.Get("Location"), "/api/uploads/")
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

var uploadIDRe = regexp.MustCompile(`^[a-z2-7]{26}$`)

func TestUploadCreate(t *testing.T) {
	s := startUploadServers(t, 1)[0]
	if s.ID() != "srv-1" || !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("server %s on %s", s.ID(), s.Addr())
	}
	url := s.URL() + "/api/uploads"
	for _, h := range [][]string{
		{"Upload-Length", "10"},
		{"Idempotency-Key", "k"},
		{"Idempotency-Key", "k", "Upload-Length", "0"},
		{"Idempotency-Key", "k", "Upload-Length", "-1"},
		{"Idempotency-Key", "k", "Upload-Length", "+5"},
		{"Idempotency-Key", "k", "Upload-Length", "ten"},
		{"Idempotency-Key", "k", "Upload-Length", strconv.FormatInt(MaxUploadLength+1, 10)},
		{"Idempotency-Key", "k", "Upload-Length", "99999999999999999999999"},
		{"Idempotency-Key", strings.Repeat("k", 256), "Upload-Length", "10"},
	} {
		if r := uploadCall(t, nil, "POST", url, nil, h...); r.status != 400 || r.header.Get("X-Server-Id") != "srv-1" {
			t.Fatalf("create with %q: %d %s", h, r.status, r.body)
		}
	}
	r := uploadCall(t, nil, "POST", url, nil, "Idempotency-Key", "k", "Upload-Length", "1000")
	if r.status != 201 || r.header.Get("X-Server-Id") != "srv-1" {
		t.Fatalf("create: %d %v", r.status, r.header)
	}
	id, ok := strings.CutPrefix(r.header.Get("Location"), "/api/uploads/")
	if !ok || !uploadIDRe.MatchString(id) {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	if m := r.json(t); m["id"] != id || m["length"] != 1000.0 || m["offset"] != 0.0 || len(m) != 3 {
		t.Fatalf("body %v", m)
	}
	ups := s.Uploads()
	if len(ups) != 1 || ups[0].ID != id || ups[0].IdempotencyKey != "k" || ups[0].Length != 1000 || ups[0].Received != 0 || ups[0].Completed || ups[0].Aborted {
		t.Fatalf("uploads %+v", ups)
	}
	if r := uploadCall(t, nil, "GET", url, nil); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Fatalf("GET /api/uploads: %d", r.status)
	}
	if r := uploadCall(t, nil, "GET", s.URL()+"/healthz", nil); r.status != 200 || r.header.Get("X-Server-Id") != "srv-1" {
		t.Fatalf("healthz: %d", r.status)
	}
}

func TestUploadIdempotentCreationPerServer(t *testing.T) {
	servers := startUploadServers(t, 2)
	s1, s2 := servers[0], servers[1]
	id := createUpload(t, s1, "key-1", 100)
	// Written to, then created again: the same upload, with its offset.
	uploadCall(t, nil, "PATCH", s1.URL()+"/api/uploads/"+id, randomBytes(10), "Upload-Offset", "0")
	r := uploadCall(t, nil, "POST", s1.URL()+"/api/uploads", nil, "Idempotency-Key", "key-1", "Upload-Length", "100")
	if r.status != 201 || r.header.Get("Location") != "/api/uploads/"+id || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", r.status, r.header)
	}
	if m := r.json(t); m["id"] != id || m["offset"] != 10.0 {
		t.Fatalf("replay body %v", m)
	}
	if r := uploadCall(t, nil, "POST", s1.URL()+"/api/uploads", nil, "Idempotency-Key", "key-1", "Upload-Length", "101"); r.status != 422 {
		t.Fatalf("same key, other length: %d", r.status)
	}
	if n := len(s1.Uploads()); n != 1 {
		t.Fatalf("%d uploads on srv-1", n)
	}
	// Another server knows nothing of it.
	id2 := createUpload(t, s2, "key-1", 100)
	if id2 == id || len(s2.Uploads()) != 1 {
		t.Fatalf("srv-2 gave %s for the key of srv-1's %s", id2, id)
	}
	if r := uploadCall(t, nil, "HEAD", s2.URL()+"/api/uploads/"+id, nil); r.status != 404 || r.header.Get("X-Server-Id") != "srv-2" {
		t.Fatalf("srv-1's upload on srv-2: %d", r.status)
	}
}

// sendChunks writes data to the upload in shuffled chunks, half by offset
// and half by chunk number, re-sending some, and checks each answer.
func sendChunks(client *http.Client, base, id string, data []byte, size int) error {
	var order []int
	for n := 0; n*size < len(data); n++ {
		order = append(order, n)
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	order = append(order, order[:len(order)/2]...) // re-sent
	for i, n := range order {
		chunk := data[n*size : min((n+1)*size, len(data))]
		var r uploadResp
		var err error
		if i%2 == 0 {
			r, err = uploadDo(client, "PATCH", base+"/api/uploads/"+id, chunk, "Upload-Offset", strconv.Itoa(n*size))
		} else {
			r, err = uploadDo(client, "PUT", fmt.Sprintf("%s/api/uploads/%s/chunks/%d", base, id, n), chunk, "Chunk-Size", strconv.Itoa(size))
		}
		if err != nil {
			return err
		}
		if r.status != 204 || r.header.Get("Upload-Offset") == "" {
			return fmt.Errorf("chunk %d of %s: %d %s", n, id, r.status, r.body)
		}
	}
	return nil
}

func TestUploadWritesOutOfOrderAndResent(t *testing.T) {
	s := startUploadServers(t, 1)[0]
	data := randomBytes(10_000)
	id := createUpload(t, s, "k", len(data))
	base := s.URL() + "/api/uploads/" + id

	// Distinct bytes: overlapping and repeated writes count once.
	for _, w := range []struct{ off, n, want int }{{100, 50, 50}, {100, 50, 50}, {120, 50, 70}, {0, 10, 80}, {10, 90, 170}} {
		r := uploadCall(t, nil, "PATCH", base, data[w.off:w.off+w.n], "Upload-Offset", strconv.Itoa(w.off))
		if r.status != 204 || r.header.Get("Upload-Offset") != strconv.Itoa(w.want) {
			t.Fatalf("write %+v: %d Upload-Offset %s", w, r.status, r.header.Get("Upload-Offset"))
		}
	}
	if err := sendChunks(nil, s.URL(), id, data, 1024); err != nil {
		t.Fatal(err)
	}
	u, _ := s.Upload(id)
	if u.Received != int64(len(data)) || !bytes.Equal(u.Data, data) || u.Chunks != 5+15 {
		t.Fatalf("received %d, equal %v, chunks %d", u.Received, bytes.Equal(u.Data, data), u.Chunks)
	}

	// Bad writes change nothing.
	for _, c := range []struct {
		method, path string
		body         []byte
		headers      []string
	}{
		{"PATCH", "", []byte("x"), nil},
		{"PATCH", "", []byte("x"), []string{"Upload-Offset", "-1"}},
		{"PATCH", "", []byte("x"), []string{"Upload-Offset", "1e3"}},
		{"PATCH", "", []byte("x"), []string{"Upload-Offset", "10000"}},
		{"PATCH", "", []byte("xx"), []string{"Upload-Offset", "9999"}},
		{"PATCH", "", []byte("x"), []string{"Upload-Offset", "10001"}},
		{"PUT", "/chunks/0", []byte("x"), nil},
		{"PUT", "/chunks/0", []byte("x"), []string{"Chunk-Size", "0"}},
		{"PUT", "/chunks/x", []byte("x"), []string{"Chunk-Size", "1"}},
		{"PUT", "/chunks/-1", []byte("x"), []string{"Chunk-Size", "1"}},
		{"PUT", "/chunks/10", data[:1000], []string{"Chunk-Size", "1000"}}, // beyond the end
		{"PUT", "/chunks/3", data[:999], []string{"Chunk-Size", "1000"}},   // short, not the last
		{"PUT", "/chunks/3", data[:1001], []string{"Chunk-Size", "1000"}},  // long
		{"PUT", "/chunks/9", data[:999], []string{"Chunk-Size", "1024"}},   // the last is 784 bytes
	} {
		if r := uploadCall(t, nil, c.method, base+c.path, c.body, c.headers...); r.status != 400 {
			t.Fatalf("%s %s %q: %d", c.method, c.path, c.headers, r.status)
		}
	}
	if u2, _ := s.Upload(id); u2.Chunks != u.Chunks || !bytes.Equal(u2.Data, data) {
		t.Fatal("a bad write changed the upload")
	}
	// An empty write is accepted and writes nothing.
	if r := uploadCall(t, nil, "PATCH", base, nil, "Upload-Offset", "10000"); r.status != 204 || r.header.Get("Upload-Offset") != "10000" {
		t.Fatalf("empty write: %d", r.status)
	}
	// Chunk 0 bigger than the upload is the last one: the whole upload.
	id2 := createUpload(t, s, "k2", 10)
	if r := uploadCall(t, nil, "PUT", s.URL()+"/api/uploads/"+id2+"/chunks/0", data[:10], "Chunk-Size", "4096"); r.status != 204 || r.header.Get("Upload-Offset") != "10" {
		t.Fatalf("single chunk: %d", r.status)
	}
}

func TestUploadStatusAndCompletion(t *testing.T) {
	s := startUploadServers(t, 1)[0]
	data := randomBytes(3000)
	id := createUpload(t, s, "k", len(data))
	base := s.URL() + "/api/uploads/" + id
	uploadCall(t, nil, "PUT", base+"/chunks/2", data[2000:], "Chunk-Size", "1000")
	uploadCall(t, nil, "PUT", base+"/chunks/0", data[:1000], "Chunk-Size", "1000")

	r := uploadCall(t, nil, "HEAD", base, nil)
	if r.status != 200 || r.header.Get("Upload-Offset") != "2000" || r.header.Get("Upload-Length") != "3000" || len(r.body) != 0 {
		t.Fatalf("HEAD: %d %v", r.status, r.header)
	}
	r = uploadCall(t, nil, "GET", base, nil)
	if m := r.json(t); r.status != 200 || r.header.Get("Upload-Offset") != "2000" || r.header.Get("Upload-Length") != "3000" ||
		m["id"] != id || m["length"] != 3000.0 || m["offset"] != 2000.0 || m["completed"] != false {
		t.Fatalf("GET: %d %v %v", r.status, r.header, m)
	}
	if r := uploadCall(t, nil, "POST", base+"/complete", nil); r.status != 409 || r.json(t)["offset"] != 2000.0 {
		t.Fatalf("incomplete: %d %s", r.status, r.body)
	}
	if u, _ := s.Upload(id); u.Completed {
		t.Fatal("completed with bytes missing")
	}
	uploadCall(t, nil, "PATCH", base, data[1000:2000], "Upload-Offset", "1000")
	r = uploadCall(t, nil, "POST", base+"/complete", nil)
	if m := r.json(t); r.status != 200 || m["completed"] != true || m["offset"] != 3000.0 {
		t.Fatalf("complete: %d %v", r.status, m)
	}
	if r := uploadCall(t, nil, "POST", base+"/complete", nil); r.status != 200 {
		t.Fatalf("complete again: %d", r.status)
	}
	if u, _ := s.Upload(id); !u.Completed || !bytes.Equal(u.Data, data) || u.Chunks != 3 {
		t.Fatalf("upload %+v", u)
	}
	if r := uploadCall(t, nil, "GET", base, nil); r.json(t)["completed"] != true {
		t.Fatal("GET after completion")
	}
	// A completed upload takes no more writes.
	if r := uploadCall(t, nil, "PATCH", base, data[:10], "Upload-Offset", "0"); r.status != 409 {
		t.Fatalf("write after completion: %d", r.status)
	}
	if r := uploadCall(t, nil, "PUT", base+"/complete", nil); r.status != 405 {
		t.Fatalf("PUT complete: %d", r.status)
	}
}

func TestUploadAbort(t *testing.T) {
	s := startUploadServers(t, 1)[0]
	id := createUpload(t, s, "k", 100)
	base := s.URL() + "/api/uploads/" + id
	uploadCall(t, nil, "PATCH", base, []byte("hello"), "Upload-Offset", "0")
	if r := uploadCall(t, nil, "DELETE", base, nil); r.status != 204 || r.header.Get("X-Server-Id") != "srv-1" {
		t.Fatalf("DELETE: %d", r.status)
	}
	for _, c := range []struct{ method, path string }{{"GET", ""}, {"HEAD", ""}, {"PATCH", ""}, {"DELETE", ""}, {"POST", "/complete"}, {"PUT", "/chunks/0"}} {
		if r := uploadCall(t, nil, c.method, base+c.path, []byte("x"), "Upload-Offset", "0", "Chunk-Size", "1"); r.status != 404 {
			t.Fatalf("%s %s after abort: %d", c.method, c.path, r.status)
		}
	}
	u, ok := s.Upload(id)
	if !ok || !u.Aborted || u.Received != 5 || string(u.Data) != "hello" {
		t.Fatalf("aborted upload %+v", u)
	}
	// The key is free again: it creates a new upload.
	if id2 := createUpload(t, s, "k", 100); id2 == id || len(s.Uploads()) != 2 {
		t.Fatalf("key after abort: %s", id2)
	}
}

func TestUploadUnknownAndForeignIDs(t *testing.T) {
	servers := startUploadServers(t, 3)
	id := createUpload(t, servers[0], "k", 10)
	unknown := newUploadID()
	for _, s := range servers {
		ids := []string{unknown, "x"}
		if s != servers[0] {
			ids = append(ids, id)
		}
		for _, uid := range ids {
			for _, c := range []struct{ method, path string }{{"GET", ""}, {"HEAD", ""}, {"PATCH", ""}, {"DELETE", ""}, {"POST", "/complete"}, {"PUT", "/chunks/0"}, {"OPTIONS", ""}} {
				r := uploadCall(t, nil, c.method, s.URL()+"/api/uploads/"+uid+c.path, []byte("x"), "Upload-Offset", "0", "Chunk-Size", "1")
				if r.status != 404 || r.header.Get("X-Server-Id") != s.ID() {
					t.Fatalf("%s %s %s on %s: %d", c.method, uid, c.path, s.ID(), r.status)
				}
			}
		}
	}
	// The foreign requests are in the log, with the id they named.
	foreign := 0
	for _, rec := range servers[1].Requests() {
		if rec.UploadID == id {
			if rec.Status != 404 {
				t.Fatalf("record %+v", rec)
			}
			foreign++
		}
	}
	if foreign != 7 {
		t.Fatalf("%d foreign requests recorded on srv-2", foreign)
	}
	if r := uploadCall(t, nil, "GET", servers[0].URL()+"/elsewhere", nil); r.status != 404 || r.header.Get("X-Server-Id") != "srv-1" {
		t.Fatalf("other path: %d", r.status)
	}
}

func TestUploadKillRefusesAndStartKeepsUploads(t *testing.T) {
	s := startUploadServers(t, 1)[0]
	addr := s.Addr()
	id := createUpload(t, s, "k", 10)
	uploadCall(t, nil, "PATCH", s.URL()+"/api/uploads/"+id, []byte("01234"), "Upload-Offset", "0")

	// A keep-alive connection that the kill must close too.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	uploadCall(t, client, "GET", s.URL()+"/api/uploads/"+id, nil)

	s.Kill()
	if c, err := net.Dial("tcp", addr); err == nil || !strings.Contains(err.Error(), "refused") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial a killed server: %v", err)
	}
	req, _ := http.NewRequest("GET", s.URL()+"/api/uploads/"+id, nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a killed server answered on a kept-alive connection")
	}
	s.Kill() // idempotent

	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("restarted on %s, was %s", s.Addr(), addr)
	}
	if err := s.Start(); err == nil {
		t.Fatal("started twice")
	}
	if r := uploadCall(t, nil, "HEAD", s.URL()+"/api/uploads/"+id, nil); r.status != 200 || r.header.Get("Upload-Offset") != "5" {
		t.Fatalf("after restart: %d %v", r.status, r.header)
	}
	s.Close()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("a closed server accepts connections")
	}
}

func TestUploadCaps(t *testing.T) {
	// In-process, through the handler: 10,000 creations, then 507.
	s := NewUploadServer("caps")
	h := s.Handler()
	create := func(key string, length int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/api/uploads", nil)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Upload-Length", strconv.FormatInt(length, 10))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for i := range MaxUploadsPerServer {
		if w := create(strconv.Itoa(i), 10); w.Code != 201 {
			t.Fatalf("creation %d: %d", i, w.Code)
		}
	}
	if w := create("one more", 10); w.Code != 507 || w.Header().Get("X-Server-Id") != "caps" {
		t.Fatalf("creation beyond the cap: %d", w.Code)
	}
	if w := create("0", 10); w.Code != 201 {
		t.Fatalf("replay at the cap: %d", w.Code)
	}
	if n := len(s.Requests()); n != MaxUploadsPerServer+2 {
		t.Fatalf("%d requests recorded", n)
	}

	// The sum of the lengths: 1 GiB reserved (and not allocated), then 507.
	s2 := NewUploadServer("bytes")
	h = s2.Handler()
	if w := create("big", MaxUploadLength); w.Code != 201 {
		t.Fatalf("1 GiB upload: %d", w.Code)
	}
	if w := create("small", 1); w.Code != 507 {
		t.Fatalf("beyond the byte cap: %d", w.Code)
	}
	if u := s2.Uploads(); len(u) != 1 || cap(u[0].Data) != 0 {
		t.Fatalf("uploads %d", len(u))
	}

	// A body longer than the upload is read to the remaining length + 1 only.
	srv := startUploadServers(t, 1)[0]
	id := createUpload(t, srv, "k", 100)
	req, _ := http.NewRequest("PATCH", srv.URL()+"/api/uploads/"+id, io.MultiReader(bytes.NewReader(make([]byte, 10)), strings.NewReader(strings.Repeat("x", 1<<20))))
	req.Header.Set("Upload-Offset", "40")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if err == nil && resp.StatusCode != 400 {
		t.Fatalf("long body: %d", resp.StatusCode)
	}
	recs := srv.Requests()
	if last := recs[len(recs)-1]; last.Status != 400 || last.Bytes != 61 || last.Offset != 40 || last.UploadID != id {
		t.Fatalf("record %+v", last)
	}
	// Announced too long: refused before reading.
	if r := uploadCall(t, nil, "PATCH", srv.URL()+"/api/uploads/"+id, make([]byte, 101), "Upload-Offset", "0"); r.status != 400 {
		t.Fatalf("Content-Length beyond the length: %d", r.status)
	}
	if u, _ := srv.Upload(id); u.Received != 0 || len(u.Data) != 0 {
		t.Fatalf("upload %+v", u)
	}
}

// Concurrent uploads from two loopback addresses to three servers: every
// request reaches the owner, each upload is complete and byte-exact, and
// the log tells where each request came from.
func TestUploadConcurrentAndRecorded(t *testing.T) {
	servers := startUploadServers(t, 3)
	clients := map[string]*http.Client{}
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		tr := &http.Transport{DialContext: d.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		clients[ip] = &http.Client{Transport: tr}
	}
	type sent struct {
		server *UploadServer
		id, ip string
		data   []byte
	}
	var mu sync.Mutex
	var uploads []sent
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			s := servers[i%3]
			ip := []string{"127.0.0.1", "127.0.0.2"}[i%2]
			data := randomBytes(2000 + i*100)
			r, err := uploadDo(clients[ip], "POST", s.URL()+"/api/uploads", nil, "Idempotency-Key", fmt.Sprint("key-", i), "Upload-Length", strconv.Itoa(len(data)))
			var created struct{ ID string }
			if err == nil {
				err = json.Unmarshal(r.body, &created)
			}
			if err == nil {
				err = sendChunks(clients[ip], s.URL(), created.ID, data, 512)
			}
			if err == nil {
				r, err = uploadDo(clients[ip], "POST", s.URL()+"/api/uploads/"+created.ID+"/complete", nil)
			}
			if err == nil && r.status != 200 {
				err = fmt.Errorf("complete %s: %d", created.ID, r.status)
			}
			if err != nil {
				t.Error(err)
				return
			}
			id := created.ID
			mu.Lock()
			uploads = append(uploads, sent{s, id, ip, data})
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, s := range servers {
		for _, rec := range s.Requests() {
			if rec.Status == 404 || rec.Status == 0 {
				t.Fatalf("%s: %+v", s.ID(), rec)
			}
		}
	}
	for _, up := range uploads {
		u, ok := up.server.Upload(up.id)
		if !ok || !u.Completed || !bytes.Equal(u.Data, up.data) {
			t.Fatalf("upload %s on %s: found %v completed %v", up.id, up.server.ID(), ok, u.Completed)
		}
		n := 0
		for _, rec := range up.server.Requests() {
			if rec.UploadID != up.id {
				continue
			}
			n++
			if host, _, _ := net.SplitHostPort(rec.ClientAddr); host != up.ip {
				t.Fatalf("request from %s, sent from %s", rec.ClientAddr, up.ip)
			}
		}
		if want := 1 + u.Chunks + 1; n != want {
			t.Fatalf("%d requests for %s, want %d", n, up.id, want)
		}
	}
}

// A write still being read when the server is killed changes nothing.
func TestUploadKillDuringWrite(t *testing.T) {
	s := NewUploadServer("inproc")
	h := s.Handler()
	req := httptest.NewRequest("POST", "/api/uploads", nil)
	req.Header.Set("Idempotency-Key", "k")
	req.Header.Set("Upload-Length", "10")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	id := strings.TrimPrefix(w.Header().Get("Location"), "/api/uploads/")

	pr, pw := io.Pipe()
	req = httptest.NewRequest("PATCH", "/api/uploads/"+id, pr)
	req.Header.Set("Upload-Offset", "0")
	w = httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, req)
	}()
	pw.Write([]byte("01234"))
	s.Kill()
	pw.Close()
	<-done
	if w.Code != 503 {
		t.Fatalf("write across a kill: %d", w.Code)
	}
	if u, _ := s.Upload(id); u.Received != 0 || u.Chunks != 0 {
		t.Fatalf("upload %+v", u)
	}
	recs := s.Requests()
	if last := recs[len(recs)-1]; last.Status != 503 || last.Bytes != 5 {
		t.Fatalf("record %+v", last)
	}
}
