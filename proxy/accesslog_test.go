package proxy_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// The access log says what replay needs of every request: when it
// arrived, its host and priority, each per-key rule's label of its key, a
// pressure test's mark, and for a forwarded one when its call ended and
// how it counted.
func TestAccessLogReplayFields(t *testing.T) {
	hasher := clientkey.NewHasher()
	now := time.Date(2026, 12, 5, 10, 0, 0, 123456000, time.UTC)
	fail := false
	upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		now = now.Add(1500 * time.Microsecond) // the call's time
		if fail {
			return nil, errors.New("connection refused")
		}
		if r.URL.Path == "/busy" {
			return rpReply(r, http.StatusServiceUnavailable, "busy"), nil
		}
		return rpReply(r, http.StatusOK, "ok"), nil
	})
	rule := keyRule(t, proxy.MissingPass, perkey.Settings{VisitThreshold: limiter.At(2)})
	p := rpPoint(t, "p", func(s *limiter.Settings) { s.PressureTestDowngrade = true }, proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
	cfg := rpConfig(rpFakeUpstream, p)
	cfg.Routes = []proxy.Route{{Point: p, Priority: limiter.PriorityCritical, Rule: route.Rule{Host: "shop.example"}}, {Point: p}}
	cfg.PressureTestHeader = "X-Pressure"
	accessLog, logs := rpAccessLog()
	h, _ := rpHandler(t, cfg, proxy.Options{Transport: upstream, AccessLog: accessLog, Hasher: hasher, Now: func() time.Time { return now }})
	do := func(host, path string, header ...string) {
		r := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	do("shop.example", "/ok", "X-Api-Key", "k1")
	do("other.example", "/busy")
	do("other.example", "/ok", "X-Pressure", "1")
	fail = true
	do("other.example", "/ok", "X-Api-Key", "k1")

	lines := logs.All()
	if len(lines) != 4 {
		t.Fatalf("%d access log lines, want 4", len(lines))
	}
	label := hasher.Label(hasher.Sum64("k1"))
	for i, want := range []map[string]any{
		{"arrived": "2026-12-05T10:00:00.123456Z", "host": "shop.example", "priority": "critical", "outcome": "ok", "ended": "2026-12-05T10:00:00.124956Z", "keys": []string{label}},
		{"host": "other.example", "priority": "default", "outcome": "failed", "error": "status_5xx", "keys": []string{""}},
		{"pressure_test": true, "strategy": "pressure_test", "degraded": true, "keys": []string{""}},
		{"outcome": "failed", "error": "transport", "keys": []string{label}},
	} {
		got := lines[i].ContextMap()
		for k, v := range want {
			if labels, ok := v.([]string); ok {
				if g, _ := got[k].([]any); !slices.Equal(asStrings(g), labels) {
					t.Errorf("line %d: %s = %v, want %v", i+1, k, got[k], labels)
				}
				continue
			}
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v (line %v)", i+1, k, got[k], v, got)
			}
		}
		if _, ok := got["arrived"].(string); !ok {
			t.Errorf("line %d: no arrived: %v", i+1, got)
		}
	}
	if got := lines[2].ContextMap(); got["ended"] != nil || got["outcome"] != nil {
		t.Errorf("a degraded request's line has ended %v and outcome %v, want neither", got["ended"], got["outcome"])
	}
}

// asStrings returns the strings of vs, as zap's observer keeps a string
// slice field.
func asStrings(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i], _ = v.(string)
	}
	return out
}
