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

// TestSDSReferenceScenarios replays the scenarios of the original SDS test
// suite at fixed instants.
func TestSDSReferenceScenarios(t *testing.T) {
	t.Run("timeout 940ms x5, ten sequential calls of 950ms", func(t *testing.T) {
		s := DefaultSettings()
		s.TimeoutThreshold, s.TimeoutCountThreshold = 940*time.Millisecond, 5
		p := mustPoint(t, s)
		now, degraded := t0, 0
		for range 10 {
			var c Call
			v := p.Enter(&c, now, false)
			if !v.Allowed {
				degraded++
				continue
			}
			now = now.Add(950 * time.Millisecond)
			c.Exit(now, OK)
		}
		if degraded != 5 {
			t.Errorf("degraded = %d, want 5", degraded)
		}
	})
	t.Run("visit 5, ten calls", func(t *testing.T) {
		s := DefaultSettings()
		s.VisitThreshold = 5
		p := mustPoint(t, s)
		degraded := 0
		for i := range 10 {
			var c Call
			now := t0.Add(time.Duration(i) * time.Millisecond)
			if v := p.Enter(&c, now, false); !v.Allowed {
				degraded++
				if v.Strategy != Visit {
					t.Errorf("strategy = %v, want visit", v.Strategy)
				}
			}
			c.Exit(now, OK)
		}
		if degraded != 5 {
			t.Errorf("degraded = %d, want 5", degraded)
		}
	})
	t.Run("exception rate 50 from 5, ten failing calls", func(t *testing.T) {
		s := DefaultSettings()
		s.ExceptionRateThreshold, s.ExceptionRateStart = 50, 5
		p := mustPoint(t, s)
		degraded := 0
		for i := range 10 {
			var c Call
			now := t0.Add(time.Duration(i) * time.Millisecond)
			if v := p.Enter(&c, now, false); !v.Allowed {
				degraded++
			}
			c.Exit(now, Failed)
		}
		if degraded != 5 {
			t.Errorf("degraded = %d, want 5", degraded)
		}
	})
	t.Run("concurrent 2, five callers x ten calls of 950ms", func(t *testing.T) {
		s := DefaultSettings()
		s.ConcurrentThreshold = 2
		p := mustPoint(t, s)
		degraded := 0
		now := t0
		for range 10 {
			var calls [5]Call
			for i := range calls {
				if v := p.Enter(&calls[i], now, false); !v.Allowed {
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
	t.Run("token bucket 15/s size 20, 100 calls in 100ms", func(t *testing.T) {
		s := DefaultSettings()
		s.TokensPerSecond, s.TokenBucketSize = 15, 20
		p := mustPoint(t, s)
		degraded := 0
		for i := range 100 {
			var c Call
			now := t0.Add(time.Duration(i) * time.Millisecond)
			if v := p.Enter(&c, now, false); !v.Allowed {
				degraded++
			}
			c.Exit(now, OK)
		}
		// 20 tokens at start, one more refilled by 66.7ms: 79 degraded.
		if degraded != 79 {
			t.Errorf("degraded = %d, want 79 (80 minus one refilled token)", degraded)
		}
	})
}
