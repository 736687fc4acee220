package limiter

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// windowSettings turns on the strategies that read the window (visit,
// timeout, exception, exception_rate), with thresholds a benchmark never
// reaches. shards 0 means DefaultShards.
func windowSettings(shards int) Settings {
	var s Settings
	s.Shards = shards
	s.VisitThreshold = At(1 << 60)
	s.TimeoutThreshold, s.TimeoutCountThreshold = time.Hour, At(1<<60)
	s.ExceptionThreshold = At(1 << 60)
	s.ExceptionRateThreshold, s.ExceptionRateStart = At(100), 1<<60
	return s
}

// allSettings adds the token bucket and the concurrency limit.
func allSettings(shards int) Settings {
	s := windowSettings(shards)
	s.ConcurrentThreshold = At(1 << 60)
	// The goroutines' clocks drift apart (see benchClock): a bucket that
	// never empties keeps the benchmark from degrading.
	s.TokensPerSecond, s.TokenBucketSize = At(1_000_000_000), At(1<<60)
	return s
}

// benchClock spreads instants over time so buckets rotate as in real use:
// each op advances the goroutine's own clock by 1µs (a shared clock would
// be a contended cache line of its own and measure itself).
type benchClock struct{ ns int64 }

func (c *benchClock) now() time.Time {
	c.ns += 1000
	return time.Unix(0, t0.UnixNano()+c.ns)
}

// benchAdaptiveSettings adds the adaptive limit, never reached, worked out
// every millisecond.
func benchAdaptiveSettings(shards int) Settings {
	s := allSettings(shards)
	s.AdaptiveConcurrency = AdaptiveConcurrency{On: true, MinLimit: MaxAdaptiveLimit, MaxLimit: MaxAdaptiveLimit, Interval: time.Millisecond}
	return s
}

var benchModes = []struct {
	name string
	s    func(int) Settings
}{{"window", windowSettings}, {"all", allSettings}, {"adaptive", benchAdaptiveSettings}}

// BenchmarkEnterExit is Enter+Exit on one hot point, on one goroutine and
// on every P (b.RunParallel), for 1 shard and the default.
// On 2 cores the parallel figure is ns per op of both cores together:
// parallel throughput / single throughput = single ns/op / parallel ns/op.
func BenchmarkEnterExit(b *testing.B) {
	for _, mode := range benchModes {
		for _, shards := range []int{1, DefaultShards} {
			b.Run(fmt.Sprintf("%s/shards=%d", mode.name, shards), func(b *testing.B) {
				p := mustPoint(b, mode.s(shards))
				b.ReportAllocs()
				var c Call
				var clock benchClock
				for b.Loop() {
					now := clock.now()
					if v := p.Enter(&c, now, Request{}); !v.Allowed {
						b.Fatalf("degraded: %+v", v)
					}
					c.Exit(now, OK)
				}
			})
			b.Run(fmt.Sprintf("%s/shards=%d/parallel", mode.name, shards), func(b *testing.B) {
				benchParallel(b, mustPoint(b, mode.s(shards)))
			})
		}
	}
}

func benchParallel(b *testing.B, p *Point) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var c Call
		var clock benchClock
		for pb.Next() {
			now := clock.now()
			if v := p.Enter(&c, now, Request{}); !v.Allowed {
				b.Fatalf("degraded: %+v", v)
			}
			c.Exit(now, OK)
		}
	})
}

// BenchmarkShards is the parallel window benchmark for several shard
// counts: the figures behind DefaultShards.
func BenchmarkShards(b *testing.B) {
	for _, shards := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			benchParallel(b, mustPoint(b, windowSettings(shards)))
		})
	}
}

// BenchmarkEnterExitSpread is Enter+Exit over 10,000 points with every
// strategy on, each op on the next point: the points' lines are mostly out
// of cache, as in a proxy with many routes.
func BenchmarkEnterExitSpread(b *testing.B) {
	const n = 10000
	points := make([]*Point, n)
	for i := range points {
		points[i] = mustPoint(b, allSettings(0))
	}
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		var c Call
		var clock benchClock
		i := 0
		for b.Loop() {
			now := clock.now()
			p := points[i]
			if i++; i == n {
				i = 0
			}
			if v := p.Enter(&c, now, Request{}); !v.Allowed {
				b.Fatalf("degraded: %+v", v)
			}
			c.Exit(now, OK)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var c Call
			var clock benchClock
			i := int(start.Add(n/2) % n) // the goroutines start apart
			for pb.Next() {
				now := clock.now()
				p := points[i]
				if i++; i == n {
					i = 0
				}
				if v := p.Enter(&c, now, Request{}); !v.Allowed {
					b.Fatalf("degraded: %+v", v)
				}
				c.Exit(now, OK)
			}
		})
	})
}
