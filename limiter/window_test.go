package limiter

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// addTo counts a visit in shard i.
func addTo(w *window, i int, cur int64, degraded bool) {
	s := &w.counters().shards[i]
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
			addTo(w, r.IntN(int(w.shards)), cur, r.IntN(4) == 0)
			if r.IntN(50) == 0 { // a reader rotates every shard
				w.hot(cur)
			}
			// The exact figure, without rotating (as the fast path sees it).
			var exact int64
			for i := range w.counters().shards {
				sh := &w.counters().shards[i]
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
	for i := range int(w.shards) {
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

// TestLayout checks that the hot structures fill whole cache-line pairs, and
// that an idle window is one line.
func TestLayout(t *testing.T) {
	if got := unsafe.Sizeof(shard{}); got != 128 {
		t.Errorf("sizeof(shard) = %d, want 128", got)
	}
	if got := unsafe.Sizeof(slot{}); got != 128 {
		t.Errorf("sizeof(slot) = %d, want 128", got)
	}
	// An idle point's window: the read-mostly line alone.
	if got := unsafe.Sizeof(window{}); got != 64 {
		t.Errorf("sizeof(window) = %d, want 64", got)
	}
}

// TestWindowIdle: a window's counters are allocated by its first write,
// not by a read, and until then every read reports zeros.
func TestWindowIdle(t *testing.T) {
	s := Settings{}.withDefaults()
	w := newWindow(s)
	cur := t0.UnixNano() / w.width
	if got := w.sum(cur); got != (Counts{}) {
		t.Errorf("sum = %+v, want zeros", got)
	}
	if got := w.series(cur); len(got) != s.Buckets || got[0] != (Counts{}) || got[s.Buckets-1] != (Counts{}) {
		t.Errorf("series = %+v, want %d zero buckets", got, s.Buckets)
	}
	if got := w.inflight(); got != 0 {
		t.Errorf("inflight = %d, want 0", got)
	}
	w.reset()
	if w.c.Load() != nil {
		t.Fatal("counters allocated by a read or a reset, want nil until a write")
	}
	for _, write := range []struct {
		name string
		f    func(*window)
	}{
		{"record", func(w *window) { w.record(cur, false) }},
		{"degradeOne", func(w *window) { w.degradeOne(cur) }},
		{"recordFailure", func(w *window) { w.recordFailure(cur, 1, 0) }},
	} {
		w := newWindow(s)
		write.f(w)
		if w.c.Load() == nil {
			t.Errorf("%s: counters not allocated", write.name)
		}
	}
	w.recordFailure(cur, 1, 1)
	w.record(cur, true)
	if got, want := w.sum(cur+1), (Counts{Visits: 1, Degraded: 1, Exceptions: 1, Timeouts: 1}); got != want {
		t.Errorf("sum after the first writes = %+v, want %+v", got, want)
	}
}

// TestWindowFirstWriteRace: goroutines writing an idle window at once
// allocate its counters once between them, and no count is lost.
func TestWindowFirstWriteRace(t *testing.T) {
	s := Settings{}.withDefaults()
	const goroutines, each = 8, 100
	for range 20 {
		w := newWindow(s)
		cur := t0.UnixNano() / w.width
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range each {
					if g%2 == 0 {
						w.record(cur, false)
					} else {
						w.recordFailure(cur, 1, 0)
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		want := Counts{Visits: goroutines / 2 * each, Exceptions: goroutines / 2 * each}
		if got := w.sum(cur); got != want {
			t.Fatalf("sum = %+v, want %+v", got, want)
		}
	}
}
