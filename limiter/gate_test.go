package limiter

import (
	"testing"
	"time"
)

// gate is a Gate holding tokens tokens; it counts Takes.
type gate struct{ tokens, takes int }

func (g *gate) Take(now time.Time) bool {
	g.takes++
	g.tokens--
	return g.tokens >= 0
}

// TestGate: Enter puts a request its strategies admit to the Request's
// gate. An empty gate degrades it as ClusterTokenBucket and ends its call
// as refused (visit degraded, token and slot given back); a request the
// strategies degrade never reaches the gate; a shadow point forwards the
// refused request as would-be degraded.
func TestGate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shadow    bool
		visits    int64 // VisitThreshold
		tokens    int   // in the gate
		allowed   bool
		strategy  Strategy
		takes     int   // Takes the gate saw
		inFlight  int64 // after Enter
		degraded  int64 // in the window
		shadowHit bool
	}{
		{name: "token", tokens: 1, visits: 10, allowed: true, takes: 1, inFlight: 1},
		{name: "empty", tokens: 0, visits: 10, strategy: ClusterTokenBucket, takes: 1, degraded: 1},
		{name: "degraded first", tokens: 1, visits: 0, strategy: Visit, takes: 0, degraded: 1},
		{name: "shadow empty", shadow: true, tokens: 0, visits: 10, allowed: true, strategy: ClusterTokenBucket, takes: 1, inFlight: 1, shadowHit: true},
		{name: "shadow degraded", shadow: true, tokens: 1, visits: 0, allowed: true, strategy: Visit, takes: 0, inFlight: 1, degraded: 1, shadowHit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPoint("p", settings(func(s *Settings) {
				s.VisitThreshold = At(tc.visits)
				s.ConcurrentThreshold = At(5)
				s.Shadow = tc.shadow
			}))
			if err != nil {
				t.Fatal(err)
			}
			g := &gate{tokens: tc.tokens}
			var c Call
			v := p.Enter(&c, at(0), Request{Gate: g})
			if v.Allowed != tc.allowed || v.Strategy != tc.strategy || v.Shadow != tc.shadowHit {
				t.Errorf("verdict: got allowed=%v strategy=%v shadow=%v, want %v %v %v", v.Allowed, v.Strategy, v.Shadow, tc.allowed, tc.strategy, tc.shadowHit)
			}
			if g.takes != tc.takes {
				t.Errorf("gate Takes: got %d, want %d", g.takes, tc.takes)
			}
			if got := p.InFlight(); got != tc.inFlight {
				t.Errorf("in flight: got %d, want %d", got, tc.inFlight)
			}
			if got := p.Snapshot(at(0)).Counts; got.Visits != 1 || got.Degraded != tc.degraded {
				t.Errorf("window: got %d visits, %d degraded, want 1 and %d", got.Visits, got.Degraded, tc.degraded)
			}
			c.Exit(at(0), OK) // nothing for a refused call; frees the slot otherwise
			c.Exit(at(0), OK) // a second Exit does nothing
			if got := p.InFlight(); got != 0 {
				t.Errorf("in flight after Exit: got %d, want 0", got)
			}
		})
	}
}
