package limiter

import (
	"container/heap"
	"slices"
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

// measure runs the minimum-latency measurement of p from at(0): batches of
// MinLimit calls of latency d until MinLatencySamples have ended, then one
// interval more. It returns the instant after.
func measure(t *testing.T, p *Point, d time.Duration) time.Time {
	t.Helper()
	a := p.Settings().AdaptiveConcurrency
	now := at(0)
	_, first := enter(p, now) // starts the first interval
	first.Exit(now, Canceled) // and is no sample
	for ended := 0; ended < MinLatencySamples; {
		for _, c := range fill(t, p, int(a.MinLimit), now) {
			c.Exit(now.Add(d), OK)
			ended++
		}
		now = now.Add(d)
	}
	now = now.Add(a.Interval)
	tick(p, now)
	return now
}

// tick enters and cancels one call at now: the adaptive limit's interval
// ends if now is past it, and the call is no sample.
func tick(p *Point, now time.Time) {
	_, c := enter(p, now)
	c.Exit(now, Canceled)
}

func TestAdaptiveMeasuresFirst(t *testing.T) {
	p := mustPoint(t, adaptiveSettings(AdaptiveConcurrency{MinLimit: 2, MaxLimit: 100, Interval: 100 * ms}))
	calls := fill(t, p, 2, at(0))
	v, _ := enter(p, at(0))
	want(t, "third call while measuring", v, false, Adaptive, 3, 2)
	if v.Events.Has(EventTripped) != true {
		t.Errorf("events %v: the adaptive limit trips like the concurrent strategy", v.Events)
	}
	for _, c := range calls {
		c.Exit(at(10*ms), OK)
	}
	if sn := p.Snapshot(at(10 * ms)); !sn.Adaptive.Measuring || sn.Adaptive.Limit != 2 {
		t.Errorf("adaptive status %+v, want measuring at 2", sn.Adaptive)
	}
	p = mustPoint(t, adaptiveSettings(AdaptiveConcurrency{MinLimit: 2, MaxLimit: 100, Interval: 100 * ms}))
	now := measure(t, p, 10*ms)
	if sn := p.Snapshot(now); sn.Adaptive.Measuring || sn.Adaptive.MinLatency != 10*ms {
		t.Errorf("after %d calls: %+v, want measured at 10ms", MinLatencySamples, sn.Adaptive)
	}
}

// After the measurement the limit grows each interval in which the
// latency stays at the minimum and the calls in flight reach half of it,
// and stops at MaxLimit; a latency above the minimum shrinks it.
func TestAdaptiveGrowsAndShrinks(t *testing.T) {
	a := AdaptiveConcurrency{MinLimit: 3, MaxLimit: 50, Interval: 100 * ms}
	p := mustPoint(t, adaptiveSettings(a))
	now := measure(t, p, 10*ms)
	sn := p.Snapshot(now)
	if sn.Adaptive.Measuring || sn.Adaptive.MinLatency != 10*ms || sn.Adaptive.Limit != 3 {
		t.Fatalf("after the measurement: %+v, want min latency 10ms, limit 3", sn.Adaptive)
	}
	// Each interval: the limit's worth of calls at the minimum latency,
	// then as many in flight when the interval ends. The gradient is the
	// tolerance, 1.25; the limit moves half-way to limit*1.25 +
	// sqrt(limit*1.25), in thousandths: 3 -> 4.343 -> 6.050 -> 8.180 ...
	for _, wantLimit := range []int64{4, 6, 8, 10, 13, 17, 22, 27, 34, 41, 50, 50} {
		limit := p.Snapshot(now).Adaptive.Limit
		for _, c := range fill(t, p, int(limit), now) {
			c.Exit(now.Add(10*ms), OK)
		}
		busy := fill(t, p, int(limit), now.Add(10*ms))
		if v, _ := enter(p, now.Add(10*ms)); v.Allowed || v.Strategy != Adaptive || v.Threshold != limit {
			t.Fatalf("call %d of a limit of %d: got %+v", limit+1, limit, v)
		}
		now = now.Add(a.Interval)
		tick(p, now)
		if got := p.Snapshot(now).Adaptive.Limit; got != wantLimit {
			t.Fatalf("limit %d, want %d", got, wantLimit)
		}
		for _, c := range busy {
			c.Exit(now, Canceled)
		}
	}
	// Latency at 4x the minimum: the gradient is 1.25/4, held at 0.5: 50
	// moves half-way to 25+5, to 40.
	for _, wantLimit := range []int64{40, 32, 26} {
		for _, c := range fill(t, p, 2, now) {
			c.Exit(now.Add(40*ms), OK)
		}
		now = now.Add(a.Interval)
		tick(p, now)
		if got := p.Snapshot(now).Adaptive.Limit; got != wantLimit {
			t.Fatalf("limit %d, want %d", got, wantLimit)
		}
	}
}

// A limit that the load does not reach does not grow: a quiet point keeps
// its limit until traffic shows it is too low.
func TestAdaptiveAppLimited(t *testing.T) {
	a := AdaptiveConcurrency{MinLimit: 10, MaxLimit: 1000, Interval: 100 * ms}
	p := mustPoint(t, adaptiveSettings(a))
	now := measure(t, p, 10*ms)
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
		t.Errorf("limit %d after 20 intervals with 1 call in flight, want 10", got)
	}
}

// Calls entered before a measurement do not count in it, nor failed or
// canceled ones.
func TestAdaptiveSamples(t *testing.T) {
	a := AdaptiveConcurrency{MinLimit: 1, MaxLimit: 10, Interval: 100 * ms}
	p := mustPoint(t, adaptiveSettings(a))
	_, first := enter(p, at(0))
	first.Exit(at(0), Canceled)
	var calls []*Call
	for i := range MinLatencySamples {
		now := at(time.Duration(i) * ms)
		c := fill(t, p, 1, now)[0]
		switch i % 3 {
		case 0:
			c.Exit(now.Add(ms), Failed)
		case 1:
			c.Exit(now.Add(ms), Canceled)
		default:
			c.Exit(now.Add(ms), OK)
		}
		calls = append(calls, c)
	}
	enter(p, at(200*ms))
	if sn := p.Snapshot(at(200 * ms)); !sn.Adaptive.Measuring {
		t.Errorf("%+v: failed and canceled calls counted as samples", sn.Adaptive)
	}
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

// upstream is a simulated service of capacity servers that each take
// service per call, in arrival order: a call waits for the first server to
// free up. Latency grows with the calls in flight past capacity.
type upstream struct {
	capacity int
	service  time.Duration
	free     []time.Time // when each busy server frees up
}

func (u *upstream) call(now time.Time) time.Time {
	slices.SortFunc(u.free, func(a, b time.Time) int { return a.Compare(b) })
	start := now
	if len(u.free) >= u.capacity {
		start = later(now, u.free[len(u.free)-u.capacity])
	}
	end := start.Add(u.service)
	u.free = append(u.free, end)
	// Forget servers freed before now that are not needed to order calls.
	for len(u.free) > 0 && !u.free[0].After(now) && len(u.free) > u.capacity {
		u.free = u.free[1:]
	}
	return end
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

type exit struct {
	at time.Time
	c  *Call
}

type exits []exit

func (e exits) Len() int           { return len(e) }
func (e exits) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e exits) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *exits) Push(x any)        { *e = append(*e, x.(exit)) }
func (e *exits) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// TestAdaptiveSimulated drives a point with the default adaptive settings
// at twice a simulated upstream's capacity, on instants: the limit settles
// between the capacity and twice it, goodput stays within 10% of the
// upstream's, the latency of forwarded calls within twice the service
// time; when the capacity halves, the limit follows within 2 seconds.
func TestAdaptiveSimulated(t *testing.T) {
	const service = 50 * time.Millisecond
	u := &upstream{capacity: 20, service: service}
	p := mustPoint(t, adaptiveSettings(AdaptiveConcurrency{}))
	var pending exits
	now := at(0)
	const rate = 800 // requests per second: 2x 20/50ms
	step := time.Second / rate
	type phase struct {
		name       string
		from, to   time.Duration
		capacity   int
		limits     []int64
		latencies  []time.Duration
		forwarded  int
		afterStart time.Duration // figures from this long into the phase
	}
	phases := []*phase{
		{name: "capacity 20", from: 0, to: 20 * time.Second, capacity: 20, afterStart: 5 * time.Second},
		{name: "capacity 10", from: 20 * time.Second, to: 30 * time.Second, capacity: 10, afterStart: 2 * time.Second},
	}
	for _, ph := range phases {
		u.capacity = ph.capacity
		for at0 := ph.from; at0 < ph.to; at0 += step {
			now = at(at0)
			for len(pending) > 0 && !pending[0].at.After(now) {
				e := heap.Pop(&pending).(exit)
				e.c.Exit(e.at, OK)
			}
			counted := at0 >= ph.from+ph.afterStart
			v, c := enter(p, now)
			if counted && at0%(100*ms) == 0 {
				ph.limits = append(ph.limits, p.Snapshot(now).Adaptive.Limit)
			}
			if !v.Allowed {
				continue
			}
			end := u.call(now)
			heap.Push(&pending, exit{end, c})
			if counted {
				ph.forwarded++
				ph.latencies = append(ph.latencies, end.Sub(now))
			}
		}
	}
	for _, ph := range phases {
		slices.Sort(ph.limits)
		slices.Sort(ph.latencies)
		seconds := (ph.to - ph.from - ph.afterStart).Seconds()
		goodput := float64(ph.forwarded) / seconds
		best := float64(ph.capacity) / service.Seconds()
		median := ph.limits[len(ph.limits)/2]
		p99 := ph.latencies[len(ph.latencies)*99/100]
		t.Logf("%s: limit min %d median %d max %d; goodput %.0f/s of %.0f/s; p99 %v", ph.name,
			ph.limits[0], median, ph.limits[len(ph.limits)-1], goodput, best, p99)
		if median < int64(ph.capacity) || median > 2*int64(ph.capacity) {
			t.Errorf("%s: median limit %d, want from %d to %d", ph.name, median, ph.capacity, 2*ph.capacity)
		}
		if goodput < 0.9*best {
			t.Errorf("%s: goodput %.0f/s, want at least 90%% of %.0f/s", ph.name, goodput, best)
		}
		if p99 > 2*service {
			t.Errorf("%s: p99 latency %v, want at most %v", ph.name, p99, 2*service)
		}
	}
}
