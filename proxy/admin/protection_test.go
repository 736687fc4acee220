package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// protectionFixture has a point in its recovery ramp (half-way through a
// 10s ramp from 10%: 55% admitted) and a point with an adaptive limit
// in its startup, at minLimit, its minimum latency not yet known.
func protectionFixture(t *testing.T) *adminFixture {
	f := newAdminFixture(t,
		adminPoint{name: "ramp", path: "/ramp", settings: func(s *limiter.Settings) {
			s.ExceptionThreshold, s.DelayTime = limiter.At(1), time.Second
			s.RecoveryTime, s.SheddableShare = 10*time.Second, limiter.At(70)
			s.VisitThreshold = limiter.At(1000)
		}},
		adminPoint{name: "adaptive", path: "/adaptive", settings: func(s *limiter.Settings) {
			s.AdaptiveConcurrency = limiter.AdaptiveConcurrency{On: true, MinLimit: 4}
		}},
	)
	if got := f.send(t, "/ramp/fail").StatusCode; got != 500 {
		t.Fatalf("GET /ramp/fail: got %d, want 500", got)
	}
	f.send(t, "/ramp") // trips: the delay ends at +1s, the ramp at +11s
	f.send(t, "/adaptive")
	f.clock.Set(adminT0.Add(6 * time.Second))
	return f
}

// TestStatusProtection: /status shows the ramp's share and end, the
// adaptive limit, and the settings of both and of the sheddable share.
func TestStatusProtection(t *testing.T) {
	f := protectionFixture(t)
	_, body := f.get(t, http.MethodGet, "/status")
	var doc struct {
		Points []struct {
			Name     string
			State    string
			Recovery *struct {
				Share float64
				Until time.Time
			}
			Adaptive *struct {
				Limit      int64
				Measuring  bool
				MinLatency float64
			}
			Strategies []struct{ Strategy string }
			Thresholds map[string]any
		}
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	ramp, adaptive := doc.Points[0], doc.Points[1]
	if r := ramp.Recovery; ramp.State != "recovering" || r == nil || r.Share != 0.55 || !r.Until.Equal(adminT0.Add(11*time.Second)) {
		t.Errorf("ramp point: state %s, recovery %+v; want recovering, 0.55 until +11s", ramp.State, r)
	}
	if ramp.Strategies[0].Strategy != "recovery" {
		t.Errorf("ramp point strategies %+v, want recovery first", ramp.Strategies)
	}
	if th := ramp.Thresholds; th["recoveryTime"] != "10s" || th["recoveryStart"] != 10.0 || th["sheddableShare"] != 70.0 || th["adaptiveConcurrency"] != nil {
		t.Errorf("ramp point thresholds %v", th)
	}
	if a := adaptive.Adaptive; a == nil || a.Limit != 4 || a.Measuring || a.MinLatency != 0 {
		t.Errorf("adaptive point: %+v, want limit 4, not measuring, no minimum latency yet", a)
	}
	want := map[string]any{"minLimit": 4.0, "maxLimit": 1000.0, "interval": "100ms", "tolerance": 25.0, "minLatencyInterval": "1m0s"}
	got, _ := adaptive.Thresholds["adaptiveConcurrency"].(map[string]any)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("adaptiveConcurrency.%s = %v, want %v", k, got[k], v)
		}
	}
	if adaptive.Recovery != nil || ramp.Adaptive != nil {
		t.Errorf("recovery or adaptive shown for a point without it")
	}
}

// TestDashboardProtection: the cards say what the ramp admits and show the
// adaptive limit.
func TestDashboardProtection(t *testing.T) {
	needChromium(t)
	f := protectionFixture(t)
	dom := dumpDOM(t, f.srv.URL+"/")
	for _, want := range []string{
		"recovering: admitting 55% of requests, all by 12:00:11",
		"adaptive&nbsp;limit&nbsp;4",
		"in flight (adaptive)",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("dashboard DOM lacks %q", want)
		}
	}
	if strings.Contains(dom, "adaptive&nbsp;limit&nbsp;4&nbsp;(measuring)") {
		t.Errorf("dashboard shows the adaptive limit measuring during its startup")
	}
}
