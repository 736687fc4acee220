package statelog

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// TestLog: a point's state change of one kind writes at most one line per
// strategy and Every; the changes held back are counted in the next line,
// or in Flush's once Every has passed; kinds and points are throttled
// apart.
func TestLog(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	sl := New(zap.New(core), nil)
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	trip := func(point string, d time.Duration) {
		sl.write(key{point, tripped, limiter.TokenBucket}, at(d), true, "point tripped", zap.String("point", point))
	}
	lines := func() []observer.LoggedEntry { return logs.TakeAll() }
	repeats := func(e observer.LoggedEntry) int64 {
		if v, ok := e.ContextMap()["repeats"]; ok {
			return v.(int64)
		}
		return 0
	}

	trip("a", 0)
	for i := range 5 {
		trip("a", time.Duration(i+1)*time.Millisecond)
	}
	sl.write(key{point: "a", kind: recovered}, at(3*time.Millisecond), false, "point recovered", zap.String("point", "a"))
	sl.write(key{"a", tripped, limiter.Visit}, at(3*time.Millisecond), true, "point tripped", zap.String("point", "a"))
	trip("b", 4*time.Millisecond)
	got := lines()
	if len(got) != 4 || got[0].Message != "point tripped" || repeats(got[0]) != 0 ||
		got[1].Message != "point recovered" || got[2].Message != "point tripped" || got[3].ContextMap()["point"] != "b" {
		t.Fatalf("in the first second: got %v, want a's first trip, a's recovery, a's trip by another strategy and b's trip, no repeats", got)
	}

	sl.Flush(at(Every - time.Nanosecond))
	if got := lines(); len(got) != 0 {
		t.Fatalf("flush before Every: got %v, want nothing", got)
	}
	trip("a", Every) // a second after a's last line: written, with the 5 held
	if got := lines(); len(got) != 1 || repeats(got[0]) != 5 || got[0].Level != zap.WarnLevel {
		t.Fatalf("a second on: got %v, want one warning with repeats 5", got)
	}

	trip("a", Every+time.Millisecond) // held
	sl.Flush(at(2 * Every))
	if got := lines(); len(got) != 1 || repeats(got[0]) != 1 {
		t.Fatalf("flush a second after a held trip: got %v, want one line with repeats 1", got)
	}
	sl.Flush(at(10 * Every))
	if got := lines(); len(got) != 0 {
		t.Fatalf("flush with nothing held: got %v, want nothing", got)
	}
	if len(sl.lines) != 0 {
		t.Errorf("lines remembered after they went quiet: got %d, want 0", len(sl.lines))
	}
}
