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

// fakeShared is a SharedBucket holding tokens tokens; it counts Takes.
type fakeShared struct {
	tokens atomic.Int64
	takes  atomic.Int64
}

func (f *fakeShared) Take(time.Time) bool {
	f.takes.Add(1)
	return f.tokens.Add(-1) >= 0
}

// TestSharedBucket: the shared bucket is judged after the limiter admits
// a request. Its refusal answers the fallback as cluster_token_bucket
// (429, Retry-After), frees the concurrency slot, and is counted in
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
		{429, "cluster_token_bucket; point=p"}, // local token 3 taken, shared empty
		{429, "token_bucket; point=p"},         // local bucket empty: no shared token asked
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
	if got := shared.takes.Load(); got != 3 {
		t.Errorf("shared Takes: got %d, want 3 (none for the locally degraded request)", got)
	}
	if calls != 2 {
		t.Errorf("upstream calls: got %d, want 2", calls)
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
		{"sds_degraded_total", map[string]string{"point": "p", "strategy": "cluster_token_bucket"}, 1},
		{"sds_degraded_total", map[string]string{"point": "p", "strategy": "token_bucket"}, 1},
		{"sds_requests_total", map[string]string{"point": "p", "result": "degraded"}, 2},
		{"sds_requests_total", map[string]string{"point": "p", "result": "proxied"}, 2},
	} {
		if got := rpMetric(t, reg, m.name, m.labels); got != m.want {
			t.Errorf("%s%v: got %v, want %v", m.name, m.labels, got, m.want)
		}
	}

	// Shadow: forwarded, marked would-be degraded by the shared bucket.
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
