package limiter

import (
	"testing"
	"time"
)

// TestDelayRetryAfter: a request degraded inside the delay carries the
// time until the next probe may go or the delay ends, whichever is
// sooner; 0 while a probe whose turn has come is in flight. The tripping
// request, a probe and a request judged after the delay carry 0.
func TestDelayRetryAfter(t *testing.T) {
	// Each step enters one request at its instant. A probe stays in
	// flight until a step with exitProbe set exits it, at that step's
	// instant, before its request.
	type step struct {
		at        time.Duration
		exitProbe Outcome
		degraded  bool // inside the delay
		want      time.Duration
	}
	tests := []struct {
		name         string
		delay, retry time.Duration
		steps        []step
	}{
		{"probes every 2s", 30 * time.Second, 2 * time.Second, []step{
			{at: 0}, // the trip, which starts the delay
			{at: 1, degraded: true, want: 2*time.Second - 1}, // just after it
			{at: 500 * ms, degraded: true, want: 1500 * ms},
			{at: 2*time.Second - 1, degraded: true, want: 1},                                // the last instant before the probe
			{at: 2 * time.Second},                                                           // the probe
			{at: 2500 * ms, degraded: true},                                                 // in flight, its turn come: 0
			{at: 3 * time.Second, exitProbe: Failed, degraded: true, want: 2 * time.Second}, // the next probe at 5s
			{at: 4200 * ms, degraded: true, want: 800 * ms},
		}},
		{"no probes: the delay's end", 30 * time.Second, 0, []step{
			{at: 0},
			{at: 10 * time.Second, degraded: true, want: 20 * time.Second},
			{at: 30*time.Second - 1, degraded: true, want: 1},
			{at: 30 * time.Second}, // over: judged afresh on a cleared window
		}},
		{"the delay ends before the next probe", 5 * time.Second, 4 * time.Second, []step{
			{at: 0},
			{at: 3 * time.Second, degraded: true, want: time.Second},
			{at: 4 * time.Second},
			{at: 4500 * ms, exitProbe: Failed, degraded: true, want: 500 * ms}, // the next probe at 8.5s, the end at 5s
			{at: 4600 * ms, degraded: true, want: 400 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPoint(t, settings(func(s *Settings) {
				s.VisitThreshold, s.DelayTime, s.RetryInterval = At(0), tt.delay, tt.retry
			}))
			var probe *Call
			for _, st := range tt.steps {
				if st.exitProbe != 0 {
					probe.Exit(at(st.at), st.exitProbe)
				}
				v, c := enter(p, at(st.at))
				if degraded := v.Delay && !v.Allowed; degraded != st.degraded || v.RetryAfter != st.want {
					t.Errorf("at %v: got %+v, want RetryAfter %v (degraded inside the delay: %v)", st.at, v, st.want, st.degraded)
				}
				if v.Probe {
					probe = c
				}
			}
		})
	}
}
