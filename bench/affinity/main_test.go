package main

import (
	"strings"
	"testing"

	"github.com/caddy-ha/caddy-ha/bench/internal/wrkbench"
)

func TestConfig(t *testing.T) {
	const backends = "127.0.0.1:9001 127.0.0.1:9002 127.0.0.1:9003"
	const plain = `{
	admin off
	persist_config off
	log {
		level ERROR
	}
}
:8080 {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:9001
}
`
	if got := config("", false)("127.0.0.1:8080", "off", backends); got != plain {
		t.Errorf("none:\n%s\nwant:\n%s", got, plain)
	}
	const withRedis = `{
	admin off
	persist_config off
	log {
		level ERROR
	}
	ha {
		store redis {
			address 127.0.0.1:6379
			prefix bench:
		}
	}
}
:8080 {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:9001 127.0.0.1:9002 127.0.0.1:9003 {
		lb_policy upload_affinity
	}
}
`
	if got := config(wrkbench.HARedis("127.0.0.1:6379"), true)("127.0.0.1:8080", "off", backends); got != withRedis {
		t.Errorf("redis:\n%s\nwant:\n%s", got, withRedis)
	}
	if got := config("", true)("127.0.0.1:8080", "off", backends); strings.Contains(got, "ha {") || !strings.Contains(got, "lb_policy upload_affinity") {
		t.Errorf("memory:\n%s", got)
	}
}

// The key chosen for a contender puts its upload on server 1.
func TestOwnedKey(t *testing.T) {
	servers := []string{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"}
	a, b := ownedKey("memory", servers), ownedKey("redis", servers)
	if a == b || !strings.HasPrefix(a, "bench-memory-") {
		t.Errorf("keys %q, %q", a, b)
	}
}
