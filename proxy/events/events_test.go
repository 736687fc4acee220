package events

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s:%s", e.Point, e.Kind))
	}
	return out
}

func TestLogBounds(t *testing.T) {
	l := New(4, 2)
	if got := l.Since(time.Time{}); len(got) != 0 {
		t.Fatalf("empty log: %v", got)
	}
	l.Add(Event{At: t0, Kind: Trip, Point: "quiet"})
	for i := range 5 {
		l.Add(Event{At: t0.Add(time.Duration(i+1) * time.Second), Kind: Probe, Point: "noisy"})
	}
	l.Add(Event{At: t0.Add(6 * time.Second), Kind: Reload})
	if got, want := kinds(l.Since(time.Time{})), []string{"noisy:probe", "noisy:probe", "noisy:probe", ":reload"}; !slices.Equal(got, want) {
		t.Errorf("global = %v, want %v", got, want)
	}
	// The noisy point pushed the quiet one's trip out of the global
	// history, not out of its own.
	if got := kinds(l.PointSince("quiet", time.Time{})); !slices.Equal(got, []string{"quiet:trip"}) {
		t.Errorf("quiet = %v", got)
	}
	if got := l.PointSince("noisy", time.Time{}); len(got) != 2 || !got[1].At.Equal(t0.Add(5*time.Second)) {
		t.Errorf("noisy = %v, want its last two", got)
	}
	if got := l.Since(t0.Add(5 * time.Second)); len(got) != 2 {
		t.Errorf("since +5s = %v, want the last probe and the reload", got)
	}
	l.Keep([]string{"noisy"})
	if got := l.PointSince("quiet", time.Time{}); got != nil {
		t.Errorf("quiet after Keep = %v, want forgotten", got)
	}
}

// TestLogFlapping shows a point that trips and recovers bucket after
// bucket folded into one trip with repeats, and a recovery that holds
// entering the history once FlapHold has passed.
func TestLogFlapping(t *testing.T) {
	l := New(10, 10)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	l.Add(Event{At: at(0), Kind: Trip, Point: "p", Strategy: "visit"})
	for i := 1; i <= 5; i++ {
		l.Add(Event{At: at(time.Duration(i) * time.Second), Kind: Recover, Point: "p"})
		l.Add(Event{At: at(time.Duration(i)*time.Second + 100*time.Millisecond), Kind: Trip, Point: "p", Strategy: "visit"})
	}
	l.Add(Event{At: at(6 * time.Second), Kind: Recover, Point: "p", Detail: "a request passed"})
	l.Flush(at(8*time.Second - 1))
	if got := l.Since(time.Time{}); len(got) != 1 || got[0].Repeats != 5 || !got[0].Last.Equal(at(5*time.Second+100*time.Millisecond)) {
		t.Fatalf("after flapping: %+v, want one trip with 5 repeats, the last at +5.1s", got)
	}
	// A trip 15 minutes old still shows while it repeated since.
	if got := l.Since(at(5 * time.Second)); len(got) != 1 {
		t.Errorf("since +5s: %+v, want the trip that repeated at +5.1s", got)
	}
	l.Flush(at(8 * time.Second))
	if got := kinds(l.PointSince("p", time.Time{})); !slices.Equal(got, []string{"p:trip", "p:recover"}) {
		t.Errorf("after the hold: %v, want trip then recover", got)
	}
	// A trip by another strategy, or after the hold, is an event of its own.
	l.Add(Event{At: at(20 * time.Second), Kind: Trip, Point: "p", Strategy: "visit"})
	l.Add(Event{At: at(21 * time.Second), Kind: Recover, Point: "p"})
	l.Add(Event{At: at(21*time.Second + 1), Kind: Trip, Point: "p", Strategy: "exception"})
	l.Add(Event{At: at(22 * time.Second), Kind: Reload})
	want := []string{"p:trip", "p:recover", "p:trip", "p:recover", "p:trip", ":reload"}
	if got := kinds(l.Since(time.Time{})); !slices.Equal(got, want) {
		t.Errorf("global: %v, want %v", got, want)
	}
}

// TestLogOrderedByTime: a recovery held back for FlapHold enters the
// history after another point's trip that happened meanwhile; Since still
// lists every event by its time, oldest first (a dashboard that lists them
// newest first then shows the later trip above the recovery).
func TestLogOrderedByTime(t *testing.T) {
	l := New(10, 10)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	l.Add(Event{At: at(0), Kind: Trip, Point: "a", Strategy: "visit"})
	l.Add(Event{At: at(43 * time.Second), Kind: Recover, Point: "a"})
	l.Add(Event{At: at(44 * time.Second), Kind: Trip, Point: "b", Strategy: "visit"})
	l.Add(Event{At: at(44*time.Second + 500*time.Millisecond), Kind: Trip, Point: "c", Strategy: "timeout"})
	l.Flush(at(45 * time.Second)) // a's recovery enters now, after b's and c's trips
	l.Add(Event{At: at(46 * time.Second), Kind: Reload})
	got := l.Since(time.Time{})
	if want := []string{"a:trip", "a:recover", "b:trip", "c:trip", ":reload"}; !slices.Equal(kinds(got), want) {
		t.Errorf("Since: got %v, want %v", kinds(got), want)
	}
	if !slices.IsSortedFunc(got, func(a, b Event) int { return a.At.Compare(b.At) }) {
		t.Errorf("Since: got %v, want sorted by At", got)
	}
	if got, want := kinds(l.Since(at(43*time.Second))), []string{"a:recover", "b:trip", "c:trip", ":reload"}; !slices.Equal(got, want) {
		t.Errorf("Since +43s: got %v, want %v", got, want)
	}
	if got, want := kinds(l.PointSince("a", time.Time{})), []string{"a:trip", "a:recover"}; !slices.Equal(got, want) {
		t.Errorf("PointSince a: got %v, want %v", got, want)
	}
}
