package stale

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// MaxAnswerBytes caps the per-answer bound, whatever maxBytes is: an
	// answer is kept only if its size (the memory formula in the package
	// doc) is at most min(maxBytes/16, MaxAnswerBytes).
	MaxAnswerBytes = 8 << 20
	// EntryOverhead is the fixed number of bytes counted per kept answer
	// on top of its body, header, key and variant: the entry, its place in
	// the LRU list and the maps, the header map's own structure.
	// TestFormulaCoversHeap measures that it covers them.
	EntryOverhead = 1024
	// FieldOverhead is the number of bytes counted per kept header line on
	// top of its name and value: its place in the header map (up to twice
	// the slots it fills, after the map grows) and in the values' array.
	// Without it an upstream sending many tiny fields would take many
	// times what it is counted for.
	FieldOverhead = 128

	// maxVaryNames is the most header names a kept answer's Vary may
	// name; an answer naming more is not kept, so that a lookup's cost per
	// answer stays small whatever the upstream sends.
	maxVaryNames = 32
	// maxVarySets is the most distinct Vary lists kept for one request
	// key; a new one past it drops the oldest list's answers.
	maxVarySets = 8
)

// Request is what the cache needs of a request, filled by the caller so
// that this package never guesses: the key and the request headers that a
// kept answer's Vary names.
type Request struct {
	// Point is the name of the point the request went to; points never
	// share answers.
	Point string
	// Method is the request's method: only "GET" answers are kept, and
	// "GET" and "HEAD" look them up; anything else is neither.
	Method string
	// Scheme is "http" or "https", as the client spoke it; compared
	// exactly.
	Scheme string
	// Host is the request's host (and port) as the request has it; ASCII
	// letters are compared lower-cased, everything else exactly.
	Host string
	// Path is the escaped path after the request path has normalised it
	// (no dot segments, no empty segments); compared exactly.
	Path string
	// RawQuery is the query as the client sent it, without '?'; compared
	// exactly, so the same parameters in another order are another key.
	RawQuery string
	// Header is the request's header as the client sent it (before the
	// proxy adds or removes anything); nil is an empty header. Only read.
	Header http.Header
}

// Cache keeps the last good answers of points with stale: and serves them
// back, within one bound of memory shared by all points (least recently
// used first out). The package doc states what is kept and served.
//
// The zero value is an off cache (maxBytes 0) that SetMaxBytes turns on;
// a nil *Cache is off too. A Cache must not be copied after first use. It
// is safe for concurrent use: one mutex, which the request path takes only
// when a recording completes (Recorder.Done) and when it looks up an answer
// to serve a degraded request (Lookup); Record and Recorder.Write take no
// lock.
type Cache struct {
	// limit is maxBytes, readable without the lock; 0 is off.
	limit atomic.Int64
	// bound is the per-answer bound, min(limit/16, MaxAnswerBytes).
	bound atomic.Int64
	// gen counts Retain calls: a recording begun before one is dropped
	// (its point may have lost stale: meanwhile).
	gen atomic.Uint64
	// inflight is the bytes of body buffers held by recordings not yet
	// done; at most limit/4 (budget).
	inflight atomic.Int64

	mu      sync.Mutex
	bytes   int64 // sum of the kept entries' sizes
	entries int
	groups  map[string]*group // by request key
	lru     entry             // sentinel: lru.next is the most recently used
}

// group is the answers kept for one request key, by the Vary list they
// came with.
type group struct {
	sets []*varySet // oldest first
}

// varySet is the answers of one request key that came with the same Vary
// list, by the request header values that list selects.
type varySet struct {
	names   []string          // canonical, sorted, unique; nil for no Vary
	entries map[string]*entry // by variant (appendVariant)
}

// entry is one kept answer.
type entry struct {
	ans Answer // never changed once the entry is in the cache

	prev, next *entry // LRU list, under Cache.mu
	group      *group
	set        *varySet
	key        string   // request key (appendKey)
	vary       []string // the Vary names, as varySet.names
	variant    string
	point      string
	size       int64
	// limit, when limited, is the age from which the answer is never
	// served whatever maxAge says (must-revalidate, s-maxage,
	// stale-if-error).
	limit   time.Duration
	limited bool
}

// New returns a cache holding at most maxBytes bytes of answers (the
// package doc's formula); maxBytes <= 0 is off: nothing is kept.
func New(maxBytes int64) *Cache {
	c := new(Cache)
	c.SetMaxBytes(maxBytes)
	return c
}

// budget is the most bytes of bodies being recorded at once.
func budget(maxBytes int64) int64 { return maxBytes / 4 }

// SetMaxBytes changes the cache's bound (a reload): the per-answer bound
// becomes min(n/16, MaxAnswerBytes), the answers larger than it are
// dropped, then the least recently used ones until the rest fit in n;
// recordings in flight are held to the new bounds when they complete. n
// <= 0 turns the cache off and empties it.
func (c *Cache) SetMaxBytes(n int64) {
	n = max(n, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	c.limit.Store(n)
	bound := min(n/16, MaxAnswerBytes)
	c.bound.Store(bound)
	for e := c.lru.next; e != &c.lru; {
		next := e.next
		if e.size > bound {
			c.remove(e)
		}
		e = next
	}
	c.evict(n)
}

// Retain drops the answers of the points for which keep returns false (a
// reload: points that no longer have stale:), and every recording begun
// before the call. keep is called under the cache's lock, at most once
// per kept answer, and must not call the cache; nil keeps nothing.
func (c *Cache) Retain(keep func(point string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	c.gen.Add(1)
	for e := c.lru.next; e != &c.lru; {
		next := e.next
		if keep == nil || !keep(e.point) {
			c.remove(e)
		}
		e = next
	}
}

// Stats returns the bytes the kept answers count for (the package doc's
// formula; never above maxBytes) and their number.
func (c *Cache) Stats() (bytes int64, entries int) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.entries
}

// Lookup returns the answer kept for req that may be served at now under
// the point's maxAge (the package doc's serving rules), and marks it used.
// A HEAD request finds the answer of a GET. When several kept answers
// match (answers that came with different Vary lists), the one whose
// header arrived last wins. maxAge <= 0, a nil or off cache, a method
// other than GET and HEAD: no answer. The Answer stays valid after the
// cache drops it.
func (c *Cache) Lookup(req Request, maxAge time.Duration, now time.Time) (*Answer, bool) {
	if c == nil || maxAge <= 0 || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		return nil, false
	}
	var kb, vb [256]byte
	key := appendKey(kb[:0], &req)
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[string(key)]
	if g == nil {
		return nil, false
	}
	var best *entry
	for _, s := range g.sets {
		v, ok := appendVariant(vb[:0], req.Header, s.names)
		if !ok {
			continue
		}
		e := s.entries[string(v)]
		if e == nil || !e.servable(maxAge, now) {
			continue
		}
		if best == nil || e.ans.arrived.After(best.ans.arrived) {
			best = e
		}
	}
	if best == nil {
		return nil, false
	}
	c.unlink(best)
	c.pushFront(best)
	return &best.ans, true
}

// servable says whether e may be served at now under maxAge: its age is
// below maxAge and below its own limit if it has one.
func (e *entry) servable(maxAge time.Duration, now time.Time) bool {
	age := e.ans.Age(now)
	return age < maxAge && (!e.limited || age < e.limit)
}

// insert keeps e (its size already computed) if the cache is still on,
// no Retain came since the recording began (gen), it fits the per-answer
// bound and could still be served at now; it replaces the answer of the
// same key and variant unless that one's header arrived later.
func (c *Cache) insert(e *entry, gen uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.limit.Load()
	if limit <= 0 || gen != c.gen.Load() || e.size > c.bound.Load() {
		return
	}
	if e.limited && e.ans.Age(now) >= e.limit {
		return
	}
	c.init()
	g, s := c.find(e.key, e.vary)
	if g == nil {
		g = new(group)
		c.groups[e.key] = g
	}
	if s == nil {
		if len(g.sets) == maxVarySets {
			// Drop the oldest list's answers; the group keeps the others.
			for _, old := range g.sets[0].entries {
				c.remove(old)
			}
		}
		s = &varySet{names: e.vary, entries: make(map[string]*entry, 1)}
		g.sets = append(g.sets, s)
	} else if old := s.entries[e.variant]; old != nil {
		if old.ans.arrived.After(e.ans.arrived) {
			return
		}
		// Replaced in place: the set and group stay.
		c.unlink(old)
		c.bytes -= old.size
		c.entries--
	}
	e.group, e.set = g, s
	s.entries[e.variant] = e
	c.pushFront(e)
	c.bytes += e.size
	c.entries++
	// e is the most recently used and within the bound (<= limit): the
	// others go before it does.
	c.evict(limit)
}

// find returns the group of key and its set of the Vary list names, nil
// for none.
func (c *Cache) find(key string, names []string) (*group, *varySet) {
	g := c.groups[key]
	if g == nil {
		return nil, nil
	}
	for _, s := range g.sets {
		if slices.Equal(s.names, names) {
			return g, s
		}
	}
	return g, nil
}

// evict drops the least recently used answers until the kept ones count
// for at most n bytes.
func (c *Cache) evict(n int64) {
	for c.bytes > n && c.lru.prev != &c.lru {
		c.remove(c.lru.prev)
	}
}

// remove drops e from the list and the maps, and the set and group it
// leaves empty.
func (c *Cache) remove(e *entry) {
	c.unlink(e)
	c.bytes -= e.size
	c.entries--
	delete(e.set.entries, e.variant)
	if len(e.set.entries) > 0 {
		return
	}
	g := e.group
	if i := slices.Index(g.sets, e.set); i >= 0 {
		g.sets = slices.Delete(g.sets, i, i+1)
	}
	if len(g.sets) == 0 && c.groups[e.key] == g {
		delete(c.groups, e.key)
	}
}

func (c *Cache) init() {
	if c.lru.next == nil {
		c.lru.next, c.lru.prev = &c.lru, &c.lru
		c.groups = make(map[string]*group)
	}
}

func (c *Cache) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache) pushFront(e *entry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}
