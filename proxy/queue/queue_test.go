package queue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// slots stands for a point's limit in flight: a try takes a free slot or
// waits; release frees one and gives the queue a turn, as a call's end
// does.
type slots struct {
	q     *Queue
	mu    sync.Mutex
	free  int
	order []string // who took a slot, in order
}

func (s *slots) try(name string) func(time.Time) (bool, time.Duration) {
	return func(time.Time) (bool, time.Duration) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.free == 0 {
			return false, 0
		}
		s.free--
		s.order = append(s.order, name)
		return true, 0
	}
}

func (s *slots) release() {
	s.mu.Lock()
	s.free++
	s.mu.Unlock()
	s.q.Release(time.Now())
}

func (s *slots) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// results collects the waits' results by name.
type results struct {
	mu sync.Mutex
	m  map[string]Result
	wg sync.WaitGroup
}

// start runs a wait of a request called name, of priority pr, on its own
// goroutine, and lets it settle in the queue.
func (r *results) start(ctx context.Context, s *slots, name string, pr limiter.Priority) {
	r.wg.Go(func() {
		res := s.q.Wait(ctx, pr, s.try(name))
		r.mu.Lock()
		r.m[name] = res
		r.mu.Unlock()
	})
	synctest.Wait()
}

func (r *results) get(name string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[name]
}

// newSetup returns a queue of settings s with no free slot, and the
// results of its waits; every wait has ended when the test returns.
func newSetup(t *testing.T, s limiter.Queue) (*slots, *results) {
	s.On = true
	r := &results{m: map[string]Result{}}
	t.Cleanup(r.wg.Wait)
	return &slots{q: New(s, time.Now)}, r
}

func TestPriorityOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: time.Second, Target: 100 * time.Millisecond})
		ctx := context.Background()
		for i, pr := range []limiter.Priority{limiter.PrioritySheddable, limiter.PriorityDefault, limiter.PriorityCritical, limiter.PriorityDefault, limiter.PrioritySheddable} {
			r.start(ctx, s, fmt.Sprintf("%s%d", pr, i), pr)
		}
		if got := s.q.Len(); got != 5 {
			t.Fatalf("Len = %d, want 5", got)
		}
		for range 5 {
			time.Sleep(10 * time.Millisecond)
			s.release()
			synctest.Wait()
		}
		want := []string{"critical2", "default1", "default3", "sheddable0", "sheddable4"}
		if got := s.taken(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("admitted %v, want %v (critical, then default, then sheddable, each first in first out)", got, want)
		}
		if got := r.get("sheddable4"); got.Outcome != Admitted || got.Waited != 50*time.Millisecond {
			t.Errorf("last = %+v, want admitted after 50ms", got)
		}
		if s.q.Len() != 0 {
			t.Errorf("Len = %d after all were admitted", s.q.Len())
		}
	})
}

func TestStandingQueueServesNewestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: 5 * time.Second, Target: 100 * time.Millisecond, Interval: 200 * time.Millisecond})
		r.start(context.Background(), s, "x", limiter.PriorityDefault)
		time.Sleep(50 * time.Millisecond)
		if st := s.q.Status(); st.Standing {
			t.Fatalf("standing after 50ms: %+v", st)
		}
		// x has waited longer than the target from 100ms, for a whole
		// interval at 300ms: y's join finds the queue standing, and sheds
		// x; the queue stands until it empties.
		time.Sleep(260 * time.Millisecond)
		r.start(context.Background(), s, "y", limiter.PriorityDefault)
		r.start(context.Background(), s, "z", limiter.PriorityDefault)
		if got := r.get("x"); got.Outcome != Shed || got.Waited != 310*time.Millisecond {
			t.Errorf("x: %+v, want shed after 310ms", got)
		}
		if st := s.q.Status(); !st.Standing || st.Length != 2 {
			t.Fatalf("status %+v, want a standing queue of 2", st)
		}
		s.release()
		synctest.Wait()
		s.release()
		synctest.Wait()
		if got := s.taken(); fmt.Sprint(got) != "[z y]" {
			t.Errorf("admitted %v, want [z y]: newest first while the queue stands", got)
		}
	})
}

func TestCoDelShedsLowestPriorityOldestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: time.Second, Target: 50 * time.Millisecond, Interval: 100 * time.Millisecond})
		ctx := context.Background()
		r.start(ctx, s, "critical", limiter.PriorityCritical)
		r.start(ctx, s, "default", limiter.PriorityDefault)
		r.start(ctx, s, "sheddable-old", limiter.PrioritySheddable)
		time.Sleep(120 * time.Millisecond)
		r.start(ctx, s, "sheddable-young", limiter.PrioritySheddable)
		if st := s.q.Status(); st.Standing || st.Length != 4 {
			t.Fatalf("status %+v at 120ms, want 4 waiting, not yet standing", st)
		}
		// Each priority's oldest passed the target at 50ms: each stands
		// from 150ms. What waited longer than the target is shed,
		// sheddable first, then default; a sheddable request within the
		// target waits, and the critical one is never shed.
		time.Sleep(40 * time.Millisecond)
		s.q.Release(time.Now())
		synctest.Wait()
		for _, name := range []string{"sheddable-old", "default"} {
			if got := r.get(name); got.Outcome != Shed || got.Waited != 160*time.Millisecond {
				t.Errorf("%s: %+v, want shed after 160ms", name, got)
			}
		}
		if st := s.q.Status(); !st.Standing || st.Length != 2 {
			t.Fatalf("status %+v at 160ms, want standing, 2 waiting", st)
		}
		// At 220ms the young sheddable one passed the target: shed.
		time.Sleep(60 * time.Millisecond)
		s.q.Release(time.Now())
		synctest.Wait()
		if got := r.get("sheddable-young"); got.Outcome != Shed || got.Waited != 100*time.Millisecond {
			t.Errorf("sheddable-young: %+v, want shed after 100ms", got)
		}
		if st := s.q.Status(); st.Length != 1 {
			t.Fatalf("status %+v at 220ms, want the critical request waiting", st)
		}
		s.release()
		synctest.Wait()
		if got := r.get("critical"); got.Outcome != Admitted {
			t.Errorf("critical: %+v, want admitted", got)
		}
	})
}

// A priority's requests that stand still stand after emptying for less
// than the target: newest first for those that join then.
func TestStandingSurvivesAMomentEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: time.Second, Target: 50 * time.Millisecond, Interval: 100 * time.Millisecond})
		ctx := context.Background()
		r.start(ctx, s, "a", limiter.PriorityDefault)
		time.Sleep(150 * time.Millisecond) // above the target from 50ms: standing at 150ms
		s.q.Release(time.Now())
		synctest.Wait()
		if got := r.get("a"); got.Outcome != Shed {
			t.Fatalf("a: %+v, want shed", got)
		}
		time.Sleep(20 * time.Millisecond) // empty for 20ms
		r.start(ctx, s, "x", limiter.PriorityDefault)
		r.start(ctx, s, "y", limiter.PriorityDefault)
		s.release()
		synctest.Wait()
		s.release()
		synctest.Wait()
		if got := s.taken(); fmt.Sprint(got) != "[y x]" {
			t.Errorf("admitted %v, want [y x]: newest first, still standing", got)
		}
		time.Sleep(50 * time.Millisecond)
		if st := s.q.Status(); st.Standing {
			t.Errorf("status %+v after 50ms drained, want not standing", st)
		}
	})
}

func TestBurstDrainedWithinMaxWaitIsNotShed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Defaults: maxWait 500ms, interval 1s, target following a 50ms
		// upstream. A burst of 30 requests drains at one per 12.5ms (4
		// slots of 50ms): the last waits 375ms, and nobody is shed.
		s, r := newSetup(t, limiter.Queue{})
		s.q.Observe(50 * time.Millisecond)
		ctx := context.Background()
		for i := range 30 {
			r.start(ctx, s, fmt.Sprint(i), limiter.PrioritySheddable)
		}
		for range 30 {
			time.Sleep(12500 * time.Microsecond)
			s.release()
			synctest.Wait()
		}
		for i := range 30 {
			if got := r.get(fmt.Sprint(i)); got.Outcome != Admitted {
				t.Fatalf("request %d: %+v, want admitted", i, got)
			}
		}
		if got := s.taken(); got[0] != "0" || got[29] != "29" {
			t.Errorf("admitted %v, want first in first out", got)
		}
	})
}

func TestMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: 300 * time.Millisecond})
		r.start(context.Background(), s, "a", limiter.PriorityCritical)
		r.start(context.Background(), s, "b", limiter.PriorityDefault)
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		for _, name := range []string{"a", "b"} {
			if got := r.get(name); got.Outcome != TimedOut || got.Waited != 300*time.Millisecond {
				t.Errorf("%s: %+v, want timed out after 300ms", name, got)
			}
		}
		if s.q.Len() != 0 {
			t.Errorf("Len = %d after every wait ended", s.q.Len())
		}
	})
}

func TestCanceledLeavesAndPassesItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: time.Second, Target: 100 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		r.start(ctx, s, "gone", limiter.PriorityCritical)
		r.start(context.Background(), s, "stays", limiter.PriorityDefault)
		time.Sleep(20 * time.Millisecond)
		cancel()
		synctest.Wait()
		if got := r.get("gone"); got.Outcome != Canceled || got.Waited != 20*time.Millisecond {
			t.Errorf("gone: %+v, want canceled after 20ms", got)
		}
		s.release()
		synctest.Wait()
		if got := r.get("stays"); got.Outcome != Admitted {
			t.Errorf("stays: %+v, want admitted", got)
		}
	})
}

func TestFullQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: time.Second, MaxLength: 2})
		ctx := context.Background()
		r.start(ctx, s, "s1", limiter.PrioritySheddable)
		r.start(ctx, s, "d1", limiter.PriorityDefault)
		r.start(ctx, s, "c1", limiter.PriorityCritical)  // full: sheds s1, the lowest's oldest
		r.start(ctx, s, "s2", limiter.PrioritySheddable) // full of higher priorities: never waits
		if got := r.get("s1"); got.Outcome != Shed {
			t.Errorf("s1: %+v, want shed for c1", got)
		}
		if got := r.get("s2"); got.Outcome != Full || got.Waited != 0 {
			t.Errorf("s2: %+v, want full at once", got)
		}
		r.start(ctx, s, "d2", limiter.PriorityDefault) // sheds d1, its own priority's oldest
		if got := r.get("d1"); got.Outcome != Shed {
			t.Errorf("d1: %+v, want shed for d2", got)
		}
		if s.q.Len() != 2 {
			t.Errorf("Len = %d, want 2", s.q.Len())
		}
	})
}

func TestTokenTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(limiter.Queue{On: true, MaxWait: time.Second}, time.Now)
		// A token every 100ms, from 100ms: try says when the next is due.
		start := time.Now()
		var mu sync.Mutex
		next := start.Add(100 * time.Millisecond)
		var got []time.Duration
		try := func(now time.Time) (bool, time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if now.Before(next) {
				return false, next.Sub(now)
			}
			got = append(got, now.Sub(start))
			next = next.Add(100 * time.Millisecond)
			return true, 0
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { q.Wait(context.Background(), limiter.PriorityDefault, try) })
		}
		wg.Wait()
		if fmt.Sprint(got) != "[100ms 200ms 300ms]" {
			t.Errorf("admitted at %v, want one per token: [100ms 200ms 300ms]", got)
		}
	})
}

func TestTokenPastMaxWaitEndsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(limiter.Queue{On: true, MaxWait: 100 * time.Millisecond}, time.Now)
		res := q.Wait(context.Background(), limiter.PriorityDefault, func(time.Time) (bool, time.Duration) {
			return false, 150 * time.Millisecond
		})
		if res.Outcome != TimedOut || res.Waited != 0 {
			t.Errorf("%+v, want timed out at once: the token comes after maxWait", res)
		}
	})
}

// TestManyWaiters runs 200 requests of mixed priorities through 4 slots
// whose calls take 1ms to 5ms: every wait ends, admitted or timed out,
// and the queue is empty after.
func TestManyWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSetup(t, limiter.Queue{MaxWait: 200 * time.Millisecond})
		s.free = 4
		var wg sync.WaitGroup
		var mu sync.Mutex
		outcomes := map[Outcome]int{}
		for i := range 200 {
			pr := []limiter.Priority{limiter.PriorityCritical, limiter.PriorityDefault, limiter.PrioritySheddable}[i%3]
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond / 2)
				take := s.try(fmt.Sprint(i))
				res := Result{Outcome: Admitted}
				if ok, _ := take(time.Now()); !ok {
					res = s.q.Wait(context.Background(), pr, take)
				}
				mu.Lock()
				outcomes[res.Outcome]++
				mu.Unlock()
				if res.Outcome == Admitted {
					time.Sleep(time.Duration(1+i%5) * time.Millisecond)
					s.release()
				}
			})
		}
		wg.Wait()
		if outcomes[Admitted]+outcomes[TimedOut]+outcomes[Shed] != 200 || outcomes[Admitted] < 100 {
			t.Errorf("outcomes %v: want all 200 ended, most admitted", outcomes)
		}
		if s.q.Len() != 0 || s.free != 4 {
			t.Errorf("Len %d, free slots %d after the run; want 0 and 4", s.q.Len(), s.free)
		}
	})
}

func TestAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r := newSetup(t, limiter.Queue{MaxWait: time.Second})
		if s.q.Ahead(limiter.PrioritySheddable) {
			t.Error("an empty queue has a request ahead")
		}
		r.start(context.Background(), s, "d", limiter.PriorityDefault)
		for pr, want := range map[limiter.Priority]bool{limiter.PrioritySheddable: true, limiter.PriorityDefault: false, limiter.PriorityCritical: false} {
			if got := s.q.Ahead(pr); got != want {
				t.Errorf("Ahead(%v) = %v with a default request waiting, want %v", pr, got, want)
			}
		}
	})
}

// A slot that frees while the highest priority's request is trying its
// turn is owed to it, never given to a lower priority meanwhile.
func TestTurnOwedToTheHigherPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(limiter.Queue{On: true, MaxWait: time.Second}, time.Now)
		ctx := context.Background()
		gate := make(chan bool)
		var criticalTries, sheddableTries atomic.Int32
		var wg sync.WaitGroup
		wg.Go(func() {
			q.Wait(ctx, limiter.PriorityCritical, func(time.Time) (bool, time.Duration) {
				criticalTries.Add(1)
				return <-gate, 0
			})
		})
		synctest.Wait() // first in order: its turn at once, now trying
		wg.Go(func() {
			q.Wait(ctx, limiter.PrioritySheddable, func(time.Time) (bool, time.Duration) {
				sheddableTries.Add(1)
				return true, 0
			})
		})
		synctest.Wait()
		q.Release(time.Now()) // a slot frees while the critical request tries
		synctest.Wait()
		if n := sheddableTries.Load(); n != 0 {
			t.Fatalf("the sheddable request tried %d times while the critical one was trying", n)
		}
		gate <- false // its try found no slot: the owed turn makes it try again
		synctest.Wait()
		if n := criticalTries.Load(); n != 2 {
			t.Fatalf("critical tries %d, want 2: the turn owed to it", n)
		}
		gate <- true
		wg.Wait()
		if n := sheddableTries.Load(); n != 1 {
			t.Errorf("sheddable tries %d, want 1: its turn after the critical one", n)
		}
	})
}
