package main

import "testing"

// The handler's contender runs the Caddyfile of the issue, word for word.
func TestConfig(t *testing.T) {
	const want = `{
	admin off
	persist_config off
	log {
		level ERROR
	}
	servers {
		trusted_proxies static 127.0.0.1/32
	}
}
:8080 {
	bind 127.0.0.1
	forwarded {
		proto https
	}
	reverse_proxy 127.0.0.1:9090
}
`
	if got := config("proto https")("127.0.0.1:8080", "off", "127.0.0.1:9090"); got != want {
		t.Errorf("config:\n%s\nwant:\n%s", got, want)
	}
	const plain = `{
	admin off
	persist_config off
	log {
		level ERROR
	}
	servers {
		trusted_proxies static 127.0.0.1/32
	}
}
:8080 {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:9090
}
`
	if got := config()("127.0.0.1:8080", "off", "127.0.0.1:9090"); got != plain {
		t.Errorf("config without the handler:\n%s\nwant:\n%s", got, plain)
	}
}
