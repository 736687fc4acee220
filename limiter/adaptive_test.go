package limiter

import (
	"testing"
	"time"
)

func adaptiveSettings(a AdaptiveConcurrency) Settings {
	a.On = true
	return settings(func(s *Settings) { s.AdaptiveConcurrency = a })
}

// fill enters n requests at now that must be allowed, and returns their
// calls.
func fill(t *testing.T, p *Point, n int, now time.Time) []*Call {
	t.Helper()
	calls := make([]*Call, n)
	for i := range calls {
		v, c := enter(p, now)
		if !v.Allowed {
			t.Fatalf("request %d of %d at %v: got %+v, want allowed", i+1, n, now.Sub(t0), v)
		}
		calls[i] = c
	}
	return calls
}

// tick enters and cancels one call at now: the adaptive limit's round
// ends if now is past it, and the call is no sample.
func tick(p *Point, now time.Time) {
	_, c := enter(p, now)
	c.Exit(now, Canceled)
}

// round enters n calls at now that must be allowed and, if full, one more
// that the adaptive limit must refuse; the n end OK after d, and a tick
// at now+interval ends the round. The calls find 1 to n in flight: (n+1)/2
// on average. It returns the round's end.
func round(t *testing.T, p *Point, now time.Time, n int, d time.Duration, full bool) time.Time {
	t.Helper()
	calls := fill(t, p, n, now)
	if full {
		if v, _ := enter(p, now); v.Allowed || v.Strategy != Adaptive {
			t.Fatalf("call %d at %v: got %+v, want degraded by the adaptive limit", n+1, now.Sub(t0), v)
		}
	}
	for _, c := range calls {
		c.Exit(now.Add(d), OK)
	}
	end := now.Add(p.Settings().AdaptiveConcurrency.Interval)
	tick(p, end)
	return end
}

func wantAdaptive(t *testing.T, p *Point, now time.Time, want AdaptiveStatus) {
	t.Helper()
	if got := p.Snapshot(now).Adaptive; got != want {
		t.Fatalf("at %v: adaptive status %+v, want %+v", now.Sub(t0), got, want)
	}
}

// startup runs p's startup, MinLimit 2: three rounds at the minimum latency
// of 10ms that fill the limit double it to 16; a round that does not fill
// it keeps it; a round at 40ms ends the startup at the capacity found,
// plus the allowance, but no lower than half the limit. It returns the
// instant after.
func startup(t *testing.T, p *Point) time.Time {
	t.Helper()
	now := at(0)
	tick(p, now) // starts the first round
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 2})
	for _, limit := range []int64{4, 8, 16} {
		now = round(t, p, now, int(limit/2), 10*ms, true)
		wantAdaptive(t, p, now, AdaptiveStatus{Limit: limit, MinLatency: 10 * ms, Latency: 10 * ms})
	}
	now = round(t, p, now, 15, 10*ms, false)
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 16, MinLatency: 10 * ms, Latency: 10 * ms})
	// 16 calls found 8.5 in flight on average; at 4x the minimum latency
	// 2.125 of them were served and 6.375 queued, more than the allowance
	// of one call: the limit would be 3.125, and is half of 16.
	now = round(t, p, now, 16, 40*ms, true)
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 8, MinLatency: 10 * ms, Latency: 40 * ms})
	return now
}

// The limit starts at MinLimit and doubles each round whose latency shows
// no queue, from its first round on: there is no measurement first.
func TestAdaptiveStartup(t *testing.T) {
	p := mustPoint(t, adaptiveSettings(AdaptiveConcurrency{MinLimit: 2, MaxLimit: 100, Interval: 100 * ms}))
	v, _ := enter(p, at(0))
	fill(t, p, 1, at(0))
	v, _ = enter(p, at(0))
	want(t, "third call at the start", v, false, Adaptive, 3, 2)
	if !v.Events.Has(EventTripped) {
		t.Errorf("events %v: the adaptive limit trips like the concurrent strategy", v.Events)
	}
	startup(t, mustPoint(t, adaptiveSettings(AdaptiveConcurrency{MinLimit: 2, MaxLimit: 100, Interval: 100 * ms})))
}

// After the startup, a round with a queue above the allowance moves the
// limit half-way down to the calls served plus the allowance; a round that
// fills the limit without such a queue raises it to them; one that does
// not fill it keeps it.
func TestAdaptiveGrowsAndShrinks(t *testing.T) {
	p := mustPoint(t, adaptiveSettings(AdaptiveConcurrency{MinLimit: 2, MaxLimit: 100, Interval: 100 * ms}))
	now := startup(t, p) // 8
	// 3 in flight on average at 2x the minimum: 1.5 served, 1.5 queued,
	// above the allowance of 1: half-way from 8 down to 4 (2.5, held at
	// half the limit), 6.
	now = round(t, p, now, 5, 20*ms, false)
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 6, MinLatency: 10 * ms, Latency: 20 * ms})
	// 3.5 in flight at 1.3x: 2.691 served, 0.809 queued, within the
	// allowance: with the limit full, 2.691 + 1 is below 6, kept.
	now = round(t, p, now, 6, 13*ms, true)
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 6, MinLatency: 10 * ms, Latency: 13 * ms})
	// Calls that each find 6 in flight (the first 6, which do not, are
	// canceled), below the minimum latency, with the limit full: 6 served
	// + 1, 7.
	calls := fill(t, p, 6, now)
	for i := range 18 {
		at := now.Add(time.Duration(i+1) * ms)
		o := OK
		if i < 6 {
			o = Canceled
		}
		calls[i%6].Exit(at, o)
		calls[i%6] = fill(t, p, 1, at)[0]
	}
	if v, _ := enter(p, now.Add(19*ms)); v.Allowed {
		t.Fatalf("seventh call: %+v, want degraded", v)
	}
	now = now.Add(100 * ms)
	tick(p, now)
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 7, MinLatency: 10 * ms, Latency: 6 * ms})
	for _, c := range calls {
		c.Exit(now, Canceled)
	}
	// At MaxLimit it stops.
	p = mustPoint(t, adaptiveSettings(AdaptiveConcurrency{MinLimit: 2, MaxLimit: 6, Interval: 100 * ms}))
	now = at(0)
	tick(p, now)
	for _, r := range []struct{ n, want int64 }{{2, 4}, {4, 6}, {6, 6}} {
		now = round(t, p, now, int(r.n), 10*ms, true)
		if got := p.Snapshot(now).Adaptive.Limit; got != r.want {
			t.Fatalf("limit %d after a full round at %d, want %d", got, r.n, r.want)
		}
	}
}

// A limit that the load does not fill does not grow: a quiet point keeps
// its limit until traffic shows it is too low.
func TestAdaptiveAppLimited(t *testing.T) {
	a := AdaptiveConcurrency{MinLimit: 10, MaxLimit: 1000, Interval: 100 * ms}
	p := mustPoint(t, adaptiveSettings(a))
	now := at(0)
	tick(p, now)
	for range 20 {
		// One call at a time, at the minimum latency.
		v, c := enter(p, now)
		if !v.Allowed {
			t.Fatal(v)
		}
		now = now.Add(a.Interval)
		c.Exit(now.Add(-90*ms), OK)
	}
	if got := p.Snapshot(now).Adaptive.Limit; got != 10 {
		t.Errorf("limit %d after 20 rounds with 1 call in flight, want 10", got)
	}
}

// Failed and canceled calls are no samples.
func TestAdaptiveSamples(t *testing.T) {
	a := AdaptiveConcurrency{MinLimit: 1, MaxLimit: 10, Interval: 100 * ms}
	p := mustPoint(t, adaptiveSettings(a))
	tick(p, at(0))
	for i := range 20 {
		now := at(time.Duration(i) * ms)
		c := fill(t, p, 1, now)[0]
		if i%2 == 0 {
			c.Exit(now.Add(ms), Failed)
		} else {
			c.Exit(now.Add(ms), Canceled)
		}
	}
	tick(p, at(200*ms))
	wantAdaptive(t, p, at(200*ms), AdaptiveStatus{Limit: 1})
}

// Every MinLatencyInterval after the startup the minimum latency is
// measured again: the limit is held at 3/4 of itself until 25 calls
// entered since have ended, and their mean is the new minimum; calls
// entered before do not count.
func TestAdaptiveMeasuresAgain(t *testing.T) {
	p := mustPoint(t, adaptiveSettings(AdaptiveConcurrency{MinLimit: 2, MaxLimit: 100, Interval: 100 * ms, MinLatencyInterval: time.Second}))
	now := startup(t, p) // 8, from at(400ms) on
	old := fill(t, p, 5, now)
	now = now.Add(time.Second)
	tick(p, now)
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 6, Measuring: true, MinLatency: 10 * ms, Latency: 40 * ms})
	for _, c := range old {
		c.Exit(now, OK) // entered before: no sample
	}
	for range 8 {
		now = round(t, p, now, 3, 20*ms, false)
	}
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 6, Measuring: true, MinLatency: 10 * ms, Latency: 40 * ms})
	now = round(t, p, now, 3, 20*ms, false) // the 25th to 27th samples
	wantAdaptive(t, p, now, AdaptiveStatus{Limit: 8, MinLatency: 20 * ms, Latency: 40 * ms})
}

// Priority: a sheddable request may use only its share of the limit.
func TestAdaptiveSheddable(t *testing.T) {
	s := adaptiveSettings(AdaptiveConcurrency{MinLimit: 10, MaxLimit: 10})
	s.SheddableShare = At(50)
	p := mustPoint(t, s)
	fill(t, p, 5, at(0))
	var c Call
	v := p.Enter(&c, at(0), Request{Priority: PrioritySheddable})
	if v.Allowed || v.Strategy != Adaptive || !v.Sheddable || v.Count != 6 || v.Threshold != 5 || v.Events != 0 {
		t.Errorf("sheddable 6th call: got %+v, want degraded by its share 5 of the limit, no event", v)
	}
	fill(t, p, 5, at(0)) // default requests use the rest
}
