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
	for i := range 5 { // forces, which never fold into one another
		l.Add(Event{At: t0.Add(time.Duration(i+1) * time.Second), Kind: Force, Point: "noisy"})
	}
	l.Add(Event{At: t0.Add(6 * time.Second), Kind: Reload})
	if got, want := kinds(l.Since(time.Time{})), []string{"noisy:force", "noisy:force", "noisy:force", ":reload"}; !slices.Equal(got, want) {
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
		t.Errorf("since +5s = %v, want the last force and the reload", got)
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
	// A trip by another strategy, or after the hold and FoldWithin, is an
	// event of its own.
	later := 5*time.Second + 100*time.Millisecond + FoldWithin
	l.Add(Event{At: at(later), Kind: Trip, Point: "p", Strategy: "visit"})
	l.Add(Event{At: at(later + time.Second), Kind: Recover, Point: "p"})
	l.Add(Event{At: at(later + time.Second + 1), Kind: Trip, Point: "p", Strategy: "exception"})
	l.Add(Event{At: at(later + 2*time.Second), Kind: Reload})
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

// TestLogFold: a point's event folds into its latest one of the same kind,
// strategy, shadow and (but for a trip) detail when that happened within
// FoldWithin before it; a force, its end and global events never fold.
func TestLogFold(t *testing.T) {
	ev := func(d time.Duration, kind Kind, point, strategy, detail string) Event {
		return Event{At: t0.Add(d), Kind: kind, Point: point, Strategy: strategy, Detail: detail}
	}
	shadow := func(e Event) Event { e.Shadow = true; return e }
	for _, tc := range []struct {
		name          string
		first, second Event
		fold          bool
	}{
		{"trip just within FoldWithin", ev(0, Trip, "p", "visit", "visit 21 > 20"), ev(FoldWithin-1, Trip, "p", "visit", "visit 21 > 20"), true},
		{"trip at FoldWithin", ev(0, Trip, "p", "visit", "visit 21 > 20"), ev(FoldWithin, Trip, "p", "visit", "visit 21 > 20"), false},
		{"trip with other figures", ev(0, Trip, "p", "visit", "visit 21 > 20"), ev(10*time.Second, Trip, "p", "visit", "visit 25 > 20"), true},
		{"trip by another strategy", ev(0, Trip, "p", "visit", ""), ev(10*time.Second, Trip, "p", "exception", ""), false},
		{"shadow trip after a trip", ev(0, Trip, "p", "visit", ""), shadow(ev(10*time.Second, Trip, "p", "visit", "")), false},
		{"trip of another point", ev(0, Trip, "p", "visit", ""), ev(10*time.Second, Trip, "q", "visit", ""), false},
		{"failed probe, same cause", ev(0, ProbeFailed, "p", "visit", "timeout"), ev(30*time.Second, ProbeFailed, "p", "visit", "timeout"), true},
		{"failed probe, other cause", ev(0, ProbeFailed, "p", "visit", "timeout"), ev(30*time.Second, ProbeFailed, "p", "visit", "exception"), false},
		{"probe", ev(0, Probe, "p", "visit", ""), ev(30*time.Second, Probe, "p", "visit", ""), true},
		{"delay start", ev(0, DelayStart, "p", "visit", "for 30s"), ev(40*time.Second, DelayStart, "p", "visit", "for 30s"), true},
		{"delay end", ev(0, DelayEnd, "p", "", "delay time passed"), ev(40*time.Second, DelayEnd, "p", "", "delay time passed"), true},
		{"recovery", ev(0, Recover, "p", "", "a request passed"), ev(40*time.Second, Recover, "p", "", "a request passed"), true},
		{"force", ev(0, Force, "p", "", "degrade for 10m0s: INC-7"), ev(time.Second, Force, "p", "", "degrade for 10m0s: INC-7"), false},
		{"reload", ev(0, Reload, "", "", "points changed [p]"), ev(time.Second, Reload, "", "", "points changed [p]"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(10, 10)
			l.Add(tc.first)
			l.Add(tc.second)
			l.Flush(tc.second.At.Add(FlapHold))
			got := l.Since(time.Time{})
			switch {
			case tc.fold && (len(got) != 1 || got[0].Repeats != 1 || !got[0].Last.Equal(tc.second.At) || got[0].Detail != tc.first.Detail):
				t.Errorf("got %+v, want one event: the first's time and detail, 1 repeat, last at the second's", got)
			case !tc.fold && (len(got) != 2 || got[0].Repeats != 0 || got[1].Repeats != 0):
				t.Errorf("got %+v, want two events, no repeats", got)
			}
		})
	}

	// FoldWithin counts from the last repeat: a trip every 50s for 10
	// minutes is one event.
	l := New(10, 10)
	for i := range 12 {
		l.Add(ev(time.Duration(i)*50*time.Second, Trip, "p", "visit", ""))
	}
	if got := l.Since(time.Time{}); len(got) != 1 || got[0].Repeats != 11 || !got[0].Last.Equal(t0.Add(550*time.Second)) {
		t.Errorf("a trip every 50s: got %+v, want one trip, 11 repeats, the last at +9m10s", got)
	}
}

// TestLogFoldFull: while adding an event would push out of the history one
// that last happened within Span of it (Span included), a point's event
// folds into its latest one of the same kind however long ago that was;
// once the oldest is older than Span, the event is added and pushes it
// out. Events that never fold are added whatever they push out: the
// bounds hold.
func TestLogFoldFull(t *testing.T) {
	l := New(4, 4)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	l.Add(Event{At: at(0), Kind: Trip, Point: "p", Strategy: "visit"})
	l.Add(Event{At: at(2 * time.Minute), Kind: DelayStart, Point: "p", Strategy: "visit"})
	l.Add(Event{At: at(4 * time.Minute), Kind: Probe, Point: "p", Strategy: "visit"})
	l.Add(Event{At: at(6 * time.Minute), Kind: DelayEnd, Point: "p"})
	l.Add(Event{At: at(8 * time.Minute), Kind: Trip, Point: "p", Strategy: "visit"})
	if got := l.Since(time.Time{}); len(got) != 4 || got[0].Repeats != 1 || !got[0].Last.Equal(at(8*time.Minute)) {
		t.Fatalf("a trip 8m after the first, the history full of the last 15m: got %+v, want it folded into the first", got)
	}
	l.Add(Event{At: at(8*time.Minute + Span), Kind: DelayEnd, Point: "p"}) // the oldest, the trip, last happened Span ago
	if got := l.Since(time.Time{}); len(got) != 4 || got[3].Kind != DelayEnd || got[3].Repeats != 1 {
		t.Fatalf("a delay's end Span after the trip's last: got %+v, want it folded into the first", got)
	}
	l.Add(Event{At: at(8*time.Minute + Span + 1), Kind: DelayStart, Point: "p", Strategy: "visit"})
	if got := kinds(l.Since(time.Time{})); !slices.Equal(got, []string{"p:delay_start", "p:probe", "p:delay_end", "p:delay_start"}) {
		t.Errorf("a delay's start just over Span after the trip's last: got %v, want it added, the trip pushed out", got)
	}

	forces := New(2, 2)
	for i := range 3 {
		forces.Add(Event{At: at(time.Duration(i) * time.Second), Kind: Force, Point: "p"})
	}
	if got := forces.Since(time.Time{}); len(got) != 2 || !got[0].At.Equal(at(time.Second)) {
		t.Errorf("3 forces in a history of 2: got %+v, want the last two", got)
	}
}

// stormStep is one event of a point's cycle, after the cycle's start.
type stormStep struct {
	after            time.Duration
	kind             Kind
	strategy, detail string
}

// delayCycle is a point that trips, degrades for delayTime 30s while a
// probe every 2s fails, and recovers as the window slides: 37s a cycle.
func delayCycle() []stormStep {
	steps := []stormStep{{0, Trip, "visit", "visit 21 > 20"}, {0, DelayStart, "visit", "for 30s"}}
	for probe := 2 * time.Second; probe < 30*time.Second; probe += 2 * time.Second {
		steps = append(steps, stormStep{probe, Probe, "visit", ""}, stormStep{probe + 50*time.Millisecond, ProbeFailed, "visit", "timeout"})
	}
	return append(steps, stormStep{30 * time.Second, DelayEnd, "", "delay time passed"},
		stormStep{31 * time.Second, Recover, "", "the window slid past the trip"})
}

// TestLogStorm: 21 points trip and recover over and over for 20 simulated
// minutes, each on its own phase, with Flush every second as Tick calls it.
// The admin port's history (500 events, 50 a point) still reaches back 15
// minutes for every point, and counts every trip in it: each point's trip
// events add up, repeats included, to the trips fed since the first of them.
func TestLogStorm(t *testing.T) {
	tokenBucket := []stormStep{{0, Trip, "token_bucket", "token_bucket empty (size 20)"}, {150 * time.Millisecond, Recover, "", "a request passed"}}
	slow := []stormStep{ // a cycle longer than FoldWithin
		{0, Trip, "exception", "exception 5 >= 5"}, {0, DelayStart, "exception", "for 20s"},
		{10 * time.Second, Probe, "exception", ""}, {10*time.Second + 200*time.Millisecond, ProbeFailed, "exception", "exception"},
		{20 * time.Second, Probe, "exception", ""}, {20*time.Second + 100*time.Millisecond, DelayEnd, "", "probe passed"},
		{25 * time.Second, Recover, "", "a request passed"},
	}
	for _, tc := range []struct {
		name   string
		cycles []stormCycle // point i runs cycles[i % len(cycles)]
	}{
		{"token buckets flapping", []stormCycle{{300 * time.Millisecond, tokenBucket}}},
		{"delays and probes", []stormCycle{{37 * time.Second, delayCycle()}}},
		{"slower than FoldWithin", []stormCycle{{70 * time.Second, slow}}},
		{"mixed", []stormCycle{{300 * time.Millisecond, tokenBucket}, {37 * time.Second, delayCycle()}, {70 * time.Second, slow}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			feed := stormFeed(tc.cycles)
			l := replayStorm(feed)
			end := t0.Add(stormDuration)

			all := l.Since(time.Time{})
			if len(all) > stormGlobal {
				t.Errorf("history: got %d events, want at most %d", len(all), stormGlobal)
			}
			oldest := end
			for i := range stormPoints {
				name := fmt.Sprintf("p%02d", i)
				own := l.PointSince(name, time.Time{})
				if len(own) > stormPerPoint {
					t.Errorf("%s: got %d events, want at most %d", name, len(own), stormPerPoint)
				}
				for _, view := range []struct {
					name string
					evs  []Event
				}{{"history", all}, {"point's history", own}} {
					if first := checkStormTrips(t, view.name, name, view.evs, feed); first.Before(oldest) {
						oldest = first
					}
				}
			}
			t.Logf("%d events fed; the history holds %d, the oldest trip %v before the end", len(feed), len(all), end.Sub(oldest))
		})
	}
}

// The storm: how many points, for how long, and the admin port's bounds
// on the history.
const (
	stormPoints   = 21
	stormDuration = 20 * time.Minute
	stormGlobal   = 500 // admin.MaxEvents
	stormPerPoint = 50  // admin.MaxPointEvents
)

// stormCycle is a point's steps, repeated every period.
type stormCycle struct {
	period time.Duration
	steps  []stormStep
}

// stormFeed is every event of the storm in time order: point i runs
// cycles[i % len(cycles)], each point on its own phase.
func stormFeed(cycles []stormCycle) []Event {
	var feed []Event
	for i := range stormPoints {
		c := cycles[i%len(cycles)]
		name := fmt.Sprintf("p%02d", i)
		for start := time.Duration(i) * 977 * time.Millisecond % c.period; start < stormDuration; start += c.period {
			for _, s := range c.steps {
				if at := start + s.after; at < stormDuration {
					feed = append(feed, Event{At: t0.Add(at), Kind: s.kind, Point: name, Strategy: s.strategy, Detail: s.detail})
				}
			}
		}
	}
	slices.SortStableFunc(feed, func(a, b Event) int { return a.At.Compare(b.At) })
	return feed
}

// replayStorm adds the feed to a new Log of the admin port's bounds, with
// Flush every second as Tick calls it.
func replayStorm(feed []Event) *Log {
	l := New(stormGlobal, stormPerPoint)
	next := 0
	for sec := time.Second; sec <= stormDuration; sec += time.Second {
		for ; next < len(feed) && feed[next].At.Before(t0.Add(sec)); next++ {
			l.Add(feed[next])
		}
		l.Flush(t0.Add(sec))
	}
	return l
}

// checkStormTrips requires the point's trips in evs (the view of the
// history called view) to reach back Span from the storm's end and to add
// up, repeats included, to the trips fed since the first of them. It
// returns the first trip's instant.
func checkStormTrips(t *testing.T, view, name string, evs, feed []Event) time.Time {
	t.Helper()
	end := t0.Add(stormDuration)
	first, kept := end, 0
	for _, e := range evs {
		if e.Point == name && e.Kind == Trip {
			if e.At.Before(first) {
				first = e.At
			}
			kept += 1 + e.Repeats
		}
	}
	fed := 0
	for _, e := range feed {
		if e.Point == name && e.Kind == Trip && !e.At.Before(first) {
			fed++
		}
	}
	if end.Sub(first) < Span || kept != fed {
		t.Errorf("%s's trips in the %s: got %d from %v before the end, want all %d fed since, from at least %v before",
			name, view, kept, end.Sub(first), fed, Span)
	}
	return first
}
