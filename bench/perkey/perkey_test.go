package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
)

func testOptions(t *testing.T, args ...string) options {
	t.Helper()
	o, err := parseFlags(args, nil)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return o
}

func TestParseFlags(t *testing.T) {
	o := testOptions(t)
	if o.duration != 40*time.Second || o.churnRate != 5000 || o.heavyRate != 300 || o.wellKeys != 20 || o.wellRate != 2 ||
		o.maxKeys != 10000 || o.late != 0 || strings.Join(o.setups, ",") != "perkey,none" {
		t.Errorf("defaults: got %+v, want the issue's scenario: 40s, churn 5000/s, heavy 300/s, 20 keys × 2/s, maxKeys 10000", o)
	}
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-duration", "1s"}, true},
		{[]string{"-duration", "999ms"}, false},
		{[]string{"-duration", "10m", "-churn-rate", "8000", "-heavy-rate", "1", "-well-keys", "0"}, true}, // 4.8M requests
		{[]string{"-duration", "10m", "-churn-rate", "9000"}, false},
		{[]string{"-duration", "10m1s"}, false},
		{[]string{"-churn-rate", "0"}, true},
		{[]string{"-churn-rate", "-1"}, false},
		{[]string{"-churn-rate", "50001"}, false},
		{[]string{"-heavy-rate", "0"}, false},
		{[]string{"-well-keys", "0"}, true},
		{[]string{"-well-keys", "1001"}, false},
		{[]string{"-well-rate", "0"}, false},
		{[]string{"-max-keys", "1000000"}, true},
		{[]string{"-max-keys", "0"}, false},
		{[]string{"-late", "39s"}, true},
		{[]string{"-late", "40s"}, false},
		{[]string{"-max-inflight", "0"}, false},
		{[]string{"-o", "csv"}, false},
		{[]string{"-setups", "none"}, true},
		{[]string{"-setups", "perkey,other"}, false},
		{[]string{"extra"}, false},
	} {
		_, err := parseFlags(tc.args, nil)
		if (err == nil) != tc.ok {
			t.Errorf("parseFlags(%q): error %v, want ok %v", tc.args, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errUsage) {
			t.Errorf("parseFlags(%q): error %v, want a usage error", tc.args, err)
		}
	}
}

// TestProxyConfig: both setups' sds.yaml are valid; perkey's has the
// issue's rule with -max-keys, none has no rule, and neither point has a
// threshold of its own.
func TestProxyConfig(t *testing.T) {
	o := testOptions(t, "-max-keys", "1234")
	for _, setup := range []string{"perkey", "none"} {
		f, err := config.ParseText("sds.yaml", proxyConfig(setup, "127.0.0.1:1", o), config.Options{})
		if err != nil {
			t.Fatalf("%s: %v", setup, err)
		}
		if len(f.Points) != 1 || f.Points[0].Name != "api.search" {
			t.Fatalf("%s: points %+v, want api.search alone", setup, f.Points)
		}
		p := f.Points[0]
		if on(p.VisitThreshold) || on(p.TokensPerSecond) || on(p.ConcurrentThreshold) {
			t.Errorf("%s: the point has a threshold of its own: %+v", setup, p)
		}
		if setup == "none" {
			if len(p.PerKey) != 0 {
				t.Errorf("none: perKey %+v, want none", p.PerKey)
			}
			continue
		}
		if len(p.PerKey) != 1 {
			t.Fatalf("perkey: perKey %+v, want one rule", p.PerKey)
		}
		k := p.PerKey[0]
		if got, want := f.KeySettings(k), ruleSettings(o); got != want {
			t.Errorf("perkey: the proxy's table settings %+v, want the report's %+v", got, want)
		}
		if k.Key != "header:X-Api-Key" || k.MaxKeys != 1234 || k.VisitThreshold != limiter.At(ruleVisits) ||
			k.TokensPerSecond != limiter.At(ruleRate) || k.TokenBucketSize != limiter.At(ruleSize) || k.ConcurrentThreshold != limiter.At(ruleConcurrent) {
			t.Errorf("perkey: rule %+v, want the issue's example with maxKeys 1234", k)
		}
	}
}

func on(t limiter.Threshold) bool { _, on := t.Get(); return on }

// TestSend: each kind of answer is counted where it belongs.
func TestSend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Api-Key") {
		case "ok":
		case "bucket":
			w.Header().Set("Sds-Degraded", "key_token_bucket; point=api.search; key=0123abcd")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case "point":
			w.Header().Set("Sds-Degraded", "visit; point=api.search")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case "no-retry":
			w.Header().Set("Sds-Degraded", "key_visit; point=api.search; key=0123abcd")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	var s stream
	for _, key := range []string{"ok", "ok", "bucket", "point", "no-retry", "other"} {
		s.send(context.Background(), srv.Client(), srv.URL, key)
	}
	if s.served.Load() != 2 || s.degraded[1].Load() != 1 || s.failed.Load() != 3 || *s.label.Load() != "0123abcd" {
		t.Errorf("got served %d, key_token_bucket %d, failed %d, label %q; want 2, 1, 3 (a point's strategy, a 429 without Retry-After, a 502), 0123abcd",
			s.served.Load(), s.degraded[1].Load(), s.failed.Load(), *s.label.Load())
	}
	if f := *s.firstFailure.Load(); !strings.Contains(f, "visit; point=api.search") {
		t.Errorf("first failure %q, want the point's visit answer", f)
	}
}

// TestPace: a stream sends every request due in its span, each with its
// key, and none when every slot is taken.
func TestPace(t *testing.T) {
	seen := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Get("X-Api-Key") }))
	defer srv.Close()
	s := &stream{perSecond: 100, begin: time.Now(), span: 300 * time.Millisecond, keyOf: func(i int) string { return strings.Repeat("k", i+1) }}
	s.pace(context.Background(), srv.Client(), srv.URL, make(chan struct{}, 10))
	close(seen)
	keys := map[string]bool{}
	for k := range seen {
		keys[k] = true
	}
	tl := summarize(s)
	if tl.Due != 30 || tl.Sent != 30 || tl.Served != 30 || len(keys) != 30 || !keys[strings.Repeat("k", 30)] {
		t.Errorf("got %+v and %d distinct keys, want 30 due, sent and served, each with its key", tl, len(keys))
	}

	full := &stream{perSecond: 100, begin: time.Now(), span: 50 * time.Millisecond, keyOf: func(int) string { return "k" }}
	full.pace(context.Background(), srv.Client(), srv.URL, make(chan struct{}))
	if tl := summarize(full); tl.Sent != 0 || tl.Dropped != 5 {
		t.Errorf("no slot: got %+v, want 5 dropped, none sent", tl)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.01, 1}, {0.2, 1}, {0.21, 2}, {0.5, 3}, {0.99, 5}, {1, 5}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of none = %v, want 0", got)
	}
}
