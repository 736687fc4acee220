package admin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/internal/testclock"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/route"
)

// adminT0 is the instant of the admin tests' requests, half-way into a
// bucket of the default 1s buckets.
var adminT0 = time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC)

// adminUpstream is a fake service: 500 for paths ending in /fail, else 200.
type adminUpstream struct{}

func (adminUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	status := http.StatusOK
	if strings.HasSuffix(r.URL.Path, "/fail") {
		status = http.StatusInternalServerError
	}
	return &http.Response{
		Status: http.StatusText(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("upstream")),
		ContentLength: 8, Request: r,
	}, nil
}

// adminFixture is a real Handler on a fake upstream, its metrics registry,
// and an admin server over them.
type adminFixture struct {
	h       *proxy.Handler
	metrics *metrics.Set
	events  *events.Log
	clock   *testclock.Clock
	ready   atomic.Bool
	status  admin.ReloadStatus
	admin   http.Handler
	srv     *httptest.Server
}

// adminPoint is a point of a fixture: requests to /<path>... go to it.
type adminPoint struct {
	name, path string
	settings   func(*limiter.Settings)
}

func newAdminFixture(t *testing.T, points ...adminPoint) *adminFixture {
	t.Helper()
	return newAdminFixtureOn(t, adminT0, func(*testclock.Clock) http.RoundTripper { return adminUpstream{} }, points...)
}

// newAdminFixtureOn is newAdminFixture with its clock set to start and the
// upstream transport that transport returns for that clock.
func newAdminFixtureOn(t *testing.T, start time.Time, transport func(*testclock.Clock) http.RoundTripper, points ...adminPoint) *adminFixture {
	t.Helper()
	f := &adminFixture{clock: testclock.New(start)}
	upstream, _ := url.Parse("http://upstream.invalid")
	cfg := &proxy.Config{Upstream: upstream, ForwardedHeaders: true}
	for _, ap := range points {
		var s limiter.Settings
		if ap.settings != nil {
			ap.settings(&s)
		}
		lim, err := limiter.NewPoint(ap.name, s)
		if err != nil {
			t.Fatalf("limiter.NewPoint(%q): %v", ap.name, err)
		}
		p := proxy.NewPoint(lim, proxy.PointOptions{})
		cfg.Points = append(cfg.Points, p)
		cfg.Routes = append(cfg.Routes, proxy.Route{Point: p, Rule: route.Rule{PathPrefix: ap.path}})
	}
	reg := prometheus.NewRegistry()
	f.metrics = metrics.NewSet(reg, func() []metrics.Source { return f.h.Sources() })
	f.events = events.New(admin.MaxEvents, admin.MaxPointEvents)
	f.h = proxy.New(cfg, proxy.Options{
		Logger:    zap.NewNop(),
		Events:    f.events,
		Metrics:   f.metrics,
		Transport: transport(f.clock),
		Now:       f.clock.Now,
	})
	f.status = admin.ReloadStatus{
		Path:        "/etc/sds/sds.yaml",
		Hash:        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		LoadedAt:    adminT0.Add(-time.Minute),
		LastAttempt: adminT0.Add(-10 * time.Second),
		LastOK:      false,
		LastError:   `sds.yaml:3:1: unknown key "visitThreshhold"`,
	}
	f.admin = admin.New(admin.Options{
		Points:   f.h,
		Gatherer: reg,
		Metrics:  f.metrics,
		Ready:    f.ready.Load,
		Status:   func() admin.ReloadStatus { return f.status },
		Now:      f.clock.Now,
		Events:   f.events,
		Traffic:  f.metrics.Traffic,
		Version:  "v9.9.9-test",
	})
	f.srv = httptest.NewServer(f.admin)
	t.Cleanup(f.srv.Close)
	return f
}

// send drives one request through the Handler at the fixture's instant
// and returns the response.
func (f *adminFixture) send(t *testing.T, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://svc.example"+path, nil))
	return rec.Result()
}

// get fetches path from the admin server.
func (f *adminFixture) get(t *testing.T, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, string(body)
}

// tripFixture returns a fixture with three points, driven at adminT0:
//   - "p" (visitThreshold 2): 5 requests, 2 proxied, 3 degraded: open.
//   - "q" (shadow, exceptionThreshold 1, delay 30s): a 500, then a request
//     that would be degraded: in its (would-be) delay, so shadow.
//   - "r" (every strategy off): no traffic: closed.
func tripFixture(t *testing.T) *adminFixture {
	t.Helper()
	f := newAdminFixture(t,
		adminPoint{name: "p", path: "/p", settings: func(s *limiter.Settings) { s.VisitThreshold = limiter.At(2) }},
		adminPoint{name: "q", path: "/q", settings: func(s *limiter.Settings) {
			s.Shadow = true
			s.ExceptionThreshold = limiter.At(1)
			s.DelayTime, s.RetryInterval = 30*time.Second, 2*time.Second
			s.TokensPerSecond, s.TokenBucketSize = limiter.At(10), limiter.At(20)
			s.TimeoutThreshold, s.TimeoutCountThreshold = 250*time.Millisecond, limiter.At(5)
			s.ConcurrentThreshold = limiter.At(8)
			s.ExceptionRateThreshold, s.ExceptionRateStart = limiter.At(50), 10
			s.PressureTestDowngrade = true
			s.DowngradeRate = limiter.At(90)
			s.Percent = func() int { return 0 } // always degrade
		}},
		adminPoint{name: "r", path: "/r"},
	)
	for i, want := range []int{200, 200, 429, 429, 429} {
		if got := f.send(t, "/p").StatusCode; got != want {
			t.Fatalf("request %d on p: got status %d, want %d", i+1, got, want)
		}
	}
	if got := f.send(t, "/q/fail").StatusCode; got != 500 {
		t.Fatalf("GET /q/fail: got status %d, want 500", got)
	}
	resp := f.send(t, "/q")
	if got, want := resp.Header.Get("Sds-Shadow-Degraded"), "exception; point=q"; resp.StatusCode != 200 || got != want {
		t.Fatalf("GET /q: got status %d, Sds-Shadow-Degraded %q; want 200, %q", resp.StatusCode, got, want)
	}
	return f
}

func TestAdminStatus(t *testing.T) {
	f := tripFixture(t)
	resp, body := f.get(t, http.MethodGet, "/status")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /status: got status %d, want 200", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("GET /status: got Content-Type %q, want application/json", got)
	}

	assertJSON(t, body, wantTripStatus(f))

	// HEAD answers the same headers and no body.
	resp, body = f.get(t, http.MethodHead, "/status")
	if resp.StatusCode != 200 || body != "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("HEAD /status: got %d %q, Content-Type %q; want 200, no body, application/json",
			resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
}

// wantTripStatus is the /status document of tripFixture f.
func wantTripStatus(f *adminFixture) string {
	// The calls in flight at a trip are the limiter's to define (whether the
	// tripped request counts itself); the admin port relays its figure.
	tripInFlight := func(i int) string {
		return strconv.FormatInt(f.h.Points()[i].Limiter().Snapshot(adminT0).LastTrip.InFlight, 10)
	}
	return `{
	  "now": "2026-03-01T12:00:00.5Z",
	  "build": {"version": "v9.9.9-test", "goVersion": "` + runtime.Version() + `"},
	  "events": [
	    {"at": "2026-03-01T12:00:00.5Z", "kind": "trip", "point": "p", "strategy": "visit", "detail": "visit 3 > 2"},
	    {"at": "2026-03-01T12:00:00.5Z", "kind": "trip", "point": "q", "strategy": "exception", "shadow": true, "detail": "exception 1 >= 1"},
	    {"at": "2026-03-01T12:00:00.5Z", "kind": "delay_start", "point": "q", "strategy": "exception", "shadow": true, "detail": "for 30s"}
	  ],
	  "config": {
	    "path": "/etc/sds/sds.yaml",
	    "hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	    "loadedAt": "2026-03-01T11:59:00.5Z",
	    "lastReload": {"at": "2026-03-01T11:59:50.5Z", "ok": false,
	      "error": "sds.yaml:3:1: unknown key \"visitThreshhold\""}
	  },
	  "points": [
	    {
	      "name": "p", "state": "open", "mode": "enforce",
	      "reason": {"strategy": "visit", "count": 2, "threshold": 2},
	      "strategies": [{"strategy": "visit", "count": 2, "threshold": 2, "trips": true}],
	      "window": {"visits": 5, "degraded": 3, "exceptions": 0, "timeouts": 0, "inFlight": 0},
	      "events": [
	        {"at": "2026-03-01T12:00:00.5Z", "kind": "trip", "point": "p", "strategy": "visit", "detail": "visit 3 > 2"}
	      ],
	      "lastTrip": {"strategy": "visit", "at": "2026-03-01T12:00:00.5Z", "count": 3, "threshold": 2,
	        "window": {"visits": 5, "degraded": 2, "exceptions": 0, "timeouts": 0}, "inFlight": ` + tripInFlight(0) + `},
	      "thresholds": {"visitThreshold": 2, "downgradeRate": 100},
	      "series": ` + statusSeries(`{"visits":5,"degraded":3,"exceptions":0,"timeouts":0}`) + `
	    },
	    {
	      "name": "q", "state": "shadow", "mode": "shadow",
	      "window": {"visits": 2, "degraded": 1, "exceptions": 1, "timeouts": 0, "inFlight": 0},
	      "tokens": 19,
	      "delay": {"strategy": "exception", "until": "2026-03-01T12:00:30.5Z", "nextProbe": "2026-03-01T12:00:02.5Z", "probing": false},
	      "strategies": [
	        {"strategy": "token_bucket", "count": 1, "threshold": 20, "trips": false},
	        {"strategy": "concurrent", "count": 0, "threshold": 8, "trips": false},
	        {"strategy": "timeout", "count": 0, "threshold": 5, "trips": false},
	        {"strategy": "exception", "count": 1, "threshold": 1, "trips": true},
	        {"strategy": "exception_rate", "count": 100, "threshold": 50, "trips": false}
	      ],
	      "events": [
	        {"at": "2026-03-01T12:00:00.5Z", "kind": "trip", "point": "q", "strategy": "exception", "shadow": true, "detail": "exception 1 >= 1"},
	        {"at": "2026-03-01T12:00:00.5Z", "kind": "delay_start", "point": "q", "strategy": "exception", "shadow": true, "detail": "for 30s"}
	      ],
	      "lastTrip": {"strategy": "exception", "at": "2026-03-01T12:00:00.5Z", "count": 1, "threshold": 1,
	        "window": {"visits": 2, "degraded": 0, "exceptions": 1, "timeouts": 0}, "inFlight": ` + tripInFlight(1) + `},
	      "thresholds": {"timeoutThreshold": "250ms", "timeoutCountThreshold": 5, "concurrentThreshold": 8,
	        "exceptionThreshold": 1, "exceptionRateThreshold": 50, "exceptionRateStart": 10,
	        "tokenBucketGeneratedTokensInSecond": 10, "tokenBucketSize": 20, "downgradeRate": 90,
	        "delayTime": "30s", "retryInterval": "2s", "pressureTestDowngrade": true},
	      "series": ` + statusSeries(`{"visits":2,"degraded":1,"exceptions":1,"timeouts":0}`) + `
	    },
	    {
	      "name": "r", "state": "closed", "mode": "enforce",
	      "strategies": [],
	      "events": [],
	      "window": {"visits": 0, "degraded": 0, "exceptions": 0, "timeouts": 0, "inFlight": 0},
	      "thresholds": {"downgradeRate": 100},
	      "series": ` + statusSeries(`{"visits":0,"degraded":0,"exceptions":0,"timeouts":0}`) + `
	    }
	  ]
	}`
}

// statusSeries is a point's /status series of ten 1s buckets: nine empty,
// then last.
func statusSeries(last string) string {
	b := strings.Repeat(`{"visits":0,"degraded":0,"exceptions":0,"timeouts":0},`, 9)
	return `{"bucketSeconds":1,"buckets":[` + b + last + `]}`
}

// assertJSON compares two JSON documents as values.
func assertJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got invalid JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is invalid JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("got JSON\n%s\nwant\n%s", gi, wi)
	}
}

func TestAdminStatusNoPoints(t *testing.T) {
	upstream, _ := url.Parse("http://upstream.invalid")
	reg := prometheus.NewRegistry()
	var h *proxy.Handler
	m := metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	h = proxy.New(&proxy.Config{Upstream: upstream}, proxy.Options{Logger: zap.NewNop(), Metrics: m, Transport: adminUpstream{}})
	// Ready, Status and Now left nil: always ready, a zero ReloadStatus, time.Now.
	srv := httptest.NewServer(admin.New(admin.Options{Points: h, Gatherer: reg}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	delete(doc, "now") // wall clock
	b, _ := json.Marshal(doc)
	assertJSON(t, string(b), `{"build": {"version": "", "goVersion": "`+runtime.Version()+`"}, "config": {"path": "", "hash": ""}, "events": [], "points": []}`)

	resp, err = http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /readyz with nil Ready: got %d, want 200", resp.StatusCode)
	}
}

func TestAdminMetrics(t *testing.T) {
	f := tripFixture(t)
	resp, body := f.get(t, http.MethodGet, "/metrics")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: got status %d, want 200", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /metrics: got Content-Type %q, want text/plain", ct)
	}
	lines := make(map[string]bool)
	for _, l := range strings.Split(body, "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		`sds_requests_total{point="p",result="proxied"} 2`,
		`sds_requests_total{point="p",result="degraded"} 3`,
		`sds_requests_total{point="q",result="proxied"} 1`,
		`sds_requests_total{point="q",result="shadow_degraded"} 1`,
		`sds_degraded_total{point="p",strategy="visit"} 3`,
		`sds_shadow_degraded_total{point="q",strategy="exception"} 1`,
		`sds_upstream_errors_total{kind="status_5xx",point="q"} 1`,
		`sds_point_tripped{point="p"} 1`,
		`sds_point_tripped{point="q"} 0`, // shadow is never tripped
		`sds_point_tripped{point="r"} 0`,
		`sds_inflight{point="p"} 0`,
		`sds_inflight{point="q"} 0`,
		`sds_upstream_duration_seconds_count{point="q"} 2`,
	} {
		if !lines[want] {
			t.Errorf("GET /metrics: no line %q in\n%s", want, body)
		}
	}
}

func TestAdminProbesAndMethods(t *testing.T) {
	f := newAdminFixture(t)
	check := func(method, path string, wantStatus int, wantBody string) *http.Response {
		t.Helper()
		resp, body := f.get(t, method, path)
		if resp.StatusCode != wantStatus || (wantBody != "" && body != wantBody) {
			t.Errorf("%s %s: got %d %q, want %d %q", method, path, resp.StatusCode, body, wantStatus, wantBody)
		}
		return resp
	}

	check("GET", "/healthz", 200, "ok")
	check("HEAD", "/healthz", 200, "")
	check("GET", "/readyz", 503, "draining") // not serving yet
	f.ready.Store(true)
	check("GET", "/readyz", 200, "ready")
	f.ready.Store(false) // SIGTERM: draining
	check("GET", "/readyz", 503, "draining")
	check("HEAD", "/readyz", 503, "")
	check("GET", "/healthz", 200, "ok") // still alive while draining

	for _, tc := range []struct{ method, path string }{
		{"POST", "/healthz"}, {"PUT", "/readyz"}, {"POST", "/metrics"},
		{"DELETE", "/status"}, {"POST", "/status"}, {"POST", "/"}, {"PATCH", "/"},
	} {
		resp := check(tc.method, tc.path, http.StatusMethodNotAllowed, "")
		if got := resp.Header.Get("Allow"); got != "GET, HEAD" {
			t.Errorf("%s %s: got Allow %q, want %q", tc.method, tc.path, got, "GET, HEAD")
		}
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/nope"}, {"GET", "/index.html"}, {"GET", "/status/"}, {"GET", "/healthz/x"},
		{"POST", "/nope"}, {"GET", "/debug/pprof/"},
	} {
		check(tc.method, tc.path, http.StatusNotFound, "")
	}
}

func ExampleNew() {
	reg := prometheus.NewRegistry()
	var h *proxy.Handler
	ms := metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	upstream, _ := url.Parse("http://127.0.0.1:9000")
	h = proxy.New(&proxy.Config{Upstream: upstream}, proxy.Options{Logger: zap.NewNop(), Metrics: ms})

	var draining atomic.Bool // set on SIGTERM
	port := admin.New(admin.Options{
		Points:   h,
		Gatherer: reg,
		Ready:    func() bool { return !draining.Load() },
		Status:   func() admin.ReloadStatus { return admin.ReloadStatus{Path: "sds.yaml"} },
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		port.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code, rec.Body)
	}
	draining.Store(true)
	rec := httptest.NewRecorder()
	port.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	fmt.Println("/readyz", rec.Code, rec.Body)
	// Output:
	// /healthz 200 ok
	// /readyz 200 ready
	// /readyz 503 draining
}
