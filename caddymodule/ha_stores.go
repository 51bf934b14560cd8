package caddymodule

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/caddy-ha/caddy-ha/store"
)

func init() {
	caddy.RegisterModule(MemoryStore{})
	caddy.RegisterModule(RedisStore{})
}

// MemoryStore keeps the ha store in this Caddy's memory: the default, for
// a single instance. Counts and bindings survive config reloads, not a
// restart.
type MemoryStore struct {
	// The most counters held, and apart from them the most values (upload
	// bindings). When the counters are full, a new one takes the place of
	// the one with the smallest count (one at its limit too), as HAProxy's
	// stick table always counts a new key: a full store is not a store
	// error. Values are never evicted: when they are full, new bindings are
	// refused until expired ones are swept. Default: 1000000.
	MaxKeys int `json:"max_keys,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (MemoryStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "ha.stores.memory", New: func() caddy.Module { return new(MemoryStore) }}
}

// Validate checks the settings: Caddy calls it after Provision, the
// Caddyfile adapter after the block.
func (m *MemoryStore) Validate() error {
	if m.MaxKeys < 0 {
		return badSetting("store memory", "max_keys", "must not be negative")
	}
	return nil
}

func (m *MemoryStore) setDefaults() { m.MaxKeys = cmp.Or(m.MaxKeys, store.DefaultMaxKeys) }

// OpenStore opens a store in this process's memory.
func (m *MemoryStore) OpenStore() (store.Store, error) {
	v := *m
	v.setDefaults()
	return store.NewMemory(v.MaxKeys, store.DefaultSweep), nil
}

// Describe names the store: memory.
func (m *MemoryStore) Describe() string { return "memory" }

// UnmarshalCaddyfile sets up the memory store. Syntax:
//
//	store memory {
//		max_keys <n>
//	}
func (m *MemoryStore) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, m, nil, func(opt string) error {
		if opt != "max_keys" {
			return d.Errf("unrecognized memory store option '%s'", opt)
		}
		return countArg(d, opt, &m.MaxKeys)
	})
}

// RedisStore keeps the ha store in Redis, shared by every Caddy instance
// and the cluster's app: one server, Sentinel (master_name) or Cluster
// (several addresses, or cluster). Each operation is one round trip.
type RedisStore struct {
	// Redis addresses (host:port): one server, the seeds of a Cluster, or
	// the Sentinels when master_name is set.
	Addresses []string `json:"addresses,omitempty"`
	// ACL user name and password. The password may be a placeholder such
	// as {env.REDIS_PASSWORD}.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Database number (not with Cluster). Default: 0.
	DB int `json:"db,omitempty"`
	// The Sentinel master name: Addresses are then the Sentinels.
	MasterName       string `json:"master_name,omitempty"`
	SentinelUsername string `json:"sentinel_username,omitempty"`
	SentinelPassword string `json:"sentinel_password,omitempty"`
	// Cluster mode with a single address (e.g. a configuration endpoint).
	Cluster bool `json:"cluster,omitempty"`
	// Put before every key, to keep this proxy's keys apart from other
	// services' in the same Redis. Default: "caddy-ha:".
	Prefix *string `json:"prefix,omitempty"`
	// TLS to Redis; absent means plain TCP.
	TLS *RedisTLS `json:"tls,omitempty"`
	// Timeouts of connecting and of each read and write. Handlers bound
	// each call further (e.g. edge_rate_limit's store_timeout). Defaults:
	// 1s, 500ms, 500ms.
	DialTimeout  caddy.Duration `json:"dial_timeout,omitempty"`
	ReadTimeout  caddy.Duration `json:"read_timeout,omitempty"`
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`
	// Connections per Redis node. Default: 10 per CPU.
	PoolSize int `json:"pool_size,omitempty"`
}

// RedisTLS is TLS to Redis, verified against the system roots or CA.
type RedisTLS struct {
	// The name to verify; default: the address's host.
	ServerName string `json:"server_name,omitempty"`
	// A PEM file of the CAs to trust instead of the system roots.
	CA string `json:"ca,omitempty"`
}

// DefaultStorePrefix is the Redis store's key prefix when none is set.
const DefaultStorePrefix = "caddy-ha:"

// CaddyModule returns the Caddy module information.
func (RedisStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "ha.stores.redis", New: func() caddy.Module { return new(RedisStore) }}
}

const redisModule = "store redis"

// Validate checks the settings: Caddy calls it after Provision, the
// Caddyfile adapter after the block.
func (r *RedisStore) Validate() error {
	if len(r.Addresses) == 0 {
		return badSetting(redisModule, "addresses", "must hold at least one address")
	}
	for _, a := range r.Addresses {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return badSetting(redisModule, "addresses", "%q: want host:port", a)
		}
	}
	clustered := r.Cluster || len(r.Addresses) > 1 && r.MasterName == ""
	switch {
	case r.DB < 0:
		return badSetting(redisModule, "db", "must not be negative")
	case clustered && r.DB != 0:
		return badSetting(redisModule, "db", "must be 0: Redis Cluster has only db 0")
	case r.Cluster && r.MasterName != "":
		return badSetting(redisModule, "cluster", "and master_name exclude each other")
	case r.PoolSize < 0:
		return badSetting(redisModule, "pool_size", "must not be negative")
	case r.DialTimeout < 0:
		return badSetting(redisModule, "dial_timeout", "must not be negative")
	case r.ReadTimeout < 0:
		return badSetting(redisModule, "read_timeout", "must not be negative")
	case r.WriteTimeout < 0:
		return badSetting(redisModule, "write_timeout", "must not be negative")
	}
	if r.TLS != nil && r.TLS.CA != "" {
		if _, err := r.rootCAs(); err != nil {
			return err
		}
	}
	return nil
}

func (r *RedisStore) rootCAs() (*x509.CertPool, error) {
	pool, _, err := loadCAPool(r.TLS.CA, "redis store: tls ca")
	return pool, err
}

// loadCAPool reads the PEM certificates of file into a pool; it returns
// the PEM too, for callers that key on it. what names the setting in
// errors.
func loadCAPool(file, what string) (*x509.CertPool, []byte, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%s %s: no PEM certificates", what, file)
	}
	return pool, pem, nil
}

// Describe names the store by what tells two stores apart: its addresses,
// database, prefix, user and Sentinel master, never its passwords.
func (r *RedisStore) Describe() string {
	v := r.withDefaults()
	name := fmt.Sprintf("redis %s db=%d prefix=%s", strings.Join(v.Addresses, ","), v.DB, *v.Prefix)
	if v.Username != "" {
		name += " user=" + v.Username
	}
	if v.MasterName != "" {
		name += " master=" + v.MasterName
	}
	return name
}

// redisLogger sends go-redis's own messages to Caddy's log at DEBUG: the
// outages they tell of are logged once each by the ha app.
type redisLogger struct{}

// Printf logs one of go-redis's messages.
func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	caddy.Log().Named("ha.store.redis").Debug(fmt.Sprintf(format, v...))
}

var setRedisLogger sync.Once

// Defaults of the Redis store. The pool size is go-redis's: 10 per CPU.
const (
	defaultRedisDialTimeout  = time.Second
	defaultRedisReadTimeout  = 500 * time.Millisecond
	defaultRedisWriteTimeout = 500 * time.Millisecond
)

// setDefaults fills in what is unset. It is applied to a copy when the
// store opens: the settings as written key the shared store.
func (r *RedisStore) setDefaults() {
	r.DialTimeout = cmp.Or(r.DialTimeout, caddy.Duration(defaultRedisDialTimeout))
	r.ReadTimeout = cmp.Or(r.ReadTimeout, caddy.Duration(defaultRedisReadTimeout))
	r.WriteTimeout = cmp.Or(r.WriteTimeout, caddy.Duration(defaultRedisWriteTimeout))
	if r.Prefix == nil {
		prefix := DefaultStorePrefix
		r.Prefix = &prefix
	}
}

// OpenStore makes the Redis client; it connects on first use.
func (r *RedisStore) OpenStore() (store.Store, error) {
	setRedisLogger.Do(func() { redis.SetLogger(redisLogger{}) })
	r = r.withDefaults()
	repl := caddy.NewReplacer()
	opts := &redis.UniversalOptions{
		Addrs:            r.Addresses,
		Username:         repl.ReplaceAll(r.Username, ""),
		Password:         repl.ReplaceAll(r.Password, ""),
		DB:               r.DB,
		MasterName:       r.MasterName,
		SentinelUsername: repl.ReplaceAll(r.SentinelUsername, ""),
		SentinelPassword: repl.ReplaceAll(r.SentinelPassword, ""),
		IsClusterMode:    r.Cluster,
		DialTimeout:      time.Duration(r.DialTimeout),
		ReadTimeout:      time.Duration(r.ReadTimeout),
		WriteTimeout:     time.Duration(r.WriteTimeout),
		PoolSize:         r.PoolSize,
		// The caller's deadline bounds every call; a retry could count an
		// increment twice, and the caller's fallback beats a late answer.
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1,
		DialerRetries:            1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if r.TLS != nil {
		opts.TLSConfig = &tls.Config{ServerName: r.TLS.ServerName, MinVersion: tls.VersionTLS12}
		if r.TLS.CA != "" {
			pool, err := r.rootCAs()
			if err != nil {
				return nil, err
			}
			opts.TLSConfig.RootCAs = pool
		}
	}
	// No connection yet: a Redis that is down at start is a store outage
	// (handled by the fallback), not a config error.
	return store.NewRedis(redis.NewUniversalClient(opts), *r.Prefix), nil
}

// withDefaults is a copy of r with the defaults set.
func (r *RedisStore) withDefaults() *RedisStore {
	v := *r
	v.setDefaults()
	return &v
}

// UnmarshalCaddyfile sets up the Redis store; see parseHAOption for the
// syntax.
func (r *RedisStore) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseValidated(d, r, map[string]string{"addresses": "address"}, func(opt string) error {
		var err error
		switch opt {
		case "address", "addresses":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			r.Addresses = append(r.Addresses, args...)
		case "username":
			err = stringArg(d, &r.Username)
		case "password":
			err = stringArg(d, &r.Password)
		case "db":
			var db string
			if err = stringArg(d, &db); err == nil {
				if r.DB, err = strconv.Atoi(db); err != nil || r.DB < 0 {
					err = d.Errf("db must be a whole number, got %s", db)
				}
			}
		case "master_name":
			err = stringArg(d, &r.MasterName)
		case "sentinel_username":
			err = stringArg(d, &r.SentinelUsername)
		case "sentinel_password":
			err = stringArg(d, &r.SentinelPassword)
		case "cluster":
			r.Cluster = true
		case "prefix":
			var p string
			if err = stringArg(d, &p); err == nil {
				r.Prefix = &p
			}
		case "tls":
			r.TLS = new(RedisTLS)
			_, err = parseOptions(d, func(tlsOpt string) error {
				switch tlsOpt {
				case "server_name":
					return stringArg(d, &r.TLS.ServerName)
				case "ca":
					return stringArg(d, &r.TLS.CA)
				}
				return d.Errf("unrecognized redis tls option '%s'", tlsOpt)
			})
		case "dial_timeout":
			err = durationArg(d, opt, &r.DialTimeout)
		case "read_timeout":
			err = durationArg(d, opt, &r.ReadTimeout)
		case "write_timeout":
			err = durationArg(d, opt, &r.WriteTimeout)
		case "pool_size":
			err = countArg(d, opt, &r.PoolSize)
		default:
			err = d.Errf("unrecognized redis store option '%s'", opt)
		}
		return err
	})
}

// Interface guards
var (
	_ StoreBackend          = (*MemoryStore)(nil)
	_ caddy.Validator       = (*MemoryStore)(nil)
	_ caddyfile.Unmarshaler = (*MemoryStore)(nil)
	_ StoreBackend          = (*RedisStore)(nil)
	_ caddy.Validator       = (*RedisStore)(nil)
	_ caddyfile.Unmarshaler = (*RedisStore)(nil)
)
