package metrics

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// TestPointSeriesMatchClientCounters: the point collector reports the
// points' counters exactly as client library CounterVecs with the same
// names, help, labels and counts would (every series present from the
// start, a point's kept after it leaves the config), each with a created
// timestamp, and the gauges of the points in force only. A strategy's
// degraded series are there from the start only on a point in force that
// has the strategy on; otherwise once they count.
func TestPointSeriesMatchClientCounters(t *testing.T) {
	judged := map[string]limiter.Strategy{"orders": limiter.Visit}
	newPoint := func(name string) Source {
		var s limiter.Settings
		if judged[name] == limiter.Visit {
			s.VisitThreshold = limiter.At(5)
		}
		lim, err := limiter.NewPoint(name, s)
		if err != nil {
			t.Fatal(err)
		}
		return Source{Limiter: lim}
	}
	live := []Source{newPoint("orders"), newPoint("b"), newPoint("a.z")}
	reg := prometheus.NewRegistry()
	m := NewSet(reg, func() []Source { return live })
	gone := m.ForPoint("gone") // a point of an earlier config

	want := prometheus.NewRegistry()
	help := map[string]string{ // as the CounterVecs had them before the point collector
		"sds_requests_total":        "Requests on protected points, by result: proxied (sent to the upstream), degraded (answered by the fallback), shadow_degraded (forwarded by a shadow point that would have degraded it), canceled (let through, but its client went away before the upstream was sent it).",
		"sds_degraded_total":        "Requests answered by the point's fallback, by the strategy that degraded them. Shadow points never count here (sds_shadow_degraded_total).",
		"sds_shadow_degraded_total": "Requests a shadow point forwarded that it would have degraded, by the strategy that would have degraded them.",
		"sds_upstream_errors_total": "Upstream calls that ended in an exception, by kind (transport, upstream_timeout, status_5xx, body).",
		"sds_timeouts_total":        "Upstream calls that passed the point's timeoutThreshold.",
	}
	vec := func(name string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help[name]}, append([]string{"point"}, labels...))
		want.MustRegister(v)
		return v
	}
	requests, errors, timeouts := vec("sds_requests_total", "result"), vec("sds_upstream_errors_total", "kind"), vec("sds_timeouts_total")
	degraded, shadow := vec("sds_degraded_total", "strategy"), vec("sds_shadow_degraded_total", "strategy")

	for n, name := range []string{"orders", "b", "a.z", "gone"} {
		pm := m.ForPoint(name)
		if name == "gone" && pm != gone {
			t.Fatal("ForPoint made new series for a name it had")
		}
		add := func(c *Counter, want prometheus.Counter, times int) {
			want.Add(0)
			for range times {
				c.Inc()
				want.Inc()
			}
		}
		add(pm.Proxied, requests.WithLabelValues(name, "proxied"), 10+n)
		add(pm.Degraded, requests.WithLabelValues(name, "degraded"), n)
		add(pm.ShadowDegraded, requests.WithLabelValues(name, "shadow_degraded"), 2*n)
		add(pm.Canceled, requests.WithLabelValues(name, "canceled"), n%2)
		add(pm.TransportErrors, errors.WithLabelValues(name, errorTransport), n)
		add(pm.TimeoutErrors, errors.WithLabelValues(name, errorUpstreamTimeout), 1)
		add(pm.StatusErrors, errors.WithLabelValues(name, errorStatus), 3*n)
		add(pm.BodyErrors, errors.WithLabelValues(name, errorBody), 0)
		add(pm.Timeouts, timeouts.WithLabelValues(name), n+1)
		for s := limiter.Strategy(1); s <= limiter.LastStrategy; s++ {
			addStrategy := func(c *Counter, vec *prometheus.CounterVec, times int) {
				if times > 0 || judged[name] == s {
					add(c, vec.WithLabelValues(name, s.String()), times)
				}
			}
			addStrategy(pm.Strategy(s), degraded, int(s)*n)
			addStrategy(pm.ShadowStrategy(s), shadow, (int(s)+n)%3)
		}
	}

	got := gatherText(t, reg)
	for name, text := range gatherText(t, want) {
		if got[name] != text {
			t.Errorf("%s: got\n%s\nwant\n%s", name, got[name], text)
		}
	}
	checkLiveFamilies(t, reg, []string{"a.z", "b", "orders"})
}

// checkLiveFamilies requires every sds_requests_total series in reg to
// have a created timestamp, and the gauges of point state to have series
// for the points in force, live, and no others.
func checkLiveFamilies(t *testing.T, reg *prometheus.Registry, live []string) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "sds_requests_total":
			for _, s := range f.GetMetric() {
				if s.GetCounter().GetCreatedTimestamp() == nil {
					t.Errorf("sds_requests_total%v has no created timestamp", s.GetLabel())
				}
			}
		case "sds_inflight", "sds_point_tripped", "sds_point_state":
			var points []string
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "point" && !slices.Contains(points, l.GetValue()) {
						points = append(points, l.GetValue())
					}
				}
			}
			if !slices.Equal(points, live) {
				t.Errorf("%s: series of points %q, want %q (the points in force)", f.GetName(), points, live)
			}
		}
	}
}

// gatherText returns the text exposition of each sds_* family on reg, by
// name.
func gatherText(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, f := range families {
		var b bytes.Buffer
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
		out[f.GetName()] = b.String()
	}
	return out
}

// TestSampleReadsHistogramOnChange: Sample's reading of a point's upstream
// time is at full resolution (durationSchema) and is reused while no call
// is observed, and read again after one is.
func TestSampleReadsHistogramOnChange(t *testing.T) {
	m := NewSet(prometheus.NewRegistry(), func() []Source { return nil })
	pm := m.ForPoint("p")
	now := time.Unix(1_700_000_000, 0)
	pm.ObserveDuration(0.01, "", now)
	first := pm.sample(now)
	if first.hist.count != 1 || first.hist.epoch.schema != durationSchema || len(first.hist.buckets) != 1 {
		t.Fatalf("after one call: got %+v, want 1 observation in 1 bucket at schema %d", first.hist, durationSchema)
	}
	again := pm.sample(now.Add(time.Second))
	if &again.hist.buckets[0] != &first.hist.buckets[0] {
		t.Error("no call since the last sample: the histogram was read again")
	}
	pm.ObserveDuration(0.02, "", now)
	if third := pm.sample(now.Add(2 * time.Second)); third.hist.count != 2 {
		t.Errorf("after a second call: got %d observations, want 2", third.hist.count)
	}
}

// TestSampleRingRuns: a ring of runs holds, for each of its last samples,
// the values added and traffic's instant, as a plain list of the last
// trafficSamples samples would: random sequences with repeats, changes
// and more samples than the ring holds.
func TestSampleRingRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1_700_000_000, 0)
	for range 200 {
		var tr traffic
		var r sampleRing
		var want []pointSample // the last trafficSamples added, with their instants
		v := 0.0
		for i := range rng.IntN(40) {
			at := t0.Add(time.Duration(i) * time.Second)
			tr.instants[tr.next] = at
			tr.next = (tr.next + 1) % trafficSamples
			if rng.IntN(3) == 0 {
				v++
			}
			s := pointSample{at: at, proxied: v, hist: nativeHistogram{count: uint64(v) / 2}}
			r.add(s)
			want = append(want, s)
			if len(want) > trafficSamples {
				want = want[1:]
			}
			if r.n != len(want) || len(r.runs) > trafficSamples || cap(r.runs) > trafficSamples {
				t.Fatalf("after %d samples: n %d, %d runs (cap %d); want n %d", i+1, r.n, len(r.runs), cap(r.runs), len(want))
			}
			for k, w := range want {
				got := r.at(k)
				if got.proxied != w.proxied || got.hist.count != w.hist.count || !tr.instant(&r, k).Equal(w.at) {
					t.Fatalf("after %d samples, sample %d: got %v at %v, want %v at %v", i+1, k, got.proxied, tr.instant(&r, k), w.proxied, w.at)
				}
			}
		}
	}
}
