package haproxy

import (
	"fmt"
	"io/fs"
	"os"
)

// Files is the one way the translation reads the files a configuration
// names (errorfiles, certificates, their directories): the filesystem
// unless a Config says otherwise (a test's own files). Its errors are
// refusals or notes of the line that named the file.
type Files interface {
	Stat(name string) (fs.FileInfo, error)
	ReadFile(name string) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error) // sorted by name
}

// osFiles is the filesystem.
type osFiles struct{}

func (osFiles) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }
func (osFiles) ReadFile(name string) ([]byte, error)       { return os.ReadFile(name) }
func (osFiles) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// files is where c's translation reads files: c.Files, else the
// filesystem (also for a translation without a Config).
func (c *Config) files() Files {
	if c == nil || c.Files == nil {
		return osFiles{}
	}
	return c.Files
}

// The bounds of the files a configuration names, each read whole when
// adapting.
const (
	maxErrorFile   = 64 << 10 // an errorfile, a return's file (HAProxy's own bound is its buffer size)
	maxCrtList     = 1 << 20  // a crt-list: a line per certificate
	maxCertificate = 1 << 20  // a PEM file: a certificate, its chain and key
	maxPatternFile = 64 << 20 // an ACL's pattern file: a value per line, up to maxPatterns
)

// readBounded reads the file at path whole: a regular file of at most max
// bytes, never a device or a FIFO, which could read forever (/dev/zero
// until memory runs out) or block.
func readBounded(files Files, path string, max int64) ([]byte, error) {
	info, err := files.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() || info.Size() > max {
		unit, n := "KiB", max>>10
		if max >= 1<<20 {
			unit, n = "MiB", max>>20
		}
		return nil, fmt.Errorf("%s is not a regular file of at most %d %s", path, n, unit)
	}
	return files.ReadFile(path)
}

// isDir reports whether path is a directory in files.
func isDir(files Files, path string) bool {
	info, err := files.Stat(path)
	return err == nil && info.IsDir()
}
