package proxy

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
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
			cfg.Routes[i] = Route{Point: cfg.Points[i], Path: paths[i]}
		}
		b.StopTimer()
		withPoints := liveHeap()
		b.StartTimer()
		var h *Handler
		metrics := NewMetrics(prometheus.NewRegistry(), func() []*Point { return h.Points() })
		h = New(&Config{Points: cfg.Points}, Options{Logger: zap.NewNop(), Metrics: metrics})
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
