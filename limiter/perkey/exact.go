package perkey

import "math/bits"

// exact is a shard's keys tracked exactly: entries[:used], each with its
// ring of visit counts in rings, found through index, an open-addressing
// hash table with linear probing over the key's low bits.
//
//	index    []int32   0: empty; else an entry's position + 1
//	entries  []entry   key, ring head, visits in the ring, GCRA time, calls in flight
//	rings    []uint32  entry j's visits in bucket b at rings[j*B + b%B]
//
// Everything is allocated by newExact, for the shard's capacity; an entry
// is reused, never freed.
type exact struct {
	index   []int32
	entries []entry
	rings   []uint32
	b       int // buckets per ring
	used    int // entries[:used] hold keys
	hand    int // where the next search for a droppable entry starts
}

// entry is one key tracked exactly.
type entry struct {
	key      uint64
	head     int64 // the ring's newest bucket
	visits   int64 // sum of the ring: admitted visits in the window
	tat      int64 // token bucket: theoretical arrival time, Unix ns (GCRA)
	inflight int32 // calls in flight counted here
	// borrowed: when the key left the sketch, the sketch held calls in
	// flight for it; they are counted (and exit) there, and are added to
	// inflight when judging until the sketch shows none.
	borrowed bool
}

// dropScan is how many entries adopt looks at, at most, for one it may
// drop: a bound on a miss's cost when every key holds state.
const dropScan = 8

func newExact(keys, buckets int) exact {
	size := 1 << bits.Len(uint(2*keys-1)) // a power of two, at least 2*keys: load at most 1/2
	return exact{
		index:   make([]int32, size),
		entries: make([]entry, keys),
		rings:   make([]uint32, keys*buckets),
		b:       buckets,
	}
}

// find returns key's entry, or -1.
func (x *exact) find(key uint64) int32 {
	m := uint64(len(x.index) - 1)
	for i := key & m; ; i = (i + 1) & m {
		p := x.index[i]
		if p == 0 {
			return -1
		}
		if x.entries[p-1].key == key {
			return p - 1
		}
	}
}

func (x *exact) ring(j int32) []uint32 {
	return x.rings[int(j)*x.b : (int(j)+1)*x.b]
}

// advance rotates entry j's ring so that bucket cur is the newest,
// dropping the buckets that leave the window.
func (x *exact) advance(j, cur int64) {
	e := &x.entries[j]
	if cur <= e.head {
		return
	}
	ring, n := x.ring(int32(j)), int64(x.b)
	if cur-e.head >= n {
		clear(ring)
		e.visits = 0
	} else {
		for i := e.head + 1; i <= cur; i++ {
			e.visits -= int64(ring[i%n])
			ring[i%n] = 0
		}
	}
	e.head = cur
}

// visitsAt returns entry j's visits in the window whose newest bucket is
// cur, without changing the entry: what advance would leave in it. Reading
// a key's count (Heaviest) must not move its ring, or a key read at least
// once a window would never look droppable.
func (x *exact) visitsAt(j, cur int64) int64 {
	e := &x.entries[j]
	if cur <= e.head {
		return e.visits
	}
	n := int64(x.b)
	if cur-e.head >= n {
		return 0
	}
	ring, visits := x.ring(int32(j)), e.visits
	for i := e.head + 1; i <= cur; i++ {
		visits -= int64(ring[i%n])
	}
	return visits
}

// droppable reports whether entry j holds no state that matters at bucket
// cur and instant n: no visit in the window, a full bucket, no call in
// flight. Dropping such a key loses nothing: were it back, it would start
// from zero, which is its true count.
func (x *exact) droppable(t *Table, j int, cur, n int64) bool {
	e := &x.entries[j]
	return cur-e.head >= t.buckets && e.tat <= n && e.inflight == 0
}

// adopt gives key an exact entry, taking a free one or dropping a key that
// holds no state (looking at dropScan entries at most), and returns it; or
// -1 when every entry looked at holds state: the key stays in the sketch.
// A new entry starts from the sketch's estimate for the key, never from
// zero.
func (s *shard) adopt(t *Table, key uint64, cur, n int64) int32 {
	var j int
	switch {
	case s.used < len(s.entries):
		j = s.used
		s.used++
	default:
		j = -1
		for range min(dropScan, len(s.entries)) {
			h := s.hand
			s.hand = (s.hand + 1) % len(s.entries)
			if s.droppable(t, h, cur, n) {
				j = h
				break
			}
		}
		if j < 0 {
			return -1
		}
		s.remove(s.entries[j].key)
	}
	e := &s.entries[j]
	*e = entry{key: key, head: cur}
	clear(s.ring(int32(j)))
	e.visits, e.tat, e.borrowed = s.sk.estimate(t, key, cur, s.ring(int32(j)))
	s.insert(key, int32(j))
	return int32(j)
}

// insert puts entry j, holding key, into the index.
func (x *exact) insert(key uint64, j int32) {
	m := uint64(len(x.index) - 1)
	i := key & m
	for x.index[i] != 0 {
		i = (i + 1) & m
	}
	x.index[i] = j + 1
}

// remove takes key out of the index, shifting back the entries that
// probed past it (linear probing's deletion, no tombstones).
func (x *exact) remove(key uint64) {
	m := uint64(len(x.index) - 1)
	i := key & m
	for x.entries[x.index[i]-1].key != key {
		i = (i + 1) & m
	}
	for j := (i + 1) & m; x.index[j] != 0; j = (j + 1) & m {
		home := x.entries[x.index[j]-1].key & m
		// The entry at j may fill the hole at i when i lies on its probe
		// path, from home to j.
		if (j-home)&m >= (j-i)&m {
			x.index[i] = x.index[j]
			i = j
		}
	}
	x.index[i] = 0
}

// enterExact judges and counts a request of entry j's key.
func (t *Table) enterExact(s *shard, j int32, cur, n int64) Verdict {
	s.advance(int64(j), cur)
	e := &s.entries[j]
	if t.visit >= 0 && e.visits+1 > t.visit {
		return degraded(Visit, e.visits+1, t.visit)
	}
	tat := max(e.tat, n)
	if t.interval > 0 && tat-n > t.tolerance {
		return degraded(TokenBucket, t.tokensUsed(e.tat, n), t.capacity)
	}
	if t.concurrent >= 0 {
		fl := int64(e.inflight)
		if e.borrowed {
			b := s.sk.flight(e.key)
			e.borrowed = b > 0
			fl += b
		}
		if fl+1 > t.concurrent {
			return degraded(Concurrent, fl+1, t.concurrent)
		}
		e.inflight++
	}
	s.ring(j)[cur%t.buckets]++
	e.visits++
	if t.interval > 0 {
		e.tat = tat + t.interval
	}
	return Verdict{Allowed: true}
}
