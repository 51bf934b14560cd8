// Package cdp drives headless Chromium through the DevTools protocol over
// --remote-debugging-pipe (NUL-terminated JSON on file descriptors 3 and
// 4), for tests: browser contexts (each a separate profile with its own
// connections and HTTP auth cache), pages in them, commands and events.
package cdp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Flags start Chromium headless, without anything that talks to the
// network by itself, and without lowering the priority of pages it deems
// in the background: on a loaded machine those stalled for tens of
// seconds.
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-renderer-backgrounding", "--disable-background-timer-throttling",
	"--disable-backgrounding-occluded-windows",
	"--remote-debugging-pipe",
}

// maxMessage bounds one message from Chromium.
const maxMessage = 64 << 20

// Browser is one Chromium process.
type Browser struct {
	cmd     *exec.Cmd
	out     *os.File // our end of Chromium's fd 3
	profile string
	exited  chan struct{}

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan message
	events  map[string]func(Event) // by session id + "\x00" + method
	err     error                  // why the connection ended
}

// Event is a message Chromium sent on its own.
type Event struct {
	Session string
	Method  string
	Params  json.RawMessage
}

type message struct {
	ID      int64           `json:"id,omitempty"`
	Session string          `json:"sessionId,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Start runs Chromium at path with Flags, args and a fresh profile.
func Start(path string, args ...string) (*Browser, error) {
	profile, err := os.MkdirTemp("", "cdp-profile-")
	if err != nil {
		return nil, err
	}
	toChrome, ourOut, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ourIn, fromChrome, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	all := append(append(append([]string{}, Flags...), "--user-data-dir="+profile), args...)
	cmd := exec.Command(path, append(all, "about:blank")...)
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fd 3, fd 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{toChrome, ourOut, ourIn, fromChrome} {
			f.Close()
		}
		_ = os.RemoveAll(profile)
		return nil, err
	}
	toChrome.Close()
	fromChrome.Close()
	b := &Browser{
		cmd: cmd, out: ourOut, profile: profile, exited: make(chan struct{}),
		pending: map[int64]chan message{}, events: map[string]func(Event){},
	}
	go func() { _ = cmd.Wait(); close(b.exited) }()
	go b.read(ourIn)
	return b, nil
}

// read delivers Chromium's answers and events until the pipe closes.
func (b *Browser) read(in *os.File) {
	defer in.Close()
	r := bufio.NewReaderSize(in, 1<<16)
	var err error
	for {
		var raw []byte
		raw, err = readMessage(r)
		if err != nil {
			break
		}
		var m message
		if err = json.Unmarshal(raw, &m); err != nil {
			break
		}
		b.mu.Lock()
		if m.ID != 0 {
			ch := b.pending[m.ID]
			delete(b.pending, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		handle := b.events[m.Session+"\x00"+m.Method]
		b.mu.Unlock()
		if handle != nil {
			// A handler may send commands, whose answers this loop reads.
			go handle(Event{Session: m.Session, Method: m.Method, Params: m.Params})
		}
	}
	b.mu.Lock()
	b.err = fmt.Errorf("cdp: connection to Chromium ended: %w", err)
	for id, ch := range b.pending {
		delete(b.pending, id)
		close(ch)
	}
	b.mu.Unlock()
}

func readMessage(r *bufio.Reader) ([]byte, error) {
	var buf bytes.Buffer
	for {
		chunk, err := r.ReadSlice(0)
		buf.Write(chunk)
		if buf.Len() > maxMessage {
			return nil, errors.New("message too large")
		}
		if err == nil {
			return buf.Bytes()[:buf.Len()-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// On sets the handler of an event of a session ("" for the browser's);
// each event runs it in a goroutine of its own.
func (b *Browser) On(session, method string, handle func(Event)) {
	b.mu.Lock()
	b.events[session+"\x00"+method] = handle
	b.mu.Unlock()
}

// Call sends a command to a session ("" for the browser) and decodes its
// result into result (if not nil).
func (b *Browser) Call(ctx context.Context, session, method string, params, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if params == nil {
		p = []byte("{}")
	}
	ch := make(chan message, 1)
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return b.err
	}
	b.nextID++
	id := b.nextID
	b.pending[id] = ch
	raw, _ := json.Marshal(message{ID: id, Session: session, Method: method, Params: p})
	_, err = b.out.Write(append(raw, 0)) // under mu: one message at a time
	b.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case m, ok := <-ch:
		switch {
		case !ok:
			return b.err
		case m.Error != nil:
			return fmt.Errorf("cdp: %s: %s (%d)", method, m.Error.Message, m.Error.Code)
		case result != nil:
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("cdp: %s: %w", method, ctx.Err())
	}
}

// Page is a page in a browser context of its own, attached in a session.
type Page struct {
	B       *Browser
	Context string // the browser context's id
	Target  string
	Session string
}

// NewPage opens about:blank in a new browser context (a profile of its
// own: its own connections, cookies and HTTP auth cache).
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	var bc struct {
		BrowserContextID string `json:"browserContextId"`
	}
	if err := b.Call(ctx, "", "Target.createBrowserContext", map[string]any{"disposeOnDetach": true}, &bc); err != nil {
		return nil, err
	}
	var tg struct {
		TargetID string `json:"targetId"`
	}
	if err := b.Call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": bc.BrowserContextID}, &tg); err != nil {
		return nil, err
	}
	var at struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tg.TargetID, "flatten": true}, &at); err != nil {
		return nil, err
	}
	return &Page{B: b, Context: bc.BrowserContextID, Target: tg.TargetID, Session: at.SessionID}, nil
}

// Close closes the page and its browser context, with its connections.
func (p *Page) Close(ctx context.Context) error {
	return p.B.Call(ctx, "", "Target.disposeBrowserContext", map[string]any{"browserContextId": p.Context}, nil)
}

// Call sends a command to the page's session.
func (p *Page) Call(ctx context.Context, method string, params, result any) error {
	return p.B.Call(ctx, p.Session, method, params, result)
}

// AuthAnswer is what a page says when a server asks for credentials.
type AuthAnswer struct {
	User, Password string
}

// Authenticate makes the page answer every HTTP authentication challenge
// (Fetch.authRequired) with creds, and counts the challenges in asked (if
// not nil). Every request pauses in the Fetch domain and is continued.
func (p *Page) Authenticate(ctx context.Context, creds AuthAnswer, asked func()) error {
	type paused struct {
		RequestID string `json:"requestId"`
	}
	p.B.On(p.Session, "Fetch.requestPaused", func(e Event) {
		var ev paused
		if json.Unmarshal(e.Params, &ev) == nil {
			_ = p.Call(ctx, "Fetch.continueRequest", map[string]any{"requestId": ev.RequestID}, nil)
		}
	})
	p.B.On(p.Session, "Fetch.authRequired", func(e Event) {
		var ev paused
		if json.Unmarshal(e.Params, &ev) != nil {
			return
		}
		if asked != nil {
			asked()
		}
		_ = p.Call(ctx, "Fetch.continueWithAuth", map[string]any{
			"requestId": ev.RequestID,
			"authChallengeResponse": map[string]any{
				"response": "ProvideCredentials", "username": creds.User, "password": creds.Password,
			},
		}, nil)
	})
	return p.Call(ctx, "Fetch.enable", map[string]any{
		"handleAuthRequests": true,
		"patterns":           []map[string]any{{"urlPattern": "*"}},
	}, nil)
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(ctx context.Context, url string) error {
	loaded := make(chan struct{}, 1)
	p.B.On(p.Session, "Page.loadEventFired", func(Event) {
		select {
		case loaded <- struct{}{}:
		default:
		}
	})
	if err := p.Call(ctx, "Page.enable", nil, nil); err != nil {
		return err
	}
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.Call(ctx, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("cdp: navigating to %s: %s", url, nav.ErrorText)
	}
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cdp: %s did not load: %w", url, ctx.Err())
	}
}

// Eval evaluates a JavaScript expression in the page, awaiting it if it
// is a promise, and decodes its value (JSON-serialisable) into result.
func (p *Page) Eval(ctx context.Context, expression string, result any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.Call(ctx, "Runtime.evaluate", map[string]any{
		"expression": expression, "awaitPromise": true, "returnByValue": true,
	}, &r)
	switch {
	case err != nil:
		return err
	case r.ExceptionDetails != nil:
		return fmt.Errorf("cdp: %s %s", r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	case result != nil:
		return json.Unmarshal(r.Result.Value, result)
	}
	return nil
}

// Close ends Chromium and every process it started, and removes its
// profile.
func (b *Browser) Close() {
	closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = b.Call(closeCtx, "", "Browser.close", nil, nil)
	cancel()
	select {
	case <-b.exited:
	case <-time.After(3 * time.Second):
	}
	// Renderers and helpers can outlive the browser process.
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.exited
	b.out.Close()
	_ = os.RemoveAll(b.profile)
}
