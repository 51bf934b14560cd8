package tools

import "testing"

func TestFindAndMust(t *testing.T) {
	if path, ok := Find(t, "sh", "nothing"); !ok || path == "" {
		t.Fatalf("sh: %q %v", path, ok)
	}
	if path := Must(t, "sh"); path == "" {
		t.Fatal("sh: no path")
	}
	t.Setenv(RequireEnv, "")
	t.Setenv("CI", "")
	if _, ok := Find(t, "no-such-tool-caddy-ha", "nothing is checked"); ok {
		t.Fatal("found a tool that does not exist")
	}
}
