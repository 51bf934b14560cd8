package caddymodule

// The dashboard and the alerting rules in deploy/ name only metrics and
// labels that exist: one Caddy with every module in use is scraped, and
// every caddy_ha_* metric and label the PromQL of the dashboard, of the
// rules and of the rules' unit test names is looked up in that scrape.
// PromQL is read by a small tokenizer (the PromQL parser is not in the
// module graph); where promtool is installed it parses every expression
// for real and runs the rules' unit test.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/caddy-ha/caddy-ha/internal/poll"
	"github.com/caddy-ha/caddy-ha/internal/redistest"
	"github.com/caddy-ha/caddy-ha/internal/tools"
)

// The files checked, from the package's directory.
const (
	deployDashboard = "../deploy/grafana/caddy-ha.json"
	deployRules     = "../deploy/prometheus/caddy-ha.rules.yml"
	deployRulesTest = "../deploy/prometheus/caddy-ha.rules.test.yml"
)

// The dashboard's rows, one per capability, in order.
var deployRows = []string{"Leader pools", "Rate-limit zones", "Stores", "Upload affinity", "Cloudflare ranges",
	"Pinned connections", "Config reloads"}

// One Caddy with every module: lb_policy leader and transport pinned in
// front of a fake cluster, edge_rate_limit and lb_policy upload_affinity on
// the ha store in a real Redis, an edge_rate_limit zone on a memory store
// of its own (a bounded store's series), trusted_proxies cloudflare_ranges
// from a local server, listener wrapper reload_handoff. Traffic makes every
// series exist; then the deploy files are checked against its /metrics.
func TestDeployDashboardAndRulesMatchMetrics(t *testing.T) {
	dashboard, err := os.ReadFile(deployDashboard)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(deployRules)
	if err != nil {
		t.Fatal(err)
	}
	rulesTest, err := os.ReadFile(deployRulesTest)
	if err != nil {
		t.Fatal(err)
	}

	srv := redistest.Start(t)
	c := newCluster(t, 2, 5*time.Second, time.Second)
	var uploadAddrs []string
	for _, s := range uploadServers(t, 2) {
		uploadAddrs = append(uploadAddrs, s.Addr())
	}
	lists := serveRangeLists(t, "173.245.48.0/20\n103.21.244.0/22\n", "2400:cb00::/32\n")
	cfFile := filepath.Join(t.TempDir(), "cloudflare.txt")
	global := redisOption(srv, "deploy:") + fmt.Sprintf(`
	servers {
		protocols h1
		trusted_proxies cloudflare_ranges {
			ipv4_url %[1]s/ips-v4
			ipv6_url %[1]s/ips-v6
			file %[2]s
			refresh 1h
		}
		listener_wrappers {
			reload_handoff
		}
	}`, lists.url, cfFile)
	site := fmt.Sprintf(`edge_rate_limit {
		zone login {
			match {
				path /login
			}
			key {http.request.remote.host}
			events 2
			window 1h
		}
		store_timeout 5s # the metrics are tested here: a slow -race run must not count locally
	}
	edge_rate_limit /memory {
		zone memory {
			key {http.request.remote.host}
			events 2
			window 1h
		}
		store memory {
			max_keys 10
		}
	}
	reverse_proxy /api/uploads* %s {
		lb_policy upload_affinity
	}
	reverse_proxy {upstreams} {
		lb_policy leader
		transport pinned {
			max_pinned 1
			pin_wait 10ms
		}
	}`, strings.Join(uploadAddrs, " "))
	tc := startCaddy(t, c, global, site)

	// Rate limits: two allowed, one limited.
	awayFromWindowEnd(t, time.Hour, 5*time.Second)
	for i, want := range []int{200, 200, 429} {
		if got := send(t, "POST", tc.url("/login")).status; got != want {
			t.Fatalf("POST /login #%d: %d, want %d", i+1, got, want)
		}
	}
	rlClient.CloseIdleConnections()
	// Pinned connections: one signed in (a pin), a second handshake
	// refused at max_pinned, then the pin ends with its connection.
	first, second := newBrowser(tc, 0), newBrowser(tc, 1)
	if resp, err := first.SignIn("/sso/me"); err != nil || resp.User() != first.User {
		t.Fatalf("first connection: %v %+v", err, resp)
	}
	if resp, err := second.Negotiate("/sso/me"); err != nil || resp.Status != http.StatusServiceUnavailable {
		t.Fatalf("second handshake, beyond max_pinned: %v %+v", err, resp)
	}
	first.Close()
	second.Close()
	poll.Until(t, 5*time.Second, "the pin to end", func() bool {
		fams := deployScrape(t, tc)
		return deployTotal(fams, "caddy_ha_pinned_connections") == 0 && deployTotal(fams, "caddy_ha_pinned_pins_ended_total") >= 1
	})
	// Upload affinity: a creation, its binding learned and kept in Redis.
	learned := affinityEvent(tc, "learned")
	if _, err := newUploadClient("http://"+tc.addr).create("deploy-1", 4); err != nil {
		t.Fatal(err)
	}
	if got := affinityEvent(tc, "learned") - learned; got != 1 {
		t.Fatalf("bindings learned from the creation: %v, want 1", got)
	}

	// Every metric caddy-ha defines, with every label, must be in the
	// scrape: else the scrape is no measure of what the files may name.
	defined := deployDefinedMetrics()
	var scraped map[string]*dto.MetricFamily
	var missing []string
	t.Cleanup(func() {
		if t.Failed() && len(missing) > 0 {
			t.Logf("missing from the last scrape: %q", missing)
		}
	})
	poll.Until(t, 10*time.Second, "every caddy_ha metric with every label in the scrape, and the 3 Cloudflare ranges", func() bool {
		scraped = deployScrape(t, tc)
		missing = deployMissing(defined, scraped)
		if n := deployTotal(scraped, "caddy_ha_cloudflare_ranges"); n != 3 {
			missing = append(missing, fmt.Sprintf("caddy_ha_cloudflare_ranges is %v, not 3", n))
		}
		return len(missing) == 0
	})
	scrape := deployScrapedNames(scraped)
	t.Logf("%d caddy_ha families (%d names) in the scrape; %d dashboard queries", len(defined), len(scrape), len(deployDashboardQueries(dashboard)))

	problems, used := checkDeployDashboard(scrape, dashboard)
	// Every metric has a panel.
	for name := range defined {
		if !used[name] {
			problems = append(problems, fmt.Sprintf("%s: no panel shows %s", deployDashboard, name))
		}
	}
	ruleProblems, alerts := checkDeployRules(scrape, rules)
	problems = append(problems, ruleProblems...)
	problems = append(problems, checkDeployRulesTest(scrape, rulesTest, alerts)...)
	for _, p := range problems {
		t.Error(p)
	}

	// The checks catch a misspelt metric or label in the real files.
	for _, m := range []struct {
		file, old, new string
		data           []byte
	}{
		{deployDashboard, "caddy_ha_store_up{", "caddy_ha_store_upp{", dashboard},
		{deployDashboard, "sum by (zone, decision)", "sum by (zone, decisions)", dashboard},
		{deployDashboard, `pool=~\"$pinned_pool\"`, `pools=~\"$pinned_pool\"`, dashboard},
		{deployDashboard, "label_values(caddy_ha_store_up{instance=~\\\"$instance\\\"}, store)", "label_values(caddy_ha_store_up{instance=~\\\"$instance\\\"}, stores)", dashboard},
		{deployDashboard, "{{reason}} {{pool}}", "{{reasons}} {{pool}}", dashboard},
		{deployRules, "on(instance, job, pool)", "on(instance, job, pol)", rules},
		{deployRules, "caddy_ha_cloudflare_refreshed_timestamp_seconds >", "caddy_ha_cloudflare_refreshed_seconds >", rules},
		{deployRules, "{{ $labels.zone }}", "{{ $labels.zones }}", rules},
		{deployRulesTest, "caddy_ha_store_up{", "caddy_ha_store_upp{", rulesTest},
		{deployRulesTest, `outcome="stale"`, `result="stale"`, rulesTest},
	} {
		if !strings.Contains(string(m.data), m.old) {
			t.Errorf("mutation of %s: %q is not in the file", m.file, m.old)
			continue
		}
		mutated := []byte(strings.Replace(string(m.data), m.old, m.new, 1))
		var got []string
		switch m.file {
		case deployDashboard:
			got, _ = checkDeployDashboard(scrape, mutated)
		case deployRules:
			got, _ = checkDeployRules(scrape, mutated)
		default:
			got = checkDeployRulesTest(scrape, mutated, alerts)
		}
		if len(got) == 0 {
			t.Errorf("%s with %q instead of %q: no problem found", m.file, m.new, m.old)
		}
	}

	runPromtool(t, dashboard)
}

// runPromtool has promtool check the rules, run their unit test, and parse
// every expression of the dashboard, if it is installed; where the tools
// are required it must be (see tools.Find).
func runPromtool(t *testing.T, dashboard []byte) {
	promtool, ok := tools.Find(t, "promtool", "the rules are not checked or tested with it (make test-deps puts one in .tools)")
	if !ok {
		return
	}
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", deployRules)
	run("test", "rules", deployRulesTest)

	// The dashboard's queries as recording rules, for promtool to parse,
	// Grafana's interval variables replaced by durations.
	var rules []map[string]string
	for _, q := range deployDashboardQueries(dashboard) {
		expr := q.expr
		if q.variable {
			m := regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`).FindStringSubmatch(expr)
			if m == nil {
				t.Errorf("%s: not label_values(<selector>, <label>): %s", q.where, expr)
				continue
			}
			expr = m[1]
		}
		expr = strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m", "$__range", "1h",
			"${__range}", "1h", "$__interval", "1m", "${__interval}", "1m").Replace(expr)
		rules = append(rules, map[string]string{"record": q.record, "expr": expr})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run("check", "rules", file)
}

// deployScrape fetches and parses Caddy's /metrics.
func deployScrape(t testing.TB, tc *testCaddy) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(tc.adminGet("/metrics")))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// deployTotal is the sum of a counter's or gauge's series, -1 without any.
func deployTotal(fams map[string]*dto.MetricFamily, name string) float64 {
	f, ok := fams[name]
	if !ok || len(f.Metric) == 0 {
		return -1
	}
	total := 0.0
	for _, m := range f.Metric {
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return total
}

// deployDefinedMetrics are the families caddy-ha's collectors describe,
// with their labels.
func deployDefinedMetrics() map[string][]string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range haCollectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	descRe := regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)
	out := map[string][]string{}
	for d := range ch {
		m := descRe.FindStringSubmatch(d.String())
		if m == nil {
			panic("unexpected Desc format: " + d.String())
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		out[m[1]] = labels
	}
	return out
}

// deployMissing lists the defined families, or labels of them, that are
// not in the scrape.
func deployMissing(defined map[string][]string, fams map[string]*dto.MetricFamily) []string {
	var missing []string
	for name, labels := range defined {
		f, ok := fams[name]
		if !ok || len(f.Metric) == 0 {
			missing = append(missing, name)
			continue
		}
		for _, l := range labels {
			if !slices.ContainsFunc(f.Metric, func(m *dto.Metric) bool {
				return slices.ContainsFunc(m.Label, func(p *dto.LabelPair) bool { return p.GetName() == l })
			}) {
				missing = append(missing, name+"{"+l+"}")
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// deployMetrics are the caddy_ha_* names PromQL can select, each with the
// label names of its series: a histogram's _bucket (with le), _count and
// _sum, and every other family (caddy-ha has no summaries) by its own name.
type deployMetrics map[string]map[string]bool

func deployScrapedNames(fams map[string]*dto.MetricFamily) deployMetrics {
	out := deployMetrics{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "caddy_ha_") {
			continue
		}
		labels := map[string]bool{}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				labels[l.GetName()] = true
			}
		}
		if f.GetType() != dto.MetricType_HISTOGRAM {
			out[name] = labels
			continue
		}
		out[name+"_count"], out[name+"_sum"] = labels, labels
		bucket := map[string]bool{"le": true}
		for l := range labels {
			bucket[l] = true
		}
		out[name+"_bucket"] = bucket
	}
	return out
}

// family is the family a selectable name belongs to.
func (s deployMetrics) family(name string) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if _, isHist := s[base+"_bucket"]; isHist {
				return base
			}
		}
	}
	return name
}

// Labels every series has (the scrape's target) or that PromQL handles.
var deployFreeLabels = map[string]bool{"instance": true, "job": true, "le": true, "__name__": true}

// ---- The deploy files

// deployQuery is one PromQL expression (or Grafana variable query) of the
// dashboard, with where it is and the labels its legend names.
type deployQuery struct {
	where, expr, legend string
	record              string // a metric name for it, e.g. deploy:panel_4_A
	variable            bool
}

type grafanaPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Datasource   map[string]any `json:"datasource"`
		Expr         string         `json:"expr"`
		LegendFormat string         `json:"legendFormat"`
		RefID        string         `json:"refId"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	UID           string
	Title         string
	Inputs        []struct {
		Name, Type, PluginID string
	} `json:"__inputs"`
	Templating struct {
		List []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Query      any            `json:"query"`
			Datasource map[string]any `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

// deployDashboardQueries lists the dashboard's queries: its query
// variables' and every panel target's.
func deployDashboardQueries(data []byte) []deployQuery {
	var d grafanaDashboard
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	var out []deployQuery
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		out = append(out, deployQuery{where: "variable " + v.Name, expr: q, record: "deploy:variable_" + v.Name, variable: true})
	}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, deployQuery{where: fmt.Sprintf("panel %d %q, query %s", p.ID, p.Title, tg.RefID),
					expr: tg.Expr, legend: tg.LegendFormat, record: fmt.Sprintf("deploy:panel_%d_%s", p.ID, tg.RefID)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

var (
	legendLabelRe   = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	templateLabelRe = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	grafanaVarRe    = regexp.MustCompile(`\$(?:\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|([a-zA-Z_][a-zA-Z0-9_]*))`)
)

// checkDeployDashboard checks the dashboard's form (rows, datasource,
// variables) and every metric and label its queries and legends name;
// used is the set of families its queries name.
func checkDeployDashboard(scrape deployMetrics, data []byte) (problems []string, used map[string]bool) {
	file := deployDashboard
	add := func(format string, args ...any) { problems = append(problems, file+": "+fmt.Sprintf(format, args...)) }
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		add("not JSON: %v", err)
		return problems, nil
	}
	if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
		add("schemaVersion %d, uid %q, title %q: want a schemaVersion of 36 or more, a uid and a title", d.SchemaVersion, d.UID, d.Title)
	}
	if !slices.ContainsFunc(d.Inputs, func(in struct{ Name, Type, PluginID string }) bool {
		return in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus"
	}) {
		add("no __inputs entry DS_PROMETHEUS, a prometheus datasource, for Grafana's import to ask for")
	}
	vars := map[string]bool{"__rate_interval": true, "__range": true, "__interval": true, "__interval_ms": true,
		"__range_s": true, "__range_ms": true, "__from": true, "__to": true}
	hasDatasource := false
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch {
		case v.Name == "datasource":
			hasDatasource = v.Type == "datasource" && v.Query == "prometheus"
		case v.Type == "query" && fmt.Sprint(v.Datasource["uid"]) != "${datasource}":
			add("variable %s: datasource %v, want uid ${datasource}", v.Name, v.Datasource)
		}
	}
	if !hasDatasource {
		add(`no template variable "datasource" of type datasource, query prometheus`)
	}

	// One row per capability, in order, each with panels; every panel on
	// the datasource variable, with a unique id and a place.
	var rows []string
	ids := map[int]bool{}
	panelsInRow := 0
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if ids[p.ID] || p.ID == 0 {
				add("panel %q: id %d missing or used twice", p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
				add("panel %d %q: gridPos %+v", p.ID, p.Title, p.GridPos)
			}
			if p.Type == "row" {
				if len(rows) > 0 && panelsInRow == 0 {
					add("row %q has no panels", rows[len(rows)-1])
				}
				rows = append(rows, p.Title)
				panelsInRow = 0
				walk(p.Panels) // a collapsed row's
				continue
			}
			panelsInRow++
			if fmt.Sprint(p.Datasource["uid"]) != "${datasource}" || len(p.Targets) == 0 {
				add("panel %d %q: datasource %v, %d queries; want uid ${datasource} and a query", p.ID, p.Title, p.Datasource, len(p.Targets))
			}
			for _, tg := range p.Targets {
				if fmt.Sprint(tg.Datasource["uid"]) != "${datasource}" || tg.Expr == "" || tg.RefID == "" {
					add("panel %d %q, query %q: datasource %v, expr %q; want uid ${datasource}, an expr and a refId", p.ID, p.Title, tg.RefID, tg.Datasource, tg.Expr)
				}
			}
		}
	}
	walk(d.Panels)
	if panelsInRow == 0 && len(rows) > 0 {
		add("row %q has no panels", rows[len(rows)-1])
	}
	if !slices.Equal(rows, deployRows) {
		add("rows %q, want one per capability: %q", rows, deployRows)
	}

	used = map[string]bool{}
	for _, q := range deployDashboardQueries(data) {
		where := file + ": " + q.where
		problems = append(problems, checkDeployPromQL(scrape, where, q.expr)...)
		if q.legend != "__auto" {
			problems = append(problems, checkDeployTemplate(scrape, where+" legend", q.expr, q.legend, legendLabelRe)...)
		}
		for _, m := range deployPromUses(q.expr).metrics {
			used[scrape.family(m)] = true
		}
		for _, m := range grafanaVarRe.FindAllStringSubmatch(q.expr, -1) {
			if name := m[1] + m[2]; !vars[name] {
				problems = append(problems, fmt.Sprintf("%s: variable $%s is not defined", where, name))
			}
		}
	}
	return problems, used
}

type promRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// The metrics the alerts must watch (issue 12): no leader beyond hold, a
// stale leader, a store down, Cloudflare ranges empty or not refreshed,
// limits decided by the fallback.
var deployAlertedMetrics = []string{"caddy_ha_leader_leaderless_seconds", "caddy_ha_leader_hold_seconds",
	"caddy_ha_leader_probe_duration_seconds_count", "caddy_ha_store_up", "caddy_ha_cloudflare_ranges",
	"caddy_ha_cloudflare_refreshed_timestamp_seconds", "caddy_ha_rate_limit_fallback_decisions_total"}

// checkDeployRules checks the alerting rules: their PromQL, their labels
// and annotations, each naming the objects (pool, zone, store, file) of its
// series; alerts are the alerts' names.
func checkDeployRules(scrape deployMetrics, data []byte) (problems []string, alerts []string) {
	file := deployRules
	var doc struct {
		Groups []struct {
			Name  string     `yaml:"name"`
			Rules []promRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return []string{fmt.Sprintf("%s: %v", file, err)}, nil
	}
	watched := map[string]bool{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			where := fmt.Sprintf("%s: group %s, alert %s", file, g.Name, r.Alert)
			if r.Alert == "" {
				problems = append(problems, fmt.Sprintf("%s: group %s: a rule that is no alert (%s)", file, g.Name, r.Record))
				continue
			}
			alerts = append(alerts, r.Alert)
			problems = append(problems, checkDeployPromQL(scrape, where, r.Expr)...)
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				problems = append(problems, fmt.Sprintf("%s: severity %q, want critical, warning or info", where, s))
			}
			uses := deployPromUses(r.Expr)
			objects := map[string]bool{}
			for _, m := range uses.metrics {
				watched[m] = true
				for _, o := range []string{"pool", "zone", "store", "file"} {
					if scrape[m][o] {
						objects[o] = true
					}
				}
			}
			for _, a := range []string{"summary", "description"} {
				text := r.Annotations[a]
				if text == "" {
					problems = append(problems, fmt.Sprintf("%s: no %s annotation", where, a))
				}
				problems = append(problems, checkDeployTemplate(scrape, where+" "+a, r.Expr, text, templateLabelRe)...)
				for o := range objects {
					if !strings.Contains(text, "$labels."+o) {
						problems = append(problems, fmt.Sprintf("%s: the %s does not name the %s ($labels.%s)", where, a, o, o))
					}
				}
			}
		}
	}
	for _, m := range deployAlertedMetrics {
		if !watched[m] {
			problems = append(problems, fmt.Sprintf("%s: no alert watches %s", file, m))
		}
	}
	return problems, alerts
}

// checkDeployRulesTest checks the rules' unit test: the series it feeds
// exist, it tests the rules file, and each alert both fires and stays quiet.
func checkDeployRulesTest(scrape deployMetrics, data []byte, alerts []string) (problems []string) {
	file := deployRulesTest
	var doc struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return []string{fmt.Sprintf("%s: %v", file, err)}
	}
	if !slices.Contains(doc.RuleFiles, filepath.Base(deployRules)) {
		problems = append(problems, fmt.Sprintf("%s: rule_files %q lacks %s", file, doc.RuleFiles, filepath.Base(deployRules)))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for i, tt := range doc.Tests {
		for _, s := range tt.InputSeries {
			where := fmt.Sprintf("%s: test %d, series %s", file, i+1, s.Series)
			problems = append(problems, checkDeployPromQL(scrape, where, s.Series)...)
			if len(deployPromUses(s.Series).metrics) != 1 {
				problems = append(problems, where+": not one caddy_ha_* series")
			}
		}
		for _, a := range tt.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] || !quiet[a] {
			problems = append(problems, fmt.Sprintf("%s: alert %s: tested firing %v, tested quiet %v; want both", file, a, fires[a], quiet[a]))
		}
	}
	return problems
}

// ---- PromQL, read by a tokenizer

// deployUses is what an expression names: caddy_ha_* metrics, and the
// labels it uses with them.
type deployUses struct {
	metrics []string
	labels  []deployLabelUse
	created map[string]bool // labels it makes (label_replace, label_join, count_values)
}

// deployLabelUse is a label named in a clause, with the caddy_ha_* metrics
// of its scope, which must each have it (or one of them, if anyOf).
type deployLabelUse struct {
	label, clause string
	metrics       []string
	anyOf         bool
}

type promToken struct {
	kind byte // 'i' identifier, 's' string, 'n' number or duration, 'v' Grafana variable, 'p' punctuation
	text string
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

// promTokens splits PromQL (with Grafana's variables) into tokens, leaving
// out comments and ranges ([5m], [$__rate_interval], [1h:1m]).
func promTokens(expr string) []promToken {
	var toks []promToken
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			toks = append(toks, promToken{'s', expr[i+1 : min(j, len(expr))]})
			i = j + 1
		case c == '[':
			for i < len(expr) && expr[i] != ']' {
				i++
			}
			i++
		case c == '$':
			j := i + 1
			if j < len(expr) && expr[j] == '{' {
				for j < len(expr) && expr[j] != '}' {
					j++
				}
				j++
			} else {
				for j < len(expr) && isIdentByte(expr[j], false) {
					j++
				}
			}
			toks = append(toks, promToken{'v', expr[i:min(j, len(expr))]})
			i = j
		case '0' <= c && c <= '9' || c == '.' && i+1 < len(expr) && '0' <= expr[i+1] && expr[i+1] <= '9':
			j := i
			for j < len(expr) && (isIdentByte(expr[j], false) || expr[j] == '.') {
				j++
			}
			toks = append(toks, promToken{'n', expr[i:j]})
			i = j
		case isIdentByte(c, true):
			j := i
			for j < len(expr) && isIdentByte(expr[j], false) {
				j++
			}
			toks = append(toks, promToken{'i', expr[i:j]})
			i = j
		default:
			n := 1
			if i+1 < len(expr) && slices.Contains([]string{"=~", "!~", "!=", "==", ">=", "<="}, expr[i:i+2]) {
				n = 2
			}
			toks = append(toks, promToken{'p', expr[i : i+n]})
			i += n
		}
	}
	return toks
}

var promAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true}

// deployPromUses reads an expression (or a series of a unit test, or
// Grafana's label_values(<selector>, <label>)).
func deployPromUses(expr string) deployUses {
	toks := promTokens(expr)
	match := map[int]int{} // each bracket's partner
	var open []int
	for i, tk := range toks {
		switch {
		case tk.kind == 'p' && (tk.text == "(" || tk.text == "{"):
			open = append(open, i)
		case tk.kind == 'p' && (tk.text == ")" || tk.text == "}") && len(open) > 0:
			o := open[len(open)-1]
			open = open[:len(open)-1]
			match[o], match[i] = i, o
		}
	}
	is := func(i int, kind byte, text string) bool {
		return i >= 0 && i < len(toks) && toks[i].kind == kind && toks[i].text == text
	}
	closing := func(i int) int { // the partner of an opening bracket at i, or the end
		if j, ok := match[i]; ok {
			return j
		}
		return len(toks)
	}

	u := deployUses{created: map[string]bool{}}
	type metricAt struct {
		pos  int
		name string
	}
	var metrics []metricAt
	type clause struct {
		pos, open, close int
		kind             string
		labels           []string
	}
	var clauses []clause
	var matchers []deployLabelUse // label matchers, each on its selector's metric
	type labelValues struct{ open, comma, close int }
	var lvs []labelValues

	// matchersIn reads a selector's {…} from the brace at b: the label
	// names, and a metric named by __name__="…".
	matchersIn := func(b int) (labels []string, name string) {
		end := closing(b)
		for k := b + 1; k+2 <= end; k++ {
			if toks[k].kind == 'i' && toks[k+1].kind == 'p' && slices.Contains([]string{"=", "!=", "=~", "!~"}, toks[k+1].text) {
				if toks[k].text == "__name__" && toks[k+1].text == "=" && toks[k+2].kind == 's' {
					name = toks[k+2].text
				} else {
					labels = append(labels, toks[k].text)
				}
			}
		}
		return labels, name
	}
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		switch {
		case tk.kind == 'p' && tk.text == "{": // a selector without a name
			labels, name := matchersIn(i)
			if strings.HasPrefix(name, "caddy_ha_") {
				metrics = append(metrics, metricAt{i, name})
				for _, l := range labels {
					matchers = append(matchers, deployLabelUse{label: l, clause: "{}", metrics: []string{name}})
				}
			}
			i = closing(i)
		case tk.kind != 'i':
		case slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, tk.text) && is(i+1, 'p', "("):
			c := clause{pos: i, open: i + 1, close: closing(i + 1), kind: tk.text}
			for k := c.open + 1; k < c.close; k++ {
				if toks[k].kind == 'i' {
					c.labels = append(c.labels, toks[k].text)
				}
			}
			clauses = append(clauses, c)
			i = c.close
		case (tk.text == "label_replace" || tk.text == "label_join" || tk.text == "count_values") && is(i+1, 'p', "("):
			for k := i + 2; k < closing(i+1); k++ {
				if toks[k].kind == 's' {
					u.created[toks[k].text] = true
					break
				}
			}
		case tk.text == "label_values" && is(i+1, 'p', "("):
			lv := labelValues{open: i + 1, comma: -1, close: closing(i + 1)}
			for k, depth := i+2, 0; k < lv.close; k++ {
				switch {
				case is(k, 'p', "(") || is(k, 'p', "{"):
					depth++
				case is(k, 'p', ")") || is(k, 'p', "}"):
					depth--
				case is(k, 'p', ",") && depth == 0:
					lv.comma = k
				}
			}
			lvs = append(lvs, lv)
		case strings.HasPrefix(tk.text, "caddy_ha_"):
			metrics = append(metrics, metricAt{i, tk.text})
			if is(i+1, 'p', "{") {
				labels, _ := matchersIn(i + 1)
				for _, l := range labels {
					matchers = append(matchers, deployLabelUse{label: l, clause: "{}", metrics: []string{tk.text}})
				}
				i = closing(i + 1)
			}
		}
	}

	in := func(from, to int) []string { // the metrics between two tokens
		var names []string
		for _, m := range metrics {
			if from <= m.pos && m.pos <= to && !slices.Contains(names, m.name) {
				names = append(names, m.name)
			}
		}
		return names
	}
	all := in(0, len(toks))
	u.metrics = all
	u.labels = matchers
	for _, c := range clauses {
		scope, anyOf := all, false
		switch c.kind {
		case "by", "without":
			// sum by (…) (<scope>), or sum(<scope>) by (…)
			if c.pos > 0 && toks[c.pos-1].kind == 'i' && promAggregations[toks[c.pos-1].text] && is(c.close+1, 'p', "(") {
				scope = in(c.close+1, closing(c.close+1))
			} else if is(c.pos-1, 'p', ")") {
				scope = in(match[c.pos-1], c.pos-1)
			}
		case "group_left", "group_right":
			anyOf = true // labels taken from the other side
		}
		for _, l := range c.labels {
			u.labels = append(u.labels, deployLabelUse{label: l, clause: c.kind, metrics: scope, anyOf: anyOf})
		}
	}
	for _, lv := range lvs {
		if lv.comma < 0 {
			u.labels = append(u.labels, deployLabelUse{clause: "label_values"})
			continue
		}
		for k := lv.comma + 1; k < lv.close; k++ {
			if toks[k].kind == 'i' {
				u.labels = append(u.labels, deployLabelUse{label: toks[k].text, clause: "label_values", metrics: in(lv.open, lv.comma)})
			}
		}
	}
	return u
}

// checkDeployPromQL reports every caddy_ha_* metric the expression names
// that the scrape lacks, and every label it uses that its metrics lack.
func checkDeployPromQL(scrape deployMetrics, where, expr string) (problems []string) {
	u := deployPromUses(expr)
	for _, m := range u.metrics {
		if _, ok := scrape[m]; !ok {
			hint := ""
			if _, isHist := scrape[m+"_bucket"]; isHist {
				hint = " (a histogram: name its _bucket, _count or _sum)"
			}
			problems = append(problems, fmt.Sprintf("%s: metric %s is not in the scrape%s", where, m, hint))
		}
	}
	for _, l := range u.labels {
		if l.clause == "label_values" && l.label == "" {
			problems = append(problems, fmt.Sprintf("%s: label_values without a metric: cannot be checked", where))
			continue
		}
		if deployFreeLabels[l.label] || u.created[l.label] {
			continue
		}
		var lacking []string
		for _, m := range l.metrics {
			if labels, ok := scrape[m]; ok && !labels[l.label] {
				lacking = append(lacking, m)
			}
		}
		if len(lacking) > 0 && (!l.anyOf || len(lacking) == len(l.metrics)) {
			problems = append(problems, fmt.Sprintf("%s: label %q (in %s) is not a label of %s", where, l.label, l.clause, strings.Join(lacking, ", ")))
		}
	}
	return problems
}

// checkDeployTemplate reports every label a legend or an annotation names
// (found by re) that no caddy_ha_* metric of the expression has.
func checkDeployTemplate(scrape deployMetrics, where, expr, text string, re *regexp.Regexp) (problems []string) {
	u := deployPromUses(expr)
	var known []string // the metrics not already reported missing
	for _, m := range u.metrics {
		if _, ok := scrape[m]; ok {
			known = append(known, m)
		}
	}
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		l := m[1]
		if deployFreeLabels[l] || u.created[l] || len(known) < len(u.metrics) {
			continue
		}
		if !slices.ContainsFunc(known, func(name string) bool { return scrape[name][l] }) {
			problems = append(problems, fmt.Sprintf("%s: %s names label %q, which none of %s has", where, m[0], l, strings.Join(known, ", ")))
		}
	}
	return problems
}

// The extractor and the checks on small expressions: each misspelt metric
// or label is found, wherever it is, and nothing else is.
func TestDeployPromQLChecks(t *testing.T) {
	scrape := deployMetrics{
		"caddy_ha_leader_current":                       {"pool": true, "upstream": true},
		"caddy_ha_leader_hold_seconds":                  {"pool": true},
		"caddy_ha_leader_leaderless_seconds":            {"pool": true},
		"caddy_ha_leader_probe_duration_seconds_bucket": {"pool": true, "upstream": true, "outcome": true, "le": true},
		"caddy_ha_leader_probe_duration_seconds_count":  {"pool": true, "upstream": true, "outcome": true},
		"caddy_ha_leader_probe_duration_seconds_sum":    {"pool": true, "upstream": true, "outcome": true},
		"caddy_ha_store_up":                             {"store": true},
	}
	for _, tt := range []struct {
		expr string
		want []string // a substring of each problem, in order; none for a good expression
	}{
		{`caddy_ha_store_up == 0`, nil},
		{`caddy_ha_store_upp == 0`, []string{"metric caddy_ha_store_upp"}},
		{`up{job="caddy"} and caddy_ha_store_up`, nil},
		{`caddy_ha_leader_probe_duration_seconds{outcome="stale"}`, []string{"a histogram"}},
		{`caddy_ha_store_up{stor="redis x"}`, []string{`label "stor" (in {})`}},
		{`caddy_ha_store_up{store="caddy_ha_nope by (x)", instance=~"$instance"}`, nil},
		{`{__name__="caddy_ha_store_upp"}`, []string{"metric caddy_ha_store_upp"}},
		{`{__name__="caddy_ha_store_up", stor="x"}`, []string{`label "stor"`}},
		{`sum by (pool, upstream) (caddy_ha_leader_current)`, nil},
		{`sum by (pol) (caddy_ha_leader_current)`, []string{`label "pol" (in by)`}},
		{`sum(rate(caddy_ha_leader_current[5m])) by (pol)`, []string{`label "pol" (in by)`}},
		{`sum by (upstream) (caddy_ha_store_up) + on() group_left() sum(caddy_ha_leader_current)`, []string{`label "upstream" (in by) is not a label of caddy_ha_store_up`}},
		{`sum without (upstrem) (caddy_ha_leader_current)`, []string{`label "upstrem" (in without)`}},
		{`caddy_ha_leader_leaderless_seconds > on(instance, job, pool) caddy_ha_leader_hold_seconds`, nil},
		{`caddy_ha_leader_leaderless_seconds > on(instance, job, pol) caddy_ha_leader_hold_seconds`, []string{`label "pol" (in on)`}},
		{`caddy_ha_leader_current > on(upstream) caddy_ha_leader_hold_seconds`, []string{`"upstream" (in on) is not a label of caddy_ha_leader_hold_seconds`}},
		{`caddy_ha_leader_leaderless_seconds > ignoring(upstream) caddy_ha_leader_hold_seconds`, []string{`label "upstream" (in ignoring)`}},
		{`caddy_ha_leader_hold_seconds * on(pool) group_left(upstream) caddy_ha_leader_current`, nil},
		{`caddy_ha_leader_hold_seconds * on(pool) group_left(upstrem) caddy_ha_leader_current`, []string{`label "upstrem" (in group_left)`}},
		{`caddy_ha_leader_current * on(pool) group_right(outcome) caddy_ha_leader_hold_seconds`, []string{`label "outcome" (in group_right)`}},
		{`histogram_quantile(0.99, sum by (le, outcome) (rate(caddy_ha_leader_probe_duration_seconds_bucket{pool=~"$pool"}[$__rate_interval])))`, nil},
		{`histogram_quantile(0.99, sum by (le, outcom) (rate(caddy_ha_leader_probe_duration_seconds_bucket[5m])))`, []string{`label "outcom"`}},
		{`max_over_time(caddy_ha_store_up[1h:1m]) offset 5m # caddy_ha_not_a_metric`, nil},
		{`increase(caddy_ha_leader_probe_duration_seconds_count{outcome="stale"}[5m]) > 0 or (caddy_ha_leader_probe_duration_seconds_count{outcome="stale"} unless caddy_ha_leader_probe_duration_seconds_count{outcome="stale"} offset 5m)`, nil},
		{`time() - caddy_ha_cloudflare_refreshed_timestamp_seconds > 2 * 86400`, []string{"metric caddy_ha_cloudflare_refreshed_timestamp_seconds"}},
		{`sum by (node) (label_replace(caddy_ha_leader_current, "node", "$1", "upstream", "(.*):.*"))`, nil},
		{`label_values(caddy_ha_store_up{instance=~"$instance"}, store)`, nil},
		{`label_values(caddy_ha_store_up, stor)`, []string{`label "stor" (in label_values)`}},
		{`label_values(store)`, []string{"label_values without a metric"}},
		{`caddy_ha_store_up{instance="caddy-1:2019", job="caddy", store="redis 10.0.0.5:6379"}`, nil},
		{`caddy_ha_leader_current{instance="caddy-1:2019", pol="a"}`, []string{`label "pol"`}},
	} {
		got := checkDeployPromQL(scrape, "expr", tt.expr)
		if len(got) != len(tt.want) {
			t.Errorf("%s: problems %q, want %d like %q", tt.expr, got, len(tt.want), tt.want)
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: problem %q, want one with %q", tt.expr, got[i], w)
			}
		}
	}

	for _, tt := range []struct {
		expr, text string
		re         *regexp.Regexp
		problems   int
	}{
		{`sum by (pool) (caddy_ha_leader_current)`, "{{pool}} {{ instance }}", legendLabelRe, 0},
		{`caddy_ha_store_up`, "{{pool}}", legendLabelRe, 1},
		{`caddy_ha_store_up == 0`, "Store {{ $labels.store }} down on {{ $labels.instance }}", templateLabelRe, 0},
		{`caddy_ha_store_up == 0`, "Store {{ $labels.stor }} down", templateLabelRe, 1},
	} {
		if got := checkDeployTemplate(scrape, "text", tt.expr, tt.text, tt.re); len(got) != tt.problems {
			t.Errorf("%s with %q: problems %q, want %d", tt.expr, tt.text, got, tt.problems)
		}
	}
}
