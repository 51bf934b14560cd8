package forwarded

import (
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"
)

// Save creates the directories the file is to go in, as on a node whose
// data directory does not exist yet.
func TestRangeFileSaveCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "caddy", "cloudflare-ranges.txt")
	f := RangeFile{V4: []netip.Prefix{netip.MustParsePrefix("173.245.48.0/20")}, V6: []netip.Prefix{netip.MustParsePrefix("2400:cb00::/32")}}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadRangeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("read back %+v, want %+v", got, f)
	}
}
