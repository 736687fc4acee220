// Package queue is a point's waiting room at its limit (limiter.Queue,
// docs/protections.md, Queue at the limit): a request that finds the
// point's calls in flight at their limit, or its token bucket empty, waits
// here for its turn instead of being degraded at once.
//
// The order, by priority: critical before default before sheddable; within
// a priority, first in first out while its requests drain, newest first
// once they stand (adaptive LIFO). A priority's requests stand once their
// oldest has waited longer than the target for a whole interval, and until
// none of them has waited for as long as the target; while they stand,
// those that waited longer than the target are shed, sheddable ones before
// default ones, the oldest first, never critical ones (CoDel). Nobody waits longer than maxWait, and
// at most maxLength wait.
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

	mu    sync.Mutex
	s     limiter.Queue // defaults applied
	lists [classes]list
	n     int
	// owed counts the turns given while every request of the highest
	// priority waiting was already trying (giveTurn); at most n.
	owed int
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

// Ahead reports whether a request of a higher priority than pr waits.
func (q *Queue) Ahead(pr limiter.Priority) bool {
	if q.length.Load() == 0 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for c := range class(pr) {
		if q.lists[c].head != nil {
			return true
		}
	}
	return false
}

// Status is what the admin port shows of a queue.
type Status struct {
	// Length is the number of requests waiting.
	Length int
	// Standing: the requests of a priority stand (newest first, and
	// CoDel sheds those of default and sheddable priority).
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
	standing := false
	for i := range q.lists {
		standing = standing || q.lists[i].standing
	}
	return Status{Length: q.n, Standing: standing, Target: q.target()}
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
	if q.owed > 0 {
		q.owed--
		q.giveTurn()
	}
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
	if q.n == 0 {
		q.owed = 0
	}
}

// judge brings the queue's state to now: whether each priority's requests
// stand, and, where they do, the requests shed for waiting longer than the
// target: sheddable ones first, then default ones, the oldest first; never
// critical ones, which wait up to maxWait. The caller holds mu.
//
// A priority's requests start to stand once their oldest has waited
// longer than the target for a whole interval (a burst that drains within
// it never stands), and stop once none of them has waited for as long as
// the target: requests that CoDel keeps short still stand, and a burst's
// gap ends the standing.
func (q *Queue) judge(now time.Time) {
	target := q.target()
	for c := range q.lists {
		l := &q.lists[c]
		switch {
		case l.head == nil:
			l.above = time.Time{}
			if l.drained.IsZero() {
				l.drained = now
			}
		case now.Sub(l.head.joined) <= target:
			l.above, l.drained = time.Time{}, time.Time{}
		default:
			l.drained = time.Time{}
			if l.above.IsZero() {
				l.above = l.head.joined.Add(target)
			}
		}
		switch {
		case !l.standing && !l.above.IsZero() && now.Sub(l.above) >= q.s.Interval:
			l.standing = true
		case l.standing && !l.drained.IsZero() && now.Sub(l.drained) >= target:
			l.standing = false
		}
	}
	for c := classes - 1; c > 0; c-- {
		for l := &q.lists[c]; l.standing && l.head != nil && now.Sub(l.head.joined) > target; {
			q.shed(l.head)
		}
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
// with a request waiting, the oldest without a turn, or the newest while
// that priority's requests stand; nil when every request of that priority
// has its turn (a lower priority's request never takes a turn from a
// higher one that is trying). The caller holds mu.
func (q *Queue) next() *Waiter {
	for c := range q.lists {
		l := &q.lists[c]
		if l.head == nil {
			continue
		}
		if l.standing {
			for w := l.tail; w != nil; w = w.prev {
				if !w.turn {
					return w
				}
			}
			return nil
		}
		for w := l.head; w != nil; w = w.next {
			if !w.turn {
				return w
			}
		}
		return nil
	}
	return nil
}

// giveTurn gives the next request its turn; when every request of the
// highest priority waiting is trying already, the turn is owed to the
// first of them that must wait again (again), so that a freed slot never
// goes to a lower priority meanwhile. The caller holds mu.
func (q *Queue) giveTurn() {
	if w := q.next(); w != nil {
		q.signal(w, sigTurn)
	} else if q.n > 0 {
		q.owed = min(q.owed+1, q.n)
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

// list is one priority's requests in the order they joined, and whether
// they stand (judge).
type list struct {
	head, tail *Waiter
	standing   bool
	// above is when the oldest request's wait passed the target, and has
	// stayed above it since; zero while it has not. drained is when the
	// list last emptied, and has stayed empty since; zero while it has
	// not.
	above, drained time.Time
}

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

// Set keeps queues by point name across reloads, so that the requests
// waiting keep their places, and a call that ends under the previous
// config still gives a turn. Its zero value is empty and ready. Keep is
// not safe for concurrent use (a reload's); the queues it returns are.
type Set struct{ byName map[string]*Queue }

// Keep returns the queue of each point of settings by name, for the
// points whose queue is on: the queue of the same name reconfigured, or a
// new one on the clock now. The queues of names not kept are dropped;
// their requests' waits end by maxWait.
func (s *Set) Keep(settings map[string]limiter.Queue, now func() time.Time) map[string]*Queue {
	kept := make(map[string]*Queue, len(settings))
	for name, qs := range settings {
		if !qs.On {
			continue
		}
		q, ok := s.byName[name]
		if ok {
			q.Reconfigure(qs)
		} else {
			q = New(qs, now)
		}
		kept[name] = q
	}
	s.byName = kept
	return kept
}
