// Package statelog reports the state changes of the points: a trip, a
// delay's start and end, a recovery. Each is one event in the history
// (proxy/events) and one log line, and the lines are throttled: a point
// that flaps under sustained overload (a token bucket that trips on every
// empty moment and recovers on every refill) would otherwise write a pair
// of lines per token. The changes held back are counted, and the next
// line, or Flush's, carries their number as repeats. The event history
// folds flapping on its own. It logs state changes, never requests.
package statelog

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/events"
)

// Every is the least time between two log lines of the same kind of one
// point (and strategy, for a trip or a delay's start).
const Every = time.Second

// Kind is a kind of line, throttled apart from the others.
type Kind uint8

const (
	tripped Kind = iota + 1
	delayStarted
	delayEnded
	recovered
	// GRPCNotForwarded is not a state change: a gRPC call the upstream
	// could not take (a transport error, or an answer that is not
	// gRPC's), whose line is throttled alike.
	GRPCNotForwarded
)

// Cause says what made a point's state change, for the event's detail.
type Cause uint8

const (
	ByRequest Cause = iota + 1 // a request's Enter
	ByProbe                    // a probe's Exit
	BySettle                   // a settle with no request (limiter.Point.Settle)
)

// Log writes the state-change lines of the points to its logger, at most
// one per point, Kind and strategy per Every, and records each change in
// its history. Build it with New; it is safe for concurrent use.
type Log struct {
	logger  *zap.Logger
	history *events.Log // nil: none
	mu      sync.Mutex
	lines   map[key]*throttled
}

// key is what lines are throttled by.
type key struct {
	point    string
	kind     Kind
	strategy limiter.Strategy // 0 for lines that name none
}

// throttled is one kind of line of one point.
type throttled struct {
	last time.Time // when the last line was written
	// held is the number of changes since then that wrote no line, and
	// msg and fields the last of them, for the line that reports them.
	held   int
	msg    string
	fields []zap.Field
	warn   bool
}

// New returns a Log writing to logger (required) and recording in history
// (nil records nothing).
func New(logger *zap.Logger, history *events.Log) *Log {
	return &Log{logger: logger, history: history, lines: make(map[key]*throttled)}
}

// Record adds e to the history, if there is one.
func (l *Log) Record(e events.Event) {
	if l.history != nil {
		l.history.Add(e)
	}
}

// Changes records each state change in ev of point p at now in the
// history and logs a line for it (in that order: whoever reads the line
// finds the event), throttled: a trip with the figures of v, the
// request's verdict (the zero Verdict for a settle). A probe let through
// by a request (v.Probe, ByRequest) is recorded, not logged. With no
// change and no probe it does nothing and does not allocate.
func (l *Log) Changes(p *limiter.Point, v limiter.Verdict, ev limiter.Events, now time.Time, cause Cause) {
	if v.Probe && cause == ByRequest {
		l.Record(events.Event{At: now, Kind: events.Probe, Point: p.Name(), Strategy: v.Strategy.String(), Shadow: p.Settings().Shadow})
	}
	if ev == 0 {
		return
	}
	name, shadow := p.Name(), p.Settings().Shadow
	fields := []zap.Field{zap.String("point", name), zap.String("strategy", v.Strategy.String()),
		zap.Int64("count", v.Count), zap.Int64("threshold", v.Threshold)}
	if shadow {
		fields = append(fields, zap.Bool("shadow", true))
	}
	if ev.Has(limiter.EventTripped) {
		l.Record(events.Event{At: now, Kind: events.Trip, Point: name, Strategy: v.Strategy.String(), Shadow: shadow,
			Detail: tripDetail(v)})
		l.write(key{name, tripped, v.Strategy}, now, true, "point tripped", fields...)
	}
	if ev.Has(limiter.EventDelayStarted) {
		delay := p.Settings().DelayTime
		l.Record(events.Event{At: now, Kind: events.DelayStart, Point: name, Strategy: v.Strategy.String(), Shadow: shadow,
			Detail: "for " + delay.String()})
		l.write(key{name, delayStarted, v.Strategy}, now, true, "delay started", append(fields, zap.Duration("delay", delay))...)
	}
	if ev.Has(limiter.EventDelayEnded) {
		detail := "delay time passed"
		if cause == ByProbe {
			detail = "probe passed"
		}
		l.settled(name, shadow, now, events.DelayEnd, delayEnded, "delay ended", detail)
	}
	if ev.Has(limiter.EventRecovered) {
		detail := "a request passed"
		if cause == BySettle {
			detail = "the window slid past the trip"
		}
		l.settled(name, shadow, now, events.Recover, recovered, "point recovered", detail)
	}
}

// settled records and logs a change that names no strategy (a delay's
// end, a recovery) of point at now, its cause in detail.
func (l *Log) settled(point string, shadow bool, now time.Time, ek events.Kind, k Kind, msg, detail string) {
	l.Record(events.Event{At: now, Kind: ek, Point: point, Shadow: shadow, Detail: detail})
	l.write(key{point: point, kind: k}, now, false, msg, zap.String("point", point), zap.String("cause", detail))
}

// tripDetail is a trip's figures: "visit 21 > 20", "exception 5 >= 5".
func tripDetail(v limiter.Verdict) string {
	switch v.Strategy {
	case limiter.Visit, limiter.Concurrent:
		return fmt.Sprintf("%s %d > %d", v.Strategy, v.Count, v.Threshold)
	case limiter.TokenBucket:
		return fmt.Sprintf("token_bucket empty (size %d)", v.Threshold)
	case limiter.ExceptionRate:
		return fmt.Sprintf("exception_rate %d%% >= %d%%", v.Count, v.Threshold)
	}
	return fmt.Sprintf("%s %d >= %d", v.Strategy, v.Count, v.Threshold)
}

// Warn logs a warning msg with fields of kind about point at now,
// throttled as the state changes are; it records no event.
func (l *Log) Warn(point string, kind Kind, now time.Time, msg string, fields ...zap.Field) {
	l.write(key{point: point, kind: kind}, now, true, msg, fields...)
}

// write logs msg with fields for a line of k at now, or holds it back when
// the same line was written less than Every ago. A line written after held
// ones carries their number as repeats.
func (l *Log) write(k key, now time.Time, warn bool, msg string, fields ...zap.Field) {
	l.mu.Lock()
	t := l.lines[k]
	if t == nil {
		t = &throttled{}
		l.lines[k] = t
	}
	if !t.last.IsZero() && now.Sub(t.last) < Every {
		t.held++
		t.msg, t.fields, t.warn = msg, fields, warn
		l.mu.Unlock()
		return
	}
	repeats := t.held
	t.last, t.held, t.fields = now, 0, nil
	l.mu.Unlock()
	emit(l.logger, warn, msg, fields, repeats)
}

// Flush writes, for every line held back Every or longer, one line: the
// last held change, with the number held as repeats, and forgets the
// lines that went quiet. Call it about once per Every (Handler.Tick).
func (l *Log) Flush(now time.Time) {
	type line struct {
		msg     string
		fields  []zap.Field
		warn    bool
		repeats int
	}
	var lines []line
	l.mu.Lock()
	for k, t := range l.lines {
		if t.held > 0 && now.Sub(t.last) >= Every {
			lines = append(lines, line{t.msg, t.fields, t.warn, t.held})
			t.last, t.held, t.fields = now, 0, nil
		}
		if t.held == 0 && now.Sub(t.last) >= Every {
			delete(l.lines, k) // nothing held, nothing recent: forget it
		}
	}
	l.mu.Unlock()
	for _, ln := range lines {
		emit(l.logger, ln.warn, ln.msg, ln.fields, ln.repeats)
	}
}

// emit writes one line; repeats, when not 0, is the number of the same
// changes it stands for besides its own.
func emit(log *zap.Logger, warn bool, msg string, fields []zap.Field, repeats int) {
	if repeats > 0 {
		fields = append(fields[:len(fields):len(fields)], zap.Int("repeats", repeats))
	}
	if warn {
		log.Warn(msg, fields...)
	} else {
		log.Info(msg, fields...)
	}
}
