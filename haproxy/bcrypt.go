package haproxy

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"sync"

	"golang.org/x/crypto/blowfish"
)

// The password of a stats auth line becomes a bcrypt hash, which Caddy's
// basic_auth checks. golang.org/x/crypto/bcrypt draws each salt at
// random, so that two translations of one file would differ: caddy ha
// migrate's Caddyfile would not adapt to --adapter haproxy's JSON, and
// every caddy reload --adapter haproxy would load a "changed" config. The
// translation is a function of the file instead: the salt is derived
// from what is not secret (the proxy section's name and the user's name),
// never from the password, which a fast hash in the salt would give away.
// A salt still only has to make a precomputed table cost as much as the
// hash itself for each (section, user) pair; the password HAProxy held in
// clear is safer hashed so than it was. The hash is standard bcrypt ($2a$,
// checked by golang.org/x/crypto/bcrypt's CompareHashAndPassword in the
// tests); statsBcryptCost is x/crypto/bcrypt's DefaultCost.

const statsBcryptCost = 10

// statsMaxPassword is the longest password bcrypt tells from every longer
// one: it reads 72 bytes of the password and its NUL, so that past 71 it
// would take any password that begins with this one.
const statsMaxPassword = 71

// bcryptEncoding is bcrypt's base64 alphabet, unpadded.
var bcryptEncoding = base64.NewEncoding("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789").WithPadding(base64.NoPadding)

// statsPasswordHash is the bcrypt hash of password (at most
// statsMaxPassword bytes) for user in section, with the salt derived from
// section and user. A process that translates again (caddy reload
// --adapter haproxy) takes it from statsHashes: it is the same.
func statsPasswordHash(section, user, password string) string {
	seed := sha256.Sum256([]byte("caddy-ha haproxy stats auth salt\x00" + section + "\x00" + user))
	key := sha256.Sum256([]byte(string(seed[:]) + password))
	statsHashes.Lock()
	h, ok := statsHashes.m[key]
	statsHashes.Unlock()
	if ok {
		return h
	}
	h = bcryptWithSalt([]byte(password), statsBcryptCost, seed[:16])
	statsHashes.Lock()
	if len(statsHashes.m) >= 256 || statsHashes.m == nil {
		statsHashes.m = map[[32]byte]string{} // bounded: start afresh
	}
	statsHashes.m[key] = h
	statsHashes.Unlock()
	return h
}

// statsHashes are the hashes computed, by a digest of salt and password.
var statsHashes struct {
	sync.Mutex
	m map[[32]byte]string
}

// bcryptWithSalt is bcrypt (the $2a$ variant, as x/crypto/bcrypt writes
// it) of password with a 16-byte salt.
func bcryptWithSalt(password []byte, cost int, salt []byte) string {
	// As x/crypto/bcrypt does: the key is the password with its C
	// string's NUL.
	key := append(append([]byte{}, password...), 0)
	c, err := blowfish.NewSaltedCipher(key, salt)
	if err != nil {
		panic(err) // only for an empty key, and key has its NUL
	}
	for range 1 << cost {
		blowfish.ExpandKey(key, c)
		blowfish.ExpandKey(salt, c)
	}
	data := []byte("OrpheanBeholderScryDoubt")
	for i := 0; i < 24; i += 8 {
		for range 64 {
			c.Encrypt(data[i:i+8], data[i:i+8])
		}
	}
	cost2 := strconv.Itoa(cost)
	if cost < 10 {
		cost2 = "0" + cost2
	}
	// 23 of the 24 bytes, as every bcrypt writes them.
	return "$2a$" + cost2 + "$" + bcryptEncoding.EncodeToString(salt) + bcryptEncoding.EncodeToString(data[:23])
}
