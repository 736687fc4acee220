package limiter

import (
	"testing"
	"time"
)

// t0 is the start of a window bucket: SDS's reference scenarios start
// "from the start of a window".
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func mustPoint(t testing.TB, s Settings) *Point {
	t.Helper()
	p, err := NewPoint("p", s)
	if err != nil {
		t.Fatalf("NewPoint: %v", err)
	}
	return p
}

// sequential makes n calls on p one after another from t0, as one SDS test
// client does: an allowed call takes callTime and exits with o, a degraded
// one returns after 1ms. It returns how many were degraded.
func sequential(p *Point, n int, callTime time.Duration, o Outcome) (degraded int) {
	now := t0
	for range n {
		var c Call
		if v := p.Enter(&c, now, Request{}); !v.Allowed {
			degraded++
			now = now.Add(time.Millisecond)
			continue
		}
		now = now.Add(callTime)
		c.Exit(now, o)
	}
	return degraded
}

// TestSDSReferenceScenarios replays the scenarios of the original SDS test
// suite at fixed instants.
func TestSDSReferenceScenarios(t *testing.T) {
	sequentialTests := []struct {
		name     string
		set      func(*Settings)
		calls    int
		callTime time.Duration
		outcome  Outcome
		want     int
	}{
		{"timeout 940ms x5, ten sequential calls of 950ms", func(s *Settings) {
			s.TimeoutThreshold, s.TimeoutCountThreshold = 940*time.Millisecond, At(5)
		}, 10, 950 * time.Millisecond, OK, 5},
		{"visit 5, ten calls", func(s *Settings) { s.VisitThreshold = At(5) }, 10, time.Millisecond, OK, 5},
		{"exception rate 50 from 5, ten failing calls", func(s *Settings) {
			s.ExceptionRateThreshold, s.ExceptionRateStart = At(50), 5
		}, 10, time.Millisecond, Failed, 5},
		// 100 calls in 100ms: 20 tokens at start and one more refilled by
		// 66.7ms, so 79 degraded (80 minus the refill).
		{"token bucket 15/s size 20, 100 calls in 100ms", func(s *Settings) {
			s.TokensPerSecond, s.TokenBucketSize = At(15), At(20)
		}, 100, time.Millisecond, OK, 79},
	}
	for _, tt := range sequentialTests {
		t.Run(tt.name, func(t *testing.T) {
			var s Settings
			tt.set(&s)
			if got := sequential(mustPoint(t, s), tt.calls, tt.callTime, tt.outcome); got != tt.want {
				t.Errorf("degraded = %d, want %d", got, tt.want)
			}
		})
	}
	t.Run("concurrent 2, five callers x ten calls of 950ms", func(t *testing.T) {
		var s Settings
		s.ConcurrentThreshold = At(2)
		p := mustPoint(t, s)
		degraded := 0
		now := t0
		for range 10 {
			var calls [5]Call
			for i := range calls {
				if v := p.Enter(&calls[i], now, Request{}); !v.Allowed {
					degraded++
				}
			}
			now = now.Add(950 * time.Millisecond)
			for i := range calls {
				calls[i].Exit(now, OK)
			}
		}
		if degraded != 30 {
			t.Errorf("degraded = %d, want 30", degraded)
		}
	})
}
