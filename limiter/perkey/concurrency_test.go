package perkey

import (
	"sync"
	"testing"
	"time"
)

// TestConcurrentEnterExit: goroutines enter keys, exact and in the
// sketch, and exit their calls on other goroutines; afterwards no call is
// left in flight, in an exact entry or a sketch cell.
func TestConcurrentEnterExit(t *testing.T) {
	s := allOn
	s.MaxKeys = 64
	s.ConcurrentThreshold = limitAt(2)
	tab := newTable(t, s)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			calls := make(chan *Call, 4)
			done := make(chan struct{})
			go func() {
				for c := range calls {
					c.Exit()
					c.Exit()
				}
				close(done)
			}()
			for i := range 5000 {
				c := new(Call)
				now := t0.Add(time.Duration(i) * time.Millisecond)
				if tab.Enter(c, now, mix(uint64(g*7+i%200), 2)).Allowed {
					calls <- c
				}
			}
			close(calls)
			<-done
		})
	}
	wg.Wait()
	for i := range tab.shards {
		sh := &tab.shards[i]
		for j := range sh.used {
			if n := sh.entries[j].inflight; n != 0 {
				t.Fatalf("shard %d entry %d: %d calls in flight, want 0", i, j, n)
			}
		}
		for c, n := range sh.sk.flights {
			if n != 0 {
				t.Fatalf("shard %d cell %d: %d calls in flight, want 0", i, c, n)
			}
		}
	}
}
