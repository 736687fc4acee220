package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// TestRoutePriority: a route's priority reaches the limiter. Sheddable
// requests past their share of the visit threshold are degraded with
// "; priority=sheddable"; critical requests then use the rest; past the
// whole threshold the answer is a plain visit trip.
func TestRoutePriority(t *testing.T) {
	p := rpPoint(t, "p", func(s *limiter.Settings) { s.VisitThreshold, s.SheddableShare = limiter.At(4), limiter.At(50) }, proxy.PointOptions{})
	cfg := &proxy.Config{Upstream: rpFakeUpstream, Points: []*proxy.Point{p}}
	for _, rt := range []proxy.Route{
		{Point: p, Path: "/shed", Priority: limiter.PrioritySheddable},
		{Point: p, Path: "/critical", Priority: limiter.PriorityCritical},
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
