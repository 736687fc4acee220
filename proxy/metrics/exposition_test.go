package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
)

// scrapeAccepts are the Accept headers the differential tests scrape
// with: none, Prometheus 3's default and native-histogram ones, each
// format alone, and OpenMetrics with escaping.
var scrapeAccepts = []string{
	"",
	"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
	"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,text/plain;version=0.0.4;q=0.1",
	"text/plain;version=0.0.4",
	"application/openmetrics-text;version=0.0.1",
	"application/openmetrics-text;version=1.0.0;escaping=underscores",
	"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
	"application/openmetrics-text;version=2.0.0",
	"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
}

// randomSet builds a Set on reg whose points have random names (quotes,
// backslashes, newlines and non-ASCII among them), settings, counts,
// calls in flight, states and upstream times with exemplars, some of them
// out of the config, at the instant now. The registry holds other
// families too, one of which (sds_point_forced) sorts among the per-point
// ones.
func randomSet(t testing.TB, rng *rand.Rand, reg *prometheus.Registry, now time.Time) *Set {
	t.Helper()
	alphabet := []string{"a", "b", "z", "0", ".", "-", "_", `"`, `\`, "\n", "é", "点", "A"}
	n := rng.IntN(200)
	var live []Source
	m := NewSet(reg, func() []Source { return live })
	m.SetClock(func() time.Time { return now })
	seen := map[string]bool{}
	for range n {
		var name string
		for range 1 + rng.IntN(8) {
			name += alphabet[rng.IntN(len(alphabet))]
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		pm := m.ForPoint(name)
		for k := range pm.counts {
			if rng.IntN(3) == 0 {
				for range rng.IntN(5) {
					pm.counts[k].Inc()
				}
				if rng.IntN(10) == 0 {
					pm.counts[k].n.Add(rng.Uint64N(1 << 60)) // large counts: float formatting
				}
			}
		}
		for i := range rng.IntN(20) {
			seconds := rng.ExpFloat64() * 0.05
			if rng.IntN(20) == 0 {
				seconds = 0 // the zero bucket
			}
			trace := ""
			if rng.IntN(3) == 0 {
				trace = fmt.Sprintf("%032x", rng.Uint64())
			}
			pm.ObserveDuration(seconds, trace, now.Add(time.Duration(i)*time.Second))
		}
		randomWaits(rng, pm)
		if rng.IntN(4) == 0 {
			continue // out of the config: counters only
		}
		var s limiter.Settings
		if rng.IntN(2) == 0 {
			s.VisitThreshold = limiter.At(int64(rng.IntN(4)))
		}
		if rng.IntN(2) == 0 {
			s.ConcurrentThreshold = limiter.At(int64(1 + rng.IntN(3)))
		}
		if rng.IntN(4) == 0 {
			s.AdaptiveConcurrency.On = true
		}
		if rng.IntN(4) == 0 {
			s.RecoveryTime = 10 * time.Second
		}
		s.Shadow = rng.IntN(5) == 0
		lim, err := limiter.NewPoint(name, s)
		if err != nil {
			t.Fatal(err)
		}
		for range rng.IntN(6) {
			var c limiter.Call
			lim.Enter(&c, now.Add(-time.Second), limiter.Request{})
			if rng.IntN(2) == 0 {
				c.Exit(now.Add(-time.Second/2), limiter.Outcome(1+rng.IntN(2)))
			}
		}
		live = append(live, Source{Limiter: lim, Gated: rng.IntN(5) == 0, Queue: randomQueue(rng, now), Keys: randomKeys(t, rng, now)})
	}
	m.Unrouted.Add(float64(rng.IntN(3)))
	if n > 0 {
		m.Forces.Active.WithLabelValues("a", "degrade").Set(1)
	}
	return m
}

// randomKeys returns, for a third of the points, one or two per-key
// rules with a few keys admitted.
func randomKeys(t testing.TB, rng *rand.Rand, now time.Time) []KeySource {
	if rng.IntN(3) > 0 {
		return nil
	}
	var keys []KeySource
	for i := range 1 + rng.IntN(2) {
		var s perkey.Settings
		switch rng.IntN(3) {
		case 0:
			s.VisitThreshold = limiter.At(int64(1 + rng.IntN(5)))
		case 1:
			s.TokensPerSecond = limiter.At(int64(1 + rng.IntN(5)))
		default:
			s.ConcurrentThreshold = limiter.At(int64(1 + rng.IntN(5)))
		}
		tab, err := perkey.New(s)
		if err != nil {
			t.Fatal(err)
		}
		for range rng.IntN(5) {
			tab.Enter(nil, now, rng.Uint64())
		}
		keys = append(keys, KeySource{Source: fmt.Sprintf("query:k%d", i), Table: tab})
	}
	return keys
}

// randomWaits observes a few waits of random outcomes and lengths on a
// third of the points.
func randomWaits(rng *rand.Rand, pm *Point) {
	if rng.IntN(3) > 0 {
		return
	}
	for range 1 + rng.IntN(10) {
		pm.ObserveWait(waitOutcomes[rng.IntN(len(waitOutcomes))], time.Duration(rng.ExpFloat64()*float64(100*time.Millisecond)))
	}
}

// randomQueue returns a queue on a third of the calls, else nil.
func randomQueue(rng *rand.Rand, now time.Time) *queue.Queue {
	if rng.IntN(3) > 0 {
		return nil
	}
	return queue.New(limiter.Queue{On: true}, func() time.Time { return now })
}

// scrapeBody serves GET /metrics?query with Accept accept through h and
// returns the answer's status, headers and body.
func scrapeBody(t testing.TB, h http.Handler, accept, query string) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics"+query, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Result().Header, body
}

// TestHandlerMatchesPromhttp: on randomized points, Handler answers every
// Accept header with the status, headers and bytes promhttp.HandlerFor
// (EnableOpenMetrics) writes for the same registry, which reports the
// per-point families through the client library's own path; protobuf
// answers decode to the same families too. Some scrapes narrow the
// families with name[].
func TestHandlerMatchesPromhttp(t *testing.T) {
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 24))
		reg := prometheus.NewRegistry()
		m := randomSet(t, rng, reg, now)
		want := promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true})
		got := m.Handler(reg)
		for _, query := range []string{"", "?name[]=sds_requests_total&name[]=sds_point_forced&name[]=sds_upstream_duration_seconds&name[]=sds_queue_wait_seconds"} {
			for _, accept := range scrapeAccepts {
				wantCode, wantHeader, wantBody := scrapeBody(t, want, accept, query)
				gotCode, gotHeader, gotBody := scrapeBody(t, got, accept, query)
				where := fmt.Sprintf("seed %d, Accept %q, query %q", seed, accept, query)
				if gotCode != wantCode || fmt.Sprint(gotHeader) != fmt.Sprint(wantHeader) {
					t.Fatalf("%s: got %d %v, want %d %v", where, gotCode, gotHeader, wantCode, wantHeader)
				}
				if !bytes.Equal(gotBody, wantBody) {
					t.Fatalf("%s: %d bytes differ from promhttp's %d at byte %d:\ngot  %q\nwant %q", where, len(gotBody), len(wantBody),
						firstDifference(gotBody, wantBody), around(gotBody, firstDifference(gotBody, wantBody)), around(wantBody, firstDifference(gotBody, wantBody)))
				}
				if expfmt.Format(wantHeader.Get("Content-Type")).FormatType() == expfmt.TypeProtoDelim {
					g, w := decodeDelimited(t, gotBody), decodeDelimited(t, wantBody)
					if len(g) != len(w) {
						t.Fatalf("%s: %d families decoded, want %d", where, len(g), len(w))
					}
					for i := range g {
						if !proto.Equal(g[i], w[i]) {
							t.Fatalf("%s: family %d decodes to %v, want %v", where, i, g[i], w[i])
						}
					}
				}
			}
		}
	}
}

// TestHandlerChunks: families of more series than a chunk holds come out
// whole, their header once, in every format: 3 × chunkSeries points,
// each with a queue's waits.
func TestHandlerChunks(t *testing.T) {
	reg := prometheus.NewRegistry()
	var live []Source
	m := NewSet(reg, func() []Source { return live })
	for i := range 3 * chunkSeries {
		name := fmt.Sprintf("p%05d", i)
		m.ForPoint(name).Proxied.Inc()
		m.ForPoint(name).ObserveDuration(float64(i)/1000, "", time.Now())
		m.ForPoint(name).ObserveWait(queue.Admitted, time.Duration(i)*time.Millisecond)
		lim, err := limiter.NewPoint(name, limiter.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, Source{Limiter: lim})
	}
	want := promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true})
	for _, accept := range scrapeAccepts {
		_, _, wantBody := scrapeBody(t, want, accept, "")
		_, _, gotBody := scrapeBody(t, m.Handler(reg), accept, "")
		if !bytes.Equal(gotBody, wantBody) {
			at := firstDifference(gotBody, wantBody)
			t.Fatalf("Accept %q: got %d bytes, want %d; first difference at %d: got %q, want %q", accept, len(gotBody), len(wantBody), at, around(gotBody, at), around(wantBody, at))
		}
		if accept == "text/plain;version=0.0.4" && bytes.Count(gotBody, []byte("# TYPE sds_requests_total")) != 1 {
			t.Errorf("text: got %d TYPE lines of sds_requests_total, want 1", bytes.Count(gotBody, []byte("# TYPE sds_requests_total")))
		}
	}
}

// TestHandlerGatherError: a registry whose Gather fails is answered 500
// with the error, as promhttp answers it.
func TestHandlerGatherError(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewSet(reg, func() []Source { return nil })
	reg.MustRegister(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("broken", "h", nil, nil), fmt.Errorf("broken collector"))
	}))
	wantCode, _, wantBody := scrapeBody(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true}), "", "")
	gotCode, _, gotBody := scrapeBody(t, m.Handler(reg), "", "")
	if gotCode != http.StatusInternalServerError || gotCode != wantCode || !bytes.Equal(gotBody, wantBody) {
		t.Errorf("got %d %q, want %d %q", gotCode, gotBody, wantCode, wantBody)
	}
}

// TestGatherDuringScrape: a Gather of the registry outside a scrape
// reports the per-point families, and a scrape leaves them for the next
// Gather (Set.exposing is back at 0).
func TestGatherDuringScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewSet(reg, func() []Source { return nil })
	m.ForPoint("a").Proxied.Inc()
	count := func() int {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range families {
			if f.GetName() == "sds_requests_total" {
				n = len(f.GetMetric())
			}
		}
		return n
	}
	if got := count(); got != 4 {
		t.Fatalf("before a scrape: %d series of sds_requests_total, want 4 (proxied, degraded, shadow_degraded, canceled)", got)
	}
	scrapeBody(t, m.Handler(reg), "", "")
	if got := count(); got != 4 {
		t.Errorf("after a scrape: %d series of sds_requests_total, want 4 (proxied, degraded, shadow_degraded, canceled)", got)
	}
}

func decodeDelimited(t testing.TB, b []byte) []*dto.MetricFamily {
	t.Helper()
	var out []*dto.MetricFamily
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("decoding protobuf: %v", err)
		}
		out = append(out, &f)
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// around is b's bytes around index at.
func around(b []byte, at int) []byte {
	return b[max(0, at-80):min(len(b), at+80)]
}
