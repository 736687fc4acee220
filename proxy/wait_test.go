package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
)

// A request degraded after waiting out maxWait says how long it waited;
// a shadow point marks a request that would have waited, and forwards it.
func TestQueueMarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) { return rpReply(r, http.StatusOK, "upstream"), nil })
		full := func(shadow bool) func(*limiter.Settings) {
			return func(s *limiter.Settings) {
				s.ConcurrentThreshold, s.Shadow = limiter.At(0), shadow
				s.Queue = limiter.Queue{On: true, MaxWait: 40 * time.Millisecond}
			}
		}
		waited := rpPoint(t, "waited", full(false), proxy.PointOptions{})
		shadow := rpPoint(t, "shadow", full(true), proxy.PointOptions{})
		cfg := rpConfig(rpFakeUpstream, waited, shadow)
		cfg.Routes = []proxy.Route{{Point: waited, Rule: route.Rule{Path: "/w"}}, {Point: shadow, Rule: route.Rule{Path: "/s"}}}
		h, _ := rpHandler(t, cfg, proxy.Options{Transport: upstream})

		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/w", nil))
		if got, want := rec.Header().Get("Sds-Degraded"), "concurrent; point=waited; waited=40ms"; rec.Code != http.StatusServiceUnavailable || got != want {
			t.Errorf("after maxWait: %d, Sds-Degraded %q, want 503 and %q", rec.Code, got, want)
		}
		if took := time.Since(start); took != 40*time.Millisecond {
			t.Errorf("answered after %v, want maxWait, 40ms", took)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/s", nil))
		if got, want := rec.Header().Get("Sds-Shadow-Degraded"), "concurrent; point=shadow; queued"; rec.Code != http.StatusOK || got != want {
			t.Errorf("shadow: %d, Sds-Shadow-Degraded %q, want 200 and %q", rec.Code, got, want)
		}
	})
}
