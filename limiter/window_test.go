package limiter

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// addTo counts a visit in shard i.
func addTo(w *window, i int, cur int64, degraded bool) {
	s := &w.shards[i]
	s.mu.Lock()
	w.add(s, cur, degraded)
	s.mu.Unlock()
}

// TestWindowBound checks the invariant the visit strategy's fast path rests
// on: the window's visits-degraded never exceeds bound+slack, so passBound
// never lets through a request that the exact sum would trip. Writes go to
// random shards (the hot path picks them by P), and time jumps so that
// shards rotate and counts expire.
func TestWindowBound(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		s := Settings{}.withDefaults()
		s.Shards = 1 + r.IntN(5)
		w := newWindow(s)
		now := t0.UnixNano()
		tight := 0
		for step := range 20000 {
			switch x := r.IntN(1000); {
			case x < 600:
			case x < 990:
				now += r.Int64N(int64(200 * time.Millisecond))
			case x < 998:
				now += r.Int64N(int64(15 * time.Second))
			default:
				w.reset()
			}
			cur := now / w.width
			addTo(w, r.IntN(len(w.shards)), cur, r.IntN(4) == 0)
			if r.IntN(50) == 0 { // a reader rotates every shard
				w.hot(cur)
			}
			// The exact figure, without rotating (as the fast path sees it).
			var exact int64
			for i := range w.shards {
				sh := &w.shards[i]
				exact += sh.visits - sh.degraded
				if d := sh.visits - sh.degraded - sh.published; d >= publishEvery {
					t.Fatalf("seed %d step %d: shard %d unpublished %d, want < %d", seed, step, i, d, publishEvery)
				}
			}
			if w.passBound(exact) {
				t.Fatalf("seed %d step %d: passBound(%d) with visits-degraded %d, bound %d, slack %d: want false",
					seed, step, exact, exact, w.bound.Load(), w.slack)
			}
			if exact == w.bound.Load()+w.slack {
				tight++
			}
		}
		if s.Shards == 1 && tight == 0 {
			t.Errorf("seed %d: the bound was never tight; the test proves little", seed)
		}
	}
}

// TestWindowBoundBoundary pins the bound's boundaries: a shard publishes
// when it has grown by publishEvery, and the fast path passes exactly while
// bound+slack+1 <= threshold.
func TestWindowBoundBoundary(t *testing.T) {
	s := Settings{}.withDefaults()
	w := newWindow(s)
	cur := t0.UnixNano() / w.width
	for i := range w.shards {
		for range publishEvery - 1 {
			addTo(w, i, cur, false)
		}
	}
	if got := w.bound.Load(); got != 0 {
		t.Fatalf("bound after %d passes per shard = %d, want 0", publishEvery-1, got)
	}
	exact := int64(s.Shards) * (publishEvery - 1)
	if w.slack != exact {
		t.Fatalf("slack = %d, want %d", w.slack, exact)
	}
	if !w.passBound(exact + 1) {
		t.Errorf("passBound(%d) = false with %d passed: want true (one more keeps it at the threshold)", exact+1, exact)
	}
	if w.passBound(exact) {
		t.Errorf("passBound(%d) = true with %d passed: want false", exact, exact)
	}
	addTo(w, 0, cur, false)
	if got := w.bound.Load(); got != publishEvery {
		t.Errorf("bound after %d passes in shard 0 = %d, want %d", publishEvery, got, publishEvery)
	}
	// Degraded requests do not move visits-degraded.
	for range 3 * publishEvery {
		addTo(w, 1, cur, true)
	}
	if got := w.bound.Load(); got != publishEvery {
		t.Errorf("bound after degraded requests = %d, want %d", got, publishEvery)
	}
	// Rotation publishes the lower figure; reset takes it all back.
	w.hot(cur + int64(s.Buckets))
	if got := w.bound.Load(); got != 0 {
		t.Errorf("bound once every count left the window = %d, want 0", got)
	}
	w.record(cur+int64(s.Buckets), false)
	w.hot(cur + int64(s.Buckets))
	w.reset()
	if got := w.bound.Load(); got != 0 {
		t.Errorf("bound after reset = %d, want 0", got)
	}
}

// TestLayout checks that the hot structures fill whole cache-line pairs.
func TestLayout(t *testing.T) {
	if got := unsafe.Sizeof(shard{}); got != 128 {
		t.Errorf("sizeof(shard) = %d, want 128", got)
	}
	if got := unsafe.Sizeof(slot{}); got != 128 {
		t.Errorf("sizeof(slot) = %d, want 128", got)
	}
}
