package proxy_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sds-proxy/sds-proxy/internal/testclock"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/route"
)

// forceFixture is a Handler with points a and b, a hand-moved clock, an
// upstream that counts its calls, the event history and the log.
type forceFixture struct {
	h      *proxy.Handler
	reg    *prometheus.Registry
	clock  *testclock.Clock
	calls  atomic.Int64
	events *events.Log
	logs   *observer.ObservedLogs
	access *observer.ObservedLogs
	a, b   *proxy.Point
}

func newForceFixture(t *testing.T, setA func(*limiter.Settings)) *forceFixture {
	t.Helper()
	f := &forceFixture{clock: testclock.New(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)),
		events: events.New(100, 50)}
	f.a = rpPoint(t, "a", setA, proxy.PointOptions{})
	f.b = rpPoint(t, "b", nil, proxy.PointOptions{})
	core, logs := observer.New(zap.InfoLevel)
	accessCore, access := observer.New(zap.InfoLevel)
	f.logs, f.access = logs, access
	cfg := &proxy.Config{Upstream: rpFakeUpstream, Points: []*proxy.Point{f.a, f.b}, PressureTestHeader: "X-Pressure-Test",
		Routes: []proxy.Route{{Point: f.a, Rule: route.Rule{Path: "/a"}}, {Point: f.b}}}
	f.h, f.reg = rpHandler(t, cfg, proxy.Options{
		Logger: zap.New(core), AccessLog: zap.New(accessCore), Events: f.events, Now: f.clock.Now,
		Transport: rpRoundTrip(func(r *http.Request) (*http.Response, error) {
			f.calls.Add(1)
			return rpReply(r, http.StatusOK, "ok"), nil
		}),
	})
	return f
}

// get sends GET path and returns the answer.
func (f *forceFixture) get(path string) *http.Response {
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Result()
}

func (f *forceFixture) pointEvents(point string) []events.Event {
	return f.events.PointSince(point, time.Time{})
}

func TestForceDegradeAnswersTheFallbackUntilItsTTL(t *testing.T) {
	t.Parallel()
	f := newForceFixture(t, nil)
	sw, err := f.h.Force("a", proxy.ForceDegrade, 10*time.Minute, "payments incident 42")
	if err != nil {
		t.Fatal(err)
	}
	if want := f.clock.Now().Add(10 * time.Minute); !sw.Until.Equal(want) {
		t.Errorf("until: got %v, want %v", sw.Until, want)
	}
	resp := f.get("/a")
	if got, want := resp.Header.Get("Sds-Degraded"), "forced; point=a"; got != want {
		t.Errorf("Sds-Degraded: got %q, want %q", got, want)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status: got %d, want 503", resp.StatusCode)
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("upstream calls under a degrade switch: got %d, want 0", n)
	}
	// The other point is untouched.
	if resp := f.get("/b"); resp.StatusCode != http.StatusOK || f.calls.Load() != 1 {
		t.Errorf("point b: status %d, upstream calls %d; want 200 and 1", resp.StatusCode, f.calls.Load())
	}
	if got, want := f.a.Limiter().Snapshot(f.clock.Now()).Counts, (limiter.Counts{Visits: 1, Degraded: 1}); got != want {
		t.Errorf("a's window: got %+v, want %+v", got, want)
	}

	// One nanosecond before its end the switch holds; at its end it is gone,
	// before any Tick reports it.
	f.clock.Add(10*time.Minute - time.Nanosecond)
	if resp := f.get("/a"); resp.Header.Get("Sds-Degraded") != "forced; point=a" {
		t.Errorf("just before the ttl: got Sds-Degraded %q, want forced", resp.Header.Get("Sds-Degraded"))
	}
	f.clock.Add(time.Nanosecond)
	if resp := f.get("/a"); resp.StatusCode != http.StatusOK || resp.Header.Get("Sds-Degraded") != "" {
		t.Errorf("at the ttl: status %d, Sds-Degraded %q; want 200 and none", resp.StatusCode, resp.Header.Get("Sds-Degraded"))
	}
	if got := f.h.Forces(f.clock.Now()); len(got) != 0 {
		t.Errorf("Forces after the ttl: got %+v, want none", got)
	}
	f.clock.Add(time.Second)
	f.h.Tick(f.clock.Now())
	evs := f.pointEvents("a")
	if len(evs) != 2 || evs[0].Kind != events.Force || evs[1].Kind != events.ForceEnd {
		t.Fatalf("a's events: got %+v, want force then force_end", evs)
	}
	if want := "degrade for 10m0s: payments incident 42"; evs[0].Detail != want {
		t.Errorf("force event detail: got %q, want %q", evs[0].Detail, want)
	}
	if want := "degrade ended: its ttl passed"; evs[1].Detail != want {
		t.Errorf("force_end event detail: got %q, want %q", evs[1].Detail, want)
	}
	if want := sw.Until; !evs[1].At.Equal(want) {
		t.Errorf("force_end at: got %v, want the switch's until %v", evs[1].At, want)
	}
	if n := f.logs.FilterMessage("point forced").Len(); n != 1 {
		t.Errorf(`"point forced" lines: got %d, want 1`, n)
	}
	if n := f.logs.FilterMessage("point force ended").Len(); n != 1 {
		t.Errorf(`"point force ended" lines: got %d, want 1`, n)
	}
	if got := forceCounter(t, f.reg, "sds_forced_requests_total", "degrade", "a"); got != 2 {
		t.Errorf("sds_forced_requests_total{a,degrade}: got %v, want 2", got)
	}
}

func TestForcePassSkipsJudgingButCountsTheTraffic(t *testing.T) {
	t.Parallel()
	f := newForceFixture(t, func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) })
	if resp := f.get("/a"); resp.Header.Get("Sds-Degraded") != "visit; point=a" {
		t.Fatalf("before the switch: Sds-Degraded %q, want visit", resp.Header.Get("Sds-Degraded"))
	}
	if _, err := f.h.Force("a", proxy.ForcePass, time.Minute, "the threshold is wrong, fix on its way"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if resp := f.get("/a"); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d under pass: status %d, Sds-Degraded %q", i+1, resp.StatusCode, resp.Header.Get("Sds-Degraded"))
		}
	}
	if n := f.calls.Load(); n != 3 {
		t.Errorf("upstream calls under pass: got %d, want 3", n)
	}
	if got, want := f.a.Limiter().Snapshot(f.clock.Now()).Counts, (limiter.Counts{Visits: 4, Degraded: 1}); got != want {
		t.Errorf("a's window: got %+v, want %+v", got, want)
	}
	lines := f.access.FilterField(zap.String("forced", "pass")).Len()
	if lines != 3 {
		t.Errorf(`access log lines with forced=pass: got %d, want 3`, lines)
	}
	f.clock.Add(time.Second)
	sw, ok := f.h.Unforce("a")
	if !ok || sw.Action != proxy.ForcePass || !sw.Until.Equal(f.clock.Now()) {
		t.Fatalf("Unforce: got %+v, %v; want the pass switch, until now %v", sw, ok, f.clock.Now())
	}
	if _, ok := f.h.Unforce("a"); ok {
		t.Error("a second Unforce found a switch")
	}
	if resp := f.get("/a"); resp.Header.Get("Sds-Degraded") != "visit; point=a" {
		t.Errorf("after the switch: Sds-Degraded %q, want visit", resp.Header.Get("Sds-Degraded"))
	}
	evs := f.pointEvents("a")
	if len(evs) < 2 || evs[len(evs)-1].Detail != "pass ended: cleared" {
		t.Errorf("a's events: got %+v, want the last to be the clearing", evs)
	}
}

func TestForceRefusesBadSwitches(t *testing.T) {
	t.Parallel()
	f := newForceFixture(t, nil)
	for _, tc := range []struct {
		name, point string
		action      proxy.ForceAction
		ttl         time.Duration
		reason      string
		want        string // in the error; "" for ErrUnknownPoint
	}{
		{"unknown point", "nope", proxy.ForceDegrade, time.Minute, "r", ""},
		{"no action", "a", 0, time.Minute, "r", "action"},
		{"zero ttl", "a", proxy.ForceDegrade, 0, "r", "ttl"},
		{"negative ttl", "a", proxy.ForceDegrade, -time.Second, "r", "ttl"},
		{"ttl past the max", "a", proxy.ForceDegrade, proxy.MaxForceTTL + time.Nanosecond, "r", "ttl"},
		{"no reason", "a", proxy.ForcePass, time.Minute, "", "reason: is empty"},
		{"reason too long", "a", proxy.ForcePass, time.Minute, strings.Repeat("x", proxy.MaxForceReason+1), "reason: is 257 bytes"},
		{"reason with a line break", "a", proxy.ForcePass, time.Minute, "a\nb", "control character"},
		{"reason not UTF-8", "a", proxy.ForcePass, time.Minute, "\xff", "not UTF-8"},
	} {
		_, err := f.h.Force(tc.point, tc.action, tc.ttl, tc.reason)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", tc.name)
		case tc.want == "" && !errors.Is(err, proxy.ErrUnknownPoint):
			t.Errorf("%s: got %v, want ErrUnknownPoint", tc.name, err)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: got %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	// The boundary: exactly MaxForceTTL and MaxForceReason are accepted.
	if _, err := f.h.Force("a", proxy.ForceDegrade, proxy.MaxForceTTL, strings.Repeat("x", proxy.MaxForceReason)); err != nil {
		t.Errorf("MaxForceTTL with a reason of MaxForceReason bytes: %v", err)
	}
	if got := f.h.Forces(f.clock.Now()); len(got) != 1 {
		t.Errorf("switches after one good Force: got %d, want 1", len(got))
	}
}

func TestForceSurvivesASwapAndEndsWithItsPoint(t *testing.T) {
	t.Parallel()
	f := newForceFixture(t, nil)
	for _, p := range []string{"a", "b"} {
		if _, err := f.h.Force(p, proxy.ForceDegrade, time.Hour, "test"); err != nil {
			t.Fatal(err)
		}
	}
	// A reload that keeps a (a new Point of the same name) and drops b.
	a2 := proxy.NewPoint(f.a.Limiter(), proxy.PointOptions{})
	f.h.Swap(&proxy.Config{Upstream: rpFakeUpstream, Points: []*proxy.Point{a2}, Routes: []proxy.Route{{Point: a2}}})
	got := f.h.Forces(f.clock.Now())
	if len(got) != 1 || got[0].Point != "a" {
		t.Fatalf("switches after the reload: got %+v, want a's only", got)
	}
	if resp := f.get("/a"); resp.Header.Get("Sds-Degraded") != "forced; point=a" {
		t.Errorf("a after the reload: Sds-Degraded %q, want forced", resp.Header.Get("Sds-Degraded"))
	}
	evs := f.pointEvents("b")
	if len(evs) != 2 || evs[1].Detail != "degrade ended: the point left the config" {
		t.Errorf("b's events: got %+v, want its switch ended by the reload", evs)
	}
	// A point that comes back does not get its old switch back.
	f.h.Swap(&proxy.Config{Upstream: rpFakeUpstream, Points: []*proxy.Point{a2, f.b}, Routes: []proxy.Route{{Point: a2, Rule: route.Rule{Path: "/a"}}, {Point: f.b}}})
	if resp := f.get("/b"); resp.StatusCode != http.StatusOK {
		t.Errorf("b back in the config: status %d, want 200", resp.StatusCode)
	}
}

// forceCounter returns the value of the counter of family name whose
// label values, in label name order, are labels.
func forceCounter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i, lp := range m.GetLabel() {
				if i >= len(labels) || lp.GetValue() != labels[i] {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

// BenchmarkHandlerForced measures a request answered by a degrade switch:
// a map lookup, a degraded visit in the window and the fallback.
func BenchmarkHandlerForced(b *testing.B) {
	p := rpPoint(b, "a", nil, proxy.PointOptions{})
	h, _ := rpHandler(b, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		return rpReply(r, http.StatusOK, "ok"), nil
	})})
	if _, err := h.Force("a", proxy.ForceDegrade, time.Hour, "bench"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		}
	})
}

// A gRPC call under a degrade switch gets the trailers-only answer; a
// HEAD request the fallback's status and headers without a body.
func TestForceDegradeAnswersGRPCAndHEAD(t *testing.T) {
	t.Parallel()
	f := newForceFixture(t, nil)
	if _, err := f.h.Force("a", proxy.ForceDegrade, time.Minute, "drill"); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/a", nil)
	r.ProtoMajor, r.ProtoMinor = 2, 0
	r.Header.Set("Content-Type", "application/grpc")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	h := w.Result().Header
	if w.Code != http.StatusOK || h.Get("Grpc-Status") != "14" || h.Get("Grpc-Message") != "degraded: forced; point=a" || h.Get("Sds-Degraded") != "forced; point=a" {
		t.Errorf("gRPC under a degrade switch: %d %v", w.Code, h)
	}
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, httptest.NewRequest(http.MethodHead, "/a", nil))
	if w.Code != http.StatusServiceUnavailable || w.Body.Len() != 0 || w.Result().Header.Get("Content-Length") == "" {
		t.Errorf("HEAD under a degrade switch: %d, body %q, Content-Length %q", w.Code, w.Body, w.Result().Header.Get("Content-Length"))
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("upstream calls: got %d, want 0", n)
	}
}

// Switches set, cleared and expiring while requests flow and configs are
// swapped: run with -race. Every answer is either forced or the
// upstream's, and every forwarded call frees its slot.
func TestForceConcurrentWithRequestsAndSwaps(t *testing.T) {
	t.Parallel()
	f := newForceFixture(t, nil)
	cfgs := []*proxy.Config{
		{Upstream: rpFakeUpstream, Points: []*proxy.Point{f.a, f.b}, Routes: []proxy.Route{{Point: f.a, Rule: route.Rule{Path: "/a"}}, {Point: f.b}}},
		{Upstream: rpFakeUpstream, Points: []*proxy.Point{f.a}, Routes: []proxy.Route{{Point: f.a}}},
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var served atomic.Int64
	for range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				path := "/a"
				if i%2 == 1 {
					path = "/b"
				}
				resp := f.get(path)
				served.Add(1)
				if d := resp.Header.Get("Sds-Degraded"); resp.StatusCode != http.StatusOK && !strings.HasPrefix(d, "forced; point=") {
					t.Errorf("GET %s: %d %q", path, resp.StatusCode, d)
				}
			}
		})
	}
	actions := []proxy.ForceAction{proxy.ForceDegrade, proxy.ForcePass}
	// At least 2,000 requests among the changes (bounded in time).
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; served.Load() < 2000 && time.Now().Before(deadline); i++ {
		point := []string{"a", "b"}[i%2]
		switch i % 5 {
		case 0, 1:
			f.h.Force(point, actions[i%2], time.Duration(1+i%3)*time.Millisecond, "race") // b may be out of the config
		case 2:
			f.h.Unforce(point)
		case 3:
			f.h.Swap(cfgs[i%2])
		case 4:
			f.clock.Add(time.Millisecond)
			f.h.Tick(f.clock.Now())
			f.h.Forces(f.clock.Now())
		}
	}
	close(done)
	wg.Wait()
	if n := served.Load(); n < 2000 {
		t.Errorf("served %d requests in 10s, want 2,000 among the changes", n)
	}
	for _, p := range []*proxy.Point{f.a, f.b} {
		if n := p.Limiter().InFlight(); n != 0 {
			t.Errorf("%s: %d calls still in flight", p.Name(), n)
		}
	}
}

// A degrade switch degrades a shadow point's requests for real; a pass
// switch forwards pressure-test traffic its point would degrade at once.
func TestForceActsWhateverTheModeAndTraffic(t *testing.T) {
	t.Parallel()
	f := newForceFixture(t, func(s *limiter.Settings) {
		s.Shadow = true
		s.PressureTestDowngrade = true
	})
	if _, err := f.h.Force("a", proxy.ForceDegrade, time.Minute, "drill"); err != nil {
		t.Fatal(err)
	}
	if resp := f.get("/a"); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Sds-Degraded") != "forced; point=a" {
		t.Errorf("shadow point under degrade: %d %q", resp.StatusCode, resp.Header.Get("Sds-Degraded"))
	}
	if _, err := f.h.Force("a", proxy.ForcePass, time.Minute, "drill"); err != nil {
		t.Fatal(err)
	}
	pressure := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/a", nil)
		r.Header.Set("X-Pressure-Test", "1")
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		return w
	}
	if w := pressure(); w.Code != http.StatusOK || w.Header().Get("Sds-Shadow-Degraded") != "" || f.calls.Load() != 1 {
		t.Errorf("pressure-test request under pass: %d, Sds-Shadow-Degraded %q, upstream calls %d", w.Code, w.Header().Get("Sds-Shadow-Degraded"), f.calls.Load())
	}
	f.h.Unforce("a")
	if w := pressure(); w.Header().Get("Sds-Shadow-Degraded") != "pressure_test; point=a" {
		t.Errorf("pressure-test request without the switch: Sds-Shadow-Degraded %q, want pressure_test", w.Header().Get("Sds-Shadow-Degraded"))
	}
}
