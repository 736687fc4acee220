package limiter

import (
	"runtime"
	"testing"
	"time"
)

// TestAllocs: the hot path does not allocate, whatever is on.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	for name, s := range map[string]Settings{"window": windowSettings(0), "all": allSettings(0), "one shard": allSettings(1)} {
		p := mustPoint(t, s)
		var c Call
		now := t0
		got := testing.AllocsPerRun(10000, func() {
			now = now.Add(time.Microsecond)
			p.Enter(&c, now, Request{})
			c.Timeout(now)
			c.Exit(now, Failed)
		})
		if got != 0 {
			t.Errorf("%s: %v allocs per Enter+Timeout+Exit, want 0", name, got)
		}
	}
	// The adaptive limit, a sheddable request, and a point in its recovery
	// ramp.
	s := allSettings(0)
	s.AdaptiveConcurrency = AdaptiveConcurrency{On: true, MinLimit: 2, Interval: time.Millisecond}
	s.ExceptionThreshold, s.DelayTime, s.RecoveryTime = At(1), time.Millisecond, time.Hour
	p := mustPoint(t, s)
	var c Call
	now := t0
	p.Enter(&c, now, Request{})
	c.Exit(now, Failed) // trips at the next request; the ramp starts 1ms later
	got := testing.AllocsPerRun(10000, func() {
		now = now.Add(time.Microsecond)
		p.Enter(&c, now, Request{Priority: PrioritySheddable})
		c.Timeout(now)
		c.Exit(now, OK)
	})
	if got != 0 {
		t.Errorf("adaptive, sheddable, ramp: %v allocs per Enter+Timeout+Exit, want 0", got)
	}
	if st := p.Snapshot(now).Status; !st.Recovering {
		t.Errorf("status %+v: the point was not in its ramp", st)
	}
}

// pointBytes measures the heap held per point, with the default window
// and shards and every strategy on, over n points, each passed to use (if
// not nil) once made.
func pointBytes(n int, use func(*Point)) float64 {
	s := allSettings(0)
	points := make([]*Point, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range points {
		points[i], _ = NewPoint("orders.read", s)
		if use != nil {
			use(points[i])
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(points)
	return float64(after.HeapAlloc-before.HeapAlloc-uint64(n)*8) / float64(n)
}

// TestMemoryPerPoint: a point with the default window holds at most 1 KiB
// while it is idle, read or not (its window's counters are not allocated
// yet), and at most 4 KiB once it has seen a request.
func TestMemoryPerPoint(t *testing.T) {
	const n = 10000
	for _, tc := range []struct {
		name string
		use  func(*Point)
		max  float64
	}{
		{"idle", nil, 1024},
		{"idle, read", func(p *Point) {
			p.Snapshot(t0)
			p.State(t0)
		}, 1024},
		{"busy", func(p *Point) {
			var c Call
			p.Enter(&c, t0, Request{})
			c.Exit(t0, Failed)
		}, 4096},
	} {
		b := pointBytes(n, tc.use)
		t.Logf("%s: %.0f bytes per point (%d shards of %d buckets)", tc.name, b, DefaultShards, DefaultBuckets)
		if b > tc.max {
			t.Errorf("%s: got %.0f bytes per point, want <= %.0f", tc.name, b, tc.max)
		}
	}
}
