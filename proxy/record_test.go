package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/internal/testclock"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/events"
)

// historyRig is a Handler on a settable clock that keeps an events.Log,
// in front of an upstream that answers 500 while fail is set.
type historyRig struct {
	t0      time.Time
	clock   *testclock.Clock
	fail    bool
	h       *proxy.Handler
	history *events.Log
}

func newHistoryRig(t *testing.T, p *proxy.Point) *historyRig {
	rig := &historyRig{t0: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), history: events.New(100, 100)}
	rig.clock = testclock.New(rig.t0)
	upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		if rig.fail {
			return rpReply(r, http.StatusInternalServerError, "down"), nil
		}
		return rpReply(r, http.StatusOK, "up"), nil
	})
	rig.h, _ = rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: upstream, Now: rig.clock.Now, Events: rig.history})
	return rig
}

// send serves one request at t0+at and returns its status.
func (rig *historyRig) send(at time.Duration) int {
	rig.clock.Set(rig.t0.Add(at))
	rec := httptest.NewRecorder()
	rig.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://svc.test/", nil))
	return rec.Code
}

// historyEntry is an events.Entry with its instants as offsets from t0.
type historyEntry struct {
	at      time.Duration
	kind    events.Kind
	detail  string
	repeats int
	last    time.Duration
}

// entries is the point's history.
func (rig *historyRig) entries(point string) []historyEntry {
	var got []historyEntry
	for _, e := range rig.history.PointSince(point, time.Time{}) {
		got = append(got, historyEntry{e.At.Sub(rig.t0), e.Kind, e.Detail, e.Repeats, max(e.Last.Sub(rig.t0), 0)})
	}
	return got
}

// TestEventHistory drives a point through a trip, its delay, a failed and
// a good probe, a second delay that ends by time with no request (Tick), and
// a trip that the window leaves behind (Tick), and reads the history.
func TestEventHistory(t *testing.T) {
	p := rpPoint(t, "p", func(s *limiter.Settings) {
		s.Window, s.Buckets = time.Second, 10
		s.ExceptionThreshold = limiter.At(1)
		s.DelayTime, s.RetryInterval = 10*time.Second, 2*time.Second
	}, proxy.PointOptions{})
	rig := newHistoryRig(t, p)
	t0, h, send := rig.t0, rig.h, rig.send

	t.Run("a delay's events fold", func(t *testing.T) {
		rig.fail = true
		send(0)                       // an exception
		send(100 * time.Millisecond)  // trips, starts the delay
		send(2100 * time.Millisecond) // a probe, which fails
		rig.fail = false
		send(4 * time.Second)         // degraded: the next probe is at +4.1s
		send(4100 * time.Millisecond) // a probe, which passes: the delay ends
		rig.fail = true
		send(5 * time.Second)   // an exception
		send(5*time.Second + 1) // trips again, a second delay
		h.Tick(t0.Add(14 * time.Second))
		h.Tick(t0.Add(15*time.Second + 1)) // the delay's time has passed
		if got := p.Limiter().State(t0.Add(15*time.Second + 1)); got != limiter.Closed {
			t.Errorf("state after the delay = %v, want closed", got)
		}

		// The second probe, trip and delay start fold into the first
		// (events.FoldWithin): the same kind within a minute.
		got := rig.entries("p")
		want := []historyEntry{
			{100 * time.Millisecond, events.Trip, "exception 1 >= 1", 1, 5*time.Second + 1},
			{100 * time.Millisecond, events.DelayStart, "for 10s", 1, 5*time.Second + 1},
			{2100 * time.Millisecond, events.Probe, "", 1, 4100 * time.Millisecond},
			{2100 * time.Millisecond, events.ProbeFailed, "exception", 0, 0},
			{4100 * time.Millisecond, events.DelayEnd, "probe passed", 0, 0},
			{15*time.Second + 1, events.DelayEnd, "delay time passed", 0, 0},
		}
		if !slices.Equal(got, want) {
			t.Errorf("history:\n got %v\nwant %v", got, want)
		}
	})

	t.Run("a trip with no delay recovers by the window", func(t *testing.T) {
		// A trip with no delay recovers at the first Tick after the window
		// has slid past it.
		q := rpPoint(t, "q", func(s *limiter.Settings) {
			s.Window, s.Buckets = time.Second, 10
			s.VisitThreshold = limiter.At(1)
		}, proxy.PointOptions{})
		h.Swap(rpConfig(rpFakeUpstream, q))
		rig.fail = false
		send(20 * time.Second)
		if code := send(20 * time.Second); code != http.StatusTooManyRequests {
			t.Fatalf("second request on q: %d, want 429", code)
		}
		h.Tick(t0.Add(20*time.Second + 999*time.Millisecond))
		h.Tick(t0.Add(21 * time.Second))
		h.Tick(t0.Add(23 * time.Second)) // the history held the recovery for events.FlapHold
		var kinds []events.Kind
		for _, e := range rig.history.PointSince("q", time.Time{}) {
			kinds = append(kinds, e.Kind)
			if e.Kind == events.Recover && (!e.At.Equal(t0.Add(21*time.Second)) || e.Detail != "the window slid past the trip") {
				t.Errorf("q's recovery: %+v, want at +21s by the window", e)
			}
		}
		if !slices.Equal(kinds, []events.Kind{events.Trip, events.Recover}) {
			t.Errorf("q's history: %v, want trip, recover", kinds)
		}
	})
}
