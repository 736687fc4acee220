package check

// The fleet view (deploy/prometheus, deploy/grafana): the alerting rules pass
// promtool's check and its unit tests, the PrometheusRule holds the same
// groups as the plain rules file, the Grafana dashboard parses, and every
// sds_* series that the rules, their tests and the dashboard use (name, and
// every label=value they match on but point names) is on a real proxy's
// /metrics.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	promDir       = "../prometheus"
	promRules     = "sds-rules.yaml"
	promRuleTests = "sds-rules.test.yaml"
	promOperator  = "prometheusrule.yaml"
	grafanaFile   = "../grafana/sds-proxy.json"
)

// promTargetLabels are the labels Prometheus (a PodMonitor, or the usual
// kubernetes_sd relabelling) adds to each series of a pod; the proxy does
// not export them.
var promTargetLabels = []string{"job", "instance", "namespace", "pod"}

// promtool returns promtool's path, or skips the test when it is absent.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		// The line every skip for a missing tool writes (the main module's
		// internal/tooltest, which this module cannot import).
		t.Skip("missing tool promtool: not on PATH; install: apt-get install prometheus (.ci/run does)")
	}
	return path
}

func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestPromtoolCheckRules(t *testing.T) {
	runPromtool(t, promDir, "check", "rules", promRules)
}

func TestPromtoolTestRules(t *testing.T) {
	runPromtool(t, promDir, "test", "rules", promRuleTests)
}

// promRule is one rule of a rules file, as much as these tests read.
type promRule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type promGroups struct {
	Groups []struct {
		Name  string     `json:"name"`
		Rules []promRule `json:"rules"`
	} `json:"groups"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func promAlerts(t *testing.T) []promRule {
	t.Helper()
	var g promGroups
	readYAML(t, filepath.Join(promDir, promRules), &g)
	var rules []promRule
	for _, group := range g.Groups {
		rules = append(rules, group.Rules...)
	}
	return rules
}

// TestPrometheusRuleMatchesRulesFile: the PrometheusRule is the plain rules
// file's groups under spec, so there is one definition of the alerts.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var plain map[string]any
	readYAML(t, filepath.Join(promDir, promRules), &plain)
	var operator struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	readYAML(t, filepath.Join(promDir, promOperator), &operator)
	if operator.APIVersion != "monitoring.coreos.com/v1" || operator.Kind != "PrometheusRule" || operator.Metadata.Name == "" {
		t.Errorf("%s is %s %s named %q, want a named monitoring.coreos.com/v1 PrometheusRule", promOperator, operator.APIVersion, operator.Kind, operator.Metadata.Name)
	}
	if len(plain) != 1 || plain["groups"] == nil {
		t.Errorf("%s has keys other than groups", promRules)
	}
	if len(operator.Spec) != 1 {
		t.Errorf("%s: spec has keys other than groups", promOperator)
	}
	if !reflect.DeepEqual(plain["groups"], operator.Spec["groups"]) {
		want, _ := yaml.Marshal(plain["groups"])
		got, _ := yaml.Marshal(operator.Spec["groups"])
		t.Errorf("%s's spec.groups differ from %s's groups: copy them over, indented under spec.\n--- %s\n%s\n--- %s\n%s", promOperator, promRules, promRules, want, promOperator, got)
	}
}

// TestAlertsAreComplete: each alert waits (for), says how bad it is
// (severity) and what happened where (summary, description naming the pod
// or the namespace), and is exercised by the promtool tests.
func TestAlertsAreComplete(t *testing.T) {
	alerts := promAlerts(t)
	if len(alerts) == 0 {
		t.Fatal("no alerts")
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, filepath.Join(promDir, promRuleTests), &tests)
	fired := map[string]bool{}
	silent := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if a.Alert == "" {
			t.Errorf("rule %q is not an alert", a.Record)
			continue
		}
		if d, err := time.ParseDuration(a.For); err != nil || d < time.Minute {
			t.Errorf("%s: for %q, want at least 1m", a.Alert, a.For)
		}
		if s := a.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
			t.Errorf("%s: severity %q, want critical, warning or info", a.Alert, s)
		}
		for _, key := range []string{"summary", "description"} {
			text := a.Annotations[key]
			if !strings.Contains(text, "$labels.namespace") {
				t.Errorf("%s: %s %q does not name the namespace", a.Alert, key, text)
			}
			if !strings.Contains(text, "$labels.pod") && !strings.Contains(text, "$labels.point") {
				t.Errorf("%s: %s %q names neither the pod nor the point", a.Alert, key, text)
			}
			if strings.Contains(a.Expr, "point") && !strings.Contains(text, "$labels.point") {
				t.Errorf("%s: %s %q does not name the point", a.Alert, key, text)
			}
		}
		if !fired[a.Alert] || !silent[a.Alert] {
			t.Errorf("%s: %s must both fire it and check that it is silent before its for: (fired %v, silent %v)", a.Alert, promRuleTests, fired[a.Alert], silent[a.Alert])
		}
	}
}

// grafanaDashboard is as much of the dashboard's JSON as these tests read.
type grafanaDashboard struct {
	Title      string         `json:"title"`
	UID        string         `json:"uid"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource map[string]any  `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	data, err := os.ReadFile(grafanaFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var d grafanaDashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", grafanaFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: no title or uid", grafanaFile)
	}
	return d
}

// dashboardExprs returns every PromQL query of the dashboard: the panels'
// targets and the query variables' definitions.
func dashboardExprs(t *testing.T, d grafanaDashboard) []string {
	t.Helper()
	var exprs []string
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			if p.Datasource["uid"] != "${datasource}" {
				t.Errorf("panel %q: datasource %v, want the ${datasource} variable", p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("panel %q has an empty query", p.Title)
				}
				if tg.Datasource["uid"] != "${datasource}" {
					t.Errorf("panel %q: a query's datasource %v, want the ${datasource} variable", p.Title, tg.Datasource)
				}
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
		}
	}
	return exprs
}

// TestGrafanaDashboard: the dashboard parses, has a Prometheus datasource
// variable and the namespace, pod and point variables, every panel queries
// through the datasource variable, and every query is valid PromQL once
// Grafana's variables are replaced (promtool check rules on a recording
// rule per query).
func TestGrafanaDashboard(t *testing.T) {
	d := readDashboard(t)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "datasource" && string(v.Query) != `"prometheus"` {
			t.Errorf("datasource variable %q queries %s, want prometheus", v.Name, v.Query)
		}
		if v.Type == "query" && v.Datasource["uid"] != "${datasource}" {
			t.Errorf("variable %q: datasource %v, want the ${datasource} variable", v.Name, v.Datasource)
		}
	}
	want := map[string]string{"datasource": "datasource", "namespace": "query", "pod": "query", "point": "query"}
	for name, typ := range want {
		if vars[name] != typ {
			t.Errorf("templating: variable %q is %q, want %q", name, vars[name], typ)
		}
	}
	exprs := dashboardExprs(t, d)
	for _, use := range []string{"sds_point_tripped", "sds_degraded_total", "histogram_quantile", "sds_upstream_duration_seconds_bucket", "sds_upstream_errors_total", "sds_config_reloads_total", "sds_config_last_reload_successful", "sds_connections"} {
		if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, use) }) {
			t.Errorf("no panel uses %s", use)
		}
	}

	// label_values(...) is Grafana's, not PromQL: check the selector in it.
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)
	grafanaVar := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$namespace", ".*", "$pod", ".*", "$point", ".*")
	var rules bytes.Buffer
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		if m := labelValues.FindStringSubmatch(e); m != nil {
			e = m[1]
		}
		e = grafanaVar.Replace(e)
		if strings.Contains(e, "$") {
			t.Errorf("query %q uses a variable the test does not know", e)
		}
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(path, rules.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, ".", "check", "rules", path)
}

// promSelector matches an sds_* series in PromQL or in a promtool input
// series; promMatcher one label matcher inside its braces.
var (
	promSelector = regexp.MustCompile(`\b(sds_[a-zA-Z0-9_]+)\s*(\{[^}]*\})?`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
)

// TestFleetMetricsExist starts the real proxy (built from this repository)
// with one point on 127.0.0.1, scrapes its /metrics, and checks that every
// sds_* series the alerts, their promtool tests and the dashboard use is
// there: the metric name, each label=value matched on (for point, which
// takes the config's names, the label), and each label grouped by. It is what keeps the fleet view honest when a metric changes.
func TestFleetMetricsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the proxy: skipped with -short")
	}
	series := scrapeRealProxy(t)

	type use struct{ where, text string }
	var uses []use
	for _, a := range promAlerts(t) {
		uses = append(uses, use{promRules + " " + a.Alert, a.Expr})
	}
	var tests struct {
		Tests []struct {
			Name        string `json:"name"`
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	readYAML(t, filepath.Join(promDir, promRuleTests), &tests)
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			if !strings.HasPrefix(s.Series, "sds_") {
				t.Errorf("%s %q: input series %s is not the proxy's", promRuleTests, tc.Name, s.Series)
			}
			uses = append(uses, use{promRuleTests + " " + tc.Name, s.Series})
		}
	}
	for _, e := range dashboardExprs(t, readDashboard(t)) {
		uses = append(uses, use{grafanaFile, e})
	}

	labelNames := map[string]bool{"le": true}
	for _, l := range promTargetLabels {
		labelNames[l] = true
	}
	for _, ss := range series {
		for _, s := range ss {
			for k := range s {
				labelNames[k] = true
			}
		}
	}
	names := 0
	for _, u := range uses {
		for _, m := range promSelector.FindAllStringSubmatch(u.text, -1) {
			name, matchers := m[1], m[2]
			got, ok := series[name]
			if !ok {
				t.Errorf("%s: %s is not on the proxy's /metrics", u.where, name)
				continue
			}
			names++
			for _, mm := range promMatcher.FindAllStringSubmatch(matchers, -1) {
				label, op, value := mm[1], mm[2], mm[3]
				if slices.Contains(promTargetLabels, label) {
					continue
				}
				if op != "=" || label == "point" { // point names are the config's
					if !slices.ContainsFunc(got, func(s map[string]string) bool { _, ok := s[label]; return ok }) {
						t.Errorf("%s: %s has no label %s", u.where, name, label)
					}
					continue
				}
				if !slices.ContainsFunc(got, func(s map[string]string) bool { return s[label] == value }) {
					t.Errorf("%s: no series %s{%s=%q} on the proxy's /metrics", u.where, name, label, value)
				}
			}
		}
		for _, g := range promGrouping.FindAllStringSubmatch(u.text, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !labelNames[l] {
					t.Errorf("%s: groups by %s, a label neither the proxy nor Prometheus sets", u.where, l)
				}
			}
		}
	}
	if names == 0 {
		t.Fatal("found no sds_* series to check")
	}
	t.Logf("checked %d uses of sds_* series against %d metric names", names, len(series))
}

// scrapeRealProxy builds cmd/sds-proxy, runs it on 127.0.0.1 in front of a
// test upstream with one point, and returns its /metrics as metric name ->
// the label sets of its series (histograms under their _bucket, _sum and
// _count names).
func scrapeRealProxy(t *testing.T) map[string][]map[string]string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sds-proxy")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sds-proxy")
	build.Dir = "../.." // the main module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sds-proxy: %v\n%s", err, out)
	}

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(upstream.Close)
	config := filepath.Join(dir, "sds.yaml")
	// cluster: with no Redis at its address: the sds_cluster_* series exist
	// all the same (the point counts on its share).
	body := fmt.Sprintf("upstream: %s\ndrainTimeout: 0\ncluster: {addresses: [127.0.0.1:1]}\nroutes:\n  - point: fleet\n    match: {}\npoints:\n  fleet:\n    visitThreshold: 100\n    clusterTokenBucket: {tokensPerSecond: 1000}\n", upstream.URL)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "run", "-config", config, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var logs bytes.Buffer
	admin := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			var e struct {
				Msg   string `json:"msg"`
				Admin string `json:"admin_addr"`
			}
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Msg == "serving" {
				admin <- e.Admin
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	var addr string
	select {
	case addr = <-admin:
	case <-exited:
		t.Fatalf("sds-proxy exited before serving:\n%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("sds-proxy did not log serving within 30s")
	}
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	series := map[string][]map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? `)
	for sc.Scan() {
		m := sample.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[1], "sds_") {
			continue
		}
		labels := map[string]string{}
		for _, mm := range promMatcher.FindAllStringSubmatch(m[3], -1) {
			labels[mm[1]] = mm[3]
		}
		series[m[1]] = append(series[m[1]], labels)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(series["sds_point_tripped"]) == 0 {
		t.Fatalf("the proxy's /metrics has no sds_point_tripped series:\n%v", series)
	}
	return series
}
