package proxy_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/route"
)

// trafficUpstream answers after ?sleep (a Go duration; fake time in a
// synctest bubble) with ?status (200 when absent).
var trafficUpstream = rpRoundTrip(func(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if d, err := time.ParseDuration(q.Get("sleep")); err == nil {
		time.Sleep(d)
	}
	status := http.StatusOK
	if s, err := strconv.Atoi(q.Get("status")); err == nil {
		status = s
	}
	return rpReply(r, status, "upstream"), nil
})

// trafficHandler serves points routed by path prefix "/<name>" and
// returns its Metrics.
func trafficHandler(t *testing.T, points ...*proxy.Point) (*proxy.Handler, *metrics.Set) {
	t.Helper()
	var h *proxy.Handler
	m := metrics.NewSet(prometheus.NewRegistry(), func() []metrics.Source { return h.Sources() })
	h = proxy.New(trafficConfig(t, points...), proxy.Options{Logger: zap.NewNop(), Metrics: m, Transport: trafficUpstream})
	return h, m
}

func trafficConfig(t *testing.T, points ...*proxy.Point) *proxy.Config {
	t.Helper()
	cfg := &proxy.Config{Upstream: rpFakeUpstream, Points: points}
	for _, p := range points {
		rt, err := proxy.NewRoute(proxy.Route{Point: p, Rule: route.Rule{PathPrefix: "/" + p.Name()}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Routes = append(cfg.Routes, rt)
	}
	return cfg
}

// sendAll sends every target at once, each from its own goroutine, and
// returns once all are answered (fake time passes for their sleeps).
func sendAll(h http.Handler, targets ...string) {
	var wg sync.WaitGroup
	for _, target := range targets {
		wg.Go(func() {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
		})
	}
	wg.Wait()
}

// repeat returns n copies of target.
func repeat(n int, target string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = target
	}
	return out
}

// bucketPoint returns 2^(x/8): for a whole x the upper bound of native
// bucket x at schema 3 (the histogram's), between two whole numbers the
// log-linear point between bounds that Traffic's quantiles interpolate.
func bucketPoint(x float64) float64 { return math.Exp2(x / 8) }

// sameFloat reports whether a and b agree to 12 significant digits.
func sameFloat(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

func checkTraffic(t *testing.T, what string, got metrics.Traffic, want metrics.Traffic) {
	t.Helper()
	if got.Span != want.Span || got.Calls != want.Calls ||
		!sameFloat(got.RequestsPerSecond, want.RequestsPerSecond) ||
		!sameFloat(got.DegradedPerSecond, want.DegradedPerSecond) ||
		!sameFloat(got.ShadowDegradedPerSecond, want.ShadowDegradedPerSecond) ||
		!sameFloat(got.ErrorPercent, want.ErrorPercent) ||
		!sameFloat(got.P50, want.P50) || !sameFloat(got.P99, want.P99) {
		t.Errorf("%s:\ngot  %+v\nwant %+v", what, got, want)
	}
}

// TestTraffic checks the figures of a forwarding point with known upstream
// times and errors, a degrading point and a shadow point, over a span of
// two samples.
func TestTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fwd := rpPoint(t, "fwd", nil, proxy.PointOptions{})
		deg := rpPoint(t, "deg", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{})
		sh := rpPoint(t, "sh", func(s *limiter.Settings) { s.VisitThreshold, s.Shadow = limiter.At(0), true }, proxy.PointOptions{})
		h, m := trafficHandler(t, fwd, deg, sh)
		t0 := time.Now()
		m.Sample(t0)
		if _, ok := m.Traffic("fwd", t0); ok {
			t.Errorf("one sample: got ok, want none")
		}

		// fwd: 85 calls of 10ms, 5 of 10ms answered 503, 10 of 1s.
		// deg: 20 requests, all degraded. sh: 20 of 4ms, all would-be degraded.
		targets := append(repeat(85, "/fwd?sleep=10ms"), repeat(5, "/fwd?sleep=10ms&status=503")...)
		targets = append(targets, repeat(10, "/fwd?sleep=1s")...)
		targets = append(targets, repeat(20, "/deg")...)
		targets = append(targets, repeat(20, "/sh?sleep=4ms")...)
		sendAll(h, targets...)
		time.Sleep(2*time.Second - time.Since(t0)) // to t0+2s
		t2 := time.Now()
		m.Sample(t2)

		got, ok := m.Traffic("fwd", t2)
		if !ok {
			t.Fatal("fwd: no traffic after two samples")
		}
		// 10ms lies in bucket -53 (2^(-54/8) < 0.01 <= 2^(-53/8)), 1s is
		// the upper bound of bucket 0. The median is the 50th of the 90
		// calls in bucket -53; the 99th percentile the 9th of the 10 in
		// bucket 0.
		checkTraffic(t, "fwd", got, metrics.Traffic{
			Span: 2 * time.Second, RequestsPerSecond: 50, Calls: 100, ErrorPercent: 5,
			P50: bucketPoint(-54 + 50.0/90), P99: bucketPoint(-1 + 9.0/10),
		})
		got, _ = m.Traffic("deg", t2)
		checkTraffic(t, "deg", got, metrics.Traffic{Span: 2 * time.Second, RequestsPerSecond: 10, DegradedPerSecond: 10})
		// 4ms lies in bucket -63 (2^(-64/8) < 0.004 <= 2^(-63/8)).
		got, _ = m.Traffic("sh", t2)
		checkTraffic(t, "sh", got, metrics.Traffic{
			Span: 2 * time.Second, RequestsPerSecond: 10, ShadowDegradedPerSecond: 10, Calls: 20,
			P50: bucketPoint(-64 + 10.0/20), P99: bucketPoint(-64 + 19.8/20),
		})
		if _, ok := m.Traffic("nowhere", t2); ok {
			t.Errorf("unknown point: got ok, want none")
		}
	})
}

// TestTrafficWindow checks that Traffic measures from the oldest sample of
// the last 10 s, that a point keeps 11 samples, and that figures are absent
// without a forwarded call or with samples too old.
func TestTrafficWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := rpPoint(t, "p", nil, proxy.PointOptions{})
		h, m := trafficHandler(t, p)
		t0 := time.Now()
		// One request per second from t0 to t0+14s, each sampled after it
		// ended: the sample at t0+k s has counted k+1 requests.
		for k := range 15 {
			time.Sleep(t0.Add(time.Duration(k) * time.Second).Sub(time.Now()))
			sendAll(h, "/p?sleep=100ms")
			m.Sample(t0.Add(time.Duration(k) * time.Second).Add(500 * time.Millisecond))
		}
		last := t0.Add(14*time.Second + 500*time.Millisecond)
		// From the sample at t0+4.5s (10 s back) to the one at t0+14.5s.
		got, ok := m.Traffic("p", last)
		if !ok {
			t.Fatal("no traffic")
		}
		// Every call lies in bucket -26 (2^(-27/8) < 0.1 <= 2^(-26/8)).
		checkTraffic(t, "10 s back", got, metrics.Traffic{
			Span: 10 * time.Second, RequestsPerSecond: 1, Calls: 10,
			P50: bucketPoint(-27 + 5.0/10), P99: bucketPoint(-27 + 9.9/10),
		})
		// Asked 3 s later, the oldest sample within 10 s is at t0+7.5s.
		got, _ = m.Traffic("p", last.Add(3*time.Second))
		checkTraffic(t, "3 s later", got, metrics.Traffic{
			Span: 7 * time.Second, RequestsPerSecond: 1, Calls: 7,
			P50: bucketPoint(-27 + 3.5/7), P99: bucketPoint(-27 + 6.93/7),
		})
		// 9.5 s later only the newest sample is within 10 s.
		if got, ok := m.Traffic("p", last.Add(9500*time.Millisecond+time.Nanosecond)); ok {
			t.Errorf("one sample within 10 s: got %+v, want none", got)
		}
		// A sample with no request since: no forwarded call in the last
		// second, so no error percentage nor quantile.
		m.Sample(last.Add(time.Second))
		got, _ = m.Traffic("p", last.Add(10*time.Second))
		checkTraffic(t, "idle", got, metrics.Traffic{Span: time.Second})
	})
}

// TestTrafficReload checks that a point removed by a reload loses its
// samples at the next Sample, and one that stays keeps them.
func TestTrafficReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := rpPoint(t, "a", nil, proxy.PointOptions{})
		b := rpPoint(t, "b", nil, proxy.PointOptions{})
		h, m := trafficHandler(t, a, b)
		t0 := time.Now()
		m.Sample(t0)
		sendAll(h, "/a", "/b")
		m.Sample(t0.Add(time.Second))
		h.Swap(trafficConfig(t, a))
		sendAll(h, "/a")
		m.Sample(t0.Add(2 * time.Second))
		if got, ok := m.Traffic("b", t0.Add(2*time.Second)); ok {
			t.Errorf("b, removed: got %+v, want none", got)
		}
		got, ok := m.Traffic("a", t0.Add(2*time.Second))
		if !ok || got.Span != 2*time.Second || got.RequestsPerSecond != 1 {
			t.Errorf("a, kept: got %+v (ok %v), want 2 requests over 2s", got, ok)
		}
		// b back: its figures start again from its next samples.
		h.Swap(trafficConfig(t, a, b))
		m.Sample(t0.Add(3 * time.Second))
		if got, ok := m.Traffic("b", t0.Add(3*time.Second)); ok {
			t.Errorf("b, back for one sample: got %+v, want none", got)
		}
	})
}

// TestTrafficHistogramChanges checks that the latency figures restart from
// the sample after the histogram lowered its resolution (more than 160
// buckets) or was reset (an hour later), while the rates go on. (From an
// empty histogram they need not restart, TestTraffic: so the first sample
// here holds a call.)
func TestTrafficHistogramChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := rpPoint(t, "p", nil, proxy.PointOptions{})
		h, m := trafficHandler(t, p)
		sendAll(h, "/p?sleep=10ms")
		t0 := time.Now()
		m.Sample(t0)
		// 170 calls, one per native bucket from 2^-20 s (about 1µs) up:
		// the 161st bucket halves the resolution (schema 3 to 2).
		var spread []string
		for k := -159; k <= 10; k++ {
			d := time.Duration(math.Floor(bucketPoint(float64(k)) * 1e9))
			spread = append(spread, "/p?sleep="+d.String())
		}
		sendAll(h, spread...)
		m.Sample(t0.Add(5 * time.Second))
		got, _ := m.Traffic("p", t0.Add(5*time.Second))
		checkTraffic(t, "resolution lowered", got, metrics.Traffic{Span: 5 * time.Second, RequestsPerSecond: 34})

		// From the first sample at schema 2: 4 calls of 10ms, in bucket
		// -26 at schema 2 (2^(-27/4) < 0.01 <= 2^(-26/4)).
		sendAll(h, repeat(4, "/p?sleep=10ms")...)
		m.Sample(t0.Add(6 * time.Second))
		got, _ = m.Traffic("p", t0.Add(6*time.Second))
		checkTraffic(t, "after the change", got, metrics.Traffic{
			Span: 6 * time.Second, RequestsPerSecond: 174.0 / 6, Calls: 4,
			P50: math.Exp2((-27 + 2.0/4) / 4), P99: math.Exp2((-27 + 3.96/4) / 4),
		})

		// An hour after its creation the client library resets the
		// histogram (every count back to 0, schema 3 again): the latency
		// figures start from the first sample after the reset, though the
		// one before is within 10 s.
		time.Sleep(t0.Add(time.Hour - time.Second).Sub(time.Now()))
		m.Sample(t0.Add(time.Hour - time.Second))
		time.Sleep(2 * time.Second)
		m.Sample(t0.Add(time.Hour + time.Second))
		sendAll(h, repeat(2, "/p?sleep=10ms")...)
		m.Sample(t0.Add(time.Hour + 2*time.Second))
		got, _ = m.Traffic("p", t0.Add(time.Hour+2*time.Second))
		checkTraffic(t, "after the reset", got, metrics.Traffic{
			Span: 3 * time.Second, RequestsPerSecond: 2.0 / 3, Calls: 2,
			P50: bucketPoint(-54 + 1.0/2), P99: bucketPoint(-54 + 1.98/2),
		})
	})
}
