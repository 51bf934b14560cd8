package haproxy

import (
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

// isDir reports whether path is a directory in files.
func isDir(files Files, path string) bool {
	info, err := files.Stat(path)
	return err == nil && info.IsDir()
}
