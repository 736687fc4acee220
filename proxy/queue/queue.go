// Package queue is a point's waiting room at its limit (limiter.Queue,
// docs/protections.md, Queue at the limit): a request that finds the
// point's calls in flight at their limit, or its token bucket empty, waits
// here for its turn instead of being degraded at once.
//
// The order, by priority: critical before default before sheddable; within
// a priority, first in first out while the queue drains, newest first once
// it stands (adaptive LIFO). A queue stands once its oldest request has
// waited longer than the target for a whole interval, and until it has
// drained within the target for a whole interval; while it stands, a request that has waited longer than the
// target is shed, the lowest priority and the oldest first (CoDel). Nobody
// waits longer than maxWait, and at most maxLength wait.
//
// The queue does not judge: a request's turn is a try (Wait's try
// function, the point's limiter), which admits it or says it waits again.
// A turn is given when a call of the point ends (Release), when a request
// is admitted from the queue (the next one tries too, in case more slots
// are free), when a request joins an empty turn order, and when a token
// it waits for is due. Every decision takes the instant it is made at, so
// the model is tested on instants; Wait alone blocks.
package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Outcome is how a wait ended.
type Outcome uint8

const (
	// Admitted: a try ended the wait (the limiter admitted the request,
	// or judged it by a strategy it may not wait at).
	Admitted Outcome = iota + 1
	// Shed: the queue stood, and the request had waited longer than the
	// target (CoDel), or it was the lowest priority's oldest when the
	// queue was full.
	Shed
	// Full: the queue was full of requests of the same or a higher
	// priority; the request never waited.
	Full
	// TimedOut: the request waited maxWait, or its token would come later
	// than that.
	TimedOut
	// Canceled: the request's context ended (its client went away).
	Canceled
)

var outcomeNames = [...]string{Admitted: "admitted", Shed: "shed", Full: "full", TimedOut: "timeout", Canceled: "canceled"}

// String returns "admitted", "shed", "full", "timeout" or "canceled".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return ""
}

// classes is the number of priorities; class 0 is served first.
const classes = 3

// class returns the turn order's class of a priority: critical 0, default
// 1, sheddable 2.
func class(pr limiter.Priority) int {
	switch pr {
	case limiter.PriorityCritical:
		return 0
	case limiter.PrioritySheddable:
		return 2
	}
	return 1
}

// Queue is one point's waiting room. Its zero value is not usable: make
// one with New. It is safe for concurrent use.
type Queue struct {
	now func() time.Time

	mu       sync.Mutex
	s        limiter.Queue // defaults applied
	lists    [classes]list
	n        int
	standing bool
	// above is when the oldest request's wait passed the target, and has
	// stayed above it since (the queue did not drain within the target);
	// zero while it has not. drained is when the queue was last drained
	// within the target (empty, or its oldest within it), and has stayed
	// so since; zero while it has not.
	above, drained time.Time
	// token is the timer that gives a turn when a token a request waits
	// for is due; tokenAt is when it fires (zero: not armed).
	token   *time.Timer
	tokenAt time.Time

	// latency is the mean upstream time, in nanoseconds, of the point's
	// calls (Observe), which the target follows when it is not set.
	latency atomic.Int64
	// length mirrors n for Len, read without the lock.
	length atomic.Int64
}

// New returns the queue of settings s (limiter.Queue, On set; zero fields
// take their defaults), on the clock now.
func New(s limiter.Queue, now func() time.Time) *Queue {
	return &Queue{s: s.WithDefaults(), now: now}
}

// Reconfigure makes s the queue's settings from now on; the requests
// waiting keep their places (a reload).
func (q *Queue) Reconfigure(s limiter.Queue) {
	q.mu.Lock()
	q.s = s.WithDefaults()
	q.mu.Unlock()
}

// Len returns the number of requests waiting.
func (q *Queue) Len() int { return int(q.length.Load()) }

// Status is what the admin port shows of a queue.
type Status struct {
	// Length is the number of requests waiting.
	Length int
	// Standing: the queue stands (newest first, and CoDel sheds).
	Standing bool
	// Target is the target in force: the setting, or the one that
	// follows the upstream's time.
	Target time.Duration
}

// Status returns the queue's state.
func (q *Queue) Status() Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.judge(q.now())
	return Status{Length: q.n, Standing: q.standing, Target: q.target()}
}

// Observe records the upstream time of one call of the point, ended well
// or not: the target follows their mean (an exponentially weighted one,
// over about the last 16 calls).
func (q *Queue) Observe(d time.Duration) {
	for {
		old := q.latency.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/16
		}
		if q.latency.CompareAndSwap(old, next) {
			return
		}
	}
}

// target is the target in force. The caller holds mu.
func (q *Queue) target() time.Duration {
	if q.s.Target > 0 {
		return q.s.Target
	}
	return min(max(time.Duration(q.latency.Load()), limiter.MinQueueTarget), q.s.MaxWait)
}

// Release gives a turn at now: a call of the point ended, so a slot may
// be free.
func (q *Queue) Release(now time.Time) {
	if q.length.Load() == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.judge(now)
	q.giveTurn()
}

// Waiter is one request in a queue, from join to its end. The request's
// goroutine owns it; the queue signals it on ch.
type Waiter struct {
	ch chan signal
	// The fields below are guarded by the queue's mu.
	class      int
	joined     time.Time
	prev, next *Waiter
	listed     bool // in its list
	turn       bool // has a turn it has not yet taken
}

// signal is what the queue tells a waiter.
type signal uint8

const (
	sigTurn signal = iota + 1 // try now
	sigShed                   // give up: shed
)

// join puts a request of priority pr in the queue at now. It returns nil
// when the queue is full of requests of the same or a higher priority;
// otherwise a full queue sheds its lowest priority's oldest. A request
// that is first in the turn order is given its turn at once.
func (q *Queue) join(now time.Time, pr limiter.Priority) *Waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.judge(now)
	w := &Waiter{ch: make(chan signal, 1), class: class(pr), joined: now}
	if int64(q.n) >= q.s.MaxLength {
		lowest := q.lowest()
		if lowest < w.class || q.lists[lowest].head == nil {
			return nil
		}
		q.shed(q.lists[lowest].head)
	}
	q.lists[w.class].push(w)
	w.listed = true
	q.n++
	q.length.Store(int64(q.n))
	if q.next() == w {
		q.signal(w, sigTurn)
	}
	return w
}

// again puts w, whose try said it waits again, back among those waiting
// for a turn, in its place; after, when not zero, is when a token it may
// take is due, and a turn is given then.
func (q *Queue) again(w *Waiter, now time.Time, after time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w.turn = false
	if after > 0 {
		q.armToken(now.Add(after))
	}
	q.judge(now)
}

// admitted takes w out of the queue: its try admitted it. The next
// request in the turn order gets a turn, in case more slots are free.
func (q *Queue) admitted(w *Waiter, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.remove(w)
	q.judge(now)
	q.giveTurn()
}

// leave takes w out of the queue, if it is still in it: its wait ended
// (maxWait, its client gone). A turn it had and did not take goes to the
// next request.
func (q *Queue) leave(w *Waiter, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	hadTurn := w.turn
	q.remove(w)
	q.judge(now)
	if hadTurn {
		q.giveTurn()
	}
}

// remove unlists w, if it is listed. The caller holds mu.
func (q *Queue) remove(w *Waiter) {
	if !w.listed {
		return
	}
	q.lists[w.class].unlink(w)
	w.listed, w.turn = false, false
	q.n--
	q.length.Store(int64(q.n))
}

// judge brings the queue's state to now: whether it stands, and, while it
// does, the requests shed for waiting longer than the target: the lowest
// priority's oldest first, and a higher priority's only once no request
// of a lower one waits. CoDel never sheds a critical request: it waits up
// to maxWait. The caller holds mu.
//
// A queue starts to stand once its oldest request has waited longer than
// the target for a whole interval, and stops once it has been drained
// within the target (empty, or its oldest request within the target) for
// a whole interval: a queue kept short by shedding still stands, and one
// that empties for a moment under sustained overload does not go back to
// first in first out.
func (q *Queue) judge(now time.Time) {
	target := q.target()
	if oldest := q.oldest(); oldest == nil || now.Sub(oldest.joined) <= target {
		q.above = time.Time{}
		if q.drained.IsZero() {
			q.drained = now
		}
	} else {
		q.drained = time.Time{}
		if q.above.IsZero() {
			q.above = oldest.joined.Add(target)
		}
	}
	switch {
	case !q.standing && !q.above.IsZero() && now.Sub(q.above) >= q.s.Interval:
		q.standing = true
	case q.standing && !q.drained.IsZero() && now.Sub(q.drained) >= q.s.Interval:
		q.standing = false
	}
	if !q.standing {
		return
	}
	for {
		c := q.lowest()
		w := q.lists[c].head
		if c == 0 || w == nil || now.Sub(w.joined) <= target {
			return
		}
		q.shed(w)
	}
}

// shed takes w out of the queue and tells it so. The caller holds mu.
func (q *Queue) shed(w *Waiter) {
	hadTurn := w.turn
	q.remove(w)
	q.signal(w, sigShed)
	if hadTurn {
		q.giveTurn()
	}
}

// oldest returns the request that has waited longest, or nil when none
// waits. The caller holds mu.
func (q *Queue) oldest() *Waiter {
	var oldest *Waiter
	for i := range q.lists {
		if h := q.lists[i].head; h != nil && (oldest == nil || h.joined.Before(oldest.joined)) {
			oldest = h
		}
	}
	return oldest
}

// lowest returns the lowest priority's class that has a request waiting,
// or the highest class when none has.
func (q *Queue) lowest() int {
	for c := classes - 1; c > 0; c-- {
		if q.lists[c].head != nil {
			return c
		}
	}
	return 0
}

// next returns the request whose turn is next: in the highest priority
// with a request that has no turn yet, the oldest, or the newest while
// the queue stands; nil when every request has its turn. The caller holds
// mu.
func (q *Queue) next() *Waiter {
	for c := range q.lists {
		if q.standing {
			for w := q.lists[c].tail; w != nil; w = w.prev {
				if !w.turn {
					return w
				}
			}
			continue
		}
		for w := q.lists[c].head; w != nil; w = w.next {
			if !w.turn {
				return w
			}
		}
	}
	return nil
}

// giveTurn gives the next request its turn. The caller holds mu.
func (q *Queue) giveTurn() {
	if w := q.next(); w != nil {
		q.signal(w, sigTurn)
	}
}

// signal tells w s. The caller holds mu. A waiter holds at most one
// signal unread: a turn is given only to one without a turn, and a shed
// one is unlisted, so nothing follows it.
func (q *Queue) signal(w *Waiter, s signal) {
	if s == sigTurn {
		w.turn = true
	}
	select {
	case w.ch <- s:
	default:
		// A turn not yet read: the shed replaces nothing, it follows.
		<-w.ch
		w.ch <- s
	}
}

// armToken makes the token timer give a turn at at, unless it fires
// sooner already. The caller holds mu.
func (q *Queue) armToken(at time.Time) {
	if !q.tokenAt.IsZero() && !at.Before(q.tokenAt) {
		return
	}
	q.tokenAt = at
	d := at.Sub(q.now())
	if q.token == nil {
		q.token = time.AfterFunc(d, q.tokenDue)
		return
	}
	q.token.Reset(d)
}

// tokenDue gives a turn: a token a request waits for is due.
func (q *Queue) tokenDue() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tokenAt = time.Time{}
	q.judge(q.now())
	q.giveTurn()
}

// Result is how a wait ended, and how long it took.
type Result struct {
	Outcome Outcome
	Waited  time.Duration
}

// Wait waits in q for a request of priority pr whose try did not admit
// it. At each turn it calls try with the instant; try reports whether the
// wait is over (the request was admitted, or judged without a wait) and,
// when not, how long until a token the request may take is due (0 when it
// waits for a slot). A try that is not
// admitted and whose token would come after maxWait ends the wait at
// once (TimedOut). The wait ends when try admits the request, the queue
// sheds it, maxWait passes or ctx ends. Wait blocks; try runs on the
// caller's goroutine.
func (q *Queue) Wait(ctx context.Context, pr limiter.Priority, try func(now time.Time) (done bool, after time.Duration)) Result {
	start := q.now()
	w := q.join(start, pr)
	if w == nil {
		return Result{Outcome: Full}
	}
	q.mu.Lock()
	maxWait := q.s.MaxWait
	q.mu.Unlock()
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	end := func(o Outcome) Result {
		now := q.now()
		if o != Admitted {
			q.leave(w, now)
		}
		return Result{Outcome: o, Waited: now.Sub(start)}
	}
	for {
		select {
		case s := <-w.ch:
			if s == sigShed {
				return end(Shed)
			}
		case <-timer.C:
			return end(TimedOut)
		case <-ctx.Done():
			return end(Canceled)
		}
		now := q.now()
		done, after := try(now)
		if done {
			q.admitted(w, now)
			return Result{Outcome: Admitted, Waited: now.Sub(start)}
		}
		if after > 0 && after > maxWait-now.Sub(start) {
			return end(TimedOut)
		}
		q.again(w, now, after)
	}
}

// list is one priority's requests in the order they joined.
type list struct{ head, tail *Waiter }

func (l *list) push(w *Waiter) {
	w.prev, w.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
}

func (l *list) unlink(w *Waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
}
