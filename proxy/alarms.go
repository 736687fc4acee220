package proxy

import (
	"context"
	"sync"
	"time"
)

// AlarmTick is how often the calls in flight are checked for a due alarm
// (clock.go): a call's timeout is counted, and its UpstreamTimeout cuts
// it, within AlarmTick of when its upstream time reaches them. So a hung
// upstream trips a point within timeoutThreshold + AlarmTick.
const AlarmTick = 10 * time.Millisecond

// alarms holds the calls whose upstream clock has an alarm (a timeout
// threshold or an UpstreamTimeout), from startClock to endClock, and fires
// those that are due. Handler.Run sweeps them every AlarmTick while there
// are any, and sleeps while there are none, instead of a timer per call: a
// request costs two short locked list operations, no allocation, and no
// timer to start and stop. Without Run no alarm fires. The zero alarms is
// not ready; New sets now and wake.
type alarms struct {
	mu   sync.Mutex
	head *call // the calls, linked by call.prev and call.next
	due  []*call
	now  func() time.Time // the Handler's clock
	wake chan struct{}    // a token when the list stops being empty
}

// add puts c in the list, and wakes the sweep when the list was empty.
func (a *alarms) add(c *call) {
	a.mu.Lock()
	wasEmpty := a.head == nil
	c.prev, c.next = nil, a.head
	if a.head != nil {
		a.head.prev = c
	}
	a.head = c
	a.mu.Unlock()
	if wasEmpty {
		select {
		case a.wake <- struct{}{}:
		default: // a token is already there
		}
	}
}

// remove takes c out of the list, if it is there.
func (a *alarms) remove(c *call) {
	a.mu.Lock()
	if c.prev != nil {
		c.prev.next = c.next
	} else if a.head == c {
		a.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
	a.mu.Unlock()
}

// run fires the due alarms every AlarmTick while the list holds calls,
// and waits for one while it is empty, until ctx is done.
func (a *alarms) run(ctx context.Context) {
	t := time.NewTicker(AlarmTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if a.fire() {
			continue
		}
		t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		t.Reset(AlarmTick)
	}
}

// fire runs the alarms that are due, and reports whether the list holds
// any call.
func (a *alarms) fire() bool {
	now := a.now().UnixNano()
	a.mu.Lock()
	if a.head == nil {
		a.mu.Unlock()
		return false
	}
	due := a.due[:0]
	for c := a.head; c != nil; c = c.next {
		if at := c.clock.due.Load(); at != 0 && at <= now {
			due = append(due, c)
		}
	}
	a.due = due
	a.mu.Unlock()
	// Outside the lock: an alarm takes the call's clock lock, under which
	// startClock and endClock take this one.
	for i, c := range due {
		c.alarm()
		due[i] = nil
	}
	return true
}

// alarmAt is when, in Unix nanoseconds, an alarm next after now is due,
// or 0 for none (next <= 0).
func alarmAt(now time.Time, next time.Duration) int64 {
	if next <= 0 {
		return 0
	}
	return now.UnixNano() + int64(next)
}
