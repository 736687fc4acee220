package limiter

import (
	"slices"
	"testing"
	"time"
)

// TestStatusReadings checks every strategy's figure against its threshold,
// and that the first that trips names the open state.
func TestStatusReadings(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) {
		s.VisitThreshold = At(10)
		s.TokensPerSecond, s.TokenBucketSize = At(5), At(8)
		s.ConcurrentThreshold = At(3)
		s.TimeoutThreshold, s.TimeoutCountThreshold = 100*ms, At(4)
		s.ExceptionThreshold = At(5)
		s.ExceptionRateThreshold, s.ExceptionRateStart = At(50), 5
	}))
	pass(t, p, 3, at(0), Failed) // 3 visits, 3 exceptions; 3 tokens used
	_, held := enter(p, at(0))   // in flight
	pass(t, p, 1, at(0), OK)     // 5 visits, 5 tokens used
	held.Timeout(at(100 * ms))   // 1 timeout
	st := p.Snapshot(at(100 * ms)).Status
	want := []Reading{
		{Visit, 5, 10, false},
		{TokenBucket, 5, 8, false}, // 0.1s refilled half a token: none whole
		{Concurrent, 1, 3, false},
		{Timeout, 1, 4, false},
		{Exception, 3, 5, false},
		{ExceptionRate, 60, 50, true}, // 3*100/5; the next request: 6 visits > 5, 300 >= 50*6
	}
	if !slices.Equal(st.Readings, want) {
		t.Errorf("readings:\n got %+v\nwant %+v", st.Readings, want)
	}
	if st.State != Open || st.Reason != want[5] || st.InDelay {
		t.Errorf("state %v reason %+v, want open by exception_rate", st.State, st.Reason)
	}
	if got := p.State(at(100 * ms)); got != Open {
		t.Errorf("State() = %v, want open", got)
	}
	// The judge agrees: the next request trips the same strategy.
	if v, _ := enter(p, at(100*ms)); v.Allowed || v.Strategy != ExceptionRate {
		t.Errorf("next request: %+v, want degraded by exception_rate", v)
	}
}

// TestStatusDecays shows a trip with no traffic after it decaying as the
// window slides, and Settle reporting the recovery once.
func TestStatusDecays(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		p := mustPoint(t, settings(func(s *Settings) { s.ExceptionThreshold, s.Shadow = At(2), shadow }))
		pass(t, p, 2, at(0), Failed)
		v, c := enter(p, at(0))
		if v.Strategy != Exception || !v.Events.Has(EventTripped) || v.Allowed != shadow {
			t.Fatalf("shadow %v: trip %+v", shadow, v)
		}
		c.Exit(at(0), OK)
		tripped := Open
		if shadow {
			tripped = Shadow
		}
		for _, d := range []time.Duration{0, 900 * ms} {
			if got := p.State(at(d)); got != tripped {
				t.Errorf("shadow %v: state at +%v = %v, want %v", shadow, d, got, tripped)
			}
			if ev := p.Settle(at(d)); ev != 0 {
				t.Errorf("shadow %v: Settle at +%v = %v, want nothing while tripped", shadow, d, ev)
			}
		}
		// The window is 1s: at +1s the exceptions have left it.
		if got := p.State(at(time.Second)); got != Closed {
			t.Errorf("shadow %v: state a window later = %v, want closed", shadow, got)
		}
		if ev := p.Settle(at(time.Second)); ev != EventRecovered {
			t.Errorf("shadow %v: Settle a window later = %v, want recovered", shadow, ev)
		}
		if ev := p.Settle(at(time.Second)); ev != 0 {
			t.Errorf("shadow %v: second Settle = %v, want nothing", shadow, ev)
		}
		if v, _ := enter(p, at(time.Second)); v.Events != 0 || !v.Allowed {
			t.Errorf("shadow %v: request after the recovery: %+v, want allowed with no event", shadow, v)
		}
	}
}

// TestStatusDelay shows the delay with its end and next probe, and Settle
// ending it when its time has passed with no request.
func TestStatusDelay(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) {
		s.VisitThreshold, s.DelayTime, s.RetryInterval = At(1), 5*time.Second, 2*time.Second
	}))
	pass(t, p, 1, at(0), OK)
	if v, _ := enter(p, at(0)); !v.Events.Has(EventDelayStarted) {
		t.Fatalf("trip: %+v, want the delay started", v)
	}
	st := p.Snapshot(at(ms)).Status
	if st.State != Delay || !st.InDelay || st.DelayStrategy != Visit || st.DelayUntil != at(5*time.Second) ||
		st.NextProbe != at(2*time.Second) || st.Probing || st.Reason != (Reading{}) {
		t.Errorf("in the delay: %+v", st)
	}
	_, probe := enter(p, at(2*time.Second))
	if st := p.Snapshot(at(2 * time.Second)).Status; !st.Probing || st.State != Delay {
		t.Errorf("while probing: %+v, want delay, probing", st)
	}
	probe.Exit(at(2*time.Second), Failed)
	if st := p.Snapshot(at(2 * time.Second)).Status; st.Probing || st.NextProbe != at(4*time.Second) {
		t.Errorf("after a failed probe: %+v, want the next probe at +4s", st)
	}
	if ev := p.Settle(at(5*time.Second - 1)); ev != 0 {
		t.Errorf("Settle before the delay's end = %v", ev)
	}
	if got := p.State(at(5 * time.Second)); got != Closed {
		t.Errorf("state at the delay's end = %v, want closed", got)
	}
	if ev := p.Settle(at(5 * time.Second)); ev != EventDelayEnded {
		t.Errorf("Settle at the delay's end = %v, want delay ended", ev)
	}
	if sn := p.Snapshot(at(5 * time.Second)); sn.Counts != (Counts{}) || sn.Status.State != Closed {
		t.Errorf("after Settle: %+v, want a cleared window, closed", sn)
	}
	if v, _ := enter(p, at(5*time.Second)); !v.Allowed || v.Events != 0 {
		t.Errorf("first request after: %+v, want allowed with no event (Settle reported them)", v)
	}
}

func TestStateDoesNotAllocate(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) {
		s.VisitThreshold, s.ConcurrentThreshold, s.TokensPerSecond = At(5), At(4), At(10)
		s.ExceptionRateThreshold, s.ExceptionRateStart = At(10), 3
	}))
	pass(t, p, 2, at(0), Failed)
	if n := testing.AllocsPerRun(100, func() { p.State(at(ms)) }); n != 0 {
		t.Errorf("State allocates %v times, want 0", n)
	}
}
