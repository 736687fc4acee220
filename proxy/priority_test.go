package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
)

// TestRoutePriority: a route's priority reaches the limiter. Sheddable
// requests past their share of the visit threshold are degraded with
// "; priority=sheddable"; critical requests then use the rest; past the
// whole threshold the answer is a plain visit trip.
func TestRoutePriority(t *testing.T) {
	p := rpPoint(t, "p", func(s *limiter.Settings) { s.VisitThreshold, s.SheddableShare = limiter.At(4), limiter.At(50) }, proxy.PointOptions{})
	cfg := &proxy.Config{Upstream: rpFakeUpstream, Points: []*proxy.Point{p}}
	for _, rt := range []proxy.Route{
		{Point: p, Priority: limiter.PrioritySheddable, Rule: route.Rule{Path: "/shed"}},
		{Point: p, Priority: limiter.PriorityCritical, Rule: route.Rule{Path: "/critical"}},
	} {
		r, err := proxy.NewRoute(rt)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Routes = append(cfg.Routes, r)
	}
	h, reg := rpHandler(t, cfg, proxy.Options{Transport: rpOK})
	for i, step := range []struct {
		path, header string
		status       int
	}{
		{"/shed", "", 200},
		{"/shed", "", 200},
		{"/shed", "visit; point=p; priority=sheddable", 429},
		{"/critical", "", 200},
		{"/critical", "", 200},
		{"/critical", "visit; point=p", 429},
		{"/shed", "visit; point=p", 429},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, step.path, nil))
		if got := rec.Header().Get("Sds-Degraded"); rec.Code != step.status || got != step.header {
			t.Errorf("request %d to %s: got %d %q, want %d %q", i+1, step.path, rec.Code, got, step.status, step.header)
		}
	}
	if got := rpMetric(t, reg, "sds_degraded_total", map[string]string{"point": "p", "strategy": "visit"}); got != 3 {
		t.Errorf("sds_degraded_total{strategy=visit}: got %v, want 3", got)
	}
}

// TestProtectionGauges: sds_adaptive_concurrency_limit and
// sds_recovery_admitted_ratio for the points that have them, and only
// those; the ratio follows the ramp after a delay, on the Handler's clock.
func TestProtectionGauges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	// The handler's clock is read by its background loop too.
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	ramp := rpPoint(t, "ramp", func(s *limiter.Settings) {
		s.ExceptionThreshold, s.DelayTime = limiter.At(1), time.Second
		s.RecoveryTime, s.RecoveryStart = 10*time.Second, limiter.At(20)
	}, proxy.PointOptions{})
	adaptive := rpPoint(t, "adaptive", func(s *limiter.Settings) {
		s.AdaptiveConcurrency = limiter.AdaptiveConcurrency{On: true, MinLimit: 4}
	}, proxy.PointOptions{})
	plain := rpPoint(t, "plain", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(10) }, proxy.PointOptions{})
	_, reg := rpHandler(t, rpConfig(rpFakeUpstream, ramp, adaptive, plain), proxy.Options{Transport: rpOK, Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	gauge := func(name, point string) float64 { return rpMetric(t, reg, name, map[string]string{"point": point}) }
	if got := gauge("sds_adaptive_concurrency_limit", "adaptive"); got != 4 {
		t.Errorf("adaptive limit %v, want 4 (minLimit while the minimum latency is measured)", got)
	}
	if got := gauge("sds_recovery_admitted_ratio", "ramp"); got != 1 {
		t.Errorf("recovery ratio %v, want 1 with no ramp", got)
	}
	for _, name := range []string{"sds_adaptive_concurrency_limit", "sds_recovery_admitted_ratio"} {
		if got := gauge(name, "plain"); got != -1 {
			t.Errorf("%s{point=plain} = %v, want no series", name, got)
		}
	}
	var c limiter.Call
	ramp.Limiter().Enter(&c, now, limiter.Request{})
	c.Exit(now, limiter.Failed)
	ramp.Limiter().Enter(&c, now, limiter.Request{}) // trips; the delay ends at +1s
	clock.Store(now.Add(6 * time.Second).UnixNano()) // half the ramp: 20% + 80%/2
	if got := gauge("sds_recovery_admitted_ratio", "ramp"); got != 0.6 {
		t.Errorf("recovery ratio %v half-way, want 0.6", got)
	}
}
