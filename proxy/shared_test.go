package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// fakeShared is a limiter.Gate holding tokens tokens; it counts Takes.
type fakeShared struct {
	tokens atomic.Int64
	takes  atomic.Int64
}

func (f *fakeShared) Take(time.Time) bool {
	f.takes.Add(1)
	return f.tokens.Add(-1) >= 0
}

// TestSharedBucket: the shared bucket is judged after the point's strategies admit
// a request. Its refusal answers the fallback as cluster_token_bucket
// (429, Retry-After), frees the concurrency slot, gives the local token
// back, counts the visit as degraded in the window, and is counted in
// sds_degraded_total; a request the local strategies degrade takes no
// shared token; a shadow point forwards the refused request, marked.
func TestSharedBucket(t *testing.T) {
	calls := 0
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		calls++
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	shared := &fakeShared{}
	shared.tokens.Store(2)
	p := rpPoint(t, "p", func(s *limiter.Settings) {
		s.ConcurrentThreshold = limiter.At(1)
		s.TokensPerSecond, s.TokenBucketSize = limiter.At(3), limiter.At(3)
	}, proxy.PointOptions{Shared: shared})
	h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})

	for i, want := range []struct {
		status   int
		degraded string
	}{
		{200, ""}, {200, ""}, // two shared tokens
		{429, "cluster_token_bucket; point=p"}, // local token 3 taken, shared empty: given back
		{429, "cluster_token_bucket; point=p"}, // so local token 3 is there again
		{429, "cluster_token_bucket; point=p"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		if rec.Code != want.status || rec.Header().Get("Sds-Degraded") != want.degraded {
			t.Errorf("request %d: got %d %q, want %d %q", i, rec.Code, rec.Header().Get("Sds-Degraded"), want.status, want.degraded)
		}
		if want.status == 429 && rec.Header().Get("Retry-After") == "" {
			t.Errorf("request %d: a 429 without Retry-After", i)
		}
	}
	if got := shared.takes.Load(); got != 5 {
		t.Errorf("shared Takes: got %d, want 5", got)
	}
	// The refused requests are degraded visits: a visit threshold or an
	// exception rate counting passed visits leaves them out.
	if c, _ := rpCounts(p, time.Now()); c.Visits != 5 || c.Degraded != 3 {
		t.Errorf("window: got %d visits, %d degraded, want 5 and 3", c.Visits, c.Degraded)
	}
	// With the shared bucket refilled, the local bucket still holds the
	// token the refusals gave back, and no more.
	shared.tokens.Store(10)
	for i, want := range []int{200, 429} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		if rec.Code != want {
			t.Errorf("after the refill, request %d: got %d %q, want %d", i, rec.Code, rec.Header().Get("Sds-Degraded"), want)
		}
	}
	if calls != 3 {
		t.Errorf("upstream calls: got %d, want 3", calls)
	}
	// The concurrency threshold is 1: had the refused request kept its
	// slot, nothing more would pass. One more shared token lets one more
	// through once the local bucket refills.
	if _, inflight := rpCounts(p, time.Now()); inflight != 0 {
		t.Errorf("calls in flight: got %d, want 0", inflight)
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sds_degraded_total", map[string]string{"point": "p", "strategy": "cluster_token_bucket"}, 3},
		{"sds_degraded_total", map[string]string{"point": "p", "strategy": "token_bucket"}, 1},
		{"sds_requests_total", map[string]string{"point": "p", "result": "degraded"}, 4},
		{"sds_requests_total", map[string]string{"point": "p", "result": "proxied"}, 3},
	} {
		if got := rpMetric(t, reg, m.name, m.labels); got != m.want {
			t.Errorf("%s%v: got %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

// TestSharedBucketShadow: a shadow point forwards what the shared bucket
// refuses, and marks it would-be degraded.
func TestSharedBucketShadow(t *testing.T) {
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	sp := rpPoint(t, "s", func(s *limiter.Settings) { s.Shadow = true }, proxy.PointOptions{Shared: &fakeShared{}})
	hs, sreg := rpHandler(t, rpConfig(rpFakeUpstream, sp), proxy.Options{Transport: transport})
	rec := httptest.NewRecorder()
	hs.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	if got, want := rec.Header().Get("Sds-Shadow-Degraded"), "cluster_token_bucket; point=s"; rec.Code != 200 || got != want {
		t.Errorf("shadow: got %d Sds-Shadow-Degraded %q, want 200 %q", rec.Code, got, want)
	}
	if got := rpMetric(t, sreg, "sds_shadow_degraded_total", map[string]string{"point": "s", "strategy": "cluster_token_bucket"}); got != 1 {
		t.Errorf("sds_shadow_degraded_total{cluster_token_bucket}: got %v, want 1", got)
	}
}
