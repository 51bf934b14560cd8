package hadiff

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-ha/caddy-ha/fakecluster"
)

// TestFiles writes, in dir, a certificate with its key for each crt of
// l's binds whose file is not there (as HAProxy's crt file holds them;
// a directory, for a crt ending in a slash, holding one), for hosts and
// localhost, and a CA for a bind's ca-file; it returns the file each
// path written maps to (an existing crt maps to itself).
func TestFiles(l Layout, dir string, hosts []string) (map[string]string, error) {
	ca, err := fakecluster.NewCA(time.Hour)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, b := range l.Binds {
		for i := 2; i+1 < len(b.Words); i++ {
			path := b.Words[i+1]
			if _, done := files[path]; done {
				continue
			}
			switch b.Words[i] {
			case "ca-file":
				files[path] = caFile
			case "crt":
				if _, err := os.Stat(path); err == nil && filepath.IsAbs(path) {
					files[path] = path
					continue
				}
				_, pem, err := ca.Issue(append(append([]string(nil), hosts...), "localhost")...)
				if err != nil {
					return nil, err
				}
				name := "crt" + strconv.Itoa(len(files))
				to := filepath.Join(dir, name+".pem")
				if strings.HasSuffix(path, "/") {
					sub := filepath.Join(dir, name)
					if err := os.Mkdir(sub, 0o700); err != nil {
						return nil, err
					}
					to = sub + "/"
					err = os.WriteFile(filepath.Join(sub, "site.pem"), pem, 0o600)
				} else {
					err = os.WriteFile(to, pem, 0o600)
				}
				if err != nil {
					return nil, err
				}
				files[path] = to
			}
		}
	}
	return files, nil
}
