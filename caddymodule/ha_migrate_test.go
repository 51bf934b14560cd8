package caddymodule

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-ha/caddy-ha/haproxy"
	"github.com/caddy-ha/caddy-ha/internal/loopback"
	"github.com/caddy-ha/caddy-ha/internal/tools"
)

const (
	giteaMixed = "../haproxy/testdata/corpus/gitea-ssh-mixed.cfg"
	mariadbTCP = "../haproxy/testdata/corpus/mariadb-readwrite-tcp.cfg"
)

// runHA runs caddy ha with args as the caddy command does: the command
// registered, its flags parsed.
func runHA(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ha, ok := caddycmd.Commands()["ha"]
	if !ok {
		t.Fatal("no ha command registered")
	}
	cmd := &cobra.Command{Use: "ha", SilenceErrors: true}
	ha.CobraFunc(cmd)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

// caddy ha migrate --report prints a row per line of a configuration
// with a tcp proxy (refused, and what to do instead; the lines no reader
// reached not read, why) and fails counting them; as JSON too; and of
// one that translates, a row per line, and succeeds.
func TestMigrateReport(t *testing.T) {
	out, _, err := runHA(t, "migrate", "--report", giteaMixed)
	if err == nil || !strings.Contains(err.Error(), "does not translate: 1 lines refused, 9 not read") {
		t.Fatalf("error %v, want the refused and not read lines counted", err)
	}
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(rows) != 35 || rows[34] != "34 lines: 22 would be translated, 1 would be ignored, 1 would be approximated, 9 not read, 1 refused" {
		t.Fatalf("%d rows, want 34 lines and the count:\n%s", len(rows), out)
	}
	for _, want := range []string{
		giteaMixed + ":34  refused                mode tcp  — mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): frontend ssh_in stays with HAProxy (caddy ha migrate --split-tcp",
		giteaMixed + ":23  would be approximated  option http-server-close  — Caddy keeps its connections to the servers alive",
		giteaMixed + ":33  not read               bind :22  — its section was refused at line 34",
	} {
		if !strings.Contains(out, want+"") {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}

	out, _, err = runHA(t, "migrate", "--report", "--report-format", "json", giteaMixed)
	var lines []haproxy.LineOutcome
	if err == nil || json.Unmarshal([]byte(out), &lines) != nil || len(lines) != 34 {
		t.Fatalf("--report-format json: error %v, %d rows of:\n%s", err, len(lines), out)
	}
	if l := lines[len(lines)-8]; l.Pos.Line != 34 || l.Status != "refused" || !strings.Contains(l.Instead, "--split-tcp") {
		t.Errorf("the row of line 34: %+v", l)
	}

	out, _, err = runHA(t, "migrate", "--report", "../haproxy/testdata/corpus/wordpress-farm.cfg")
	if err != nil || strings.Contains(out, " refused ") || strings.Contains(out, "not read") || !strings.Contains(out, "wordpress-farm.cfg:17  approximated  frontend www  — the X-Forwarded-For") {
		t.Fatalf("a configuration that translates: error %v, report:\n%s", err, out)
	}
}

// caddy ha migrate --split-tcp writes a mixed file's mode tcp proxies as
// written, for HAProxy (which accepts them), and prints the Caddyfile of
// the rest, each saying so at its top; --report then says which lines
// HAProxy keeps. A file of tcp proxies only is refused, writing nothing;
// one without them is translated as it is. caddy adapt still refuses the
// mixed file, at its first tcp proxy, pointing to --split-tcp.
func TestMigrateSplitTCP(t *testing.T) {
	body, err := os.ReadFile(giteaMixed)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = HAProxyAdapter{}.Adapt(body, map[string]any{"filename": "gitea.cfg"})
	if err == nil || !strings.HasPrefix(err.Error(), "gitea.cfg:34: mode tcp: only mode http is translated (Caddy's layer-4 proxying is another module): frontend ssh_in stays with HAProxy (caddy ha migrate --split-tcp") {
		t.Fatalf("caddy adapt of the mixed file: %v, want it refused at the first tcp proxy's mode line", err)
	}
	residual := filepath.Join(t.TempDir(), "residual.cfg")
	out, _, err := runHA(t, "migrate", "--split-tcp", residual, giteaMixed)
	if err != nil {
		t.Fatal(err)
	}
	wantTop := "# The mode tcp proxies of " + giteaMixed + " are not here: HAProxy keeps serving them\n# from " + residual + " (caddy ha migrate --split-tcp): frontend ssh_in, backend gitea_ssh.\n"
	if !strings.HasPrefix(out, wantTop) || strings.Contains(out, "ssh_in") && !strings.Contains(out, wantTop) || strings.Contains(out, ".cfg:33: bind :22") || !strings.Contains(out, ".cfg:20: bind :443 ssl crt") {
		t.Fatalf("the Caddyfile:\n%s", out)
	}
	if _, _, err := (caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}).Adapt([]byte(out), nil); err != nil {
		t.Fatalf("the Caddyfile does not adapt: %v", err)
	}
	text, err := os.ReadFile(residual)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Written by caddy ha migrate --split-tcp from " + giteaMixed + ": its mode tcp proxies\n# (frontend ssh_in, backend gitea_ssh), for HAProxy",
		"\nglobal  # " + giteaMixed + ":3\n    log /dev/log local0  # " + giteaMixed + ":4\n",
		"\nfrontend ssh_in  # " + giteaMixed + ":32\n    bind :22  # " + giteaMixed + ":33\n    mode tcp  # " + giteaMixed + ":34\n",
		"    server gitea 127.0.0.1:2222 check  # " + giteaMixed + ":42\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the residual lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(string(text), "https_in") || strings.Contains(string(text), "gitea_web") {
		t.Errorf("the residual holds an HTTP proxy:\n%s", text)
	}
	if bin, ok := tools.Find(t, "haproxy", "the residual is not checked with haproxy -c"); ok {
		if out, err := exec.Command(bin, "-c", "-f", residual).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c refuses the residual: %v\n%s", err, out)
		}
	}

	out, _, err = runHA(t, "migrate", "--report", "--split-tcp", residual, giteaMixed)
	if err != nil || !strings.Contains(out, giteaMixed+":32  kept in HAProxy  frontend ssh_in  — in "+residual+": a mode tcp proxy") ||
		!strings.HasSuffix(out, "34 lines: 21 translated, 1 ignored, 2 approximated, 10 kept in HAProxy\n") {
		t.Fatalf("--report --split-tcp: error %v, report:\n%s", err, out)
	}

	own := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(own, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runHA(t, "migrate", "--split-tcp", own, own); err == nil || !strings.Contains(err.Error(), "name another file for the residual") {
		t.Errorf("--split-tcp over the configuration itself: error %v", err)
	}
	if after, _ := os.ReadFile(own); !bytes.Equal(after, body) {
		t.Errorf("--split-tcp over the configuration itself wrote over it")
	}

	none := filepath.Join(t.TempDir(), "none.cfg")
	if _, _, err := runHA(t, "migrate", "--split-tcp", none, mariadbTCP); err == nil || !strings.Contains(err.Error(), "every proxy of "+mariadbTCP+" is mode tcp (frontend mysql_write, frontend mysql_read, backend db_writer, backend db_readers)") {
		t.Errorf("a file of tcp proxies only: error %v", err)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("a file of tcp proxies only: %s written (%v)", none, err)
	}
	out, stderr, err := runHA(t, "migrate", "--split-tcp", none, "../haproxy/testdata/corpus/wordpress-farm.cfg")
	if err != nil || !strings.HasPrefix(out, "# Written by caddy ha migrate") || !strings.Contains(stderr, "has no mode tcp proxy: nothing to write to "+none) {
		t.Errorf("a file without tcp proxies: error %v, stderr %q", err, stderr)
	}
}

// A mixed configuration split by caddy ha migrate --split-tcp runs: real
// HAProxy serves the residual's mode tcp proxy (an echo server behind
// it) while Caddy serves the HTTP proxy from the Caddyfile.
func TestMigrateSplitTCPRuns(t *testing.T) {
	app := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app answered "+r.URL.Path) }))
	echo := echoServer(t)
	caddyAddr, hapAddr := loopback.FreeAddr(), loopback.FreeAddr()
	cfg := `global
    maxconn 100
defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend web
    bind ` + caddyAddr + `
    default_backend app
backend app
    server app1 ` + app + `
listen echo
    mode tcp
    bind ` + hapAddr + `
    server echo1 ` + echo + `
`
	dir := t.TempDir()
	file, residual := filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "residual.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runHA(t, "migrate", "--split-tcp", residual, file)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(residual)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text), caddyAddr) || strings.Contains(out, hapAddr) {
		t.Fatalf("an address in both parts:\n%s\n%s", text, out)
	}
	startHAProxy(t, string(text), hapAddr)
	adapted, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(out), nil)
	if err != nil {
		t.Fatalf("the Caddyfile does not adapt: %v\n%s", err, out)
	}
	loadAdapted(t, adapted, out)

	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + caddyAddr + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "app answered /orders" {
		t.Errorf("through Caddy: %d %q, want the app's answer", resp.StatusCode, body)
	}
	conn, err := net.DialTimeout("tcp", hapAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "ping over HAProxy\n"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("ping over HAProxy\n"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "ping over HAProxy\n" {
		t.Errorf("through HAProxy: %q %v, want the echo", got, err)
	}
}

// echoServer is a TCP server on loopback that sends back what it reads,
// until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// What the Caddyfile cannot say (session tickets off, for
// ssl-default-bind-options no-tls-tickets): caddy ha migrate says at the
// top of its Caddyfile that the adapter's JSON carries it, and --report
// at the line; the adapter's JSON has it.
func TestMigrateSaysWhatTheCaddyfileCannot(t *testing.T) {
	const file = "../haproxy/testdata/corpus/mozilla-intermediate.cfg"
	out, _, err := runHA(t, "migrate", file)
	if err != nil {
		t.Fatal(err)
	}
	top := strings.Join(strings.Split(out, "\n")[:5], "\n")
	if !strings.Contains(top, "caddy adapt --adapter haproxy of the HAProxy file turns TLS session\n# tickets off in its JSON (apps.tls.session_tickets.disabled), as line 8's no-tls-tickets asks") {
		t.Errorf("the Caddyfile's first lines do not say what its JSON carries:\n%s", top)
	}
	report, _, err := runHA(t, "migrate", "--report", file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(report, ":8   approximated  ssl-default-bind-options prefer-client-ciphers no-sslv3 no-tlsv10 no-tlsv11 no-tls-tickets  — prefer-client-ciphers ignored: Go orders the suites itself, in neither HAProxy's order nor the client's; no-tls-tickets: session tickets off in the JSON caddy adapt --adapter haproxy makes (apps.tls.session_tickets.disabled), which a Caddyfile cannot say") {
		t.Errorf("--report does not say it at line 8:\n%s", report)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	adapted, _, err := HAProxyAdapter{}.Adapt(body, map[string]any{"filename": file})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			TLS struct {
				SessionTickets struct {
					Disabled bool `json:"disabled"`
				} `json:"session_tickets"`
			} `json:"tls"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(adapted, &cfg); err != nil || !cfg.Apps.TLS.SessionTickets.Disabled {
		t.Errorf("the adapter's JSON has no apps.tls.session_tickets.disabled (%v): %s", err, adapted)
	}
}
