# caddy-ha: `make demo` to try it, `make test` to run every test.
GO      ?= go
BIN     := bin
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build demo test test-deps fuzz bench bench-deps chaos clean FORCE

all: build

build: $(BIN)/caddy $(BIN)/fakecluster

$(BIN)/caddy: FORCE
	$(GO) build -o $@ ./cmd/caddy

$(BIN)/fakecluster: FORCE
	$(GO) build -o $@ ./cmd/fakecluster

# The main job: the custom Caddy in front of the fake cluster on loopback.
demo: build
	./demo/run.sh

# Installs what the tests need if it is missing, then vets and runs every test
# under the race detector (.ci/go-test), the fuzz targets' kept inputs
# (testdata/fuzz) included; a missing tool fails the tests that need it. Vet
# builds with -race too, so that it and the tests share one compile.
# Fuzzing for new inputs is make fuzz; make test runs the HAProxy adapter's
# token writers and whole configurations for a few thousand new inputs too.
test: test-deps
	PATH="$(TOOLS):$$PATH" CADDY_HA_REQUIRE_TOOLS=1 GO=$(GO) ./.ci/go-test

# A count of inputs (10–50 s each), not a duration: Go 1.26's fuzz coordinator
# can fail a duration run with "context deadline exceeded" when the time runs
# out mid-input (golang/go#75804, fixed in Go 1.27). -timeout bounds it. Inputs
# that fail are saved under the package's testdata/fuzz, which go test reruns.
FUZZTIME ?= 400000x
# Go fuzzes one target of one package at a time: package:target.
FUZZ_TARGETS := ./forwarded:FuzzParseForwarded ./forwarded:FuzzParseXForwardedFor \
	./affinity:FuzzPattern ./affinity:FuzzIDFromLocation ./affinity:FuzzIDFromJSON \
	./healthcheck:FuzzParseLeaderBody ./healthcheck:FuzzLeaseValidUntil ./healthcheck:FuzzEpochFloor \
	./haproxy:FuzzParse ./haproxy:FuzzLiteralToken ./haproxy:FuzzFormatToken ./haproxy:FuzzPlainToken ./haproxy:FuzzCELString \
	./caddymodule:FuzzHAProxyAdapt
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; f=$${t#*:}; \
		echo "fuzz $$f in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -timeout 5m $$pkg || exit 1; \
	done

# The store tests run a real redis-server and a real PostgreSQL (Debian's
# postgresql package, under /usr/lib/postgresql) on loopback ports; the
# Windows SSO tests run curl --ntlm; the status page's test opens it in
# headless chromium; the HAProxy adapter is compared with haproxy itself;
# the alert rules are checked with promtool; caddymodule's tests run in a
# network namespace of their own, its loopback brought up with ip (see
# .ci/go-test). Each tool:package pair is installed if missing; promtool
# alone, see below.
TEST_TOOLS := redis-server:redis-server curl:curl chromium:chromium haproxy:haproxy ip:iproute2
test-deps:
	@command -v $(GO) >/dev/null || { echo "Go is required: https://go.dev/dl/"; exit 1; }
	@missing=""; for tp in $(TEST_TOOLS); do command -v $${tp%%:*} >/dev/null || missing="$$missing $${tp#*:}"; done; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -z "$$missing" ] || { $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; }
	@command -v promtool >/dev/null || $(MAKE) --no-print-directory $(TOOLS)/promtool

# promtool alone, taken out of Debian's prometheus package into .tools (on
# the tests' PATH), without installing the package: its server, exporters and
# their dependencies are not needed.
TOOLS := $(CURDIR)/.tools
$(TOOLS)/promtool:
	rm -rf $(TOOLS)/deb && mkdir -p $(TOOLS)/deb
	cd $(TOOLS)/deb && { apt-get download prometheus 2>/dev/null || { $(SUDO) apt-get update -qq && apt-get download prometheus; }; }
	dpkg-deb --fsys-tarfile $(TOOLS)/deb/prometheus_*.deb | tar -xO ./usr/bin/promtool > $@.part
	chmod +x $@.part && mv $@.part $@ && rm -rf $(TOOLS)/deb

# Go benchmarks of the hot paths, then the side-by-side benchmarks.
bench: build bench-deps
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(GO) run ./bench/failover
	$(GO) run ./bench/ratelimit
	$(GO) run ./bench/seed
	$(GO) run ./bench/forwarded
	$(GO) run ./bench/affinity
	$(GO) run ./bench/pinned
	$(GO) run ./bench/haproxyadapt
	$(GO) run ./bench/latency
	$(GO) run ./bench/reload

BENCH_TOOLS := haproxy wrk redis-server
bench-deps: test-deps
	@missing=""; for t in $(BENCH_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	[ -z "$$missing" ] || { $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; }

# The fault suite (cmd/chaos): one Caddy with every module under mixed load,
# twelve faults in turn, invariants from the cluster's, servers' and status's
# own records, one table; about 1 min 45 s on 2 busy cores, loopback only.
# Not part of make test. Needs redis-server and PostgreSQL, which test-deps
# installs.
chaos: test-deps
	$(GO) run ./cmd/chaos

clean:
	rm -rf $(BIN)
