package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
)

// family returns the metric family name gathered from reg, or nil.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// TestUnroutedAndRejected checks that a request matching no route is
// forwarded and counted as unrouted, and one with a path the proxy refuses
// is answered 400 and counted as rejected, not as unrouted.
func TestUnroutedAndRejected(t *testing.T) {
	calls := 0
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		calls++
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	p := rpPoint(t, "p", nil, proxy.PointOptions{})
	cfg := &proxy.Config{Upstream: rpFakeUpstream, Points: []*proxy.Point{p},
		Routes: []proxy.Route{{Point: p, Rule: route.Rule{Host: "shop.example"}}}}
	h, reg := rpHandler(t, cfg, proxy.Options{Transport: transport})
	for _, step := range []struct {
		method, target                     string
		wantStatus, wantUpstream           int
		wantUnrouted, wantPath, wantMethod float64
		wantOnPoint                        float64 // sds_requests_total{point=p,result=proxied}
	}{
		{"GET", "http://other.example/x", http.StatusOK, 1, 1, 0, 0, 0},
		{"GET", "http://shop.example/x", http.StatusOK, 2, 1, 0, 0, 1},
		{"GET", "http://other.example/a%2Fb", http.StatusBadRequest, 2, 1, 1, 0, 1},
		{"GET", "http://shop.example/a%5Cb", http.StatusBadRequest, 2, 1, 2, 0, 1},
		{"GET", "http://other.example/y", http.StatusOK, 3, 2, 2, 0, 1},
		{"CONNECT", "shop.example:443", http.StatusMethodNotAllowed, 3, 2, 2, 1, 1},
		{"CONNECT", "evil.example:443", http.StatusMethodNotAllowed, 3, 2, 2, 2, 1},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(step.method, step.target, nil))
		if rec.Code != step.wantStatus || calls != step.wantUpstream {
			t.Errorf("%s %s: got status %d, %d upstream calls so far; want %d, %d", step.method, step.target, rec.Code, calls, step.wantStatus, step.wantUpstream)
		}
		if allow := rec.Header().Get("Allow"); step.method == "CONNECT" && (allow == "" || strings.Contains(allow, "CONNECT")) {
			t.Errorf("%s %s: Allow %q, want the methods the proxy forwards, CONNECT not among them", step.method, step.target, allow)
		}
		for _, m := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"sds_unrouted_requests_total", nil, step.wantUnrouted},
			{"sds_rejected_requests_total", map[string]string{"reason": "path"}, step.wantPath},
			{"sds_rejected_requests_total", map[string]string{"reason": "method"}, step.wantMethod},
			{"sds_requests_total", map[string]string{"point": "p", "result": "proxied"}, step.wantOnPoint},
		} {
			if got := rpMetric(t, reg, m.name, m.labels); got != m.want {
				t.Errorf("after %s: %s%v: got %v, want %v", step.target, m.name, m.labels, got, m.want)
			}
		}
	}
}

// TestCanceledCounted: a request let through counts as proxied once the
// upstream is sent its headers (the transport's WroteHeaders), and as
// canceled when its client went away before that; a transport that fails
// with the client still there counts it proxied (the proxy tried).
func TestCanceledCounted(t *testing.T) {
	errRefused := errors.New("connection refused")
	tests := []struct {
		name string
		// cancelFirst: the client has gone before the request is served.
		cancelFirst bool
		// transport's sent: it calls WroteHeaders; then it waits for the
		// client to go away when wait is set, and fails with fail if set.
		sent, wait              bool
		fail                    error
		wantProxied, wantCancel float64
	}{
		{"answered", false, true, false, nil, 1, 0},
		{"client gone before the upstream was sent it", true, false, false, nil, 0, 1},
		{"client gone while the upstream works", false, true, true, nil, 1, 0},
		{"refused, client still there", false, false, false, errRefused, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
				if err := r.Context().Err(); err != nil {
					return nil, err // a transport checks its context before it dials
				}
				if trace := httptrace.ContextClientTrace(r.Context()); tt.sent && trace != nil && trace.WroteHeaders != nil {
					trace.WroteHeaders()
				}
				if tt.wait {
					cancel()
					<-r.Context().Done()
					return nil, r.Context().Err()
				}
				if tt.fail != nil {
					return nil, tt.fail
				}
				return rpReply(r, http.StatusOK, "upstream"), nil
			})
			p := rpPoint(t, "p", nil, proxy.PointOptions{})
			h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})
			if tt.cancelFirst {
				cancel()
			}
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx))
			for _, m := range []struct {
				result string
				want   float64
			}{{"proxied", tt.wantProxied}, {"canceled", tt.wantCancel}, {"degraded", 0}} {
				if got := rpMetric(t, reg, "sds_requests_total", map[string]string{"point": "p", "result": m.result}); got != m.want {
					t.Errorf("sds_requests_total{result=%q}: got %v, want %v", m.result, got, m.want)
				}
			}
		})
	}
}

// TestShadowCountedApart checks that a shadow point's would-be
// degradations go to sds_shadow_degraded_total only, and an enforcing
// point's degradations to sds_degraded_total only.
func TestShadowCountedApart(t *testing.T) {
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	enforce := rpPoint(t, "enforce", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{})
	shadow := rpPoint(t, "shadow", func(s *limiter.Settings) { s.VisitThreshold, s.Shadow = limiter.At(0), true }, proxy.PointOptions{})
	h, reg := rpHandler(t, trafficConfig(t, enforce, shadow), proxy.Options{Transport: transport})
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/enforce", nil))
	}
	for range 5 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/shadow", nil))
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sds_degraded_total", map[string]string{"point": "enforce", "strategy": "visit"}, 3},
		{"sds_shadow_degraded_total", map[string]string{"point": "enforce", "strategy": "visit"}, 0},
		{"sds_requests_total", map[string]string{"point": "enforce", "result": "degraded"}, 3},
		{"sds_degraded_total", map[string]string{"point": "shadow", "strategy": "visit"}, 0},
		{"sds_shadow_degraded_total", map[string]string{"point": "shadow", "strategy": "visit"}, 5},
		{"sds_requests_total", map[string]string{"point": "shadow", "result": "shadow_degraded"}, 5},
		{"sds_requests_total", map[string]string{"point": "shadow", "result": "degraded"}, 0},
	} {
		if got := rpMetric(t, reg, m.name, m.labels); got != m.want {
			t.Errorf("%s%v: got %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

// TestPointStateGauges checks sds_point_state and sds_point_tripped for a
// point in each state.
func TestPointStateGauges(t *testing.T) {
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	closed := rpPoint(t, "closed", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(100) }, proxy.PointOptions{})
	open := rpPoint(t, "open", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{})
	delay := rpPoint(t, "delay", func(s *limiter.Settings) {
		s.VisitThreshold, s.DelayTime = limiter.At(0), time.Hour
	}, proxy.PointOptions{})
	shadow := rpPoint(t, "shadow", func(s *limiter.Settings) { s.VisitThreshold, s.Shadow = limiter.At(0), true }, proxy.PointOptions{})
	h, reg := rpHandler(t, trafficConfig(t, closed, open, delay, shadow), proxy.Options{Transport: transport})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/delay", nil)) // starts the delay

	states := []string{"closed", "open", "delay", "shadow"}
	for _, p := range []struct {
		name, state string
		tripped     float64
	}{
		{"closed", "closed", 0},
		{"open", "open", 1},
		{"delay", "delay", 1},
		{"shadow", "shadow", 0},
	} {
		if got := rpMetric(t, reg, "sds_point_tripped", map[string]string{"point": p.name}); got != p.tripped {
			t.Errorf("sds_point_tripped{point=%s}: got %v, want %v", p.name, got, p.tripped)
		}
		for _, s := range states {
			want := 0.0
			if s == p.state {
				want = 1
			}
			if got := rpMetric(t, reg, "sds_point_state", map[string]string{"point": p.name, "state": s}); got != want {
				t.Errorf("sds_point_state{point=%s,state=%s}: got %v, want %v", p.name, s, got, want)
			}
		}
	}
}

// TestUpstreamDurationHistogram checks that sds_upstream_duration_seconds
// is a native histogram with its classic buckets, and that a request with
// a valid traceparent leaves its trace id as an exemplar, one without or
// with a malformed one none.
func TestUpstreamDurationHistogram(t *testing.T) {
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	p := rpPoint(t, "p", nil, proxy.PointOptions{})
	// A clock that moves 1µs per reading: every call takes some upstream
	// time, and the four requests fall within 100µs.
	var ticks atomic.Int64
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Microsecond) }
	h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport, Now: now})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	send := func(traceparent string) {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		if traceparent != "" {
			r.Header.Set("Traceparent", traceparent)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	histogram := func() *dto.Histogram {
		f := family(t, reg, "sds_upstream_duration_seconds")
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("sds_upstream_duration_seconds: got %v, want one series", f)
		}
		return f.GetMetric()[0].GetHistogram()
	}
	exemplars := func(hist *dto.Histogram) (ids []string) {
		all := hist.GetExemplars()
		for _, b := range hist.GetBucket() {
			if b.GetExemplar() != nil {
				all = append(all, b.GetExemplar())
			}
		}
		for _, e := range all {
			for _, l := range e.GetLabel() {
				ids = append(ids, l.GetName()+"="+l.GetValue())
			}
		}
		return ids
	}

	send("")
	send("00-" + traceID + "-00f067aa0ba902b7-0") // one character short
	hist := histogram()
	if hist.GetSampleCount() != 2 || len(exemplars(hist)) != 0 {
		t.Errorf("without a valid traceparent: got %d observations, exemplars %q; want 2 and none", hist.GetSampleCount(), exemplars(hist))
	}
	if hist.GetSchema() != 3 || hist.GetZeroThreshold() != prometheus.DefNativeHistogramZeroThreshold ||
		len(hist.GetPositiveSpan()) == 0 || len(hist.GetBucket()) != 13 {
		t.Errorf("got schema %d, zero threshold %v, %d positive spans, %d classic buckets; want 3, %v, some, 13",
			hist.GetSchema(), hist.GetZeroThreshold(), len(hist.GetPositiveSpan()), len(hist.GetBucket()), prometheus.DefNativeHistogramZeroThreshold)
	}

	send("00-" + traceID + "-00f067aa0ba902b7-01")
	hist = histogram()
	// The same exemplar in a classic bucket and among the native ones.
	want := "trace_id=" + traceID
	if ids := exemplars(hist); len(ids) != 2 || ids[0] != want || ids[1] != want {
		t.Errorf("after a request with traceparent: got exemplars %q, want %q twice", ids, want)
	}

	// Within 100ms of an exemplar, a traced call is observed without one:
	// the exemplars stay those of the first.
	send("00-ffffffffffffffffffffffffffffffff-00f067aa0ba902b7-01")
	hist = histogram()
	if ids := exemplars(hist); hist.GetSampleCount() != 4 || len(ids) != 2 || ids[0] != want {
		t.Errorf("a second traced call at once: got %d observations, exemplars %q; want 4, still %q", hist.GetSampleCount(), ids, want)
	}
}
