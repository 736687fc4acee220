package main_test

// End-to-end tests of /metrics (docs/admin.md, Admin port) as Prometheus reads
// it: the protobuf exposition decoded by prometheus/common's expfmt, with
// the upstream time as a native histogram and the W3C traceparent's trace
// id as its exemplar; and two real Prometheus servers scraping the proxy,
// one negotiating the protobuf format (native histograms) and one
// OpenMetrics text (exemplars on the classic buckets), asked through their
// HTTP API.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sds-proxy/sds-proxy/internal/tooltest"
)

const (
	// metricsTraceID is the trace id sent in a valid traceparent.
	metricsTraceID = "0af7651916cd43dd8448eb211c80319c"
	// metricsBadTraceID is sent in an upper-case traceparent, which the
	// W3C format does not allow: it must never become an exemplar.
	metricsBadTraceID = "0AF7651916CD43DD8448EB211C80319D"
	// prometheusBin is Debian's Prometheus server (2.42), which .ci/run
	// installs.
	prometheusBin = "/usr/bin/prometheus"
)

// metricsTraffic sends the traffic the metrics tests read: on point p, 20
// calls without traceparent, 1 with a malformed one and 5 with a valid
// one, each taking at least 20ms upstream; 2 requests that match no route;
// 1 refused for its path.
func metricsTraffic(e *env) {
	e.t.Helper()
	send := func(path, traceparent string) {
		e.t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.proxy.url+path, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		if traceparent != "" {
			req.Header.Set("Traceparent", traceparent)
		}
		r, err := e.do(req)
		if err != nil || r.status != http.StatusOK {
			e.t.Fatalf("GET %s: got %v, %v; want 200", path, r, err)
		}
	}
	for range 20 {
		send("/api/x?sleep=20ms", "")
	}
	send("/api/x?sleep=20ms", "00-"+metricsBadTraceID+"-b7ad6b7169203331-01")
	for range 5 {
		send("/api/x?sleep=20ms", "00-"+metricsTraceID+"-b7ad6b7169203331-01")
	}
	send("/elsewhere", "")
	send("/elsewhere", "")
	if r := rawGet(e.t, strings.TrimPrefix(e.proxy.url, "http://"), "/api/a%2Fb", "shop.example"); r.status != http.StatusBadRequest {
		e.t.Fatalf("GET /api/a%%2Fb: got %v, want 400", r)
	}
}

const metricsConfig = "routes:\n  - point: p\n    match: {pathPrefix: /api}\npoints:\n  p:\n    visitThreshold: 1000\n"

// metricsForwarded is how many calls metricsTraffic forwards on p.
const metricsForwarded = 26

// scrapeAs GETs the admin port's /metrics with accept as Accept header.
func scrapeAs(t *testing.T, admin, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := (&http.Client{Timeout: wait}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: got status %d, want 200", resp.StatusCode)
	}
	return resp
}

// TestMetricsProtobuf scrapes /metrics in the delimited protobuf format,
// as Prometheus does with native histograms on, and decodes it with
// expfmt.
func TestMetricsProtobuf(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, metricsConfig)
	metricsTraffic(e)

	resp := scrapeAs(t, e.proxy.admin, "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3")
	if got := expfmt.ResponseFormat(resp.Header); got.FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("Content-Type %q: got format %v, want delimited protobuf", resp.Header.Get("Content-Type"), got)
	}
	ms := decodeExposition(t, resp)

	hist := pointHistogram(t, ms, "p")
	if hist.GetSampleCount() != metricsForwarded {
		t.Errorf("observations: got %d, want %d", hist.GetSampleCount(), metricsForwarded)
	}
	if hist.GetSchema() != 3 || hist.GetZeroThreshold() != math.Ldexp(1, -128) {
		t.Errorf("native histogram: got schema %d, zero threshold %g; want 3, 2^-128", hist.GetSchema(), hist.GetZeroThreshold())
	}
	// Decode the spans and deltas: every call took at least 20ms, so no
	// bucket below index ceil(8*log2(0.02)) = -45 is populated.
	total, lowest := nativeBuckets(t, hist)
	if total != metricsForwarded || lowest < -45 {
		t.Errorf("native buckets: got %d observations, lowest bucket %d; want %d, at or above -45", total, lowest, metricsForwarded)
	}
	if n := len(hist.GetBucket()); n != 13 && n != 14 { // 14 with an exemplar on +Inf
		t.Errorf("classic buckets: got %d, want 13", n)
	}
	ids := exemplarIDs(hist)
	if ids[metricsTraceID] == 0 || ids[strings.ToLower(metricsBadTraceID)] != 0 || ids[metricsBadTraceID] != 0 {
		t.Errorf("exemplar trace ids: got %v, want %s and never %s", ids, metricsTraceID, metricsBadTraceID)
	}

	if v, _ := ms.value("sds_unrouted_requests_total"); v != 2 {
		t.Errorf("sds_unrouted_requests_total: got %v, want 2", v)
	}
	if v, _ := ms.value("sds_rejected_requests_total", "reason", "path"); v != 1 {
		t.Errorf("sds_rejected_requests_total{reason=path}: got %v, want 1", v)
	}
	if v, _ := ms.value("sds_requests_total", "point", "p", "result", "proxied"); v != metricsForwarded {
		t.Errorf("sds_requests_total{point=p,result=proxied}: got %v, want %d", v, metricsForwarded)
	}
	if v, _ := ms.value("sds_point_state", "point", "p", "state", "closed"); v != 1 {
		t.Errorf("sds_point_state{point=p,state=closed}: got %v, want 1", v)
	}
	version := binaryVersion(t)
	if v, ok := ms.value("sds_build_info", "version", version, "goversion", runtime.Version()); v != 1 {
		t.Errorf("sds_build_info{version=%q,goversion=%q}: got %v (present: %v), want 1; families: %v",
			version, runtime.Version(), v, ok, ms["sds_build_info"])
	}
}

// decodeExposition decodes a scrape's answer in the format its
// Content-Type names.
func decodeExposition(t *testing.T, resp *http.Response) metrics {
	t.Helper()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	ms := metrics{}
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding the protobuf exposition: %v", err)
		}
		ms[mf.GetName()] = &mf
	}
	return ms
}

// nativeBuckets decodes a native histogram's positive spans and deltas,
// and returns the observations they and the zero bucket hold, and the
// index of the lowest bucket populated.
func nativeBuckets(t *testing.T, hist *dto.Histogram) (total uint64, lowest int32) {
	t.Helper()
	spans := hist.GetPositiveSpan()
	if len(spans) == 0 {
		t.Fatal("no native buckets")
	}
	index, count := int32(0), int64(0)
	total, lowest = uint64(hist.GetZeroCount()), int32(math.MaxInt32)
	deltas := hist.GetPositiveDelta()
	for _, s := range spans {
		index += s.GetOffset()
		for range s.GetLength() {
			if len(deltas) == 0 {
				t.Fatalf("%d spans, more buckets than deltas (%d)", len(spans), len(hist.GetPositiveDelta()))
			}
			count += deltas[0]
			deltas = deltas[1:]
			if count > 0 {
				lowest = min(lowest, index)
			}
			total += uint64(count)
			index++
		}
	}
	return total, lowest
}

// pointHistogram returns point's sds_upstream_duration_seconds.
func pointHistogram(t *testing.T, ms metrics, point string) *dto.Histogram {
	t.Helper()
	for _, m := range ms["sds_upstream_duration_seconds"].GetMetric() {
		if labelsAre(m.GetLabel(), map[string]string{"point": point}) {
			return m.GetHistogram()
		}
	}
	t.Fatalf("no sds_upstream_duration_seconds{point=%q}", point)
	return nil
}

// exemplarIDs counts the trace_id of every exemplar of hist, native and
// classic.
func exemplarIDs(hist *dto.Histogram) map[string]int {
	ids := map[string]int{}
	all := hist.GetExemplars()
	for _, b := range hist.GetBucket() {
		if b.GetExemplar() != nil {
			all = append(all, b.GetExemplar())
		}
	}
	for _, e := range all {
		for _, l := range e.GetLabel() {
			if l.GetName() == "trace_id" {
				ids[l.GetValue()]++
			}
		}
	}
	return ids
}

// binaryVersion returns the version the built sds-proxy reports.
func binaryVersion(t *testing.T) string {
	t.Helper()
	out, err := command("sds-proxy", "version").Output()
	if err != nil {
		t.Fatalf("sds-proxy version: %v", err)
	}
	fields := strings.Fields(string(out)) // sds-proxy VERSION GOVERSION
	if len(fields) != 3 {
		t.Fatalf("sds-proxy version: got %q, want three fields", out)
	}
	return fields[1]
}

// TestMetricsOpenMetrics checks that /metrics negotiates OpenMetrics and
// that real Prometheus servers read it: one with native histograms on
// (which negotiates the protobuf format) computes a quantile from the
// native histogram and stores the trace id sent as its exemplar; one
// without reads OpenMetrics text and stores the trace id as the exemplar of
// a classic bucket.
func TestMetricsOpenMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, metricsConfig)
	metricsTraffic(e)

	resp := scrapeAs(t, e.proxy.admin, "application/openmetrics-text;version=1.0.0")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") ||
		!strings.HasSuffix(string(body), "# EOF\n") || !strings.Contains(string(body), `# {trace_id="`+metricsTraceID+`"}`) {
		t.Errorf("OpenMetrics scrape: got Content-Type %q, a body without # EOF or without the exemplar:\n%.2000s", ct, body)
	}

	if _, err := os.Stat(prometheusBin); err != nil {
		tooltest.Skip(t, "prometheus", "no Prometheus server at "+prometheusBin+", so only the scrape itself was checked", "apt-get install prometheus (.ci/run does)")
	}
	target := strings.TrimPrefix(e.proxy.admin, "http://")
	native := startPrometheus(t, target, "native-histograms,exemplar-storage")
	text := startPrometheus(t, target, "exemplar-storage")

	// Native: the series is a histogram sample, and its median is that
	// of calls of 20ms and more (a generous upper bound for a loaded
	// machine).
	var count float64
	if !eventually(wait, func() bool {
		res := native.query(t, `sds_upstream_duration_seconds{point="p"}`)
		if len(res) != 1 || res[0].Histogram == nil {
			return false
		}
		count, _ = strconv.ParseFloat(res[0].Histogram.Count, 64)
		return true
	}) {
		t.Fatalf("the native Prometheus has no native histogram sds_upstream_duration_seconds{point=\"p\"}: %v",
			native.query(t, `{__name__=~"sds_upstream_duration_seconds.*"}`))
	}
	if count != metricsForwarded {
		t.Errorf("native histogram count: got %v, want %d", count, metricsForwarded)
	}
	if res := native.query(t, `histogram_quantile(0.5, sds_upstream_duration_seconds{point="p"})`); len(res) != 1 ||
		res[0].number() < 0.02 || res[0].number() > 2 {
		t.Errorf("native histogram median: got %v, want one value between 0.02 and 2 (s)", res)
	}
	if res := native.query(t, `sds_upstream_duration_seconds_bucket{point="p"}`); len(res) != 0 {
		t.Errorf("classic buckets stored beside the native histogram: %v", res)
	}

	var ids map[string]bool
	if !eventually(wait, func() bool {
		ids = native.exemplarIDs(t, `sds_upstream_duration_seconds{point="p"}`)
		return ids[metricsTraceID]
	}) {
		t.Errorf("native Prometheus: exemplar trace ids %v, want %s", ids, metricsTraceID)
	}

	// OpenMetrics text: classic buckets, and the trace id as exemplar.
	if !eventually(wait, func() bool {
		ids = text.exemplarIDs(t, `sds_upstream_duration_seconds_bucket{point="p"}`)
		return ids[metricsTraceID]
	}) {
		t.Fatalf("OpenMetrics Prometheus: exemplar trace ids %v, want %s", ids, metricsTraceID)
	}
	if ids[metricsBadTraceID] || ids[strings.ToLower(metricsBadTraceID)] {
		t.Errorf("OpenMetrics Prometheus: exemplar of a malformed traceparent: %v", ids)
	}
	if res := text.query(t, `sds_upstream_duration_seconds_count{point="p"}`); len(res) != 1 || res[0].number() != metricsForwarded {
		t.Errorf("OpenMetrics Prometheus: sds_upstream_duration_seconds_count: got %v, want %d", res, metricsForwarded)
	}
	if res := text.query(t, `sds_build_info{version!="",goversion="`+runtime.Version()+`"}`); len(res) != 1 || res[0].number() != 1 {
		t.Errorf("OpenMetrics Prometheus: sds_build_info: got %v, want one series of 1", res)
	}
}

// prometheusServer is a running Prometheus and its HTTP API.
type prometheusServer struct {
	url string // http://127.0.0.1:PORT
}

// startPrometheus runs Prometheus scraping target's /metrics every second
// with the given feature flags, its storage in a temporary directory, and
// waits until it is ready. t.Cleanup stops it. It picks a free port, and
// another if something took it first.
func startPrometheus(t *testing.T, target, features string) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: sds
    static_configs:
      - targets: [%q]
`, target), 0o644); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		addr := freePort(t)
		p, err := start(t, exec.Command(prometheusBin,
			"--config.file="+config,
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprint("data", attempt)),
			"--web.listen-address="+addr,
			"--enable-feature="+features,
			"--log.level=warn"))
		if err != nil {
			t.Fatalf("start %s: %v", prometheusBin, err)
		}
		s := &prometheusServer{url: "http://" + addr}
		client := http.Client{Timeout: time.Second}
		ready := eventually(wait, func() bool {
			if p.hasExited() {
				return true
			}
			resp, err := client.Get(s.url + "/-/ready")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		switch {
		case ready && !p.hasExited():
			return s
		case attempt < 2 && p.hasExited():
			continue // most likely the port was taken meanwhile
		default:
			t.Fatalf("Prometheus (%s) not ready within %v:\n%s", features, wait, p.stderr)
		}
	}
}

// promSample is one element of an instant query's vector.
type promSample struct {
	Metric    map[string]string `json:"metric"`
	Value     []any             `json:"value"` // [time, "value"]
	Histogram *struct {
		Count string `json:"count"`
	} `json:"histogram"` // a native histogram's [time, {...}], decoded below
}

// UnmarshalJSON reads "histogram": [time, {"count": ...}].
func (s *promSample) UnmarshalJSON(b []byte) error {
	var raw struct {
		Metric    map[string]string `json:"metric"`
		Value     []any             `json:"value"`
		Histogram []json.RawMessage `json:"histogram"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	s.Metric, s.Value = raw.Metric, raw.Value
	if len(raw.Histogram) == 2 {
		s.Histogram = &struct {
			Count string `json:"count"`
		}{}
		return json.Unmarshal(raw.Histogram[1], s.Histogram)
	}
	return nil
}

// number is the sample's float value, NaN for a histogram.
func (s promSample) number() float64 {
	if len(s.Value) != 2 {
		return math.NaN()
	}
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

func (s promSample) String() string {
	if s.Histogram != nil {
		return fmt.Sprintf("%v histogram count %s", s.Metric, s.Histogram.Count)
	}
	return fmt.Sprintf("%v %v", s.Metric, s.Value)
}

// api GETs a Prometheus API path and decodes its data into out.
func (s *prometheusServer) api(t *testing.T, path string, params url.Values, out any) {
	t.Helper()
	resp, err := (&http.Client{Timeout: wait}).Get(s.url + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if body.Status != "success" {
		t.Fatalf("%s %v: got status %q: %s", path, params, body.Status, body.Error)
	}
	if err := json.Unmarshal(body.Data, out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, body.Data)
	}
}

// query runs an instant PromQL query now and returns its vector.
func (s *prometheusServer) query(t *testing.T, q string) []promSample {
	t.Helper()
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	s.api(t, "/api/v1/query", url.Values{"query": {q}}, &data)
	if data.ResultType != "vector" {
		t.Fatalf("query %s: got result type %q, want vector", q, data.ResultType)
	}
	return data.Result
}

// exemplarIDs returns the trace_id of every exemplar stored for the series
// of selector in the last minute.
func (s *prometheusServer) exemplarIDs(t *testing.T, selector string) map[string]bool {
	t.Helper()
	var data []struct {
		Exemplars []struct {
			Labels map[string]string `json:"labels"`
		} `json:"exemplars"`
	}
	now := time.Now()
	s.api(t, "/api/v1/query_exemplars", url.Values{
		"query": {selector},
		"start": {strconv.FormatInt(now.Add(-time.Minute).Unix(), 10)},
		"end":   {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)},
	}, &data)
	ids := map[string]bool{}
	for _, series := range data {
		for _, e := range series.Exemplars {
			ids[e.Labels["trace_id"]] = true
		}
	}
	return ids
}
