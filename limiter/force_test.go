package limiter_test

import (
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// A point whose every strategy would trip still admits what Admit
// forwards, counting it as a passed visit with a slot and an outcome.
func TestAdmitCountsWithoutJudging(t *testing.T) {
	var s limiter.Settings
	s.VisitThreshold = limiter.At(0) // every judged request is degraded
	s.ConcurrentThreshold = limiter.At(1)
	s.ExceptionThreshold = limiter.At(1)
	s.TimeoutThreshold = 100 * time.Millisecond
	s.TimeoutCountThreshold = limiter.At(1)
	s.DelayTime = time.Minute
	p, err := limiter.NewPoint("p", s)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	calls := make([]limiter.Call, 3)
	for i := range calls {
		p.Admit(&calls[i], t0)
	}
	sn := p.Snapshot(t0)
	if got, want := sn.Counts, (limiter.Counts{Visits: 3}); got != want {
		t.Errorf("counts after 3 admits: got %+v, want %+v", got, want)
	}
	if sn.InFlight != 3 {
		t.Errorf("in flight: got %d, want 3", sn.InFlight)
	}
	if sn.Status.InDelay || sn.LastTrip.Strategy != 0 {
		t.Errorf("admits judged the point: in delay %v, last trip %v", sn.Status.InDelay, sn.LastTrip.Strategy)
	}
	calls[0].Exit(t0.Add(10*time.Millisecond), limiter.OK)
	calls[1].Exit(t0.Add(10*time.Millisecond), limiter.Failed)
	calls[2].Exit(t0.Add(200*time.Millisecond), limiter.OK)
	sn = p.Snapshot(t0.Add(200 * time.Millisecond))
	if got, want := sn.Counts, (limiter.Counts{Visits: 3, Exceptions: 1, Timeouts: 1}); got != want {
		t.Errorf("counts after the exits: got %+v, want %+v", got, want)
	}
	if sn.InFlight != 0 {
		t.Errorf("in flight after the exits: got %d, want 0", sn.InFlight)
	}
	// A judged request sees the admitted load.
	var c limiter.Call
	if v := p.Enter(&c, t0.Add(300*time.Millisecond), limiter.Request{}); v.Allowed {
		t.Errorf("a judged request after the admits was allowed: %+v", v)
	}
}

// Refuse counts a degraded visit and nothing else.
func TestRefuseCountsADegradedVisit(t *testing.T) {
	var s limiter.Settings
	s.VisitThreshold = limiter.At(2)
	s.DelayTime = time.Minute
	p, err := limiter.NewPoint("p", s)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for range 5 {
		p.Refuse(t0)
	}
	sn := p.Snapshot(t0)
	if got, want := sn.Counts, (limiter.Counts{Visits: 5, Degraded: 5}); got != want {
		t.Errorf("counts after 5 refusals: got %+v, want %+v", got, want)
	}
	if sn.InFlight != 0 || sn.Status.InDelay || sn.LastTrip.Strategy != 0 || sn.Status.State != limiter.Closed {
		t.Errorf("refusals changed more than the window: %+v", sn.Status)
	}
	// visits-degraded is unchanged: two judged requests still pass.
	for i := range 2 {
		var c limiter.Call
		if v := p.Enter(&c, t0, limiter.Request{}); !v.Allowed {
			t.Errorf("judged request %d after the refusals: degraded by %s", i+1, v.Strategy)
		}
	}
}

func BenchmarkAdmit(b *testing.B) {
	p, err := limiter.NewPoint("p", limiter.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var c limiter.Call
		for pb.Next() {
			p.Admit(&c, now)
			c.Exit(now, limiter.OK)
		}
	})
}
