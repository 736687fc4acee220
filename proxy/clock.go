package proxy

import (
	"sync"
	"sync/atomic"
	"time"
)

// The upstream clock of one call (docs/semantics.md, "Upstream time"). It measures
// the service's time only, so that no client can trip a point by being
// slow:
//
//	Enter ─────request────────────────┬──response──────────────────── exit
//	  runs, but stops while the       │ stops, but runs while the
//	  transport waits on a read of    │ proxy waits on a read of the
//	  the client's request body       │ upstream's response body
//	                                  headers
//
// Time it stops is given to the limiter with Call.Exclude, so the call's
// Duration is the upstream time. A call has two alarms in upstream time:
// the timeout threshold (the timeout is counted in flight) and the point's
// UpstreamTimeout (the call is cut). The next pending one is due at an
// instant while the clock runs, none while it stands still; the Handler's
// alarms (alarms.go) fire it within AlarmTick, and a clock that runs again
// is due again for what remains.

// clockPhase is where a call stands on its way through the upstream.
type clockPhase uint8

const (
	phaseRequest  clockPhase = iota // waiting for the response headers
	phaseResponse                   // copying the response body
	phaseEnded                      // exited; the clock is read no more
)

// upstreamClock is a call's upstream clock. Its zero value is a running
// clock in phaseRequest with no alarm. Its methods are safe for concurrent
// use: the transport reads the request body on a goroutine of its own, and
// the timer fires on another.
type upstreamClock struct {
	mu       sync.Mutex
	phase    clockPhase
	stopped  bool
	since    time.Time     // when the clock stopped; meaningful while stopped
	listed   bool          // the call is in the Handler's alarms
	timeout  time.Duration // upstream time at which to count the timeout; 0: none pending
	deadline time.Duration // upstream time at which to cut the call; 0: none pending
	took     time.Duration // the upstream time, once phaseEnded
	// due is when the next pending alarm is due, in Unix nanoseconds on
	// the Handler's clock; 0 while none is (none left, or the clock
	// stands still). Written under mu, read by the alarms' sweeper.
	due atomic.Int64
}

// startClock arms c's alarms, in upstream time: the point's timeout
// threshold and UpstreamTimeout (0 for either means none). It runs before
// the upstream call, on the request's goroutine.
func (c *call) startClock(threshold, deadline time.Duration) {
	if threshold <= 0 && deadline <= 0 {
		return
	}
	k := &c.clock
	k.mu.Lock()
	defer k.mu.Unlock()
	k.timeout, k.deadline = threshold, deadline
	now := c.h.now()
	k.arm(now, c.lim.Duration(now))
	k.listed = true
	c.h.alarms.add(c)
}

// next returns how long after spent the next pending alarm is due, or 0
// when none is pending.
func (k *upstreamClock) next(spent time.Duration) time.Duration {
	var next time.Duration
	for _, at := range [2]time.Duration{k.timeout, k.deadline} {
		if at > 0 && (next == 0 || at-spent < next) {
			next = max(at-spent, 1)
		}
	}
	return next
}

// alarm runs on the alarms' sweeper once the next alarm is due: it counts
// the timeout and cuts the call when their upstream time has come, and
// arms the rest.
func (c *call) alarm() {
	now := c.h.now()
	k := &c.clock
	k.mu.Lock()
	if k.phase == phaseEnded || k.stopped {
		k.mu.Unlock() // a stopped clock arms again when it runs again
		return
	}
	spent := c.lim.Duration(now)
	timedOut := k.timeout > 0 && spent >= k.timeout
	if timedOut {
		k.timeout = 0
	}
	cut := k.deadline > 0 && spent >= k.deadline
	if cut {
		k.deadline = 0
	}
	k.arm(now, spent)
	counted := timedOut && c.lim.Timeout(now)
	k.mu.Unlock()
	if counted {
		c.series.Timeouts.Inc()
	}
	if cut {
		c.cut.Store(true)
		c.cancel(errUpstreamTimeout)
	}
}

// arm makes the next pending alarm due at its instant, the clock running
// from now with spent upstream time. Call with k.mu held.
func (k *upstreamClock) arm(now time.Time, spent time.Duration) {
	k.due.Store(alarmAt(now, k.next(spent)))
}

// stop stops the clock at now, if it runs: no alarm is due while it
// stands still. Call with k.mu held.
func (k *upstreamClock) stop(now time.Time) {
	if !k.stopped {
		k.stopped, k.since = true, now
		k.due.Store(0)
	}
}

// run starts the clock again at now, handing the time it stood still to
// the limiter, and arms what remains of the alarms. Call with c.clock.mu
// held.
func (c *call) run(now time.Time) {
	k := &c.clock
	if !k.stopped {
		return
	}
	k.stopped = false
	c.lim.Exclude(now.Sub(k.since))
	if k.phase != phaseEnded {
		k.arm(now, c.lim.Duration(now))
	}
}

// clientRead brackets a read of the client's request body: before is true
// as it starts, false once it returned. The clock stops meanwhile while the
// call waits for its response headers; afterwards reads of a body still
// streaming (a bidirectional stream) change nothing.
func (c *call) clientRead(before bool) {
	now := c.h.now()
	k := &c.clock
	k.mu.Lock()
	if k.phase == phaseRequest {
		if before {
			k.stop(now)
		} else {
			c.run(now)
		}
	}
	k.mu.Unlock()
}

// headers marks the arrival of the response headers: from here the clock
// runs only while the proxy reads the upstream's body.
func (c *call) headers() {
	now := c.h.now()
	k := &c.clock
	k.mu.Lock()
	if k.phase == phaseRequest {
		k.phase = phaseResponse
		k.stop(now)
	}
	k.mu.Unlock()
}

// upstreamRead brackets a read of the upstream's response body, like
// clientRead.
func (c *call) upstreamRead(before bool) {
	now := c.h.now()
	k := &c.clock
	k.mu.Lock()
	if k.phase == phaseResponse {
		if before {
			c.run(now)
		} else {
			k.stop(now)
		}
	}
	k.mu.Unlock()
}

// endClock ends the clock at now, once: the time it has stood still since
// it last ran is the client's, and no alarm fires after it. It returns the
// call's upstream time, the same on every call, and whether this call
// ended it.
func (c *call) endClock(now time.Time) (took time.Duration, ended bool) {
	k := &c.clock
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.phase != phaseEnded {
		ended = true
		c.run(now)
		k.phase = phaseEnded
		k.took = c.lim.Duration(now)
		k.due.Store(0)
		if k.listed {
			c.h.alarms.remove(c)
			k.listed = false
		}
	}
	return k.took, ended
}
