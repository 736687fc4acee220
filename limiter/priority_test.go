package limiter

import (
	"testing"
	"time"
)

func enterAs(p *Point, now time.Time, pr Priority) (Verdict, *Call) {
	c := new(Call)
	return p.Enter(c, now, Request{Priority: pr}), c
}

// A sheddable request passes a count strategy while its count is at most
// the share of the threshold; past it, it is degraded with Sheddable set
// and no trip, while other priorities still pass up to the threshold.
func TestSheddableShare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     func(*Settings)
		strat Strategy
		// share and full are the sheddable and the full threshold as
		// counted (for the token bucket: tokens).
		share, full int64
		hold        bool // keep the calls in flight (concurrency)
	}{
		{"visit", func(s *Settings) { s.VisitThreshold = At(10) }, Visit, 8, 10, false},
		{"visit 1000 at 75%", func(s *Settings) { s.VisitThreshold, s.SheddableShare = At(1000), At(75) }, Visit, 750, 1000, false},
		{"token bucket", func(s *Settings) { s.TokensPerSecond = At(10) }, TokenBucket, 8, 10, false},
		{"concurrent", func(s *Settings) { s.ConcurrentThreshold = At(10) }, Concurrent, 8, 10, true},
		{"concurrent at 0%", func(s *Settings) { s.ConcurrentThreshold, s.SheddableShare = At(10), At(0) }, Concurrent, 0, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPoint(t, settings(func(s *Settings) { tc.s(s); s.DelayTime = time.Second }))
			now := at(0)
			for i := range tc.share {
				v, c := enterAs(p, now, PrioritySheddable)
				if !v.Allowed {
					t.Fatalf("sheddable request %d of its share %d: got %+v", i+1, tc.share, v)
				}
				if !tc.hold {
					c.Exit(now, OK)
				}
			}
			v, _ := enterAs(p, now, PrioritySheddable)
			if v.Allowed || v.Strategy != tc.strat || !v.Sheddable || v.Events != 0 {
				t.Fatalf("sheddable request past its share: got %+v, want degraded by %v's share, no event", v, tc.strat)
			}
			if tc.strat != TokenBucket && (v.Count != tc.share+1 || v.Threshold != tc.share) {
				t.Errorf("figures %d/%d, want %d/%d", v.Count, v.Threshold, tc.share+1, tc.share)
			}
			if st := p.Snapshot(now).Status; st.State != Closed || st.InDelay {
				t.Errorf("state %v: a sheddable degradation is no trip", st.State)
			}
			// Default and critical requests use the rest.
			for i := tc.share; i < tc.full; i++ {
				pr := []Priority{PriorityDefault, PriorityCritical, 0}[i%3]
				v, c := enterAs(p, now, pr)
				if !v.Allowed {
					t.Fatalf("%v request %d of %d: got %+v", pr, i+1, tc.full, v)
				}
				if !tc.hold {
					c.Exit(now, OK)
				}
			}
			// Past the full threshold a sheddable request trips as any other.
			v, _ = enterAs(p, now, PrioritySheddable)
			if v.Allowed || v.Strategy != tc.strat || v.Sheddable || !v.Events.Has(EventTripped|EventDelayStarted) {
				t.Errorf("sheddable request past the threshold: got %+v, want a trip", v)
			}
		})
	}
}

// A DowngradeRate below 100 never degrades a critical request; at 100
// every tripped request is degraded.
func TestCriticalDowngradeRate(t *testing.T) {
	for _, tc := range []struct {
		rate    Threshold
		allowed bool
	}{{At(50), true}, {At(0), true}, {At(100), false}, {Threshold{}, false}} {
		p := mustPoint(t, settings(func(s *Settings) {
			s.VisitThreshold, s.DowngradeRate = At(1), tc.rate
			s.Percent = func() int { t.Fatal("the draw ran for a critical request"); return 0 }
		}))
		pass(t, p, 1, at(0), OK)
		for range 20 {
			v, _ := enterAs(p, at(0), PriorityCritical)
			if v.Allowed != tc.allowed || v.Strategy != Visit {
				t.Fatalf("rate %v: critical request past the threshold: got %+v, want allowed=%v", tc.rate, v, tc.allowed)
			}
		}
	}
}

func TestParsePriority(t *testing.T) {
	for _, pr := range []Priority{PriorityCritical, PriorityDefault, PrioritySheddable} {
		if got, ok := ParsePriority(pr.String()); !ok || got != pr {
			t.Errorf("ParsePriority(%q) = %v, %v", pr.String(), got, ok)
		}
	}
	if _, ok := ParsePriority("urgent"); ok {
		t.Error(`ParsePriority("urgent") is ok`)
	}
	if Priority(0).String() != "default" {
		t.Errorf("zero Priority is %q, want default", Priority(0).String())
	}
}
