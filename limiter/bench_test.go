package limiter

import (
	"fmt"
	"testing"
	"time"
)

// windowSettings turns on the strategies that read the window, with
// thresholds a benchmark never reaches.
func windowSettings(shards int) Settings {
	s := DefaultSettings()
	s.Shards = shards
	s.VisitThreshold = 1 << 60
	s.TimeoutThreshold, s.TimeoutCountThreshold = time.Hour, 1<<60
	s.ExceptionThreshold = 1 << 60
	s.ExceptionRateThreshold, s.ExceptionRateStart = 100, 1<<60
	return s
}

// allSettings adds the token bucket and the concurrency limit.
func allSettings(shards int) Settings {
	s := windowSettings(shards)
	s.ConcurrentThreshold = 1 << 60
	s.TokensPerSecond, s.TokenBucketSize = 1_000_000_000, 1_000_000_000
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

func BenchmarkEnterExit(b *testing.B) {
	for _, shards := range []int{1, DefaultShards} {
		for _, mode := range []struct {
			name string
			s    func(int) Settings
		}{{"window", windowSettings}, {"all", allSettings}} {
			b.Run(fmt.Sprintf("%s/shards=%d", mode.name, shards), func(b *testing.B) {
				p := mustPoint(b, mode.s(shards))
				b.ReportAllocs()
				var c Call
				var clock benchClock
				for b.Loop() {
					now := clock.now()
					if v := p.Enter(&c, now, false); !v.Allowed {
						b.Fatalf("degraded: %+v", v)
					}
					c.Exit(now, OK)
				}
			})
			b.Run(fmt.Sprintf("%s/shards=%d/parallel", mode.name, shards), func(b *testing.B) {
				p := mustPoint(b, mode.s(shards))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					var c Call
					var clock benchClock
					for pb.Next() {
						now := clock.now()
						if v := p.Enter(&c, now, false); !v.Allowed {
							b.Fatalf("degraded: %+v", v)
						}
						c.Exit(now, OK)
					}
				})
			})
		}
	}
}
