package haproxy

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// bcryptWithSalt is standard bcrypt: x/crypto/bcrypt (as Caddy's
// basic_auth) accepts its password and no other (cost 4 here, for speed).
func TestBcryptWithSaltIsBcrypt(t *testing.T) {
	salt := []byte("sixteen byte sal")
	for _, pw := range []string{"AdMiN123", "x", "pässwörd with spaces", strings.Repeat("p", statsMaxPassword)} {
		h := bcryptWithSalt([]byte(pw), bcrypt.MinCost, salt)
		if err := bcrypt.CompareHashAndPassword([]byte(h), []byte(pw)); err != nil {
			t.Errorf("%q: %s: %v", pw, h, err)
		}
		if err := bcrypt.CompareHashAndPassword([]byte(h), []byte(pw+"!")); err == nil {
			t.Errorf("%q: %s accepts another password", pw, h)
		}
	}
}

// The stats auth hash has x/crypto/bcrypt's default cost and is the same
// every translation; another section or user gets another salt, which
// does not depend on the password.
func TestStatsPasswordHash(t *testing.T) {
	h := statsPasswordHash("listen stats", "admin", "AdMiN123")
	if err := bcrypt.CompareHashAndPassword([]byte(h), []byte("AdMiN123")); err != nil {
		t.Fatalf("%s: %v", h, err)
	}
	if cost, _ := bcrypt.Cost([]byte(h)); cost != bcrypt.DefaultCost {
		t.Errorf("cost %d", cost)
	}
	statsHashes.Lock()
	statsHashes.m = nil // computed again, not remembered
	statsHashes.Unlock()
	if again := statsPasswordHash("listen stats", "admin", "AdMiN123"); again != h {
		t.Errorf("two translations, two hashes: %s %s", h, again)
	}
	salt := func(h string) string { return h[7:29] }
	for _, other := range []string{statsPasswordHash("frontend web", "admin", "AdMiN123"), statsPasswordHash("listen stats", "ops", "AdMiN123")} {
		if salt(other) == salt(h) {
			t.Errorf("a salt shared across sections or users: %s %s", h, other)
		}
	}
	if salt(statsPasswordHash("listen stats", "admin", "other")) != salt(h) {
		t.Error("the salt depends on the password")
	}
}
