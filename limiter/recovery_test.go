package limiter

import (
	"testing"
	"time"
)

// rampSettings: a point that trips on one exception, keeps a 1s delay with
// no probes, and then ramps up over 1s from start percent.
func rampSettings(start Threshold) Settings {
	return settings(func(s *Settings) {
		s.ExceptionThreshold = At(1)
		s.DelayTime = time.Second
		s.RecoveryTime, s.RecoveryStart = time.Second, start
	})
}

// tripAt trips p by one failed call at now and checks that the delay began.
func tripAt(t *testing.T, p *Point, now time.Time) {
	t.Helper()
	pass(t, p, 1, now, Failed)
	if v, _ := enter(p, now); v.Allowed || !v.Events.Has(EventDelayStarted) {
		t.Fatalf("after a failure: got %+v, want a trip that starts the delay", v)
	}
}

func TestRecoveryRampShare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start Threshold
		// want is the admitted requests of 100 in each tenth of the ramp.
		want [10]int
	}{
		// 10% + 90% * elapsed: the mean share over each tenth.
		{"default start", Threshold{}, [10]int{15, 24, 33, 42, 51, 60, 69, 78, 87, 96}},
		{"from 0", At(0), [10]int{5, 15, 25, 35, 45, 55, 65, 75, 85, 95}},
		{"from 50", At(50), [10]int{53, 58, 63, 68, 73, 78, 83, 88, 93, 98}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPoint(t, rampSettings(tc.start))
			tripAt(t, p, at(0))
			// The delay ends at 1s; 100 requests in each 100ms of the ramp.
			for tenth := range 10 {
				admitted := 0
				for i := range 100 {
					now := at(time.Second + time.Duration(tenth)*100*ms + time.Duration(i)*ms)
					v, c := enter(p, now)
					switch {
					case v.Allowed:
						admitted++
						c.Exit(now, OK)
					case v.Strategy != Recovery || v.Threshold != 100 || v.Events != 0:
						t.Fatalf("tenth %d request %d: got %+v, want degraded by recovery, no event", tenth, i, v)
					}
				}
				// Within one request of the share: the credit carries over.
				if d := admitted - tc.want[tenth]; d < -1 || d > 1 {
					t.Errorf("tenth %d: %d of 100 admitted, want %d±1", tenth, admitted, tc.want[tenth])
				}
			}
			// The ramp is over: everything passes.
			pass(t, p, 50, at(2*time.Second), OK)
		})
	}
}

func TestRecoveryFirstRequestPasses(t *testing.T) {
	p := mustPoint(t, rampSettings(At(0)))
	tripAt(t, p, at(0))
	v, c := enter(p, at(time.Second))
	if !v.Allowed || v.Strategy != 0 || !v.Events.Has(EventDelayEnded) {
		t.Fatalf("first request after the delay: got %+v, want allowed, ending the delay", v)
	}
	c.Exit(at(time.Second), OK)
	if v, _ := enter(p, at(time.Second)); v.Allowed || v.Strategy != Recovery || v.Count != 0 {
		t.Fatalf("second request at 0%%: got %+v, want degraded by recovery at 0%%", v)
	}
}

// A call that fails during the ramp trips the point at the next request,
// which starts the delay again; the ramp restarts after it.
func TestRecoveryFailureTripsAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(c *Call, now time.Time)
	}{
		{"exception", func(c *Call, now time.Time) { c.Exit(now, Failed) }},
		{"timeout in flight", func(c *Call, now time.Time) { c.Timeout(now.Add(200 * ms)) }},
		{"timeout at exit", func(c *Call, now time.Time) { c.Exit(now.Add(200*ms), OK) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPoint(t, settings(func(s *Settings) {
				s.ExceptionThreshold = At(1)
				s.TimeoutThreshold, s.TimeoutCountThreshold = 100*ms, At(5)
				s.DelayTime, s.RetryInterval = time.Second, 100*ms
				s.RecoveryTime = 5 * time.Second
			}))
			tripAt(t, p, at(0))
			// A good probe ends the delay at 150ms and starts the ramp.
			v, probe := enter(p, at(150*ms))
			if !v.Probe {
				t.Fatalf("probe: got %+v", v)
			}
			if ev := probe.Exit(at(150*ms), OK); !ev.Has(EventDelayEnded) {
				t.Fatalf("probe exit: events %v, want the delay ended", ev)
			}
			if st := p.Snapshot(at(150 * ms)).Status; !st.Recovering || st.RecoveryShare != 100_000 || st.State != Recovering {
				t.Fatalf("status after the probe: %+v, want recovering at 10%%, state recovering", st)
			}
			v, c := enter(p, at(160*ms))
			if !v.Allowed {
				t.Fatalf("first request of the ramp: got %+v, want allowed", v)
			}
			tc.fail(c, at(160*ms))
			if st := p.Snapshot(at(400 * ms)).Status; st.State != Open || st.Reason.Strategy != Recovery {
				t.Fatalf("status after the failure: %+v, want open by recovery", st)
			}
			v, _ = enter(p, at(400*ms))
			want(t, "after the failure", v, false, Recovery, 1, 1)
			if !v.Events.Has(EventTripped | EventDelayStarted) {
				t.Errorf("events %v, want tripped and delay started", v.Events)
			}
			if lt := p.Snapshot(at(400 * ms)).LastTrip; lt.Strategy != Recovery {
				t.Errorf("last trip %+v, want recovery", lt)
			}
			if v, _ := enter(p, at(450*ms)); v.Allowed || !v.Delay || v.Strategy != Recovery {
				t.Errorf("in the new delay: got %+v, want degraded with delay, recovery", v)
			}
			// The delay runs its time; a new ramp starts at 1.4s.
			if ev := p.Settle(at(1400 * ms)); !ev.Has(EventDelayEnded) {
				t.Errorf("Settle: %v, want the delay ended", ev)
			}
			if st := p.Snapshot(at(1400 * ms)).Status; !st.Recovering || !st.RecoveryUntil.Equal(at(6400*ms)) {
				t.Errorf("status: %+v, want recovering until 6.4s", st)
			}
		})
	}
}

// Critical requests are admitted first: while the ramp admits 10%, a
// stream of critical requests at 10% gets through whole, and the default
// requests beside them get nothing.
func TestRecoveryCriticalFirst(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) {
		s.ExceptionThreshold = At(1)
		s.DelayTime = time.Second
		s.RecoveryTime, s.RecoveryStart = time.Hour, At(10) // 10% throughout the test
	}))
	tripAt(t, p, at(0))
	var critical, other int
	for i := range 1000 {
		now := at(time.Second + time.Duration(i)*ms)
		pr := PriorityDefault
		if i%10 == 5 {
			pr = PriorityCritical
		}
		var c Call
		v := p.Enter(&c, now, Request{Priority: pr})
		if !v.Allowed {
			if pr == PriorityCritical {
				t.Fatalf("request %d: critical degraded: %+v", i, v)
			}
			continue
		}
		c.Exit(now, OK)
		if pr == PriorityCritical {
			critical++
		} else {
			other++
		}
	}
	if critical != 100 || other > 2 {
		t.Errorf("admitted %d critical, %d others; want 100 and at most 2", critical, other)
	}
}

func TestRecoveryOff(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.ExceptionThreshold, s.DelayTime = At(1), time.Second }))
	tripAt(t, p, at(0))
	pass(t, p, 100, at(time.Second), OK)
	if st := p.Snapshot(at(time.Second)).Status; st.Recovering {
		t.Errorf("status %+v, want no ramp", st)
	}
}

// A reload that turns the ramp off ends it; its requests are judged plainly.
func TestRecoveryReconfigured(t *testing.T) {
	p := mustPoint(t, rampSettings(At(0)))
	tripAt(t, p, at(0))
	pass(t, p, 1, at(time.Second), OK)
	s := rampSettings(At(0))
	s.RecoveryTime = 0
	np, err := p.Reconfigure(s)
	if err != nil {
		t.Fatal(err)
	}
	pass(t, np, 20, at(time.Second+ms), OK)
}

func TestRampShare(t *testing.T) {
	for _, tc := range []struct {
		start, at, want int64
	}{
		{10, 0, 100_000},
		{10, 500, 550_000},
		{10, 999, 999_100},
		{10, 1000, 1_000_000},
		{0, 250, 250_000},
		{100, 0, 1_000_000},
	} {
		if got := rampShare(tc.start, 0, 1000, tc.at); got != tc.want {
			t.Errorf("rampShare(%d%%, at %d of 1000) = %d, want %d", tc.start, tc.at, got, tc.want)
		}
	}
	// A ramp of a century does not overflow.
	long := int64(100 * 365 * 24 * time.Hour)
	if got := rampShare(0, 0, long, long/2); got != 500_000 {
		t.Errorf("half a century-long ramp = %d, want 500000", got)
	}
}
