// Package events keeps the recent history of what happened to the proxy's
// points and config: trips, delays, probes, recoveries, reloads and
// rejected reloads, in bounded memory, for the admin port to show. It
// imports nothing of sds-proxy; the request path and cmd add, the admin
// port reads.
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
}

// Log is a bounded history: the last Global events of every kind, and
// for each point its last PerPoint events, so that a noisy point cannot
// push a quiet one's trip out. The zero Log is not usable; use New. A Log
// is safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	global   ring
	points   map[string]*ring
	perPoint int
}

// ring holds the last len(buf) events; next is where the next one goes.
type ring struct {
	buf  []Event
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]Event, n)} }

func (r *ring) add(e Event) {
	r.buf[r.next] = e
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// since appends to out the events at or after t, oldest first.
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
		if !e.At.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// New returns a Log that keeps the last global events overall and the
// last perPoint events of each point; both must be at least 1.
func New(global, perPoint int) *Log {
	return &Log{global: *newRing(global), points: make(map[string]*ring), perPoint: perPoint}
}

// Add records e. It is cheap (one lock, no allocation but a point's first
// event) and meant for state changes, never for every request.
func (l *Log) Add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.global.add(e)
	if e.Point == "" {
		return
	}
	r := l.points[e.Point]
	if r == nil {
		r = newRing(l.perPoint)
		l.points[e.Point] = r
	}
	r.add(e)
}

// Since returns the events at or after t, oldest first: every kind, every
// point.
func (l *Log) Since(t time.Time) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.global.since(nil, t)
}

// PointSince returns point's events at or after t, oldest first.
func (l *Log) PointSince(point string, t time.Time) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.points[point]
	if r == nil {
		return nil
	}
	return r.since(nil, t)
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
