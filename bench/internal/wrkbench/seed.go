package wrkbench

import "fmt"

// SeedHAProxy is the cluster's HAProxy configuration (the seed's), over
// plain HTTP on loopback: listening on listen, node-a and its backup
// node-b at nodes, checked every checkInterval (the seed's is 5s).
func SeedHAProxy(listen string, nodes []string, checkInterval string) string {
	return fmt.Sprintf(`global
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    timeout http-keep-alive 60s
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend nodepilot_frontend
    bind %s
    http-request del-header Forwarded
    http-request del-header X-Forwarded-For
    http-request del-header X-Forwarded-Proto
    option forwardfor header X-Forwarded-For
    http-request set-header X-Forwarded-Proto https
    default_backend nodepilot_active
backend nodepilot_active
    option httpchk
    http-check send meth GET uri /healthz/leader hdr Host nodepilot.internal.example
    http-check expect status 200
    default-server inter %s fall 2 rise 1
    http-reuse never
    balance source
    hash-type consistent
    server node-a %s check
    server node-b %s check backup
`, listen, checkInterval, nodes[0], nodes[1])
}

// SeedDeployment is caddy-ha with the seed's deployment, as the global
// options and the site of a Caddyfile (see Caddyfile): HTTP/1.1 only,
// reload_handoff, forwarded, edge_rate_limit on the Redis at redisAddr with
// a limit never reached per client (limitOptions are more lines of its
// block, each ending in a newline), and reverse_proxy to upstreams
// (space-separated) with lb_policy leader and transport pinned.
func SeedDeployment(redisAddr, upstreams, limitOptions string) (globals, site string) {
	globals = "\tservers {\n\t\tprotocols h1\n\t\tlistener_wrappers {\n\t\t\treload_handoff\n\t\t}\n\t}\n" +
		"\tha {\n\t\tstore redis {\n\t\t\taddress " + redisAddr + "\n\t\t}\n\t}\n"
	site = "\tforwarded\n\tedge_rate_limit {\n\t\tzone api {\n\t\t\tkey {client_ip}\n\t\t\tevents 1000000000\n\t\t\twindow 1m\n\t\t}\n" + limitOptions + "\t}\n" +
		"\treverse_proxy " + upstreams + " {\n\t\tlb_policy leader\n\t\ttransport pinned\n\t}\n"
	return globals, site
}
