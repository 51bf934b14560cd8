#!/usr/bin/env bash
# Starts the fake cluster (two nodes, a 10 s lease renewed every 3 s) and
# the custom Caddy with demo/Caddyfile on 127.0.0.1, says what to try, and
# stops both on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

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

./bin/fakecluster -nodes 2 -base-port 9001 -control 127.0.0.1:9000 -lease-ttl 10s -renew 3s >"$logs/fakecluster.log" 2>&1 &
pids+=($!)
./bin/fakecluster -mode active-active -servers 3 -base-port 9101 >"$logs/uploads.log" 2>&1 &
pids+=($!)
./bin/caddy run --config demo/Caddyfile --adapter caddyfile >"$logs/caddy.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 100); do
	curl -fsS -o /dev/null http://127.0.0.1:8080/api/hello 2>/dev/null && break
	sleep 0.1
done

cat <<MSG

caddy-ha demo is running
  Caddy (lb_policy leader)   http://127.0.0.1:8080   -> node-a 127.0.0.1:9001, node-b 127.0.0.1:9002
  Caddy (upload_affinity)    http://127.0.0.1:8081   -> srv-1..3 127.0.0.1:9101-9103 (active/active)
  fake cluster control API   http://127.0.0.1:9000   (lease TTL 10s, renew 3s)
  status page (ha_status)    http://127.0.0.1:8082   <- open this in a browser during a failover
  Caddy admin API            http://127.0.0.1:2019
  logs                       $logs

Try:
  # a write; the X-Node-Id and X-Lease-Epoch headers say who served it
  curl -si -X POST http://127.0.0.1:8080/api/orders | grep -E 'HTTP|X-Node|X-Lease'

  # writes in a loop in another terminal, then fail the leader over
  while sleep 0.2; do curl -s -X POST http://127.0.0.1:8080/api/orders; echo; done

  # planned stop (lease released): the writes pause ~3s and none fails
  curl -s -X POST http://127.0.0.1:9000/nodes/node-a/stop
  # crash (the lease runs out after 10s): writes wait and then go to the new leader
  curl -s -X POST http://127.0.0.1:9000/nodes/node-b/kill
  # hung process: accepts connections, never answers
  curl -s -X POST 'http://127.0.0.1:9000/nodes/node-a/kill?mode=hang'
  # bring a node back (it comes back as follower)
  curl -s -X POST http://127.0.0.1:9000/nodes/node-a/start
  # rate limit: the 6th sign-in within a minute gets 429 with Retry-After and
  # the RateLimit-Policy / RateLimit fields
  for i in 1 2 3 4 5 6; do curl -si -X POST http://127.0.0.1:8080/login | grep -E 'HTTP|Ratelimit|Retry-After'; done

  # an upload through http://127.0.0.1:8081 (three active/active servers):
  # create it, send two chunks, complete it; X-Server-Id says who served each
  loc=\$(curl -si -X POST -H 'Idempotency-Key: demo-1' -H 'Upload-Length: 10' http://127.0.0.1:8081/api/uploads | tr -d '\r' | awk '/^Location:/ {print \$2}')
  curl -si -X PATCH -H 'Upload-Offset: 0' --data-binary 01234 http://127.0.0.1:8081\$loc | grep -E 'HTTP|X-Server-Id'
  curl -si -X PATCH -H 'Upload-Offset: 5' --data-binary 56789 http://127.0.0.1:8081\$loc | grep -E 'HTTP|X-Server-Id'
  curl -si -X POST http://127.0.0.1:8081\$loc/complete | grep -E 'HTTP|X-Server-Id'

  # Windows SSO: NTLM authenticates a connection. curl signs in (any user;
  # the password is pw-<user>) and then asks anonymously on the same
  # connection: both answers say alice, from one node connection of her own
  curl -s --ntlm -u alice:pw-alice -D - -o /dev/null http://127.0.0.1:8080/sso/me -D - -o /dev/null http://127.0.0.1:8080/api/whoami | grep -E 'HTTP/|X-Authenticated-User|X-Upstream-Conn'
  # a fresh connection is anonymous: 401 with WWW-Authenticate Negotiate and NTLM
  curl -si http://127.0.0.1:8080/sso/me | grep -E 'HTTP/|WWW-Authenticate'
  curl -s http://127.0.0.1:2019/metrics | grep caddy_ha_pin

  # the database unreachable: both nodes followers; requests wait 15s, then 503
  curl -s -X POST http://127.0.0.1:9000/database/down ; curl -s -X POST http://127.0.0.1:9000/database/up

  # what Caddy sees (the status page's view, as tables or JSON), and what the cluster says
  ./bin/caddy ha status
  curl -s http://127.0.0.1:2019/ha/status
  curl -s http://127.0.0.1:9000/state
  curl -s http://127.0.0.1:2019/metrics | grep caddy_ha_

Ctrl-C stops everything.
MSG

wait -n "${pids[@]}"
