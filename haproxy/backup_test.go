package haproxy

import (
	"os"
	"strings"
	"testing"
)

// checkedBackend is a configuration with one checked backend: balance
// (if any), extra backend lines, then the servers.
func checkedBackend(balance, extra string, servers ...string) string {
	text := "defaults\n    mode http\n\nfrontend web\n    bind 127.0.0.1:8080\n    default_backend app\n\nbackend app\n"
	if balance != "" {
		text += "    balance " + balance + "\n"
	}
	text += "    option httpchk\n    http-check expect status 200\n" + extra
	for _, s := range servers {
		text += "    server " + s + "\n"
	}
	return text
}

func translateText(t *testing.T, text string) (string, error) {
	t.Helper()
	cfg, err := Parse(strings.NewReader(text), "b.cfg", lookup)
	if err != nil {
		t.Fatal(err)
	}
	return caddyfileOf(cfg)
}

// oneLine is a Caddyfile's directives without comments, each line trimmed,
// joined by "; ", for comparing a block with what a test wants.
func oneLine(caddyfile string) string {
	var out []string
	for l := range strings.SplitSeq(caddyfile, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// Backup servers in a checked backend become lb_policy backup whatever
// the balance, the servers in HAProxy's order; weights become
// weighted_round_robin with roundrobin and static-rr, per group.
func TestTranslateBackups(t *testing.T) {
	primaries := []string{"a 127.0.0.1:9001 check", "spare 127.0.0.1:9003 check backup", "b 127.0.0.1:9002 check"}
	for _, tt := range []struct {
		name, text, want string
	}{
		{"roundrobin", checkedBackend("roundrobin", "", primaries...),
			"reverse_proxy 127.0.0.1:9001 127.0.0.1:9003 127.0.0.1:9002 {"},
		{"roundrobin", checkedBackend("roundrobin", "", primaries...),
			"lb_policy backup {; backups 127.0.0.1:9003; primary_policy round_robin; }; lb_retries 3"},
		{"the default balance", checkedBackend("", "", primaries...), "lb_policy backup {; backups 127.0.0.1:9003; primary_policy round_robin; }"},
		{"static-rr", checkedBackend("static-rr", "", primaries...), "primary_policy round_robin; }"},
		{"leastconn", checkedBackend("leastconn", "", primaries...), "backups 127.0.0.1:9003; primary_policy least_conn; }"},
		{"first", checkedBackend("first", "", primaries...), "backups 127.0.0.1:9003; primary_policy first; }"},
		{"source", checkedBackend("source", "    hash-type consistent\n", primaries...), "backups 127.0.0.1:9003; primary_policy ip_hash; }"},
		{"uri", checkedBackend("uri", "", primaries...), "backups 127.0.0.1:9003; primary_policy uri_hash; }"},
		{"hdr", checkedBackend("hdr(X-User)", "", primaries...), "backups 127.0.0.1:9003; primary_policy header X-User; }"},
		{"two backups", checkedBackend("leastconn", "", append(primaries, "spare2 127.0.0.1:9004 check backup")...),
			"backups 127.0.0.1:9003 127.0.0.1:9004; primary_policy least_conn; }"},
		{"allbackups", checkedBackend("leastconn", "    option allbackups\n", append(primaries, "spare2 127.0.0.1:9004 check backup")...),
			"backups 127.0.0.1:9003 127.0.0.1:9004; primary_policy least_conn; all_backups; }"},
		{"allbackups in defaults", strings.Replace(checkedBackend("", "", primaries...), "mode http\n", "mode http\n    option allbackups\n", 1),
			"primary_policy round_robin; all_backups; }"},
		{"allbackups without backups", checkedBackend("", "    option allbackups\n", "a 127.0.0.1:9001 check"), "lb_policy round_robin"},
		{"backup in default-server", checkedBackend("first", "    default-server check backup\n", "a 127.0.0.1:9001", "b 127.0.0.1:9002"),
			"backups 127.0.0.1:9001 127.0.0.1:9002; primary_policy round_robin; }"},
		{"weights", checkedBackend("", "", "a 127.0.0.1:9001 check weight 3", "b 127.0.0.1:9002 check"), "lb_policy weighted_round_robin 3 1"},
		{"weights with backups", checkedBackend("static-rr", "", "a 127.0.0.1:9001 check weight 3", "b 127.0.0.1:9002 check", "s 127.0.0.1:9003 check backup weight 9"),
			"backups 127.0.0.1:9003; primary_policy weighted_round_robin 3 1; }"},
		{"weights of each group", checkedBackend("", "    option allbackups\n    default-server weight 2\n",
			"a 127.0.0.1:9001 check weight 3", "b 127.0.0.1:9002 check", "s 127.0.0.1:9003 check backup", "t 127.0.0.1:9004 check backup weight 0"),
			"primary_policy weighted_round_robin 3 2; all_backups; backup_policy weighted_round_robin 2 0; }"},
		{"weight 0", checkedBackend("", "", "a 127.0.0.1:9001 check weight 0", "b 127.0.0.1:9002 check"), "lb_policy weighted_round_robin 0 1"},
		{"equal weights", checkedBackend("leastconn", "    default-server weight 50\n", "a 127.0.0.1:9001 check", "b 127.0.0.1:9002 check weight 50"), "lb_policy least_conn"},
		{"weights with first", checkedBackend("first", "", "a 127.0.0.1:9001 check weight 3", "b 127.0.0.1:9002 check"),
			"# b.cfg:12: server a 127.0.0.1:9001 check weight 3  (weight: balance first ignores weights)"},
		{"weights with first", checkedBackend("first", "", "a 127.0.0.1:9001 check weight 3", "b 127.0.0.1:9002 check"), "lb_policy first"},
		{"cookie", checkedBackend("", "    cookie SRV insert\n", "a 127.0.0.1:9001 check cookie a", "s 127.0.0.1:9003 check backup cookie s"),
			"lb_policy cookie SRV {; fallback backup {; backups 127.0.0.1:9003; primary_policy round_robin; }; }"},
		{"no checks, weights", "defaults\n    mode http\nfrontend web\n    bind :80\n    default_backend app\nbackend app\n" +
			"    server a 127.0.0.1:9001 weight 2\n    server b 127.0.0.1:9002 weight 1\n", "lb_policy weighted_round_robin 2 1"},
	} {
		got, err := translateText(t, tt.text)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !strings.Contains(oneLine(got), tt.want) && !strings.Contains(got, tt.want) {
			t.Errorf("%s: no %q in\n%s", tt.name, tt.want, got)
		}
	}

	// The seed's pool, checked at another path than the leader's: balance
	// source and hash-type consistent with node-b as a backup.
	seed, err := os.ReadFile("testdata/seed.cfg")
	if err != nil {
		t.Fatal(err)
	}
	got, err := translateText(t, strings.Replace(string(seed), "uri /healthz/leader", "uri /healthz/ready", 1))
	if err != nil {
		t.Fatal(err)
	}
	if want := "lb_policy backup {; backups 10.0.1.11:443; primary_policy ip_hash; }"; !strings.Contains(oneLine(got), want) {
		t.Errorf("the seed checked at /healthz/ready: no %q in\n%s", want, got)
	}
}

// What backups and weights do not translate is refused with its line.
func TestTranslateRefusesBackupsAndWeights(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{checkedBackend("leastconn", "", "a 127.0.0.1:9001 check weight 3", "b 127.0.0.1:9002 check"),
			"b.cfg:12: server a: weights that differ are translated with balance roundrobin or static-rr: Caddy's least_conn has no weights"},
		{checkedBackend("source", "", "a 127.0.0.1:9001 check", "b 127.0.0.1:9002 check weight 2"),
			"b.cfg:13: server b: weights that differ are translated with balance roundrobin or static-rr: Caddy's ip_hash has no weights"},
		{checkedBackend("hdr(X-User)", "", "a 127.0.0.1:9001 check weight 0", "b 127.0.0.1:9002 check weight 0"),
			"b.cfg:12: server a: every server of the group has weight 0"},
		{checkedBackend("uri", "    option allbackups\n", "a 127.0.0.1:9001 check", "s 127.0.0.1:9002 check backup weight 4", "t 127.0.0.1:9003 check backup"),
			"b.cfg:14: server s: weights that differ are translated with balance roundrobin or static-rr: Caddy's uri_hash has no weights"},
		{checkedBackend("first", "", "a 127.0.0.1:9001 check weight 0", "b 127.0.0.1:9002 check"),
			"b.cfg:12: server a: weight 0 with balance first is not translated"},
		{checkedBackend("", "", "a 127.0.0.1:9001 check", "s 127.0.0.1:9002 check backup weight 0"),
			"b.cfg:12: server s: weight 0 on a backup without option allbackups is not translated"},
		{checkedBackend("", "", "a 127.0.0.1:9001 check weight x"), "b.cfg:11: server a: weight takes a whole number from 0 to 256"},
		{checkedBackend("", "", "a 127.0.0.1:9001 check weight -1"), "b.cfg:11: server a: weight takes a whole number from 0 to 256"},
		{checkedBackend("", "", "a 127.0.0.1:9001 check weight"), "b.cfg:11: server a: weight needs a value"},
		{checkedBackend("", "    option allbackups x\n", "a 127.0.0.1:9001 check"), "b.cfg:11: option allbackups: takes no argument"},
		{"defaults\n    mode http\nfrontend web\n    bind :80\n    default_backend app\nbackend app\n" +
			"    server a 127.0.0.1:9001\n    server b 127.0.0.1:9002 backup\n", "b.cfg:8: server b: backup without checks is never used"},
	} {
		_, err := translateText(t, tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want %s, for\n%s", err, tt.want, tt.text)
		}
	}
}
