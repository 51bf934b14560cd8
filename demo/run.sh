#!/usr/bin/env bash
# Starts the fake cluster (two nodes, a 5 s lease renewed every 1 s), three
# upload servers and the custom Caddy with demo/Caddyfile, all on 127.0.0.1,
# says what to try (./demo/try), and stops them all on Ctrl-C. The
# binaries come from ./bin (make demo builds them), or $CADDY_HA_DEMO_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CADDY_HA_DEMO_BIN:-./bin}

for port in 8080 8081 8082 2019 9000 9001 9002 9101 9102 9103; do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
		echo "port $port on 127.0.0.1 is in use; stop what uses it first" >&2
		exit 1
	fi
done

logs=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo; echo "stopped; logs were in $logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin/fakecluster" -nodes 2 -base-port 9001 -control 127.0.0.1:9000 -lease-ttl 5s -renew 1s >"$logs/fakecluster.log" 2>&1 &
pids+=($!)
"$bin/fakecluster" -mode active-active -servers 3 -base-port 9101 >"$logs/uploads.log" 2>&1 &
pids+=($!)
"$bin/caddy" run --config demo/Caddyfile --adapter caddyfile >"$logs/caddy.log" 2>&1 &
pids+=($!)

ready=""
for _ in $(seq 1 300); do
	curl -fs --max-time 1 -o /dev/null http://127.0.0.1:8080/api/hello && ready=1 && break
	sleep 0.1
done
[ -n "$ready" ] || { echo "Caddy did not answer on http://127.0.0.1:8080 within 30s; see $logs" >&2; exit 1; }

cat <<MSG

caddy-ha demo is running, on 127.0.0.1 only
  Caddy (lb_policy leader)   http://127.0.0.1:8080   -> node-a 127.0.0.1:9001, node-b 127.0.0.1:9002
  Caddy (upload_affinity)    http://127.0.0.1:8081   -> srv-1..3 127.0.0.1:9101-9103 (active/active)
  fake cluster control API   http://127.0.0.1:9000   (lease TTL 5s, renew 1s)
  status page (ha_status)    http://127.0.0.1:8082   <- open this in a browser during a scenario
  Caddy admin API            http://127.0.0.1:2019
  logs                       $logs

$(./demo/try)

Ctrl-C stops everything.
MSG

wait -n "${pids[@]}"
