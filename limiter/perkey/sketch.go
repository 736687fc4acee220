package perkey

import "math/bits"

// rows is the sketch's depth: a key has one cell in each row, and its
// estimate is the least of its cells (count-min).
const rows = 4

// sketch holds the state of a shard's keys that are not tracked exactly,
// in rows×w cells. Each cell holds, for every key hashed to it, at least
// that key's own state:
//
//	visits   per cell: the ring head (bucket index, low 32 bits), then one
//	         count per bucket; the cell's count in bucket b is at least the
//	         admitted visits in b of every key hashed to it
//	tats     per cell: a GCRA time at least that of every key hashed to it
//	flights  per cell: the sum of the calls in flight of the keys hashed
//	         to it
//
// so that the least of a key's cells never under-counts it. Visits and
// token times are charged by conservative update (a cell is raised only to
// the key's new estimate, not by a full increment), which keeps the
// invariant and over-counts less; calls in flight are added and
// subtracted. A slice is nil when its strategy is off.
type sketch struct {
	w       int  // cells per row, a power of two
	shift   uint // a key's cell in row i is mix(key, i) >> shift
	b       int  // buckets
	visits  []uint32
	tats    []int64
	flights []int32
}

func newSketch(w, buckets int, visits, tokens, flights bool) sketch {
	sk := sketch{w: w, shift: uint(64 - bits.TrailingZeros(uint(w))), b: buckets}
	if visits {
		sk.visits = make([]uint32, rows*w*(buckets+1))
	}
	if tokens {
		sk.tats = make([]int64, rows*w)
	}
	if flights {
		sk.flights = make([]int32, rows*w)
	}
	return sk
}

// mix is a row's hash of key (splitmix64's finalizer on key plus a
// per-row constant): rows index independently of each other and of the
// bits that choose the shard and the exact index.
func mix(key uint64, row int) uint64 {
	x := key + uint64(row+1)*0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// cells returns key's cell in each row, as an index into tats or flights.
func (sk *sketch) cells(key uint64) (c [rows]int) {
	for i := range c {
		var k int
		if sk.shift < 64 {
			k = int(mix(key, i) >> sk.shift)
		}
		c[i] = i*sk.w + k
	}
	return c
}

// cell returns cell c's visit words, rotated so that bucket cur is the
// newest: [head, count of bucket b at 1 + b%B].
func (sk *sketch) cell(c int, cur int64) []uint32 {
	stride := sk.b + 1
	v := sk.visits[c*stride : (c+1)*stride]
	// Unsigned: a cell untouched for 2^32 buckets may look recent and keep
	// old counts, an over-count, never an under-count.
	d := uint32(cur) - v[0]
	if d == 0 {
		return v
	}
	if d >= uint32(sk.b) {
		clear(v[1:])
	} else {
		for i := cur - int64(d) + 1; i <= cur; i++ {
			v[1+i%int64(sk.b)] = 0
		}
	}
	v[0] = uint32(cur)
	return v
}

// visitEstimate returns key's admitted visits in the window at cur, at
// least the true figure: the sum over buckets of the least of its cells.
// When ring is not nil it receives the estimate per bucket.
func (sk *sketch) visitEstimate(c [rows]int, cur int64, ring []uint32) int64 {
	var v [rows][]uint32
	for i := range v {
		v[i] = sk.cell(c[i], cur)
	}
	var sum int64
	for b := 1; b <= sk.b; b++ {
		m := v[0][b]
		for i := 1; i < rows; i++ {
			m = min(m, v[i][b])
		}
		sum += int64(m)
		if ring != nil {
			ring[b-1] = m
		}
	}
	return sum
}

// tat returns key's GCRA time estimate: the least of its cells, at least
// the key's own.
func (sk *sketch) tat(c [rows]int) int64 {
	m := sk.tats[c[0]]
	for i := 1; i < rows; i++ {
		m = min(m, sk.tats[c[i]])
	}
	return m
}

// flight returns key's calls in flight estimate: the least of its cells.
func (sk *sketch) flight(key uint64) int64 {
	if sk.flights == nil {
		return 0
	}
	return sk.flightAt(sk.cells(key))
}

func (sk *sketch) flightAt(c [rows]int) int64 {
	m := sk.flights[c[0]]
	for i := 1; i < rows; i++ {
		m = min(m, sk.flights[c[i]])
	}
	return int64(m)
}

// exit subtracts one call in flight of key from its cells.
func (sk *sketch) exit(key uint64) {
	for _, c := range sk.cells(key) {
		sk.flights[c]--
	}
}

// estimate returns the state an exact entry of key starts from at bucket
// cur: its visits in the window, with their counts per bucket in ring; its
// GCRA time; whether the sketch holds calls in flight for it.
func (sk *sketch) estimate(t *Table, key uint64, cur int64, ring []uint32) (visits, tat int64, borrowed bool) {
	c := sk.cells(key)
	if sk.visits != nil {
		// ring[k] receives the bucket b with b%B == k, as the entry's ring
		// holds it.
		visits = sk.visitEstimate(c, cur, ring)
	}
	if sk.tats != nil {
		tat = sk.tat(c)
	}
	if sk.flights != nil {
		borrowed = sk.flightAt(c) > 0
	}
	return visits, tat, borrowed
}

// enterSketch judges and counts a request of a key not tracked exactly.
func (t *Table) enterSketch(s *shard, key uint64, cur, n int64) Verdict {
	sk := &s.sk
	c := sk.cells(key)
	if t.visit >= 0 {
		if est := sk.visitEstimate(c, cur, nil); est+1 > t.visit {
			return degraded(Visit, est+1, t.visit)
		}
	}
	var next int64
	if t.interval > 0 {
		tat := sk.tat(c)
		if max(tat, n)-n > t.tolerance {
			return degraded(TokenBucket, t.tokensUsed(tat, n), t.capacity)
		}
		next = max(tat, n) + t.interval
	}
	if t.concurrent >= 0 {
		if fl := sk.flightAt(c); fl+1 > t.concurrent {
			return degraded(Concurrent, fl+1, t.concurrent)
		}
	}
	if t.visit >= 0 {
		k := 1 + int(cur%t.buckets)
		stride := sk.b + 1
		m := sk.visits[c[0]*stride+k]
		for i := 1; i < rows; i++ {
			m = min(m, sk.visits[c[i]*stride+k])
		}
		for i := range rows {
			p := &sk.visits[c[i]*stride+k]
			*p = max(*p, m+1)
		}
	}
	for i := range rows {
		if t.interval > 0 {
			sk.tats[c[i]] = max(sk.tats[c[i]], next)
		}
		if t.concurrent >= 0 {
			sk.flights[c[i]]++
		}
	}
	return Verdict{Allowed: true}
}
