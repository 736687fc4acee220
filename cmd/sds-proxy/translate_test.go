package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
)

func loadExample(t *testing.T) *config.File {
	t.Helper()
	f, err := config.Load("../../sds.yaml", config.Options{})
	if err != nil {
		t.Fatalf("loading the example sds.yaml: %v", err)
	}
	return f
}

func TestTranslateExample(t *testing.T) {
	f := loadExample(t)
	cfg, err := translateShared(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Upstream.String(), f.Upstream; got != want {
		t.Errorf("upstream = %q, want %q", got, want)
	}
	if got, want := len(cfg.Points), len(f.Points); got != want {
		t.Fatalf("points = %d, want %d", got, want)
	}
	if got, want := len(cfg.Routes), len(f.Routes); got != want {
		t.Fatalf("routes = %d, want %d", got, want)
	}
	for i, r := range f.Routes {
		if got := cfg.Routes[i].Point.Name(); got != r.Point {
			t.Errorf("route %d point = %q, want %q", i, got, r.Point)
		}
		if got := cfg.Routes[i].Priority; got != r.Priority {
			t.Errorf("route %d priority = %v, want %v", i, got, r.Priority)
		}
	}
	for i := range f.Points {
		cp, p := &f.Points[i], cfg.Points[i]
		s := p.Limiter().Settings()
		if s.Policy != cp.Policy {
			t.Errorf("point %s policy = %+v, want %+v", cp.Name, s.Policy, cp.Policy)
		}
		if s.Window != f.Window || s.Buckets != f.Buckets {
			t.Errorf("point %s window = %v in %d buckets, want %v in %d", cp.Name, s.Window, s.Buckets, f.Window, f.Buckets)
		}
		if o := pointOptions(cp, nil); o.UpstreamTimeout != cp.UpstreamTimeout || o.FallbackOnError != cp.FallbackOnError {
			t.Errorf("point %s upstreamTimeout/fallbackOnError = %v/%v, want %v/%v", cp.Name, o.UpstreamTimeout, o.FallbackOnError, cp.UpstreamTimeout, cp.FallbackOnError)
		}
	}
}

// TestTranslateKeepsState: a reload that keeps a point's window shape
// keeps its counts; one that changes the window starts afresh.
func TestTranslateKeepsState(t *testing.T) {
	f := loadExample(t)
	first, err := translateShared(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := first.Points[0]
	var c limiter.Call
	p.Limiter().Enter(&c, now, limiter.Request{})
	c.Exit(now, limiter.Failed)

	second, err := translateShared(f, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := second.Points[0].Limiter().Snapshot(now).Counts
	if got.Visits != 1 || got.Exceptions != 1 {
		t.Errorf("after a reload with the same window: counts = %+v, want 1 visit and 1 exception", got)
	}

	reshaped := *f
	reshaped.Buckets = 5
	third, err := translateShared(&reshaped, second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := third.Points[0].Limiter().Snapshot(now).Counts; got != (limiter.Counts{}) {
		t.Errorf("after a reload with another window shape: counts = %+v, want zero", got)
	}
}

func TestUpstreamURL(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		h2c       bool
	}{
		{"http://127.0.0.1:9000", "http://127.0.0.1:9000", false},
		{"https://svc.local", "https://svc.local", false},
		{"h2c://127.0.0.1:50051", "http://127.0.0.1:50051", true},
	} {
		u, h2c, err := upstreamURL(tc.raw)
		if err != nil || u.String() != tc.want || h2c != tc.h2c {
			t.Errorf("upstreamURL(%q) = %v, %v, %v; want %s, %v", tc.raw, u, h2c, err, tc.want, tc.h2c)
		}
	}
}

// TestFallbackHeaders: headers keep every value, in file order.
func TestFallbackHeaders(t *testing.T) {
	fb := fallback(config.Fallback{Status: 503, Headers: [][2]string{{"Vary", "Accept"}, {"Vary", "Accept-Encoding"}, {"content-type", "text/plain"}}, Body: []byte("x"), BodySet: true})
	rec := httptest.NewRecorder()
	for k, v := range fb.Header {
		rec.Header()[k] = v
	}
	if got := rec.Header().Values("Vary"); len(got) != 2 || got[0] != "Accept" || got[1] != "Accept-Encoding" {
		t.Errorf("Vary = %q, want [Accept Accept-Encoding]", got)
	}
	if got := rec.Header().Get("Content-Type"); got != "text/plain" {
		t.Errorf("Content-Type = %q, want text/plain", got)
	}
}

// TestTranslateKeepsKeyTables: a reload keeps a per-key rule's table when
// its key and thresholds are unchanged, whatever else changed, so no key
// gets a fresh budget; a changed rule, or a changed window, starts a new
// table.
func TestTranslateKeepsKeyTables(t *testing.T) {
	var prev *proxy.Config
	load := func(window, pointVisits, keyVisits string) []proxy.KeyRule {
		t.Helper()
		src := "upstream: http://127.0.0.1:9\nwindow: " + window + "\nroutes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: " + pointVisits +
			"\n    perKey:\n      - {key: header:X-Api-Key, visitThreshold: " + keyVisits + ", missing: shared}\n      - {key: clientIP, concurrentThreshold: 4}\n"
		f, err := config.ParseText("sds.yaml", []byte(src), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := translateShared(f, prev, nil)
		if err != nil {
			t.Fatal(err)
		}
		prev = cfg
		return cfg.Points[0].Keys()
	}
	first := load("10s", "100", "30")
	if len(first) != 2 || first[0].Source.String() != "header:X-Api-Key" || first[0].Missing != proxy.MissingShared || first[1].Source.String() != "clientIP" {
		t.Fatalf("rules %+v, want header:X-Api-Key (missing: shared) then clientIP", first)
	}
	if got := first[0].Table.Settings(); got.VisitThreshold != limiter.At(30) || got.Window != 10*time.Second || got.MaxKeys != perkey.DefaultMaxKeys {
		t.Errorf("first rule's table settings %+v, want 30 visits in the file's 10s window, default maxKeys", got)
	}
	second := load("10s", "200", "30")
	if second[0].Table != first[0].Table || second[1].Table != first[1].Table {
		t.Error("a reload that changed only the point's visitThreshold made new per-key tables; want them kept")
	}
	third := load("10s", "200", "40")
	if third[0].Table == second[0].Table || third[1].Table != second[1].Table {
		t.Error("a reload that changed the first rule's threshold: want a new table for it and the second kept")
	}
	if fourth := load("20s", "200", "40"); fourth[0].Table == third[0].Table || fourth[1].Table == third[1].Table {
		t.Error("a reload that changed the window kept a per-key table; want new ones")
	}
}
