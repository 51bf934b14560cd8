package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the store shared by every Caddy instance (and the cluster's app)
// through go-redis's UniversalClient: one node, Sentinel or Cluster. Each
// operation is one round trip: SET PX NX, GET, GETDEL (Redis 6.2+), DEL,
// GETEX PX, and MULTI INCRBY PEXPIRE EXEC. Every key is put under prefix.
//
// The hot calls of a busy proxy, increments (rate limits) and GetAndTouch
// (upload bindings), are batched on one server or through Sentinel: the
// calls waiting at the same moment go out in one write, each increment
// still its own MULTI … EXEC, so a busy proxy makes fewer than one round
// trip and two syscalls per request. On Cluster each call goes alone: a
// batch would span nodes.
type Redis struct {
	client redis.UniversalClient
	prefix string
	batch  *batcher // nil on Cluster
}

// NewRedis returns a store on client with keys under prefix. Closing the
// store closes the client.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	s := &Redis{client: client, prefix: prefix}
	if _, cluster := client.(*redis.ClusterClient); !cluster {
		s.batch = newBatcher(client)
	}
	return s
}

func (s *Redis) TryAdd(ctx context.Context, key, value string, lifetime time.Duration) (bool, error) {
	if err := checkLifetime(lifetime); err != nil {
		return false, err
	}
	return s.client.SetNX(ctx, s.prefix+key, value, lifetime).Result()
}

func (s *Redis) Get(ctx context.Context, key string) (string, bool, error) {
	return found(s.client.Get(ctx, s.prefix+key).Result())
}

func (s *Redis) Take(ctx context.Context, key string) (string, bool, error) {
	return found(s.client.GetDel(ctx, s.prefix+key).Result())
}

func (s *Redis) Remove(ctx context.Context, key string) error {
	return s.client.Del(ctx, s.prefix+key).Err()
}

// GetAndTouch is GETEX key PX lifetime (Redis 6.2+), which creates nothing.
func (s *Redis) GetAndTouch(ctx context.Context, key string, lifetime time.Duration) (string, bool, error) {
	if err := checkLifetime(lifetime); err != nil {
		return "", false, err
	}
	if s.batch != nil {
		c := s.newCall(true, key, 0, lifetime, nil)
		if err := s.batch.do(ctx, c); err != nil {
			return "", false, err // c may still be on the wire: its fields are not ours
		}
		return c.value, c.found, nil
	}
	return found(s.client.GetEx(ctx, s.prefix+key, lifetime).Result())
}

func (s *Redis) Increment(ctx context.Context, key string, amount int64, lifetime time.Duration) (int64, error) {
	return s.IncrementAndCount(ctx, key, amount, lifetime, nil, nil)
}

// IncrementAndCount sends MULTI INCRBY PEXPIRE [MGET others] EXEC. Keys
// sharing a {hash tag} may be read together on Redis Cluster.
func (s *Redis) IncrementAndCount(ctx context.Context, key string, amount int64, lifetime time.Duration, others []string, counts []int64) (int64, error) {
	if err := checkLifetime(lifetime); err != nil {
		return 0, err
	}
	if s.batch != nil {
		c := s.newCall(false, key, amount, lifetime, others)
		if err := s.batch.do(ctx, c); err != nil {
			return 0, err
		}
		copy(counts, c.counts)
		return c.count, nil
	}
	full := s.prefix + key
	var incr *redis.IntCmd
	var mget *redis.SliceCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.IncrBy(ctx, full, amount)
		p.PExpire(ctx, full, lifetime)
		if len(others) > 0 {
			keys := make([]string, len(others))
			for i, o := range others {
				keys[i] = s.prefix + o
			}
			mget = p.MGet(ctx, keys...)
		}
		return nil
	})
	if err != nil {
		return 0, counterErr(err)
	}
	if mget != nil {
		for i, v := range mget.Val() {
			counts[i] = 0
			if text, ok := v.(string); ok {
				counts[i], _ = parseCount(text)
			}
		}
	}
	return incr.Val(), nil
}

func (s *Redis) Ping(ctx context.Context) error { return s.client.Ping(ctx).Err() }

// Now is Redis's clock (TIME), so that it is a Clock.
func (s *Redis) Now(ctx context.Context) (time.Time, error) { return s.client.Time(ctx).Result() }

func (s *Redis) Close() error {
	if s.batch != nil {
		s.batch.close()
	}
	return s.client.Close()
}

// found maps redis.Nil, Redis's "no such key", to absent.
func found(v string, err error) (string, bool, error) {
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return v, true, nil
}

// counterErr is err, or ErrNotCounter when Redis refused to count a value
// that is not a number.
func counterErr(err error) error {
	if strings.Contains(err.Error(), "not an integer") {
		return ErrNotCounter
	}
	return err
}
