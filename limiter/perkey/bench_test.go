package perkey

import (
	"sync/atomic"
	"testing"
	"time"
)

// benchSettings: every strategy on, with limits a benchmark never reaches.
var benchSettings = Settings{
	VisitThreshold:      limitAt(MaxVisitThreshold),
	TokensPerSecond:     limitAt(1_000_000_000),
	TokenBucketSize:     limitAt(1 << 40),
	ConcurrentThreshold: limitAt(MaxConcurrentThreshold),
}

// BenchmarkEnterExact: Enter and Exit of a key tracked exactly.
func BenchmarkEnterExact(b *testing.B) {
	tab := newTable(b, benchSettings)
	var c Call
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		tab.Enter(&c, now, 42)
		c.Exit()
	}
}

// BenchmarkEnterSketch: Enter and Exit of a key in the sketch (the exact
// table held by a key with a call in flight).
func BenchmarkEnterSketch(b *testing.B) {
	s := benchSettings
	s.MaxKeys = 1
	tab := newTable(b, s)
	var hold, c Call
	tab.Enter(&hold, t0, 1)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		tab.Enter(&c, now, 42)
		c.Exit()
	}
}

// BenchmarkEnterParallel: many goroutines, each with its own keys (10,000
// over all, as many as MaxKeys), so shards are what they contend on.
func BenchmarkEnterParallel(b *testing.B) {
	tab := newTable(b, benchSettings)
	b.ReportAllocs()
	var seed atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		var c Call
		k := mix(seed.Add(1), 0)
		now := t0
		for i := uint64(0); pb.Next(); i++ {
			now = now.Add(time.Microsecond)
			tab.Enter(&c, now, mix(k+i%2500, 1))
			c.Exit()
		}
	})
}
