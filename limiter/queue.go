package limiter

import (
	"fmt"
	"time"
)

// Queue is a point's queue at its limit (docs/protections.md, Queue at
// the limit): a request that finds the point's calls in flight at their
// limit (ConcurrentThreshold, the adaptive limit, or a sheddable share of
// either), or its token bucket empty, waits for a slot or a token instead
// of being degraded at once. The limiter only says that a request may wait
// (Request.Wait, Verdict.Wait); the proxy keeps the waiting requests
// (package proxy/queue), in order of priority:
//
//   - critical before default before sheddable;
//   - within a priority, first in first out while its requests drain;
//     once they stand (their oldest has waited longer than Target for a
//     whole Interval, until none has waited for as long as Target),
//     newest first (adaptive LIFO: those whose clients are still
//     waiting go first), and those that waited longer than Target are
//     shed, sheddable ones before default ones, the oldest first (CoDel),
//     never critical ones;
//   - nobody waits longer than MaxWait, and at most MaxLength wait: past
//     it the lowest priority's oldest is shed.
//
// A shed request is judged again without waiting, and degraded as it
// would have been without a queue. Time in the queue is not upstream
// time: the call begins when it takes its slot.
//
// The zero value is off; with On set, each zero field takes its default.
type Queue struct {
	// On turns the queue on.
	On bool
	// MaxWait is the longest a request waits, from 1ms to MaxQueueWait.
	// 0: DefaultQueueMaxWait, about as long as clients wait for an
	// answer, and longer than a burst takes to drain.
	MaxWait time.Duration
	// Target is the wait above which a queue that stands sheds, from 1ms
	// to MaxWait. 0: follow the point's mean upstream time (at least
	// MinQueueTarget, at most MaxWait): a queue is as long as a few calls
	// take, which fits a 1ms service and a 50ms one alike.
	Target time.Duration
	// Interval is how long a priority's oldest request must have waited
	// longer than Target, without a break, before that priority's
	// requests stand; at least Target. 0: 2*MaxWait, so that a burst the
	// service drains within MaxWait never stands.
	Interval time.Duration
	// MaxLength is the most requests waiting, 1 to MaxQueueLength. 0:
	// DefaultQueueMaxLength.
	MaxLength int64
}

// Defaults and limits of Queue.
const (
	DefaultQueueMaxWait   = time.Second
	DefaultQueueMaxLength = 1000
	// MinQueueTarget is the least Target that follows the upstream's
	// time: below a few milliseconds, a scheduler's pause would count as
	// a standing queue.
	MinQueueTarget = 5 * time.Millisecond
	// MaxQueueWait is the highest MaxWait: a request that waits longer
	// has most likely been given up by its client.
	MaxQueueWait = time.Minute
	// MaxQueueLength is the highest MaxLength.
	MaxQueueLength = 1 << 20
)

// WithDefaults returns q with its zero fields set to their defaults, but
// Target, whose zero follows the upstream (Queue.Target); a q that is off
// is returned as it is.
func (q Queue) WithDefaults() Queue {
	if !q.On {
		return q
	}
	if q.MaxWait == 0 {
		q.MaxWait = DefaultQueueMaxWait
	}
	if q.Interval == 0 {
		q.Interval = 2 * q.MaxWait
	}
	if q.MaxLength == 0 {
		q.MaxLength = DefaultQueueMaxLength
	}
	return q
}

// check appends the queue's problems to errs.
func (q Queue) check(errs []error) []error {
	if !q.On {
		return errs
	}
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "Queue." + field, Problem: fmt.Sprintf(format, args...)})
	}
	d := q.WithDefaults()
	if d.MaxWait < time.Millisecond || d.MaxWait > MaxQueueWait {
		bad("MaxWait", "%v is not from 1ms to %v; write a wait such as 500ms", q.MaxWait, MaxQueueWait)
		return errs
	}
	if q.Target != 0 && (q.Target < time.Millisecond || q.Target > d.MaxWait) {
		bad("Target", "%v is not from 1ms to maxWait %v; write one such as 50ms, or remove it to follow the upstream's time", q.Target, d.MaxWait)
	}
	if q.Interval < 0 || d.Interval < max(q.Target, time.Millisecond) {
		bad("Interval", "%v is shorter than the target %v", q.Interval, q.Target)
	}
	if d.MaxLength < 1 || d.MaxLength > MaxQueueLength {
		bad("MaxLength", "%d is not from 1 to %d", q.MaxLength, MaxQueueLength)
	}
	return errs
}

// Queues reports whether a request that fails s may wait in its point's
// Queue: s is a limit on the calls in flight or the token bucket.
func (s Strategy) Queues() bool { return s == Concurrent || s == Adaptive || s == TokenBucket }
