package main_test

// End-to-end tests of the state model (docs/semantics.md, State model): the state is
// what the next plain request would get, evaluated when read; a trip with no
// traffic after it decays; a shadow point is never tripped; the delay shows
// its end and next probe; the event history keeps trips, recoveries and
// reloads in order.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

const stateConfig = `routes:
  - point: p
    match: {pathPrefix: /p}
  - point: sh
    match: {pathPrefix: /sh}
  - point: d
    match: {pathPrefix: /d}
points:
  p:
    visitThreshold: 2
  sh:
    visitThreshold: 1
    mode: shadow
  d:
    exceptionThreshold: 1
    delayTime: 60s
    retryInterval: 20s
`

// TestStateDecays trips a point and reads it open, then, with no request
// after the trip, reads it closed on /status and in the metrics once its
// 2s window has slid past the trip, with a recovery in the history.
func TestStateDecays(t *testing.T) {
	t.Parallel()
	e := setup(t, "2s", 4, stateConfig)
	tripped := time.Now()
	if got := e.countDegraded(4, "/p", "visit; point=p", 429); got != 2 {
		t.Fatalf("degraded on p: got %d of 4, want 2", got)
	}
	p := e.point("p")
	if p.State != "open" || p.Reason == nil || *p.Reason != (admin.Reading{Strategy: "visit", Count: 2, Threshold: 2}) {
		t.Errorf("right after the trip: state %q reason %+v, want open, visit 2/2", p.State, p.Reason)
	}
	if !slices.Equal(p.Strategies, []admin.StrategyReading{judged("visit", 2, 2, true)}) {
		t.Errorf("strategies: got %+v, want visit 2/2, tripping", p.Strategies)
	}
	e.metricIs(1, "sds_point_tripped", "point", "p")
	e.metricIs(1, "sds_point_state", "point", "p", "state", "open")

	// No request on p from here on: the state decays as the window slides.
	// It may read closed before the window is empty, when the 4 requests
	// straddled a bucket's boundary and the older bucket slid out first.
	var closed admin.PointStatus
	if !eventually(10*time.Second, func() bool {
		closed = e.point("p")
		return closed.State == "closed" && closed.Window.Visits == 0
	}) {
		t.Fatalf("p never read closed with an empty window: %+v", closed)
	}
	if since := time.Since(tripped); since < 1500*time.Millisecond {
		t.Errorf("p read closed %v after its trip, before its 2s window could slide past it", since)
	}
	if closed.Reason != nil || closed.Window.Visits != 0 || !slices.Equal(closed.Strategies, []admin.StrategyReading{judged("visit", 0, 2, false)}) {
		t.Errorf("closed p: %+v, want no reason, an empty window, visit 0/2", closed)
	}
	e.metricIs(0, "sds_point_tripped", "point", "p")
	e.metricIs(1, "sds_point_state", "point", "p", "state", "closed")
	e.metricIs(0, "sds_point_state", "point", "p", "state", "open")

	// The proxy's once-a-second settle reports the recovery, with no
	// request: in the log and in the history, after the trip.
	// The history holds a recovery back for 2s (flapping).
	e.proxy.waitLog(t, 0, wait, pointLog("point recovered", "p"))
	var ev []admin.Event
	if !eventually(wait, func() bool { ev = e.point("p").Events; return len(ev) == 2 }) {
		t.Fatalf("p's events: got %v, want trip then recover", kinds(ev))
	}
	if got := kinds(ev); !slices.Equal(got, []string{"trip", "recover"}) {
		t.Errorf("p's events: got %v, want trip then recover", got)
	}
	if ev[0].Detail != "visit 3 > 2" || ev[1].Detail != "the window slid past the trip" || ev[1].At.Before(ev[0].At) {
		t.Errorf("p's events: %+v", ev)
	}
}

// TestStateShadowAndDelay checks a shadow point that would trip (reported
// as shadow, counted only as shadow), a point in its delay (its end and
// next probe), and the event history across a reload and a rejected one.
func TestStateShadowAndDelay(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, stateConfig)

	for i, want := range []string{"", "visit; point=sh", "visit; point=sh"} {
		r := e.get("/sh")
		if r.status != 200 || r.degraded() != "" || r.header.Get("Sds-Shadow-Degraded") != want {
			t.Errorf("shadow request %d: got %v, want 200 with Sds-Shadow-Degraded %q", i+1, r, want)
		}
	}
	sh := e.point("sh")
	if sh.State != "shadow" || sh.Reason == nil || sh.Reason.Strategy != "visit" || sh.Delay != nil {
		t.Errorf("shadow point: state %q reason %+v delay %+v, want shadow by visit, no delay", sh.State, sh.Reason, sh.Delay)
	}
	e.metricIs(2, "sds_shadow_degraded_total", "point", "sh", "strategy", "visit")
	e.metricIs(2, "sds_requests_total", "point", "sh", "result", "shadow_degraded")
	e.metricIs(0, "sds_degraded_total", "point", "sh", "strategy", "visit")
	e.metricIs(0, "sds_requests_total", "point", "sh", "result", "degraded")
	e.metricIs(0, "sds_point_tripped", "point", "sh")
	e.metricIs(1, "sds_point_state", "point", "sh", "state", "shadow")
	if ev := e.point("sh").Events; len(ev) != 1 || ev[0].Kind != "trip" || !ev[0].Shadow {
		t.Errorf("shadow point's events: %+v, want one shadow trip", ev)
	}

	// d: one exception trips it and starts a 60s delay probed every 20s.
	if r := e.get("/d?status=500"); r.status != 500 {
		t.Fatalf("GET /d?status=500: %v", r)
	}
	start := time.Now()
	if r := e.get("/d"); r.degraded() != "exception; delay; point=d" && r.degraded() != "exception; point=d" {
		t.Fatalf("GET /d after the exception: %v, want degraded by exception", r)
	}
	doc := e.status()
	d := findPoint(t, doc, "d")
	if d.State != "delay" || d.Reason != nil || d.Delay == nil || d.Delay.Strategy != "exception" || d.Delay.Probing {
		t.Fatalf("d: state %q reason %+v delay %+v, want delay by exception, not probing", d.State, d.Reason, d.Delay)
	}
	if until := d.Delay.Until.Sub(doc.Now); until <= 55*time.Second || until > 60*time.Second {
		t.Errorf("d's delay ends in %v, want about 60s", until)
	}
	if probe := d.Delay.NextProbe.Sub(d.Delay.Until.Add(-60 * time.Second)); probe != 20*time.Second {
		t.Errorf("d's next probe is %v after the delay began, want 20s", probe)
	}
	e.metricIs(1, "sds_point_tripped", "point", "d")
	e.metricIs(1, "sds_point_state", "point", "d", "state", "delay")
	if took := time.Since(start); took > 15*time.Second {
		t.Logf("slow machine: the delay checks took %v", took)
	}

	// A reload and a rejected one join the history after the trips.
	mark := e.proxy.stderr.mark()
	e.write(e.config, configHeader(e.upstream, "10s", 10)+strings.Replace(stateConfig, "visitThreshold: 2", "visitThreshold: 3", 1))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	e.write(e.config, configHeader(e.upstream, "10s", 10)+stateConfig+"    bogus: 1\n")
	e.proxy.waitLog(t, mark, wait, msgStarts("config rejected"))
	doc = e.status()
	var got []string
	for _, ev := range doc.Events {
		got = append(got, ev.Point+":"+ev.Kind)
	}
	want := []string{"sh:trip", "d:trip", "d:delay_start", ":reload", ":reload_rejected"}
	if !slices.Equal(got, want) {
		t.Errorf("history: got %v, want %v", got, want)
	}
	if n := len(doc.Events); n == len(want) {
		if r := doc.Events[3]; !strings.Contains(r.Detail, "points changed [p]") {
			t.Errorf("reload event detail %q, want what changed", r.Detail)
		}
		if r := doc.Events[4]; !strings.Contains(r.Detail, "bogus") {
			t.Errorf("rejected reload event detail %q, want the error", r.Detail)
		}
	}
	// The delay survives the reload (d unchanged): still delay.
	if d := findPoint(t, e.status(), "d"); d.State != "delay" {
		t.Errorf("d after the reload: %q, want delay", d.State)
	}
}

func findPoint(t *testing.T, doc admin.Status, name string) admin.PointStatus {
	t.Helper()
	for _, p := range doc.Points {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("/status has no point %q", name)
	return admin.PointStatus{}
}

func kinds(evs []admin.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// judged is a strategy's reading on /status: its count against its
// threshold, and whether it trips.
func judged(strategy string, count, threshold int64, trips bool) admin.StrategyReading {
	return admin.StrategyReading{Reading: admin.Reading{Strategy: strategy, Count: count, Threshold: threshold}, Trips: trips}
}
