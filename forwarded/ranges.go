package forwarded

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// MaxRangeListBytes bounds a downloaded or saved range list.
const MaxRangeListBytes = 1 << 20

// MaxRanges bounds the ranges of one list.
const MaxRanges = 10_000

// ParseRangeList parses a list of CIDR prefixes, one per line (blank lines
// and # comments allowed), of one family: IPv6 when v6, else IPv4. Anything
// else makes the whole list invalid, as does a list without a prefix: a
// half-read or empty list must never replace a good one.
func ParseRangeList(body []byte, v6 bool) ([]netip.Prefix, error) {
	if len(body) > MaxRangeListBytes {
		return nil, fmt.Errorf("range list over %d bytes", MaxRangeListBytes)
	}
	var out []netip.Prefix
	sc := bufio.NewScanner(bytes.NewReader(body))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		p, err := netip.ParsePrefix(text)
		if err != nil || p.Addr().Zone() != "" {
			return nil, fmt.Errorf("line %d: not a CIDR prefix", line)
		}
		if p.Addr().Is6() != v6 || p.Addr().Is4In6() {
			return nil, fmt.Errorf("line %d: %s is not an IPv%s prefix", line, p, map[bool]string{false: "4", true: "6"}[v6])
		}
		if len(out) == MaxRanges {
			return nil, fmt.Errorf("more than %d ranges", MaxRanges)
		}
		out = append(out, p.Masked())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no ranges")
	}
	return out, nil
}

// RangeFile is the saved form of a range set: the IPv4 list, then the IPv6
// list, each under a "# ipv4" / "# ipv6" line.
type RangeFile struct {
	V4, V6 []netip.Prefix
}

// All returns both lists as one.
func (f RangeFile) All() []netip.Prefix { return append(append([]netip.Prefix(nil), f.V4...), f.V6...) }

// Marshal writes the file's text.
func (f RangeFile) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString("# ipv4\n")
	for _, p := range f.V4 {
		b.WriteString(p.String() + "\n")
	}
	b.WriteString("# ipv6\n")
	for _, p := range f.V6 {
		b.WriteString(p.String() + "\n")
	}
	return b.Bytes()
}

// ParseRangeFile reads what Marshal wrote; both lists must be valid.
func ParseRangeFile(text []byte) (RangeFile, error) {
	_, rest, ok := bytes.Cut(text, []byte("# ipv4\n"))
	v4, v6, ok6 := bytes.Cut(rest, []byte("# ipv6\n"))
	if !ok || !ok6 {
		return RangeFile{}, errors.New("not a range file: want # ipv4 and # ipv6 sections")
	}
	var f RangeFile
	var err error
	if f.V4, err = ParseRangeList(v4, false); err != nil {
		return RangeFile{}, fmt.Errorf("ipv4: %v", err)
	}
	if f.V6, err = ParseRangeList(v6, true); err != nil {
		return RangeFile{}, fmt.Errorf("ipv6: %v", err)
	}
	return f, nil
}

// LoadRangeFile reads and parses a saved range file.
func LoadRangeFile(path string) (RangeFile, error) {
	text, err := readBounded(path)
	if err != nil {
		return RangeFile{}, err
	}
	return ParseRangeFile(text)
}

// Save writes the file atomically (a temporary file renamed over it), so a
// reader never sees half of it. It creates the file's directory if need be:
// the default, in Caddy's data directory, may not exist yet on a new node.
func (f RangeFile) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(f.Marshal()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// FetchRangeFile downloads the IPv4 and IPv6 lists; both must be valid.
func FetchRangeFile(ctx context.Context, client *http.Client, v4URL, v6URL string) (RangeFile, error) {
	var f RangeFile
	var err error
	if f.V4, err = fetchRangeList(ctx, client, v4URL, false); err != nil {
		return RangeFile{}, err
	}
	if f.V6, err = fetchRangeList(ctx, client, v6URL, true); err != nil {
		return RangeFile{}, err
	}
	return f, nil
}

func fetchRangeList(ctx context.Context, client *http.Client, url string, v6 bool) ([]netip.Prefix, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxRangeListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	list, err := ParseRangeList(body, v6)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	return list, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, 2*MaxRangeListBytes+1))
	if err != nil {
		return nil, err
	}
	if len(text) > 2*MaxRangeListBytes {
		return nil, fmt.Errorf("%s: over %d bytes", path, 2*MaxRangeListBytes)
	}
	return text, nil
}
