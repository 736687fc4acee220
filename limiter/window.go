package limiter

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Counts are the window's counters for one point.
type Counts struct {
	Visits     int64 // requests judged, degraded ones and probes included
	Degraded   int64 // requests degraded (or, in shadow mode, that would have been)
	Exceptions int64 // forwarded calls that ended in an exception
	Timeouts   int64 // forwarded calls that passed the timeout threshold
}

func (c *Counts) add(d Counts) {
	c.Visits += d.Visits
	c.Degraded += d.Degraded
	c.Exceptions += d.Exceptions
	c.Timeouts += d.Timeouts
}

// atomicCounts holds Counts that readers load without the shard lock.
type atomicCounts struct {
	visits, degraded, exceptions, timeouts atomic.Int64
}

func (a *atomicCounts) add(d Counts) {
	if d.Visits != 0 {
		a.visits.Add(d.Visits)
	}
	if d.Degraded != 0 {
		a.degraded.Add(d.Degraded)
	}
	if d.Exceptions != 0 {
		a.exceptions.Add(d.Exceptions)
	}
	if d.Timeouts != 0 {
		a.timeouts.Add(d.Timeouts)
	}
}

func (a *atomicCounts) load() Counts {
	return Counts{a.visits.Load(), a.degraded.Load(), a.exceptions.Load(), a.timeouts.Load()}
}

// shard is one stripe of a window: its running totals and newest bucket
// index on one cache line, its ring of buckets elsewhere. Writers hold mu;
// readers load head and total atomically and take mu only to rotate a shard
// that has not seen the current bucket yet.
type shard struct {
	mu    sync.Mutex
	head  atomic.Int64                // index of the newest bucket in ring
	total atomicCounts                // sum of the ring: the shard's share of the window
	ring  []Counts                    // ring[i % len(ring)] holds bucket i, for head-len < i <= head
	_     [128 - 8 - 8 - 32 - 24]byte // two cache lines: the adjacent-line prefetcher pairs lines
}

// advance rotates the ring so that bucket cur is the newest, dropping the
// buckets that leave the window. The caller holds s.mu.
func (s *shard) advance(cur int64) {
	head := s.head.Load()
	if cur <= head {
		return
	}
	n := int64(len(s.ring))
	if cur-head >= n {
		s.clear()
	} else {
		for i := head + 1; i <= cur; i++ {
			b := &s.ring[i%n]
			s.total.add(Counts{-b.Visits, -b.Degraded, -b.Exceptions, -b.Timeouts})
			*b = Counts{}
		}
	}
	s.head.Store(cur)
}

// clear zeroes the ring and the totals. The caller holds s.mu.
func (s *shard) clear() {
	clear(s.ring)
	s.total.visits.Store(0)
	s.total.degraded.Store(0)
	s.total.exceptions.Store(0)
	s.total.timeouts.Store(0)
}

// record adds d to bucket cur. A bucket older than the ring (an instant
// that has already left the window) is dropped, as its counts would be.
func (s *shard) record(cur int64, d Counts) {
	s.mu.Lock()
	s.advance(cur)
	n := int64(len(s.ring))
	if cur > s.head.Load()-n {
		s.ring[cur%n].add(d)
		s.total.add(d)
	}
	s.mu.Unlock()
}

// window is a sharded sliding window of Counts.
type window struct {
	width  int64 // bucket width in nanoseconds
	shards []shard
}

func newWindow(s Settings) *window {
	w := &window{width: int64(s.Window) / int64(s.Buckets), shards: make([]shard, s.Shards)}
	ring := make([]Counts, s.Shards*s.Buckets)
	for i := range w.shards {
		w.shards[i].ring = ring[i*s.Buckets : (i+1)*s.Buckets : (i+1)*s.Buckets]
	}
	return w
}

// bucket returns the index of the bucket now falls in.
func (w *window) bucket(now time.Time) int64 { return now.UnixNano() / w.width }

// record adds d to the window at now, in one shard chosen at random.
func (w *window) record(now time.Time, d Counts) {
	i := 0
	if len(w.shards) > 1 {
		i = int(rand.Uint32N(uint32(len(w.shards))))
	}
	w.shards[i].record(w.bucket(now), d)
}

// sum returns the window's counts at now.
func (w *window) sum(now time.Time) Counts {
	cur := w.bucket(now)
	var c Counts
	for i := range w.shards {
		s := &w.shards[i]
		if s.head.Load() < cur {
			s.mu.Lock()
			s.advance(cur)
			s.mu.Unlock()
		}
		c.add(s.total.load())
	}
	return c
}

// series returns the counts of each bucket in the window at now, oldest
// first. It allocates; it is for the admin port, not the hot path.
func (w *window) series(now time.Time) []Counts {
	cur := w.bucket(now)
	out := make([]Counts, len(w.shards[0].ring))
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		s.advance(cur)
		n := int64(len(s.ring))
		for j := range out {
			out[j].add(s.ring[(cur-n+1+int64(j))%n])
		}
		s.mu.Unlock()
	}
	return out
}

// reset clears every count.
func (w *window) reset() {
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		s.clear()
		s.mu.Unlock()
	}
}
