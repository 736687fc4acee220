package perkey

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Table is the per-key state of one per-key rule of one point: up to
// MaxKeys keys tracked exactly, and a sketch for the others. Keys are
// 64-bit hashes of the raw keys, which never reach this package. A Table
// is safe for concurrent use; its settings never change.
type Table struct {
	s          Settings // with defaults applied
	width      int64    // bucket width in nanoseconds
	buckets    int64
	visit      int64 // VisitThreshold; -1: off
	concurrent int64 // ConcurrentThreshold; -1: off
	interval   int64 // nanoseconds per token; 0: token bucket off
	capacity   int64 // max(TokenBucketSize, TokensPerSecond)
	tolerance  int64 // (capacity-1) * interval
	shardShift uint  // a key's shard is key >> shardShift
	shards     []shard
}

// shard is the state of the keys whose top bits name it, under one lock,
// on cache lines of its own.
type shard struct {
	mu   sync.Mutex
	last int64 // the newest bucket seen: time never runs backwards here
	exact
	sk sketch
	_  [64]byte
}

// maxShards is the most shards a table has. BenchmarkEnterParallel
// measures the contention it removes.
const maxShards = 16

// New returns a table with the given settings (see Settings for the
// defaults of zero fields). It fails only on settings beyond the limits
// that Settings.Check reports. It allocates all the table's memory: the
// exact keys' state and the sketch (see the package doc for how much).
func New(s Settings) (*Table, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	t := &Table{s: s, width: int64(s.Window) / int64(s.Buckets), buckets: int64(s.Buckets), visit: -1, concurrent: -1}
	if n, on := s.VisitThreshold.Get(); on {
		t.visit = n
	}
	if n, on := s.ConcurrentThreshold.Get(); on {
		t.concurrent = n
	}
	if rate, on := s.TokensPerSecond.Get(); on {
		size, _ := s.TokenBucketSize.Get()
		t.interval = limiter.MaxTokensPerSecond / rate
		t.capacity = max(size, rate)
		t.tolerance = (t.capacity - 1) * t.interval
	}
	n := shardCount(s.MaxKeys)
	t.shardShift = uint(64 - bits.TrailingZeros(uint(n)))
	t.shards = make([]shard, n)
	w := sketchWidth(s.MaxKeys) / n
	for i := range t.shards {
		keys := s.MaxKeys / n
		if i < s.MaxKeys%n {
			keys++
		}
		t.shards[i].exact = newExact(keys, s.Buckets)
		t.shards[i].sk = newSketch(w, s.Buckets, t.visit >= 0, t.interval > 0, t.concurrent >= 0)
	}
	return t, nil
}

// shardCount is one shard per 256 exact keys, a power of two from 1 to
// maxShards: a small table keeps one sketch, wide enough to be useful.
func shardCount(maxKeys int) int {
	n := 1
	for n < maxShards && n*256 < maxKeys {
		n *= 2
	}
	return n
}

// sketchWidth is the sketch's cells per row, over all shards: about half
// MaxKeys, a power of two, at least 8 per shard.
func sketchWidth(maxKeys int) int {
	w := 1 << bits.Len(uint(maxKeys-1)/2)
	return max(w, 8*shardCount(maxKeys))
}

// Settings returns the table's settings, defaults applied.
func (t *Table) Settings() Settings { return t.s }

func (t *Table) shard(key uint64) *shard {
	if t.shardShift >= 64 {
		return &t.shards[0]
	}
	return &t.shards[key>>t.shardShift]
}

// Enter judges one request of key at now: the key's visit limit, then its
// token bucket, then its calls in flight. When every limit passes, the
// request is counted (a visit in now's bucket, a token, and, with the
// concurrent strategy on, a call in flight that c holds until c.Exit) and
// the Verdict is Allowed. Enter resets c. c may be nil when the concurrent
// strategy is off; with it on, a nil c counts a call in flight that
// nothing can free (a test's way to hold one for good), so a caller that
// serves requests passes a Call and Exits it. Enter does not allocate.
func (t *Table) Enter(c *Call, now time.Time, key uint64) Verdict {
	if c != nil {
		c.t = nil
		c.done.Store(false)
	}
	n := now.UnixNano()
	s := t.shard(key)
	s.mu.Lock()
	cur := max(n/t.width, s.last)
	s.last = cur
	var v Verdict
	j := s.find(key)
	if j < 0 {
		j = s.adopt(t, key, cur, n)
	}
	if j >= 0 {
		v = t.enterExact(s, j, cur, n)
	} else {
		v = t.enterSketch(s, key, cur, n)
	}
	s.mu.Unlock()
	if v.Allowed && t.concurrent >= 0 && c != nil {
		c.t, c.key, c.entry = t, key, j
	}
	return v
}

// degraded returns the verdict of a request failing strategy st.
func degraded(st limiter.Strategy, count, threshold int64) Verdict {
	return Verdict{Strategy: st, Count: count, Threshold: threshold}
}

// tokensUsed returns the capacity less the tokens left, for a bucket whose
// theoretical arrival time is tat at n.
func (t *Table) tokensUsed(tat, n int64) int64 {
	used := max(tat, n) - n
	return min(t.capacity, (used+t.interval-1)/t.interval)
}

// Call is the ticket of one request Enter admitted while the concurrent
// strategy is on: it holds the key's call in flight until Exit. Keep it
// with the request; it must not be copied while in use. The zero Call, or
// one whose request was degraded, holds nothing.
type Call struct {
	t     *Table
	key   uint64
	entry int32 // the exact entry the call was counted in, or -1: the sketch
	done  atomic.Bool
}

// Exit frees the call's slot in flight. It is safe to defer: a second Exit,
// or Exit on a Call that holds nothing, does nothing. It may run on another
// goroutine than Enter, once Enter has returned. It does not allocate.
func (c *Call) Exit() {
	t := c.t
	if t == nil || c.done.Swap(true) {
		return
	}
	s := t.shard(c.key)
	s.mu.Lock()
	if c.entry < 0 {
		s.sk.exit(c.key)
	} else if e := &s.entries[c.entry]; e.key == c.key && e.inflight > 0 {
		// Always so: an entry holding calls in flight is never dropped.
		e.inflight--
	}
	s.mu.Unlock()
}

// Len returns the number of keys tracked exactly, at most MaxKeys.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.used
		s.mu.Unlock()
	}
	return n
}

// KeyCount is one key's figures at an instant.
type KeyCount struct {
	Key      uint64 // the key's hash, as given to Enter
	Visits   int64  // admitted visits in the window
	InFlight int64  // calls in flight counted on the exact entry
}

// Heaviest returns up to n keys tracked exactly with the most admitted
// visits in the window at now, most first (ties by key), leaving out keys
// with none. Keys in the sketch are not listed: the sketch holds cells,
// not keys. It changes nothing of the table (a key it reads is as
// droppable as before). It allocates; it is for the admin port, not the
// hot path.
func (t *Table) Heaviest(now time.Time, n int) []KeyCount {
	if n <= 0 {
		return nil
	}
	var out []KeyCount
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		cur := max(now.UnixNano()/t.width, s.last)
		for j := range s.used {
			e := &s.entries[j]
			if v := s.visitsAt(int64(j), cur); v > 0 {
				out = append(out, KeyCount{Key: e.key, Visits: v, InFlight: int64(e.inflight)})
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Visits, a.Visits); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out[:min(n, len(out))]
}

// Bytes returns the memory a table of settings s would hold, in bytes,
// without making one: what New(s).Bytes() returns, so that a config can
// be judged before any table is made. Settings beyond the limits give 0.
func Bytes(s Settings) int {
	if s.Check() != nil {
		return 0
	}
	s = s.withDefaults()
	n := shardCount(s.MaxKeys)
	w := sketchWidth(s.MaxKeys) / n
	total := int(unsafe.Sizeof(Table{})) + n*int(unsafe.Sizeof(shard{}))
	_, visits := s.VisitThreshold.Get()
	_, tokens := s.TokensPerSecond.Get()
	_, flights := s.ConcurrentThreshold.Get()
	for i := range n {
		keys := s.MaxKeys / n
		if i < s.MaxKeys%n {
			keys++
		}
		total += 4*(1<<bits.Len(uint(2*keys-1))) + int(unsafe.Sizeof(entry{}))*keys + 4*keys*s.Buckets
		if visits {
			total += 4 * rows * w * (s.Buckets + 1)
		}
		if tokens {
			total += 8 * rows * w
		}
		if flights {
			total += 4 * rows * w
		}
	}
	return total
}

// Bytes returns the memory the table holds, in bytes: what New allocated
// (the package doc gives the formula), which no traffic changes.
func (t *Table) Bytes() int {
	n := int(unsafe.Sizeof(*t)) + len(t.shards)*int(unsafe.Sizeof(shard{}))
	for i := range t.shards {
		s := &t.shards[i]
		n += 4*len(s.index) + int(unsafe.Sizeof(entry{}))*len(s.entries) + 4*len(s.rings)
		n += 4*len(s.sk.visits) + 8*len(s.sk.tats) + 4*len(s.sk.flights)
	}
	return n
}
