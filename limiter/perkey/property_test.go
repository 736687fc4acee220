package perkey

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// peek returns the table's figures for key at now, as Enter would judge
// them: its exact entry's, or the sketch's estimate.
func (t *Table) peek(now time.Time, key uint64) (visits, tat, flight int64) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := max(now.UnixNano()/t.width, s.last)
	s.last = cur
	if j := s.find(key); j >= 0 {
		s.advance(int64(j), cur)
		e := &s.entries[j]
		flight = int64(e.inflight)
		if e.borrowed {
			flight += s.sk.flight(key)
		}
		return e.visits, e.tat, flight
	}
	c := s.sk.cells(key)
	if s.sk.visits != nil {
		visits = s.sk.visitEstimate(c, cur, nil)
	}
	if s.sk.tats != nil {
		tat = s.sk.tat(c)
	}
	return visits, tat, s.sk.flight(key)
}

// truth is the reference model: each key's true admitted visits per
// bucket, GCRA time and calls in flight, from the requests the table
// admitted.
type truth struct {
	tab   *Table
	keys  map[uint64]*trueKey
	calls []*heldCall
}

type trueKey struct {
	at     []int64 // buckets of admitted visits, oldest first
	tat    int64
	flight int64
}

type heldCall struct {
	c   Call
	key uint64
}

func newTruth(tab *Table) *truth { return &truth{tab: tab, keys: map[uint64]*trueKey{}} }

func (m *truth) key(k uint64) *trueKey {
	tk := m.keys[k]
	if tk == nil {
		tk = &trueKey{}
		m.keys[k] = tk
	}
	return tk
}

// visits returns k's true admitted visits in the window at bucket cur,
// dropping older ones.
func (tk *trueKey) visits(tab *Table, cur int64) int64 {
	i := 0
	for i < len(tk.at) && cur-tk.at[i] >= tab.buckets {
		i++
	}
	tk.at = tk.at[i:]
	return int64(len(tk.at))
}

// enter runs one request through the table and the model, and fails when
// the table admits what the true counts forbid.
func (m *truth) enter(t *testing.T, now time.Time, k uint64) Verdict {
	tab, tk := m.tab, m.key(k)
	n, cur := now.UnixNano(), now.UnixNano()/tab.width
	hc := &heldCall{key: k}
	v := tab.Enter(&hc.c, now, k)
	if !v.Allowed {
		return v
	}
	if tv := tk.visits(tab, cur); tab.visit >= 0 && tv+1 > tab.visit {
		t.Fatalf("key %#x at %v: admitted visit %d, threshold %d", k, now.Sub(t0), tv+1, tab.visit)
	}
	if tab.interval > 0 {
		if max(tk.tat, n)-n > tab.tolerance {
			t.Fatalf("key %#x at %v: admitted with an empty bucket", k, now.Sub(t0))
		}
		tk.tat = max(tk.tat, n) + tab.interval
	}
	if tab.concurrent >= 0 {
		if tk.flight+1 > tab.concurrent {
			t.Fatalf("key %#x at %v: admitted call %d in flight, threshold %d", k, now.Sub(t0), tk.flight+1, tab.concurrent)
		}
		tk.flight++
		m.calls = append(m.calls, hc)
	}
	tk.at = append(tk.at, cur)
	return v
}

// exitOne ends the call at i.
func (m *truth) exitOne(i int) {
	hc := m.calls[i]
	hc.c.Exit()
	hc.c.Exit() // a second Exit frees nothing
	m.key(hc.key).flight--
	m.calls[i] = m.calls[len(m.calls)-1]
	m.calls = m.calls[:len(m.calls)-1]
}

// check fails when the table under-counts key k at now.
func (m *truth) check(t *testing.T, now time.Time, k uint64) {
	tk := m.keys[k]
	if tk == nil {
		return
	}
	tab := m.tab
	visits, tat, flight := tab.peek(now, k)
	tv := tk.visits(tab, now.UnixNano()/tab.width)
	if (tab.visit >= 0 || tab.shard(k).find(k) >= 0) && visits < tv {
		t.Fatalf("key %#x at %v: visits %d, true %d", k, now.Sub(t0), visits, tv)
	}
	if tab.interval > 0 && tat < tk.tat {
		t.Fatalf("key %#x at %v: GCRA time %d, true %d", k, now.Sub(t0), tat, tk.tat)
	}
	if tab.concurrent >= 0 && flight < tk.flight {
		t.Fatalf("key %#x at %v: in flight %d, true %d", k, now.Sub(t0), flight, tk.flight)
	}
}

func (m *truth) checkAll(t *testing.T, now time.Time) {
	for k := range m.keys {
		m.check(t, now, k)
	}
}

var allOn = Settings{
	VisitThreshold:      limiter.At(300),
	TokensPerSecond:     limiter.At(10),
	TokenBucketSize:     limiter.At(20),
	ConcurrentThreshold: limiter.At(4),
}

// TestNeverUnderCountRandom: random keys from small and large pools,
// random exits, on instants; every key checked every 500 steps, the key
// entered at every step.
func TestNeverUnderCountRandom(t *testing.T) {
	for _, maxKeys := range []int{1, 16, 100, 1000} {
		rng := rand.New(rand.NewPCG(uint64(maxKeys), 7))
		s := allOn
		s.MaxKeys = maxKeys
		s.VisitThreshold = limiter.At(30)
		m := newTruth(newTable(t, s))
		now := t0
		for i := range 60_000 {
			now = now.Add(time.Duration(rng.IntN(2_000_000)))
			k := rng.Uint64N(3 * uint64(maxKeys))
			if rng.IntN(4) == 0 {
				k = rng.Uint64N(8) // a few hot keys
			}
			k *= 0x9e3779b97f4a7c15 // spread over shards
			m.enter(t, now, k)
			m.check(t, now, k)
			for len(m.calls) > 0 && rng.IntN(3) > 0 {
				m.exitOne(rng.IntN(len(m.calls)))
			}
			if i%500 == 0 {
				m.checkAll(t, now)
			}
		}
	}
}

// TestHeavyKeyUnderChurn: a heavy key interleaved with 200,000 distinct
// churning keys at MaxKeys 1,000 is never admitted beyond its limits, and
// is never under-counted: whether it comes first (tracked exactly) or
// once churn has filled the exact table (judged in the sketch, until an
// entry frees).
func TestHeavyKeyUnderChurn(t *testing.T) {
	for _, start := range []int{0, 10_000} {
		s := allOn
		s.MaxKeys = 1000
		s.VisitThreshold = limiter.At(50) // below the token bucket's 10/s * 10s
		m := newTruth(newTable(t, s))
		const heavy = 0x5eed_0000_0000_0001
		rng := rand.New(rand.NewPCG(1, 2))
		now, admitted, sent := t0, 0, 0
		for i := range churnSteps {
			now = now.Add(200 * time.Microsecond) // 5,000 churn keys per second
			k := rng.Uint64()
			m.enter(t, now, k)
			m.check(t, now, k)
			if i >= start && i%4 == 0 { // the heavy key at 1,250/s
				sent++
				if m.enter(t, now, heavy).Allowed {
					admitted++
				}
				m.check(t, now, heavy)
			}
			for len(m.calls) > 8 {
				m.exitOne(0) // calls end in order, a few in flight
			}
			if i%20_000 == 0 {
				m.checkAll(t, now)
			}
		}
		windows := (churnSteps - start) * 200 / 10_000_000 // whole 10s windows the heavy key sent in
		t.Logf("heavy key from step %d: %d of %d admitted over %v (limit 50 per window, %d windows); %d keys exact",
			start, admitted, sent, time.Duration(churnSteps-start)*200*time.Microsecond, windows, m.tab.Len())
		if admitted > 50*(windows+1) {
			t.Fatalf("heavy key admitted %d, want at most %d", admitted, 50*(windows+1))
		}
	}
}

// TestCollidingKeys: keys that share every sketch cell with the heavy key
// (found by search in a small table) churn beside it, while the exact
// table is held by busy keys: the heavy key stays limited, and no key is
// under-counted.
func TestCollidingKeys(t *testing.T) {
	s := allOn
	s.MaxKeys = 16
	s.VisitThreshold = limiter.At(20)
	tab := newTable(t, s)
	const heavy = 0xbad
	want := tab.shard(heavy).sk.cells(heavy)
	var colliders []uint64
	for k := uint64(1); len(colliders) < 200; k++ {
		if k != heavy && tab.shard(k).sk.cells(k) == want {
			colliders = append(colliders, k)
		}
	}
	m := newTruth(tab)
	var busy [16]Call
	for i := range busy { // the exact table: 16 keys with a call in flight each
		tab.Enter(&busy[i], t0, uint64(1<<40+i))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	now, admitted := t0, 0
	for i := range 50_000 {
		now = now.Add(time.Millisecond)
		k := colliders[rng.IntN(len(colliders))]
		m.enter(t, now, k)
		m.check(t, now, k)
		if m.enter(t, now, heavy).Allowed {
			admitted++
		}
		m.check(t, now, heavy)
		for len(m.calls) > 3 {
			m.exitOne(rng.IntN(len(m.calls)))
		}
		if i%5000 == 0 {
			m.checkAll(t, now)
		}
	}
	if max := 20 * (50 + 1); admitted > max {
		t.Fatalf("heavy key admitted %d over 50s, want at most %d", admitted, max)
	}
	t.Logf("heavy key admitted %d over %v beside %d colliding keys", admitted, now.Sub(t0), len(colliders))
}
