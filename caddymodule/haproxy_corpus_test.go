package caddymodule

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// Every configuration of the HAProxy corpus (haproxy/testdata/corpus),
// of HAProxy's examples and Debian's haproxy.cfg (as Debian's haproxy
// package installs them) that translates is adapted by --adapter haproxy,
// to the JSON that caddy ha migrate's Caddyfile adapts to, and passes what
// caddy validate does: its JSON decoded strictly and every
// module provisioned (which starts health checks: every server address is
// moved to loopback, as the tests' traffic must stay). Certificate and CA files (crt, ca-file) are the
// test's own, written for it, so that the TLS app loads them. Those that
// are refused are TestCorpus's (package haproxy), which asserts each
// outcome and that the refusal names its file, line and keyword.
func TestHAProxyCorpusValidates(t *testing.T) {
	files, err := filepath.Glob("../haproxy/testdata/corpus/*.cfg")
	if err != nil || len(files) < 12 {
		t.Fatalf("corpus %q %v", files, err)
	}
	system, _ := filepath.Glob("/usr/share/doc/haproxy/examples/*.cfg")
	if _, err := os.Stat("/etc/haproxy/haproxy.cfg"); err == nil {
		system = append(system, "/etc/haproxy/haproxy.cfg")
	}
	if len(system) == 0 && os.Getenv("CADDY_HA_REQUIRE_TOOLS") == "1" {
		t.Fatal("Debian's haproxy package's configurations are missing: apt-get install haproxy")
	}
	files = append(files, system...)
	crtFile, crtDir, caFile := corpusTLSFiles(t)
	var translated []string
	for _, file := range files {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(file, "../"), "/", "_"), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			body = withLoopbackServers(withTestTLSFiles(body, crtFile, crtDir, caFile))
			tr, err := migrate(body, file)
			if err != nil {
				t.Logf("refused, not validated (TestCorpus asserts the refusal): %v", err)
				return
			}
			translated = append(translated, filepath.Base(file))
			adapted, warnings, err := caddyconfig.GetAdapter("haproxy").Adapt(body, map[string]any{"filename": file})
			if err != nil || len(warnings) != len(tr.Warnings) {
				t.Fatalf("adapting: %v; warnings %v, want the translation's approximations alone (%d)", err, warnings, len(tr.Warnings))
			}
			for _, w := range warnings {
				if w.File != file || w.Line < 1 {
					t.Errorf("a warning without its file and line: %+v", w)
				}
			}
			if viaCaddyfile := caddyfileJSON(t, tr); string(viaCaddyfile) != string(adapted) {
				t.Fatalf("caddy ha migrate's Caddyfile adapts otherwise than --adapter haproxy:\n%s\n%s", adapted, viaCaddyfile)
			}
			var cfg *caddy.Config
			if err := caddy.StrictUnmarshalJSON(caddy.RemoveMetaFields(adapted), &cfg); err != nil {
				t.Fatalf("decoding the adapted config: %v\n%s", err, adapted)
			}
			if err := caddy.Validate(cfg); err != nil {
				t.Fatalf("caddy validate: %v\n%s", err, adapted)
			}
		})
	}
	if len(translated) == 0 {
		t.Fatal("no configuration of the corpus translates: nothing was validated")
	}
	t.Logf("validated: %s", strings.Join(translated, ", "))
}

// corpusTLSFiles writes a certificate and its key in one PEM file (as
// HAProxy's crt wants them), a directory holding that file (for a crt
// naming a directory), and the CA that signed it.
func corpusTLSFiles(t *testing.T) (crtFile, crtDir, caFile string) {
	t.Helper()
	caFile, serverTLS := testPKI(t)
	crtDir = t.TempDir()
	crtFile = filepath.Join(crtDir, "site.pem")
	if err := os.WriteFile(crtFile, crtPEM(t, serverTLS.Certificates[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	return crtFile, crtDir, caFile
}

var (
	serverIPv4 = regexp.MustCompile(`(?m)^(\s*(?:server|default-server)\s.*?)\b(?:\d{1,3}\.){3}\d{1,3}(:\d+)`)
	crtWord    = regexp.MustCompile(`(\scrt\s+)(\S+)`)
	caFileWord = regexp.MustCompile(`(\sca-file\s+)(\S+)`)
)

// withLoopbackServers moves each server's IPv4 address to a loopback one
// of its own (127.1.0.<n>, an address of 127.* kept), its port kept, so
// that validating (which starts the active health checks and the leader
// policy's probes) sends nothing off the machine, and two servers stay two.
func withLoopbackServers(body []byte) []byte {
	moved := map[string]string{}
	for prev := []byte(nil); string(prev) != string(body); {
		prev = body
		body = serverIPv4.ReplaceAllFunc(body, func(m []byte) []byte {
			sub := serverIPv4.FindSubmatch(m)
			ip := strings.TrimSuffix(strings.TrimPrefix(string(m), string(sub[1])), string(sub[2]))
			if strings.HasPrefix(ip, "127.") {
				return m
			}
			if moved[ip] == "" {
				moved[ip] = fmt.Sprintf("127.1.0.%d", len(moved)+1)
			}
			return []byte(string(sub[1]) + moved[ip] + string(sub[2]))
		})
	}
	return body
}

// withTestTLSFiles points every crt at the test's PEM file (its directory
// for a crt ending in a slash) and every ca-file at the test's CA.
func withTestTLSFiles(body []byte, crtFile, crtDir, caFile string) []byte {
	body = crtWord.ReplaceAllFunc(body, func(m []byte) []byte {
		sub := crtWord.FindSubmatch(m)
		to := crtFile
		if strings.HasSuffix(string(sub[2]), "/") {
			to = crtDir + "/"
		}
		return append(append([]byte{}, sub[1]...), to...)
	})
	return caFileWord.ReplaceAll(body, []byte("${1}"+caFile))
}
