package proxy

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// StateLogEvery is the least time between two log lines of the same state
// change of one point (a trip, a recovery, a delay's start or end). A point
// that flaps under sustained overload (a token bucket that trips on every
// empty moment and recovers on every refill) would otherwise write a pair
// of lines per token; the changes in between are counted, and the next
// line, or Tick's within about a second, carries their number as repeats.
// The event history (proxy/events) folds flapping on its own.
const StateLogEvery = time.Second

// stateChange is a kind of state change logged by pointEvents.
type stateChange uint8

const (
	changeTripped stateChange = iota
	changeDelayStarted
	changeDelayEnded
	changeRecovered
	// grpcNotForwarded is not a state change: a gRPC call the upstream
	// could not take (Handler.grpcFailed), throttled alike.
	grpcNotForwarded
	numChanges
)

// stateLog throttles the state-change lines of each point to one per kind
// and strategy per StateLogEvery: a trip by another strategy, or a delay
// another strategy started, is another change and is written at once. Its
// zero value is ready; it is safe for concurrent use.
type stateLog struct {
	mu    sync.Mutex
	lines map[stateKey]*throttled
}

// stateKey is what lines are throttled by.
type stateKey struct {
	point    string
	kind     stateChange
	strategy limiter.Strategy // 0 for changes that name none
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

// write logs msg with fields for a state change of point at now, or holds
// it back when the same kind of line of the point was written less than
// StateLogEvery ago. A line written after held ones carries their number as
// repeats.
func (sl *stateLog) write(log *zap.Logger, key stateKey, now time.Time, warn bool, msg string, fields ...zap.Field) {
	sl.mu.Lock()
	if sl.lines == nil {
		sl.lines = make(map[stateKey]*throttled)
	}
	t := sl.lines[key]
	if t == nil {
		t = &throttled{}
		sl.lines[key] = t
	}
	if !t.last.IsZero() && now.Sub(t.last) < StateLogEvery {
		t.held++
		t.msg, t.fields, t.warn = msg, fields, warn
		sl.mu.Unlock()
		return
	}
	repeats := t.held
	t.last, t.held, t.fields = now, 0, nil
	sl.mu.Unlock()
	emit(log, warn, msg, fields, repeats)
}

// flush writes, for every line held back StateLogEvery or longer, one line:
// the last held change, with the number held as repeats. Tick calls it.
func (sl *stateLog) flush(log *zap.Logger, now time.Time) {
	type line struct {
		msg     string
		fields  []zap.Field
		warn    bool
		repeats int
	}
	var lines []line
	sl.mu.Lock()
	for key, t := range sl.lines {
		if t.held > 0 && now.Sub(t.last) >= StateLogEvery {
			lines = append(lines, line{t.msg, t.fields, t.warn, t.held})
			t.last, t.held, t.fields = now, 0, nil
		}
		if t.held == 0 && now.Sub(t.last) >= StateLogEvery {
			delete(sl.lines, key) // nothing held, nothing recent: forget it
		}
	}
	sl.mu.Unlock()
	for _, l := range lines {
		emit(log, l.warn, l.msg, l.fields, l.repeats)
	}
}

// emit writes one state-change line; repeats, when not 0, is the number of
// the same changes it stands for besides its own.
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
