package limiter

import (
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

// A window splits a point's counts in two by how often they are written:
//
//	hot   visits, degraded      written by every Enter   N shards, one per P (roughly: per core)
//	rare  exceptions, timeouts  written on failures      one ring, one lock
//
//	           read by every Enter: one read-mostly line
//	      +----------------------------------------------+
//	      | c   bound    exceptions    timeouts  rareHead|
//	      +-|--^-------------------------------^---------+
//	        |  | a shard's growth, every       | on a failure, and
//	        |  | publishEvery passes, and      | when the ring rotates
//	        |  | when the shard rotates        |
//	        v  counters, behind c: allocated by the first write
//	   +-------+-----+-------------+--       +-+-------------+
//	   | shard 0     | shard 1     |  ...    | rare ring     |
//	   | mu, head,   | mu, head,   |         | mu, head,     |
//	   | visits,     | visits,     |         | exceptions,   |
//	   | degraded,   | degraded,   |         | timeouts per  |
//	   | ring[B]     | ring[B]     |         | bucket        |
//	   +-------------+-------------+--       +---------------+
//	   | slot 0      | slot 1      |  ...    calls in flight (concurrent strategy off)
//	   +-------------+-------------+--
//	    written by     written by
//	    P0             P1
//
// Each Enter writes one shard, the one its P (roughly: its core) is
// affine to, so in the steady state a core writes lines no other core
// reads. The judge reads only the read-mostly line:
//
//   - exceptions and timeouts: exact totals of the rare ring (once rotated
//     to the current bucket; a zero total needs no rotation).
//
//   - bound: an upper bound on the window's visits-degraded. Each shard
//     adds its own visits-degraded to bound ("publishes") whenever it has
//     grown by publishEvery since the shard last published, and when the
//     shard rotates. So each shard's true figure is below its published
//     one plus publishEvery, and
//
//     visits-degraded <= bound + Shards*(publishEvery-1)
//
//     Counts leaving the window only lower the true figure, so a stale
//     bound stays an upper bound. The visit strategy passes a request at
//     once when that bound proves it passes; near the threshold (and for
//     thresholds below the slack) it sums the shards exactly. The verdict
//     is therefore always the exact one; only its cost varies.
//
// The exception_rate strategy needs visits only when there are exceptions
// (or its threshold is 0), and then sums the shards exactly too.
//
// An idle point's window is the read-mostly line alone: its counters
// (shards, slots and rare ring, about 2,300 bytes with the defaults) are
// allocated by the first write, a request or a failure, so that the many
// points of a large config that see no traffic cost 64 bytes of window
// each (TestMemoryPerPoint). Until then every read reports zeros, which is
// what the counters would hold, and allocates nothing: a scrape of every
// point leaves the idle ones idle. Once allocated, the counters stay,
// through reset and a Reconfigure that keeps the window.
type window struct {
	width   int64 // bucket width in nanoseconds
	slack   int64 // Shards * (publishEvery-1): the most bound can lag behind
	shards  int32 // Settings.Shards
	buckets int32 // Settings.Buckets
	// c is nil until the first write, then set once (by compare-and-swap).
	c atomic.Pointer[counters]

	// The read-mostly line (with the fields above, read-only but for c's
	// one store).
	bound    atomic.Int64 // sum of the shards' published visits-degraded
	rareHead atomic.Int64 // c.rare.head, for a lock-free check
	excTotal atomic.Int64 // exceptions in the rare ring
	toTotal  atomic.Int64 // timeouts in the rare ring
}

// counters are a window's shards, slots and rare ring: what the first
// write allocates. The slice headers are read-only.
type counters struct {
	shards []shard
	slots  []slot
	rare   rareRing
}

// publishEvery is how much a shard's visits-degraded may grow before it
// adds the growth to window.bound. Larger: fewer writes to the shared line;
// smaller: the exact sum is needed only closer to the visit threshold. At
// 32 with 4 shards, a visit threshold of 1000 is judged from the bound
// until the window holds 876 passed requests.
const publishEvery = 32

// shard is one stripe of the hot counts, on its own pair of cache lines
// (the adjacent-line prefetcher pairs them), guarded by mu.
type shard struct {
	mu        sync.Mutex
	head      int64         // index of the newest bucket in ring
	visits    int64         // sum of ring's visits: the shard's share of the window
	degraded  int64         // sum of ring's degraded
	published int64         // visits-degraded as last added to window.bound
	slot      *atomic.Int64 // this shard's in-flight count: &counters.slots[i].n
	ring      []hotBucket   // ring[i % len(ring)] holds bucket i, for head-len < i <= head
	_         [128 - 72]byte
}

// slot is a shard's count of calls in flight that took their slot there
// (while the concurrent strategy is off; see pointState). It has lines of
// its own: the concurrent strategy sums the slots, and must not read the
// shards' hot lines to do so.
type slot struct {
	n atomic.Int64
	_ [120]byte
}

type hotBucket struct{ visits, degraded int64 }

// rareRing holds the exceptions and timeouts per bucket. Its totals live
// on window's read-mostly line.
type rareRing struct {
	mu   sync.Mutex
	head int64 // index of the newest bucket in ring; also in window.rareHead
	ring []rareBucket
}

type rareBucket struct{ exceptions, timeouts int64 }

func newWindow(s Settings) *window {
	return &window{
		width:   int64(s.Window) / int64(s.Buckets),
		slack:   int64(s.Shards) * (publishEvery - 1),
		shards:  int32(s.Shards),
		buckets: int32(s.Buckets),
	}
}

// counters returns the window's counters, allocating them on the first
// call. Writers call it; readers load w.c and read zeros when it is nil.
func (w *window) counters() *counters {
	if c := w.c.Load(); c != nil {
		return c
	}
	return w.allocate()
}

// allocate sets w.c, unless a concurrent first write set it first, and
// returns it.
func (w *window) allocate() *counters {
	n, buckets := int(w.shards), int(w.buckets)
	c := &counters{shards: make([]shard, n), slots: make([]slot, n)}
	// One allocation for every shard's ring, each ring starting on its own
	// 128-byte boundary (relative to the allocation) so that two shards'
	// current buckets never share a cache line.
	stride := (buckets*16 + 127) / 128 * 128 / 16
	rings := make([]hotBucket, n*stride)
	for i := range c.shards {
		c.shards[i].ring = rings[i*stride : i*stride+buckets : i*stride+buckets]
		c.shards[i].slot = &c.slots[i].n
	}
	c.rare.ring = make([]rareBucket, buckets)
	if w.c.CompareAndSwap(nil, c) {
		return c
	}
	return w.c.Load()
}

// bucket returns the index of the bucket now falls in.
func (w *window) bucket(now time.Time) int64 { return now.UnixNano() / w.width }

// hint is a token kept in hints; the shard a caller writes is its hint
// modulo the shard count. sync.Pool keeps a cache per P, so a goroutine
// mostly gets back the hint its P had: each core keeps writing the same
// shard, and the shard's lines stay in that core's cache. Hints are
// numbered in creation order, so the first Ps get distinct shards. The
// pool is shared by every point (a pool per point would cost a cache line
// per P per point).
type hint struct{ n uint32 }

var (
	hintCount atomic.Uint32
	hints     = sync.Pool{New: func() any { return &hint{n: hintCount.Add(1) - 1} }}
)

// lock returns a shard for the calling goroutine's P to write, locked.
// When its lock is taken (another core is writing the same shard, as two
// Ps whose hints are equal modulo the shard count would), the hint moves on
// to the next shard, so that such Ps drift apart.
func (c *counters) lock() *shard {
	if len(c.shards) == 1 {
		s := &c.shards[0]
		s.mu.Lock()
		return s
	}
	h := hints.Get().(*hint)
	n := uint32(len(c.shards))
	s := &c.shards[h.n%n]
	if !s.mu.TryLock() {
		h.n++
		s = &c.shards[h.n%n]
		s.mu.Lock()
	}
	hints.Put(h)
	return s
}

// advance rotates the shard's ring so that bucket cur is the newest,
// dropping the buckets that leave the window, and publishes the lower
// figure. The caller holds s.mu.
func (s *shard) advance(w *window, cur int64) {
	if cur <= s.head {
		return
	}
	n := int64(len(s.ring))
	if cur-s.head >= n {
		clear(s.ring)
		s.visits, s.degraded = 0, 0
	} else {
		for i := s.head + 1; i <= cur; i++ {
			b := &s.ring[i%n]
			s.visits -= b.visits
			s.degraded -= b.degraded
			*b = hotBucket{}
		}
	}
	s.head = cur
	if d := s.visits - s.degraded - s.published; d != 0 {
		w.bound.Add(d)
		s.published += d
	}
}

// record counts one visit, degraded or not, in bucket cur, in the shard
// lock picks, and returns that shard. A bucket older than the ring (an
// instant that has already left the window) is dropped, as its counts
// would be.
func (w *window) record(cur int64, degraded bool) *shard {
	s := w.counters().lock()
	w.add(s, cur, degraded)
	s.mu.Unlock()
	return s
}

// add counts one visit in shard s. The caller holds s.mu.
func (w *window) add(s *shard, cur int64, degraded bool) {
	if cur > s.head {
		s.advance(w, cur)
	}
	if n := int64(len(s.ring)); cur > s.head-n {
		b := &s.ring[cur%n]
		b.visits++
		s.visits++
		if degraded {
			b.degraded++
			s.degraded++
		} else if d := s.visits - s.degraded - s.published; d >= publishEvery {
			w.bound.Add(d)
			s.published += d
		}
	}
}

// degradeOne turns one visit counted in bucket cur into a degraded one. It
// may land in another shard than the visit did: only the sums over the
// shards are read, and the published bound of passed visits stays an upper
// bound. A bucket that has left the window is dropped, as its visit was.
func (w *window) degradeOne(cur int64) {
	s := w.counters().lock()
	if cur > s.head {
		s.advance(w, cur)
	}
	if n := int64(len(s.ring)); cur > s.head-n {
		s.ring[cur%n].degraded++
		s.degraded++
	}
	s.mu.Unlock()
}

// passBound reports whether the window's bound proves that one more
// passed request keeps visits-degraded, this request included, at or
// below threshold. When it does not, the caller sums the shards.
func (w *window) passBound(threshold int64) bool {
	return w.bound.Load()+w.slack < threshold
}

// hot returns the window's exact visits and degraded at cur, rotating
// shards that have not seen cur yet. It takes every shard's lock in turn.
func (w *window) hot(cur int64) (visits, degraded int64) {
	c := w.c.Load()
	if c == nil {
		return 0, 0
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.advance(w, cur)
		visits += s.visits
		degraded += s.degraded
		s.mu.Unlock()
	}
	return visits, degraded
}

// failures returns the window's exceptions and timeouts at cur. It does not
// lock unless the rare ring holds counts (so it has been allocated) and
// must be rotated to cur.
func (w *window) failures(cur int64) (exceptions, timeouts int64) {
	exceptions, timeouts = w.excTotal.Load(), w.toTotal.Load()
	if exceptions|timeouts != 0 && w.rareHead.Load() < cur {
		c := w.counters()
		r := &c.rare
		r.mu.Lock()
		w.advanceRare(c, cur)
		r.mu.Unlock()
		exceptions, timeouts = w.excTotal.Load(), w.toTotal.Load()
	}
	return exceptions, timeouts
}

// advanceRare rotates c's rare ring to cur. The caller holds c.rare.mu.
func (w *window) advanceRare(c *counters, cur int64) {
	r := &c.rare
	if cur <= r.head {
		return
	}
	n := int64(len(r.ring))
	var d rareBucket
	if cur-r.head >= n {
		for _, b := range r.ring {
			d.exceptions += b.exceptions
			d.timeouts += b.timeouts
		}
		clear(r.ring)
	} else {
		for i := r.head + 1; i <= cur; i++ {
			b := &r.ring[i%n]
			d.exceptions += b.exceptions
			d.timeouts += b.timeouts
			*b = rareBucket{}
		}
	}
	if d.exceptions != 0 {
		w.excTotal.Add(-d.exceptions)
	}
	if d.timeouts != 0 {
		w.toTotal.Add(-d.timeouts)
	}
	r.head = cur
	w.rareHead.Store(cur)
}

// recordFailure counts an exception and/or a timeout in bucket cur.
func (w *window) recordFailure(cur int64, exceptions, timeouts int64) {
	c := w.counters()
	r := &c.rare
	r.mu.Lock()
	w.advanceRare(c, cur)
	if n := int64(len(r.ring)); cur > r.head-n {
		b := &r.ring[cur%n]
		b.exceptions += exceptions
		b.timeouts += timeouts
		if exceptions != 0 {
			w.excTotal.Add(exceptions)
		}
		if timeouts != 0 {
			w.toTotal.Add(timeouts)
		}
	}
	r.mu.Unlock()
}

// sum returns the window's exact counts at cur.
func (w *window) sum(cur int64) Counts {
	var c Counts
	c.Visits, c.Degraded = w.hot(cur)
	c.Exceptions, c.Timeouts = w.failures(cur)
	return c
}

// inflight returns the calls that took their slot in a shard.
func (w *window) inflight() int64 {
	c := w.c.Load()
	if c == nil {
		return 0
	}
	var n int64
	for i := range c.slots {
		n += c.slots[i].n.Load()
	}
	return n
}

// series returns the counts of each bucket in the window at cur, oldest
// first. It allocates; it is for the admin port, not the hot path.
func (w *window) series(cur int64) []Counts {
	out := make([]Counts, w.buckets)
	c := w.c.Load()
	if c == nil {
		return out
	}
	n := int64(len(out))
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.advance(w, cur)
		for j := range out {
			b := s.ring[(cur-n+1+int64(j))%n]
			out[j].Visits += b.visits
			out[j].Degraded += b.degraded
		}
		s.mu.Unlock()
	}
	r := &c.rare
	r.mu.Lock()
	w.advanceRare(c, cur)
	for j := range out {
		b := r.ring[(cur-n+1+int64(j))%n]
		out[j].Exceptions, out[j].Timeouts = b.exceptions, b.timeouts
	}
	r.mu.Unlock()
	return out
}

// reset clears every count (not the calls in flight). Counters not yet
// allocated hold none.
func (w *window) reset() {
	c := w.c.Load()
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.ring)
		s.visits, s.degraded = 0, 0
		if s.published != 0 {
			w.bound.Add(-s.published)
			s.published = 0
		}
		s.mu.Unlock()
	}
	r := &c.rare
	r.mu.Lock()
	clear(r.ring)
	w.excTotal.Store(0)
	w.toTotal.Store(0)
	r.mu.Unlock()
}
