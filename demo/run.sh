#!/usr/bin/env bash
# Starts the fake cluster (two nodes, a 5 s lease renewed every 1 s), three
# upload servers and the custom Caddy with demo/Caddyfile, and a second
# fake cluster over TLS with a second Caddy running the seed's HAProxy
# configuration (demo/haproxy.cfg) through the adapter, all on 127.0.0.1;
# says what to try (./demo/try), and stops them all on Ctrl-C. The
# binaries come from ./bin (make demo builds them), or $CADDY_HA_DEMO_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CADDY_HA_DEMO_BIN:-./bin}

for port in 8080 8081 8082 8443 2019 2020 9000 9001 9002 9010 9011 9012 9101 9102 9103; do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
		echo "port $port on 127.0.0.1 is in use; stop what uses it first" >&2
		exit 1
	fi
done

logs=$(mktemp -d)
# Caddy's autosave and data (XDG dirs) in the logs' directory, not the home.
export XDG_CONFIG_HOME=$logs/config XDG_DATA_HOME=$logs/data
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
# The seed's HAProxy configuration, as it is, through --adapter haproxy: its
# nodes serve TLS with certificates from a private CA the fake cluster
# writes to $pki (./demo/try reads them there too).
pki=${TMPDIR:-/tmp}/caddy-ha-demo-pki
rm -rf "$pki"
"$bin/fakecluster" -nodes 2 -base-port 9011 -control 127.0.0.1:9010 -lease-ttl 5s -renew 1s -tls-dir "$pki" >"$logs/fakecluster-tls.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$pki/frontend.pem" ] && break; sleep 0.1; done
CADDY_ADMIN=127.0.0.1:2020 CADDY_HA_DEMO_PKI=$pki "$bin/caddy" run --adapter haproxy --config demo/haproxy.cfg >"$logs/caddy-haproxy.log" 2>&1 &
pids+=($!)

ready=""
for _ in $(seq 1 300); do
	curl -fs --max-time 1 -o /dev/null http://127.0.0.1:8080/api/hello && ready=1 && break
	sleep 0.1
done
[ -n "$ready" ] || { echo "Caddy did not answer on http://127.0.0.1:8080 within 30s; see $logs" >&2; exit 1; }
ready=""
for _ in $(seq 1 300); do
	curl -fs --max-time 1 --cacert "$pki/ca.pem" -o /dev/null https://127.0.0.1:8443/api/hello && ready=1 && break
	sleep 0.1
done
[ -n "$ready" ] || { echo "Caddy (demo/haproxy.cfg) did not answer on https://127.0.0.1:8443 within 30s; see $logs" >&2; exit 1; }

cat <<MSG

caddy-ha demo is running, on 127.0.0.1 only
  Caddy (lb_policy leader)   http://127.0.0.1:8080   -> node-a 127.0.0.1:9001, node-b 127.0.0.1:9002
  Caddy (upload_affinity)    http://127.0.0.1:8081   -> srv-1..3 127.0.0.1:9101-9103 (active/active)
  fake cluster control API   http://127.0.0.1:9000   (lease TTL 5s, renew 1s)
  status page (ha_status)    http://127.0.0.1:8082   <- open this in a browser during a scenario
  Caddy admin API            http://127.0.0.1:2019
  Caddy (demo/haproxy.cfg)   https://127.0.0.1:8443  -> node-a 127.0.0.1:9011, node-b 127.0.0.1:9012 over TLS
                             (the seed's HAProxy configuration through --adapter haproxy; admin on :2020,
                             control API of its cluster on :9010, CA in $pki/ca.pem)
  logs                       $logs

$(./demo/try)

Ctrl-C stops everything.
MSG

wait -n "${pids[@]}"
