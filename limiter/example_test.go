package limiter_test

import (
	"fmt"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// A point that lets 2 requests a window through, then degrades.
func ExampleNewPoint() {
	var s limiter.Settings // every strategy off
	s.VisitThreshold = limiter.At(2)
	p, err := limiter.NewPoint("orders.read", s)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) // the caller's clock
	for range 3 {
		var c limiter.Call
		v := p.Enter(&c, now, limiter.Request{})
		if !v.Allowed {
			fmt.Printf("degraded: %s %d/%d\n", v.Strategy, v.Count, v.Threshold)
			continue
		}
		// Forward the request, then:
		c.Exit(now.Add(20*time.Millisecond), limiter.OK)
		fmt.Println("forwarded")
	}
	fmt.Println(p.Snapshot(now).Counts)
	// Output:
	// forwarded
	// forwarded
	// degraded: visit 3/2
	// {3 1 0 0}
}

// The proxy's shape of a request: Enter, a timer that counts a hung call
// as a timeout while it hangs, and a deferred Exit.
func ExamplePoint_Enter() {
	var s limiter.Settings
	s.TimeoutThreshold, s.TimeoutCountThreshold = 250*time.Millisecond, limiter.At(1)
	p, _ := limiter.NewPoint("orders.read", s)
	begin := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	var c limiter.Call
	if v := p.Enter(&c, begin, limiter.Request{}); v.Allowed {
		// A timer set to p.TimeoutThreshold() fires while the call hangs:
		fmt.Println("timeout counted:", c.Timeout(begin.Add(p.TimeoutThreshold())))
		// The call ends at last; Exit does not count the timeout again.
		c.Exit(begin.Add(2*time.Second), limiter.OK)
	}
	v := p.Enter(new(limiter.Call), begin.Add(2*time.Second), limiter.Request{})
	fmt.Println(v.Allowed, v.Strategy, v.Events.Has(limiter.EventTripped))
	// Output:
	// timeout counted: true
	// false timeout true
}

// Sheddable requests may use only SheddableShare percent of a threshold:
// with 4 visits a window and a 50% share, the third sheddable request is
// degraded while critical ones still pass.
func ExamplePoint_Enter_priority() {
	var s limiter.Settings
	s.VisitThreshold, s.SheddableShare = limiter.At(4), limiter.At(50)
	p, _ := limiter.NewPoint("orders.read", s)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, pr := range []limiter.Priority{limiter.PrioritySheddable, limiter.PrioritySheddable, limiter.PrioritySheddable, limiter.PriorityCritical} {
		var c limiter.Call
		v := p.Enter(&c, now, limiter.Request{Priority: pr})
		if !v.Allowed {
			fmt.Printf("%s degraded: %s %d/%d, sheddable share: %v\n", pr, v.Strategy, v.Count, v.Threshold, v.Sheddable)
			continue
		}
		c.Exit(now, limiter.OK)
		fmt.Println(pr, "forwarded")
	}
	// Output:
	// sheddable forwarded
	// sheddable forwarded
	// sheddable degraded: visit 3/2, sheddable share: true
	// critical forwarded
}
