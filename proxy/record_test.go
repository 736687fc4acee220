package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/events"
)

// recClock is a settable clock for the Handler.
type recClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *recClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *recClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// TestEventHistory drives a point through a trip, its delay, a failed and
// a good probe, a second delay that ends by time with no request (Tick), and
// a trip that the window leaves behind (Tick), and reads the history.
func TestEventHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := &recClock{t: t0}
	var fail bool
	upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		if fail {
			return rpReply(r, http.StatusInternalServerError, "down"), nil
		}
		return rpReply(r, http.StatusOK, "up"), nil
	})
	p := rpPoint(t, "p", func(s *limiter.Settings) {
		s.Window, s.Buckets = time.Second, 10
		s.ExceptionThreshold = limiter.At(1)
		s.DelayTime, s.RetryInterval = 10*time.Second, 2*time.Second
	}, proxy.PointOptions{})
	history := events.New(100, 100)
	h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: upstream, Now: clock.Now, Events: history})
	send := func(at time.Duration) int {
		clock.set(t0.Add(at))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://svc.test/", nil))
		return rec.Code
	}

	fail = true
	send(0)                       // an exception
	send(100 * time.Millisecond)  // trips, starts the delay
	send(2100 * time.Millisecond) // a probe, which fails
	fail = false
	send(4 * time.Second)         // degraded: the next probe is at +4.1s
	send(4100 * time.Millisecond) // a probe, which passes: the delay ends
	fail = true
	send(5 * time.Second)   // an exception
	send(5*time.Second + 1) // trips again, a second delay
	h.Tick(t0.Add(14 * time.Second))
	h.Tick(t0.Add(15*time.Second + 1)) // the delay's time has passed
	if got := p.Limiter().State(t0.Add(15*time.Second + 1)); got != limiter.Closed {
		t.Errorf("state after the delay = %v, want closed", got)
	}

	// The second probe, trip and delay start fold into the first
	// (events.FoldWithin): the same kind within a minute.
	type entry struct {
		at      time.Duration
		kind    events.Kind
		detail  string
		repeats int
		last    time.Duration
	}
	var got []entry
	for _, e := range history.PointSince("p", time.Time{}) {
		got = append(got, entry{e.At.Sub(t0), e.Kind, e.Detail, e.Repeats, max(e.Last.Sub(t0), 0)})
	}
	want := []entry{
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

	// A trip with no delay recovers at the first Tick after the window
	// has slid past it.
	q := rpPoint(t, "q", func(s *limiter.Settings) {
		s.Window, s.Buckets = time.Second, 10
		s.VisitThreshold = limiter.At(1)
	}, proxy.PointOptions{})
	h.Swap(rpConfig(rpFakeUpstream, q))
	fail = false
	send(20 * time.Second)
	if code := send(20 * time.Second); code != http.StatusTooManyRequests {
		t.Fatalf("second request on q: %d, want 429", code)
	}
	h.Tick(t0.Add(20*time.Second + 999*time.Millisecond))
	h.Tick(t0.Add(21 * time.Second))
	h.Tick(t0.Add(23 * time.Second)) // the history held the recovery for events.FlapHold
	var kinds []events.Kind
	for _, e := range history.PointSince("q", time.Time{}) {
		kinds = append(kinds, e.Kind)
		if e.Kind == events.Recover && (!e.At.Equal(t0.Add(21*time.Second)) || e.Detail != "the window slid past the trip") {
			t.Errorf("q's recovery: %+v, want at +21s by the window", e)
		}
	}
	if !slices.Equal(kinds, []events.Kind{events.Trip, events.Recover}) {
		t.Errorf("q's history: %v, want trip, recover", kinds)
	}
}
