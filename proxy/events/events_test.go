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
