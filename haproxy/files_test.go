package haproxy

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// mapFiles is Files from a map of absolute paths to contents.
type mapFiles map[string]string

func (m mapFiles) fs() fstest.MapFS {
	out := fstest.MapFS{}
	for name, data := range m {
		out[strings.TrimPrefix(name, "/")] = &fstest.MapFile{Data: []byte(data)}
	}
	return out
}

func (m mapFiles) Stat(name string) (fs.FileInfo, error) {
	return fs.Stat(m.fs(), strings.TrimPrefix(name, "/"))
}

func (m mapFiles) ReadFile(name string) ([]byte, error) {
	return fs.ReadFile(m.fs(), strings.TrimPrefix(name, "/"))
}

func (m mapFiles) ReadDir(name string) ([]fs.DirEntry, error) {
	return fs.ReadDir(m.fs(), strings.TrimPrefix(name, "/"))
}

// Issue 27.4: the files a configuration names are read through one seam,
// which a test fills: an errorfile's body comes from it, and a file it
// lacks is a refusal naming the line that named it.
func TestFilesAreReadThroughOneSeam(t *testing.T) {
	const text = "defaults\n\tmode http\n\terrorfile 503 /etc/haproxy/errors/503.http\n" +
		"frontend f\n\tbind :80\n\tdefault_backend b\nbackend b\n\tserver s 10.0.0.1:80\n"
	cfg, err := Parse(strings.NewReader(text), "s.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Files = mapFiles{"/etc/haproxy/errors/503.http": "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nfrom the seam\n"}
	out, err := caddyfileOf(cfg)
	if err != nil || !strings.Contains(out, `respond "from the seam`) {
		t.Fatalf("%v\n%s", err, out)
	}
	cfg.Files = mapFiles{}
	_, err = caddyfileOf(cfg)
	var e *Error
	if !errors.As(err, &e) || e.Pos.Line != 3 || !strings.Contains(err.Error(), "errorfile 503") {
		t.Fatalf("a missing errorfile: %v, want a refusal at s.cfg:3", err)
	}
}
