package limiter

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tally is what one goroutine did to a point.
type tally struct{ Counts }

// hammer runs workers goroutines of n requests each on the point cur
// returns, all at instants within one bucket, and returns the sum of what
// they did: every request visits; a verdict that is not allowed, or is
// shadow, is degraded; a forwarded call fails a third of the time and runs
// past the timeout threshold a quarter of the time, counted by Timeout half
// of those times and by Exit the other half.
func hammer(t *testing.T, workers, n int, cur func() *Point) Counts {
	t.Helper()
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 3))
			d := &tallies[w]
			var c Call
			for range n {
				p := cur()
				begin := t0.Add(time.Duration(r.IntN(100)) * time.Millisecond)
				pt := r.IntN(10) == 0
				v := p.Enter(&c, begin, Request{PressureTest: pt})
				d.Visits++
				if !v.Allowed || v.Shadow {
					d.Degraded++
				}
				if !v.Allowed {
					c.Exit(begin, OK) // a no-op
					continue
				}
				end := begin.Add(time.Millisecond)
				if r.IntN(4) == 0 {
					end = begin.Add(p.TimeoutThreshold())
					if r.IntN(2) == 0 && !c.Timeout(end) {
						t.Errorf("Timeout at the threshold = false")
					}
					d.Timeouts++
				}
				o := OK
				if r.IntN(3) == 0 {
					o = Failed
					d.Exceptions++
				}
				c.Exit(end, o)
				c.Exit(end, o) // a no-op
			}
		})
	}
	wg.Wait()
	var sum Counts
	for _, d := range tallies {
		sum.add(d.Counts)
	}
	return sum
}

// TestConcurrentCounts runs many goroutines on one point under -race and
// requires the window to hold exactly what they did: no lost or double
// counts, every slot freed.
func TestConcurrentCounts(t *testing.T) {
	var base Settings
	base.TimeoutThreshold = 20 * time.Millisecond
	for _, tc := range []struct {
		name string
		f    func(*Settings)
	}{
		{"off", func(*Settings) {}},
		{"window strategies", func(s *Settings) {
			s.VisitThreshold, s.TimeoutCountThreshold, s.ExceptionThreshold = At(1<<40), At(1<<40), At(1<<40)
			s.ExceptionRateThreshold = At(100)
		}},
		{"visit trips", func(s *Settings) { s.VisitThreshold = At(2000) }},
		{"all, one shard", func(s *Settings) {
			s.Shards, s.VisitThreshold, s.ConcurrentThreshold = 1, At(3000), At(4)
			s.TokensPerSecond, s.TokenBucketSize = At(1000), At(5000)
			s.ExceptionRateThreshold = At(40)
		}},
		{"shadow", func(s *Settings) {
			s.Shadow, s.PressureTestDowngrade, s.VisitThreshold, s.ConcurrentThreshold = true, true, At(1000), At(3)
		}},
		{"downgrade rate", func(s *Settings) { s.VisitThreshold, s.DowngradeRate = At(500), At(50) }},
		{"adaptive", func(s *Settings) {
			s.AdaptiveConcurrency = AdaptiveConcurrency{On: true, MinLimit: 4, Interval: time.Millisecond}
			s.VisitThreshold = At(3000)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.f(&s)
			p := mustPoint(t, s)
			want := hammer(t, 8, 2000, func() *Point { return p })
			sn := p.Snapshot(t0.Add(time.Second - 1))
			if sn.Counts != want {
				t.Errorf("counts = %+v, want %+v", sn.Counts, want)
			}
			if sn.InFlight != 0 {
				t.Errorf("in flight = %d, want 0", sn.InFlight)
			}
			var series Counts
			for _, b := range sn.Series {
				series.add(b)
			}
			if series != want {
				t.Errorf("series sums to %+v, want %+v", series, want)
			}
		})
	}
}

// TestConcurrentReconfigure swaps a point's settings (same shape: the
// concurrent strategy on and off, thresholds up and down) while goroutines
// use whichever point is current, as the proxy does on a reload.
func TestConcurrentReconfigure(t *testing.T) {
	var s Settings
	s.TimeoutThreshold = 20 * time.Millisecond
	first := mustPoint(t, s)
	var cur atomic.Pointer[Point]
	cur.Store(first)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r := rand.New(rand.NewPCG(9, 9))
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			n := s
			n.VisitThreshold = []Threshold{{}, At(100), At(5000)}[r.IntN(3)]
			n.ConcurrentThreshold = []Threshold{{}, At(3), At(1 << 40)}[r.IntN(3)]
			n.ExceptionThreshold = []Threshold{{}, At(1 << 40)}[r.IntN(2)]
			n.Shadow = r.IntN(4) == 0
			np, err := cur.Load().Reconfigure(n)
			if err != nil {
				t.Error(err)
				return
			}
			cur.Store(np)
			if i%8 == 0 {
				np.Snapshot(t0)
				np.State(t0)
			}
		}
	})
	want := hammer(t, 8, 2000, cur.Load)
	close(done)
	wg.Wait()
	p := cur.Load()
	sn := p.Snapshot(t0.Add(time.Second - 1))
	if sn.Counts != want || sn.InFlight != 0 {
		t.Errorf("counts = %+v in flight %d, want %+v and 0", sn.Counts, sn.InFlight, want)
	}
	if first.InFlight() != 0 {
		t.Errorf("in flight on the first point = %d, want 0", first.InFlight())
	}
	// A shape change starts afresh; calls entered before it still exit.
	var c Call
	p.Enter(&c, t0, Request{})
	s.Buckets = 5
	np, err := p.Reconfigure(s)
	if err != nil {
		t.Fatal(err)
	}
	c.Exit(t0, Failed)
	if got := np.Snapshot(t0); got.Counts != (Counts{}) || got.InFlight != 0 || p.InFlight() != 0 {
		t.Errorf("after a shape change: counts %+v in flight %d/%d", got.Counts, got.InFlight, p.InFlight())
	}
}

// TestConcurrentDelay races probes, trips and the delay's end. Counts are
// cleared by the delay, so only invariants are checked: nothing panics or
// races, every slot is freed, and the point ends closed once the delay is
// over.
func TestConcurrentDelay(t *testing.T) {
	var s Settings
	s.VisitThreshold, s.ExceptionThreshold = At(50), At(20)
	s.DelayTime, s.RetryInterval, s.TimeoutThreshold = 300*time.Millisecond, 10*time.Millisecond, 20*time.Millisecond
	p := mustPoint(t, s)
	var wg sync.WaitGroup
	var probes atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 4))
			var c Call
			for i := range 3000 {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				v := p.Enter(&c, now, Request{})
				if v.Probe {
					probes.Add(1)
				}
				c.Exit(now.Add(time.Millisecond), []Outcome{OK, Failed, Canceled}[r.IntN(3)])
			}
		})
	}
	wg.Wait()
	if p.InFlight() != 0 {
		t.Errorf("in flight = %d, want 0", p.InFlight())
	}
	if probes.Load() == 0 {
		t.Errorf("no probes: the test did not reach the delay")
	}
	t.Logf("%d probes", probes.Load())
}

// TestConcurrentRamp races the recovery ramp, its re-trips, the adaptive
// limit's intervals and requests of every priority. Only invariants are
// checked: nothing races, every slot is freed, and the ramp was reached.
func TestConcurrentRamp(t *testing.T) {
	var s Settings
	s.VisitThreshold, s.ExceptionThreshold, s.SheddableShare = At(50), At(3), At(50)
	s.DelayTime, s.RetryInterval, s.RecoveryTime = 100*time.Millisecond, 10*time.Millisecond, 500*time.Millisecond
	s.AdaptiveConcurrency = AdaptiveConcurrency{On: true, MinLimit: 2, Interval: time.Millisecond}
	p := mustPoint(t, s)
	var wg sync.WaitGroup
	var gated atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 5))
			var c Call
			for i := range 3000 {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				v := p.Enter(&c, now, Request{Priority: Priority(r.IntN(4))})
				if v.Strategy == Recovery && !v.Allowed {
					gated.Add(1)
				}
				if i%50 == 0 {
					p.Snapshot(now)
				}
				o := OK
				if r.IntN(40) == 0 {
					o = Failed
				}
				c.Exit(now.Add(time.Duration(r.IntN(3))*time.Millisecond), o)
			}
		})
	}
	wg.Wait()
	if p.InFlight() != 0 {
		t.Errorf("in flight = %d, want 0", p.InFlight())
	}
	if gated.Load() == 0 {
		t.Errorf("no request degraded by the ramp: the test did not reach it")
	}
	t.Logf("%d requests degraded by the ramp", gated.Load())
}
