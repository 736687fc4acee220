package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/route"
)

// liveHeap returns the bytes of live heap objects, after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkScaleMemory measures what a config of 10,000 points, each with
// one exact route, holds in memory at the default window (10s in 10
// buckets) with every strategy off, part by part: a point's limiter
// (limiter-B/point), its proxy Point with its prebuilt fallback answers
// (point-B/point), its metric series once swapped into a Handler
// (series-B/point), and a route in the compiled router (router-B/route).
// ns/op is the time to build all of it.
func BenchmarkScaleMemory(b *testing.B) {
	const n = 10_000
	names := make([]string, n)
	paths := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
		paths[i] = fmt.Sprintf("/api/v1/resource%d/action", i)
	}
	var limBytes, pointBytes, seriesBytes, routeBytes uint64
	for b.Loop() {
		b.StopTimer()
		start := liveHeap()
		b.StartTimer()
		lims := make([]*limiter.Point, n)
		for i, name := range names {
			lim, err := limiter.NewPoint(name, limiter.Settings{Window: limiter.DefaultWindow, Buckets: limiter.DefaultBuckets})
			if err != nil {
				b.Fatal(err)
			}
			lims[i] = lim
		}
		b.StopTimer()
		withLimiters := liveHeap()
		b.StartTimer()
		cfg := &Config{Points: make([]*Point, n), Routes: make([]Route, n)}
		for i, lim := range lims {
			cfg.Points[i] = NewPoint(lim, PointOptions{})
			cfg.Routes[i] = Route{Point: cfg.Points[i], Rule: route.Rule{Path: paths[i]}}
		}
		b.StopTimer()
		withPoints := liveHeap()
		b.StartTimer()
		var h *Handler
		ms := metrics.NewSet(prometheus.NewRegistry(), func() []metrics.Source { return h.Sources() })
		h = New(&Config{Points: cfg.Points}, Options{Logger: zap.NewNop(), Metrics: ms})
		b.StopTimer()
		withSeries := liveHeap()
		b.StartTimer()
		h.Swap(cfg)
		b.StopTimer()
		withRouter := liveHeap()
		runtime.KeepAlive(h)
		limBytes, pointBytes = withLimiters-start, withPoints-withLimiters
		seriesBytes, routeBytes = withSeries-withPoints, withRouter-withSeries
		b.StartTimer()
	}
	b.ReportMetric(float64(limBytes)/n, "limiter-B/point")
	b.ReportMetric(float64(pointBytes)/n, "point-B/point")
	b.ReportMetric(float64(seriesBytes)/n, "series-B/point")
	b.ReportMetric(float64(routeBytes)/n, "router-B/route")
	b.ReportMetric(float64(limBytes+pointBytes+seriesBytes)/n, "B/point")
}

// scalePoints returns a Handler over n points named p0, p1, ..., each with
// one exact route, and the registry its metrics are on.
func scalePoints(tb testing.TB, n int) (*Handler, *prometheus.Registry) {
	tb.Helper()
	cfg := &Config{Points: make([]*Point, n), Routes: make([]Route, n)}
	for i := range n {
		lim, err := limiter.NewPoint(fmt.Sprintf("p%d", i), limiter.Settings{Window: limiter.DefaultWindow, Buckets: limiter.DefaultBuckets})
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Points[i] = NewPoint(lim, PointOptions{})
		cfg.Routes[i] = Route{Point: cfg.Points[i], Rule: route.Rule{Path: fmt.Sprintf("/api/v1/resource%d/action", i)}}
	}
	reg := prometheus.NewRegistry()
	var h *Handler
	ms := metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	h = New(cfg, Options{Logger: zap.NewNop(), Metrics: ms})
	return h, reg
}

// BenchmarkScrape measures one GET /metrics of a Handler of 1,000 and
// 10,000 points, each with one call observed (busy=all) or a fifth of them
// (busy=fifth, as in issue 24's run), in the formats a scraper
// asks for: the text format (no Accept header), OpenMetrics (Prometheus'
// default) and protobuf (Prometheus with native histograms), uncompressed
// (the admin port gzips), through the two handlers side by side:
// promhttp's over the registry, which builds a dto.Metric per series
// (what the admin port served before issue 24), and metrics.Set's Handler,
// which writes the per-point families in reused chunks (what it serves
// now). Their answers are the same bytes (TestHandlerMatchesPromhttp).
// B/op and allocs/op are the scrape's own: the body is counted, not kept.
func BenchmarkScrape(b *testing.B) {
	for _, run := range []struct {
		n, busy int
		name    string
	}{{1_000, 1_000, "all"}, {1_000, 200, "fifth"}, {10_000, 10_000, "all"}, {10_000, 2_000, "fifth"}} {
		n := run.n
		h, reg := scalePoints(b, n)
		now := time.Now()
		for i := range run.busy {
			h.opts.Metrics.ForPoint(fmt.Sprintf("p%d", i)).ObserveDuration(0.01, "", now)
		}
		handlers := []struct {
			name string
			h    http.Handler
		}{
			{"promhttp", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true})},
			{"handler", h.opts.Metrics.Handler(reg)},
		}
		for _, format := range []struct{ name, accept string }{
			{"text", ""},
			{"openmetrics", "application/openmetrics-text;version=1.0.0"},
			{"protobuf", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"},
		} {
			for _, handler := range handlers {
				b.Run(fmt.Sprintf("points=%d/busy=%s/%s/%s", n, run.name, format.name, handler.name), func(b *testing.B) {
					req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
					if format.accept != "" {
						req.Header.Set("Accept", format.accept)
					}
					var w countingWriter
					for b.Loop() {
						w = countingWriter{header: make(http.Header)}
						handler.h.ServeHTTP(&w, req)
						if w.status != http.StatusOK || w.size == 0 {
							b.Fatalf("/metrics: status %d, %d bytes", w.status, w.size)
						}
					}
					b.ReportMetric(float64(w.size), "body-B")
				})
			}
		}
	}
}

// countingWriter is a ResponseWriter that counts the body's bytes and
// drops them.
type countingWriter struct {
	header http.Header
	status int
	size   int
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(status int) { w.status = status }

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.size += len(p)
	return len(p), nil
}

// BenchmarkSample measures one Metrics.Sample, which the admin port runs
// once a second for the dashboard's and /status's traffic figures, on a
// Handler of 10,000 idle points.
func BenchmarkSample(b *testing.B) {
	h, _ := scalePoints(b, 10_000)
	now := time.Unix(1_700_000_000, 0)
	for b.Loop() {
		now = now.Add(time.Second)
		h.opts.Metrics.Sample(now)
	}
}
