package caddymodule

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/caddyauth"
	"github.com/go-crypt/crypt"
	"github.com/go-crypt/crypt/algorithm/bcrypt"
	"github.com/go-crypt/crypt/algorithm/shacrypt"
)

// basic_auth_crypt is basic_auth with the crypt(3) hashes that HAProxy's
// userlists, /etc/shadow and htpasswd hold: SHA-256 ($5$) and SHA-512
// ($6$) crypt, and bcrypt, checked by go-crypt/crypt (Authelia's). Caddy's
// own basic_auth checks bcrypt and argon2id only; the HAProxy adapter
// writes this directive for a userlist with a SHA-crypt hash.
//
//	basic_auth_crypt [<matcher>] [<realm>] {
//		<username> <hash>
//	}
func init() {
	caddy.RegisterModule(CryptHash{})
	httpcaddyfile.RegisterHandlerDirective("basic_auth_crypt", parseBasicAuthCrypt)
	httpcaddyfile.RegisterDirectiveOrder("basic_auth_crypt", httpcaddyfile.After, "basic_auth")
}

// CryptHash checks a password against a SHA-256 crypt, SHA-512 crypt or
// bcrypt hash in crypt(3)'s format (http.authentication.hashes.crypt).
type CryptHash struct{}

func (CryptHash) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.authentication.hashes.crypt", New: func() caddy.Module { return new(CryptHash) }}
}

// cryptDecoder reads the hashes CryptHash takes, and no other (no
// plaintext, MD5 or SHA-1 crypt).
var cryptDecoder = func() *crypt.Decoder {
	d := crypt.NewDecoder()
	if err := shacrypt.RegisterDecoder(d); err != nil {
		panic(err)
	}
	if err := bcrypt.RegisterDecoderStandard(d); err != nil {
		panic(err)
	}
	return d
}()

// Compare tells whether plaintext is the password of hashed.
func (CryptHash) Compare(hashed, plaintext []byte) (bool, error) {
	digest, err := cryptDecoder.Decode(string(hashed))
	if err != nil {
		return false, err
	}
	return digest.MatchBytesAdvanced(plaintext)
}

// cryptFakeHash is a SHA-512 crypt hash compared against for an unknown
// user, so that its answer takes as long as a known user's.
const cryptFakeHash = "$6$fakesaltfakesalt$w2H7ix8h78iXH9xi5ygLJb9TOeoe7s40yBqk/4guk2VCEVC7rTXZfE7.uEI4HDgaQmR52MGg5AZH7YAPCdPyZ1"

// FakeHash is cryptFakeHash.
func (CryptHash) FakeHash() []byte { return []byte(cryptFakeHash) }

// Hash is plaintext's SHA-512 crypt hash (for caddy hash-password).
func (CryptHash) Hash(plaintext []byte) ([]byte, error) {
	h, err := shacrypt.NewSHA512()
	if err != nil {
		return nil, err
	}
	digest, err := h.Hash(string(plaintext))
	if err != nil {
		return nil, err
	}
	return []byte(digest.Encode()), nil
}

// validateCryptAccounts checks that every account's hash is one
// CryptHash reads.
func validateCryptAccounts(accounts []caddyauth.Account) error {
	for _, a := range accounts {
		if _, err := cryptDecoder.Decode(a.Password); err != nil {
			return fmt.Errorf("basic_auth_crypt: user %s: %v", a.Username, err)
		}
	}
	return nil
}

func parseBasicAuthCrypt(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h.Next() // the directive
	ba := caddyauth.HTTPBasicAuth{HashCache: new(caddyauth.Cache)}
	switch args := h.RemainingArgs(); len(args) {
	case 0:
	case 1:
		ba.Realm = args[0]
	default:
		return nil, h.ArgErr()
	}
	ba.HashRaw = caddyconfig.JSONModuleObject(CryptHash{}, "algorithm", "crypt", nil)
	for h.NextBlock(0) {
		user := h.Val()
		var hash string
		if !h.Args(&hash) || h.NextArg() || !strings.HasPrefix(hash, "$") {
			return nil, h.Err("basic_auth_crypt: want <username> <crypt(3) hash>")
		}
		ba.AccountList = append(ba.AccountList, caddyauth.Account{Username: user, Password: hash})
	}
	if err := validateCryptAccounts(ba.AccountList); err != nil {
		return nil, h.Err(err.Error())
	}
	return caddyauth.Authentication{ProvidersRaw: caddy.ModuleMap{"http_basic": caddyconfig.JSON(ba, nil)}}, nil
}

var (
	_ caddyauth.Comparer = CryptHash{}
	_ caddyauth.Hasher   = CryptHash{}
)
