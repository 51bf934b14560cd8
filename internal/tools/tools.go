// Package tools finds the programs that tests run (curl, haproxy,
// chromium, promtool, …) on PATH, one way for every package: where make
// test or CI runs the tests, a missing one fails the test; elsewhere the
// test says what goes unchecked and the caller skips that part.
package tools

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv, set by make test (and CI), makes a missing tool a failure
// rather than a skip.
const RequireEnv = "CADDY_HA_REQUIRE_TOOLS"

// Find returns the path of the program name on PATH. Without it, t fails
// in CI or with RequireEnv set; elsewhere it logs what is not checked
// (without) and Find returns false.
func Find(t testing.TB, name, without string) (string, bool) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path, true
	}
	msg := name + " is not on PATH: " + without
	if os.Getenv("CI") != "" || os.Getenv(RequireEnv) != "" {
		t.Fatal(msg + " (required here: CI or " + RequireEnv + " is set; make test-deps installs it)")
	}
	t.Log(msg)
	return "", false
}

// Must returns the path of the program name on PATH, or fails t: for a
// tool without which the test proves nothing.
func Must(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: run make test-deps", name)
	}
	return path
}
