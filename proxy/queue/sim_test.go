package queue

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// simulation runs Poisson arrivals of default requests on synctest's
// clock against 4 slots of 50ms (80 a second) with the default queue,
// for 20s: rate returns the arrival rate, per second, at a time since
// the start. Requests that find a slot free and nobody waiting take it;
// the others wait. It returns the waits of the requests admitted after
// the first 5s, and how every wait ended.
func simulation(t *testing.T, rate func(since time.Duration) float64) (waits []time.Duration, outcomes map[Outcome]int) {
	q := New(limiter.Queue{On: true}, time.Now)
	var mu sync.Mutex
	free := 4
	try := func(time.Time) (bool, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if free == 0 {
			return false, 0
		}
		free--
		return true, 0
	}
	outcomes = map[Outcome]int{}
	rng := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	start := time.Now()
	for since := time.Duration(0); since < 20*time.Second; since = time.Since(start) {
		time.Sleep(time.Duration(rng.ExpFloat64() * float64(time.Second) / rate(since)))
		wg.Go(func() {
			res := Result{Outcome: Admitted}
			if q.Len() > 0 {
				res = q.Wait(context.Background(), limiter.PriorityDefault, try)
			} else if ok, _ := try(time.Now()); !ok {
				res = q.Wait(context.Background(), limiter.PriorityDefault, try)
			}
			mu.Lock()
			outcomes[res.Outcome]++
			if res.Outcome == Admitted && since > 5*time.Second {
				waits = append(waits, res.Waited)
			}
			mu.Unlock()
			if res.Outcome == Admitted {
				time.Sleep(50 * time.Millisecond)
				mu.Lock()
				free++
				mu.Unlock()
				q.Observe(50 * time.Millisecond)
				q.Release(time.Now())
			}
		})
	}
	wg.Wait()
	slices.Sort(waits)
	return waits, outcomes
}

// Under sustained overload (180 a second on 80) the queue stands after
// its first interval and stays so: the requests served wait at most
// about the target (the upstream's 50ms), and the others are shed
// rather than waiting maxWait.
func TestSimulatedOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		waits, outcomes := simulation(t, func(time.Duration) float64 { return 180 })
		p99 := waits[len(waits)*99/100]
		if p99 > 60*time.Millisecond {
			t.Errorf("p99 wait of the requests admitted after 5s: %v, want about the target, 50ms", p99)
		}
		if outcomes[Shed] < 1000 || outcomes[TimedOut] > 100 {
			t.Errorf("outcomes %v: want most of the excess shed, few timed out (those before the queue stood)", outcomes)
		}
		t.Logf("outcomes %v; waits after 5s: p50 %v, p99 %v", outcomes, waits[len(waits)/2], p99)
	})
}

// At 0.8 of the capacity in bursts (3x for 200ms of each second, 20 a
// second the rest), every request is served: a burst drains within the
// interval, so the queue never stands and nothing is shed.
func TestSimulatedBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		waits, outcomes := simulation(t, func(since time.Duration) float64 {
			if since%time.Second < 200*time.Millisecond {
				return 240
			}
			return 20
		})
		if outcomes[Shed]+outcomes[TimedOut] != 0 {
			t.Errorf("outcomes %v, want every request admitted", outcomes)
		}
		t.Logf("outcomes %v; waits after 5s: p50 %v, p99 %v", outcomes, waits[len(waits)/2], waits[len(waits)*99/100])
	})
}
