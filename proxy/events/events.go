package events

import (
	"slices"
	"sync"
	"time"
)

// Kind names what happened. The values are the /status document's.
type Kind string

const (
	// Trip: a point's strategies failed (a would-be trip on a shadow point).
	Trip Kind = "trip"
	// Recover: a tripped point's strategies pass again, at a request or
	// because the window slid past the trip.
	Recover Kind = "recover"
	// DelayStart: a trip started the point's delay.
	DelayStart Kind = "delay_start"
	// DelayEnd: the delay ended, by a good probe or by time.
	DelayEnd Kind = "delay_end"
	// Probe: the delay let a request through to test the service.
	Probe Kind = "probe"
	// ProbeFailed: a probe ended in an exception or a timeout.
	ProbeFailed Kind = "probe_failed"
	// Reload: a changed config was applied.
	Reload Kind = "reload"
	// ReloadRejected: a changed config was refused; the last good one serves.
	ReloadRejected Kind = "reload_rejected"
	// Force: an operator switched a point to degrade or pass every
	// request until a time (the admin port's POST /points/{name}/force).
	Force Kind = "force"
	// ForceEnd: a point's switch ended: cleared, its time passed, or the
	// point left the config.
	ForceEnd Kind = "force_end"
)

// Event is one entry of the history.
type Event struct {
	At   time.Time
	Kind Kind
	// Point names the point; "" for a global event (reloads).
	Point string
	// Strategy names the strategy of a trip, a delay's start or a failed
	// probe; "" otherwise.
	Strategy string
	// Shadow marks an event of a shadow point: nothing was degraded.
	Shadow bool
	// Detail is a short human text: a trip's figures, what a reload
	// changed, why a reload was rejected.
	Detail string
	// Repeats counts the later occurrences folded into this event (0:
	// none), and Last is when the last of them happened (zero with none).
	// At and Detail stay the first occurrence's. A point's event folds
	// into its latest one of the same kind, strategy and shadow (and, but
	// for a trip, whose figures vary, the same detail) that happened
	// within FoldWithin before it, or at any time before it while the
	// history holds only events of the last Span (Log); a trip within
	// FlapHold of the recovery before it folds into the trip before
	// that.
	Repeats int
	Last    time.Time
}

// FlapHold is how long a point's recovery is held back before it enters
// the history. A trip of the same point with the same strategy within it
// (a point that flaps at its threshold, tripping and recovering bucket
// after bucket) folds into the trip before it as a repeat, and the
// recovery is dropped, instead of adding a recovery and a trip each time.
const FlapHold = 2 * time.Second

// FoldWithin is how close to the last occurrence of a point's trip,
// recovery, delay's start or end, probe or failed probe another of the
// same must be to fold into it as a repeat (Event.Repeats). A point that
// trips, enters its delay, probes and recovers over and over under a storm
// then keeps one event of each kind instead of one per occurrence, which
// would push everything else out of the history within a minute. A force
// or its end and the global events (reloads) never fold.
const FoldWithin = time.Minute

// Span is how far back the history is to reach: the admin port shows the
// events of the last Span. While adding an event would push out of the
// history one that happened within Span of it, a point's event folds into
// its latest one of the same kind whenever that happened (FoldWithin
// lifted), so that the bounds hold the last Span unless more kinds of
// events happen in it than the bounds can hold.
const Span = 15 * time.Minute

// Log is a bounded history: the last Global events of every kind, and
// for each point its last PerPoint events, so that a noisy point cannot
// push a quiet one's trip out. Repeats fold (FoldWithin, Span) and
// recoveries are held back for FlapHold. The zero Log is not usable; use
// New. A Log is safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	global   ring
	points   map[string]*pointLog
	perPoint int
}

// pointLog is one point's history, its recovery held back, if any, and
// the latest event of each fold key that its ring still holds.
type pointLog struct {
	ring
	held   *Event // a Recover not yet in the history (FlapHold)
	latest map[foldKey]*Event
}

// foldKey is what makes two events of a point repeats of one another.
type foldKey struct {
	kind     Kind
	strategy string
	shadow   bool
	detail   string // "" for a trip: its figures vary from trip to trip
}

// foldable reports whether e may fold into an earlier event of its point,
// and under what key.
func foldable(e *Event) (foldKey, bool) {
	switch e.Kind {
	case Trip:
		return foldKey{kind: e.Kind, strategy: e.Strategy, shadow: e.Shadow}, true
	case Recover, DelayStart, DelayEnd, Probe, ProbeFailed:
		return foldKey{kind: e.Kind, strategy: e.Strategy, shadow: e.Shadow, detail: e.Detail}, true
	}
	return foldKey{}, false
}

// lastAt is when e last happened: its last repeat's time, or its own.
func (e *Event) lastAt() time.Time {
	if e.Repeats > 0 {
		return e.Last
	}
	return e.At
}

// fold counts an occurrence at at as a repeat of e.
func (e *Event) fold(at time.Time) {
	e.Repeats++
	e.Last = at
}

// ring holds the last len(buf) events; next is where the next one goes.
// The global ring and a point's hold the same *Event, so that folding a
// repeat into a trip shows in both.
type ring struct {
	buf  []*Event
	next int
	full bool
}

func newRing(n int) ring { return ring{buf: make([]*Event, n)} }

// add puts e in the ring and returns the event it pushed out, or nil.
func (r *ring) add(e *Event) (out *Event) {
	out, r.buf[r.next] = r.buf[r.next], e
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
	return out
}

// pushesOut reports whether adding an event would push out one that last
// happened at or after t.
func (r *ring) pushesOut(t time.Time) bool {
	return r.full && !r.buf[r.next].lastAt().Before(t)
}

// last returns the newest event, or nil.
func (r *ring) last() *Event {
	if !r.full && r.next == 0 {
		return nil
	}
	return r.buf[(r.next+len(r.buf)-1)%len(r.buf)]
}

// since appends to out the events at or after t (or repeated after it),
// sorted by At, oldest first. The ring holds them in the order they
// entered it, which is not their order in time: a recovery held back for
// FlapHold enters after the events of other points that happened
// meanwhile.
func (r *ring) since(out []Event, t time.Time) []Event {
	start := 0
	if r.full {
		start = r.next
	}
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	for i := range n {
		e := r.buf[(start+i)%len(r.buf)]
		if !e.At.Before(t) || e.Last.After(t) {
			out = append(out, *e)
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	return out
}

// New returns a Log that keeps the last global events overall and the
// last perPoint events of each point; both must be at least 1.
func New(global, perPoint int) *Log {
	return &Log{global: newRing(global), points: make(map[string]*pointLog), perPoint: perPoint}
}

// Add records e, which happened after every event already added. It is
// cheap (one lock, one allocation) and meant for state changes, never
// for every request; e's Repeats and Last are ignored. A point's event
// may fold into an earlier one as a repeat (Event.Repeats). A point's
// Recover is held back for FlapHold (Flush adds it): a Trip of the point
// with the same strategy within FlapHold of it drops it and counts as a
// repeat of the trip before.
func (l *Log) Add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Repeats, e.Last = 0, time.Time{}
	if e.Point == "" {
		l.global.add(&e)
		return
	}
	pl := l.points[e.Point]
	if pl == nil {
		pl = &pointLog{ring: newRing(l.perPoint), latest: make(map[foldKey]*Event)}
		l.points[e.Point] = pl
	}
	if held := pl.held; held != nil {
		pl.held = nil
		if trip := pl.last(); e.Kind == Trip && trip != nil && trip.Kind == Trip &&
			trip.Strategy == e.Strategy && trip.Shadow == e.Shadow && e.At.Sub(held.At) < FlapHold {
			trip.fold(e.At)
			return
		}
		l.put(pl, held)
	}
	if e.Kind == Recover {
		pl.held = &e
		return
	}
	l.put(pl, &e)
}

// put folds e into the latest event of pl with its fold key, when that
// happened within FoldWithin before it, or at all while adding e would
// push out of the history an event of the last Span; otherwise it adds e.
func (l *Log) put(pl *pointLog, e *Event) {
	key, ok := foldable(e)
	if !ok {
		l.add(pl, e)
		return
	}
	if prev := pl.latest[key]; prev != nil {
		since := e.At.Add(-Span)
		if e.At.Sub(prev.lastAt()) < FoldWithin || l.global.pushesOut(since) || pl.pushesOut(since) {
			prev.fold(e.At)
			return
		}
	}
	l.add(pl, e)
	pl.latest[key] = e
}

// add adds e to the global history and to pl's, and forgets pl's latest
// event of a fold key once pl's ring no longer holds it.
func (l *Log) add(pl *pointLog, e *Event) {
	l.global.add(e)
	if out := pl.add(e); out != nil {
		if key, ok := foldable(out); ok && pl.latest[key] == out {
			delete(pl.latest, key)
		}
	}
}

// Flush adds the recoveries held back for FlapHold or longer at now. Call
// it about once a second.
func (l *Log) Flush(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pl := range l.points {
		if pl.held != nil && now.Sub(pl.held.At) >= FlapHold {
			l.put(pl, pl.held)
			pl.held = nil
		}
	}
}

// Since returns the events at or after t (or repeated after it), oldest
// first by At (ties in the order they were added): every kind, every
// point.
func (l *Log) Since(t time.Time) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.global.since(nil, t)
}

// PointSince returns point's events at or after t (or repeated after it),
// oldest first by At.
func (l *Log) PointSince(point string, t time.Time) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.points[point]
	if pl == nil {
		return nil
	}
	return pl.since(nil, t)
}

// Keep forgets the per-point history of every point not in names (points
// a reload removed), so that the Log's memory stays bounded by the points
// in force. Their events stay in the global history until pushed out.
func (l *Log) Keep(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name := range l.points {
		if !slices.Contains(names, name) {
			delete(l.points, name)
		}
	}
}
