package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// TestDelayRetryAfter: inside a delay, an answer other than 429 carries
// Retry-After, the seconds until the next probe may go or the delay ends,
// whichever is sooner, rounded up, at least 1; a 429 keeps its own (the
// retryInterval), a fallback's own Retry-After is kept, and a gRPC call
// gets none. The tripping request is not inside the delay yet: none.
func TestDelayRetryAfter(t *testing.T) {
	exception := func(delay, retry time.Duration) func(*limiter.Settings) {
		return func(s *limiter.Settings) {
			s.ExceptionThreshold, s.DelayTime, s.RetryInterval = limiter.At(0), delay, retry
		}
	}
	visit := func(s *limiter.Settings) {
		s.VisitThreshold, s.DelayTime, s.RetryInterval = limiter.At(0), 30*time.Second, 2*time.Second
	}
	head := func() *http.Request { return httptest.NewRequest(http.MethodHead, "/api/orders", nil) }
	grpc := func() *http.Request { return grpcRequest(2) }
	tests := []struct {
		name     string
		set      func(*limiter.Settings)
		fallback proxy.Fallback
		req      func() *http.Request
		at       time.Duration // after the trip, at fbT0
		status   int
		want     string // the Retry-After; "" means none
	}{
		{"1.5s to the probe", exception(30*time.Second, 2*time.Second), proxy.Fallback{}, get, 500 * time.Millisecond, 503, "2"},
		{"0.8s to the probe", exception(30*time.Second, 2*time.Second), proxy.Fallback{}, get, 1200 * time.Millisecond, 503, "1"},
		{"1ns to the probe", exception(30*time.Second, 2*time.Second), proxy.Fallback{}, get, 2*time.Second - 1, 503, "1"},
		{"no probes: 19.5s to the end", exception(30*time.Second, 0), proxy.Fallback{}, get, 10500 * time.Millisecond, 503, "20"},
		{"the end before the probe", exception(3*time.Second, 5*time.Second), proxy.Fallback{}, get, 1500 * time.Millisecond, 503, "2"},
		{"an hour's delay", exception(time.Hour, 0), proxy.Fallback{}, get, time.Second, 503, "3599"},
		{"HEAD", exception(30*time.Second, 2*time.Second), proxy.Fallback{}, head, 500 * time.Millisecond, 503, "2"},
		{"a configured 200", exception(30*time.Second, 2*time.Second), proxy.Fallback{Status: 200}, get, 1500 * time.Millisecond, 200, "1"},
		{"the fallback's own", exception(30*time.Second, 2*time.Second),
			proxy.Fallback{Header: http.Header{"retry-after": {"120"}}}, get, 1500 * time.Millisecond, 503, "120"},
		{"a configured 429 keeps its own", exception(30*time.Second, 2*time.Second), proxy.Fallback{Status: 429}, get, 1500 * time.Millisecond, 429, "2"},
		{"visit's 429 keeps its own", visit, proxy.Fallback{}, get, 1500 * time.Millisecond, 429, "2"},
		{"gRPC", exception(30*time.Second, 2*time.Second), proxy.Fallback{}, grpc, 500 * time.Millisecond, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rpPoint(t, "orders", tt.set, proxy.PointOptions{Fallback: tt.fallback})
			now := fbT0
			h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: fbNever(t), Now: func() time.Time { return now }})
			trip := httptest.NewRecorder()
			h.ServeHTTP(trip, get())
			own := trip.Code == http.StatusTooManyRequests || tt.fallback.Header != nil
			if got := trip.Header().Values("Retry-After"); strings.HasSuffix(trip.Header().Get("Sds-Degraded"), "; delay") || !own && len(got) != 0 {
				t.Errorf("tripping request: got %d, Sds-Degraded %q, Retry-After %q; want no delay, and no Retry-After but a 429's or the fallback's",
					trip.Code, trip.Header().Get("Sds-Degraded"), got)
			}
			now = fbT0.Add(tt.at)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tt.req())
			if !strings.HasSuffix(rec.Header().Get("Sds-Degraded"), "; delay") || rec.Code != tt.status {
				t.Errorf("at %v: got %d, Sds-Degraded %q; want %d in the delay", tt.at, rec.Code, rec.Header().Get("Sds-Degraded"), tt.status)
			}
			if got := rec.Header().Values("Retry-After"); strings.Join(got, ",") != tt.want || len(got) > 1 {
				t.Errorf("at %v: Retry-After got %q, want %q", tt.at, got, tt.want)
			}
		})
	}
}
