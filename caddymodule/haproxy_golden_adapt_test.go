package caddymodule

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// Every golden translation of haproxy/testdata (the seed's and one per
// feature: logging's syslog loggers and access logs, the TLS defaults'
// protocols and ciphers among them) adapts as a Caddyfile, without a
// warning, to JSON Caddy decodes strictly: what caddy ha migrate writes
// is a Caddyfile Caddy reads. (Their crt and ca-file paths are not the
// test's, so they are not provisioned; the corpus's are, by
// TestHAProxyCorpusValidates.) The adapted JSON, indented, is kept beside
// each golden (haproxy/testdata/<name>.json), so that a change of what
// Caddy is given shows in a diff; -update rewrites them.
func TestHAProxyAdapterTakesEveryGolden(t *testing.T) {
	files, err := filepath.Glob("../haproxy/testdata/*.Caddyfile")
	if err != nil || len(files) < 2 {
		t.Fatalf("%q %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			adapted, warnings, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt(text, map[string]any{"filename": file})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range warnings {
				if w.Message != "Caddyfile input is not formatted; run 'caddy fmt --overwrite' to fix inconsistencies" {
					t.Errorf("warning: %s", w)
				}
			}
			var cfg *caddy.Config
			if err := caddy.StrictUnmarshalJSON(caddy.RemoveMetaFields(adapted), &cfg); err != nil {
				t.Fatalf("decoding: %v\n%s", err, adapted)
			}
			// The JSON beside the golden, indented for review.
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, adapted, "", "\t"); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			golden := strings.TrimSuffix(file, ".Caddyfile") + ".json"
			if *updateGolden {
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestHAProxyAdapterTakesEveryGolden -update ./caddymodule/ writes it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("%s adapts to other JSON than %s (-update rewrites it):\n%s", file, golden, pretty.Bytes())
			}
		})
	}
}
