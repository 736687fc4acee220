package admin_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/events"
)

// browser is a headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: it reads commands on its fd 3 and writes
// answers and events on its fd 4, each message JSON ended by a NUL byte).
// It measures the laid-out page, which --dump-dom cannot: the dashboard's
// Content-Security-Policy lets no other script into the page, and the
// protocol's Runtime.evaluate needs none.
type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      *os.File       // chromium's fd 3
	answers chan cdpAnswer // the answers, in order; events are dropped
	failed  chan struct{}  // closed when chromium's output ends
	next    int            // the id of the next command
	session string         // the page's session, once attached
	stderr  *bytes.Buffer  // chromium's own messages, for failures
}

// cdpAnswer is the answer to one command.
type cdpAnswer struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// browserCall bounds one command, page loads and renders included.
const browserCall = 60 * time.Second

// newBrowser starts Chromium (in UTC, like runChromium) with one blank
// page attached; t.Cleanup closes it and waits for it.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	cmdIn, in, err := os.Pipe() // we write in, chromium reads cmdIn as fd 3
	if err != nil {
		t.Fatal(err)
	}
	out, cmdOut, err := os.Pipe() // chromium writes cmdOut as fd 4
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, in: in, answers: make(chan cdpAnswer, 16), failed: make(chan struct{}), stderr: &bytes.Buffer{}}
	b.cmd = exec.Command(chromiumPath, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	b.cmd.Env = append(os.Environ(), "TZ=UTC")
	b.cmd.ExtraFiles = []*os.File{cmdIn, cmdOut}
	b.cmd.Stderr = b.stderr
	b.cmd.WaitDelay = 5 * time.Second // chromium's helpers may hold the pipes
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	cmdIn.Close()
	cmdOut.Close()
	go func() {
		defer close(b.failed)
		r := bufio.NewReader(out)
		for {
			msg, err := r.ReadBytes(0)
			if err != nil {
				return
			}
			var a cdpAnswer
			if json.Unmarshal(msg[:len(msg)-1], &a) == nil && a.ID != 0 {
				b.answers <- a
			}
		}
	}()
	t.Cleanup(func() {
		b.in.Close() // chromium exits when its command pipe closes
		done := make(chan struct{})
		go func() { b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.cmd.Process.Kill()
			<-done
		}
		out.Close()
	})

	var target struct{ TargetID string }
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct{ SessionID string }
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	return b
}

// call sends method with params to the browser ("" session) or the page
// and decodes the answer's result into result (nil: ignored); an error
// answer, or none within browserCall, fails the test.
func (b *browser) call(session, method string, params, result any) {
	b.t.Helper()
	b.next++
	msg := map[string]any{"id": b.next, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		b.t.Fatalf("chromium %s: %v\n%s", method, err, b.stderr)
	}
	deadline := time.NewTimer(browserCall)
	defer deadline.Stop()
	for {
		select {
		case a := <-b.answers:
			if a.ID != b.next {
				continue // the answer to an earlier command that timed out
			}
			if a.Error != nil {
				b.t.Fatalf("chromium %s: %s", method, a.Error.Message)
			}
			if result != nil {
				if err := json.Unmarshal(a.Result, result); err != nil {
					b.t.Fatalf("chromium %s: %v: %s", method, err, a.Result)
				}
			}
			return
		case <-b.failed:
			b.t.Fatalf("chromium %s: chromium stopped\n%s", method, b.stderr)
		case <-deadline.C:
			b.t.Fatalf("chromium %s: no answer within %v", method, browserCall)
		}
	}
}

// open loads url in the page at width × height CSS pixels.
func (b *browser) open(url string, width, height int) {
	b.t.Helper()
	b.call(b.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
}

// eval evaluates the JavaScript expression expr in the page, awaiting it
// if it is a promise, and decodes its JSON value into result.
func (b *browser) eval(expr string, result any) {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r)
	if e := r.ExceptionDetails; e != nil {
		b.t.Fatalf("chromium: %s %s", e.Text, e.Exception.Description)
	}
	if err := json.Unmarshal(r.Result.Value, result); err != nil {
		b.t.Fatalf("chromium: %v: %s", err, r.Result.Value)
	}
}

// dashboardLabels are the dashboard's labels and captions, which must be
// shown whole: a strategy's name, the window's counts, a chart's caption,
// the sparkline's caption, an event's time and kind, the timeline's lanes.
// A point's name and an event's detail are text of any length, cut with
// an ellipsis and shown whole in their title: they are not among them.
var dashboardLabels = []string{".strat .sname", ".strat .ratio", ".win", "figcaption", ".hist-cap",
	".traffic b", ".events li > time", ".events li > .ev", ".tl-lanes > span"}

// measureLabels waits until the page has drawn a card for each of cards
// points, polling in the page (every 20ms, until the call's deadline), and
// returns "SELECTOR: TEXT (SCROLL > CLIENT px)" for each label element
// whose text is wider than its box, and how many label elements it
// measured.
const measureLabels = `new Promise(function (resolve) {
  const selectors = SELECTORS;
  (function check() {
    const cards = document.querySelectorAll("#points article");
    if (cards.length < CARDS || !document.querySelector("#conn.conn-live")) { setTimeout(check, 20); return; }
    const cut = [];
    let measured = 0;
    for (const sel of selectors) {
      for (const e of document.querySelectorAll(sel)) {
        if (e.getClientRects().length === 0) continue; // not displayed
        measured++;
        if (e.scrollWidth > e.clientWidth) cut.push(sel + ": " + JSON.stringify(e.textContent) + " (" + e.scrollWidth + " > " + e.clientWidth + " px)");
      }
    }
    resolve({cut: cut, measured: measured});
  })();
})`

// layoutFixture is TestDashboardLayout's admin port: points that show
// every strategy label, one of them in its recovery ramp, and a recovery
// that entered the history after a later trip. at(s) is the instant s
// seconds into the ramp.
func layoutFixture(t *testing.T) (f *adminFixture, at func(s int) time.Time) {
	t.Helper()
	f = newAdminFixture(t,
		adminPoint{name: "orders.read", path: "/read", settings: func(s *limiter.Settings) {
			s.VisitThreshold = limiter.At(1000)
			s.ConcurrentThreshold = limiter.At(1000)
			s.TokensPerSecond, s.TokenBucketSize = limiter.At(1000), limiter.At(2000)
			s.TimeoutThreshold, s.TimeoutCountThreshold = 250*time.Millisecond, limiter.At(1000)
			s.ExceptionThreshold = limiter.At(1000)
			s.ExceptionRateThreshold, s.ExceptionRateStart = limiter.At(50), 20
		}},
		adminPoint{name: "orders.adaptive", path: "/adaptive", settings: func(s *limiter.Settings) {
			s.AdaptiveConcurrency = limiter.AdaptiveConcurrency{On: true}
		}},
		adminPoint{name: "orders.ramp", path: "/ramp", settings: func(s *limiter.Settings) {
			s.ExceptionThreshold = limiter.At(1)
			s.DelayTime, s.RecoveryTime = time.Second, time.Hour
		}},
	)
	for range 30 {
		f.send(t, "/read")
		f.send(t, "/adaptive")
	}
	f.tripOnException(t, "/ramp") // the trip starts the delay
	// The delay's second passes: orders.ramp is in its recovery ramp.
	ramp := adminT0.Add(2 * time.Second)
	f.clock.Set(ramp)

	// Point a recovers at :43 and point b trips at :44, before a's
	// recovery has been held back for FlapHold and enters the history.
	at = func(s int) time.Time { return ramp.Add(time.Duration(s) * time.Second) }
	f.events.Add(events.Event{At: at(42), Kind: events.Trip, Point: "a", Strategy: "visit", Detail: "visit 5 / 5"})
	f.events.Add(events.Event{At: at(43), Kind: events.Recover, Point: "a"})
	f.events.Add(events.Event{At: at(44), Kind: events.Trip, Point: "b", Strategy: "visit", Detail: "visit 5 / 5"})
	f.events.Flush(at(46))
	f.clock.Set(at(47))
	return f, at
}

// checkLayoutStatus checks that f's /status lists its events oldest first
// and shows every strategy label, and returns how many points it has.
func checkLayoutStatus(t *testing.T, f *adminFixture) int {
	t.Helper()
	type event struct {
		At          time.Time
		Kind, Point string
	}
	var status struct {
		Events []event
		Points []struct {
			Name       string
			State      string
			Strategies []struct{ Strategy string }
		}
	}
	_, body := f.get(t, "GET", "/status")
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	if !slices.IsSortedFunc(status.Events, func(a, b event) int { return a.At.Compare(b.At) }) {
		t.Errorf("/status events: got %v, want them oldest first by at", status.Events)
	}
	var strategies []string
	for _, p := range status.Points {
		for _, s := range p.Strategies {
			strategies = append(strategies, s.Strategy)
		}
	}
	for _, want := range []string{"visit", "concurrent", "token_bucket", "timeout", "exception", "exception_rate", "adaptive_concurrency", "recovery"} {
		if !slices.Contains(strategies, want) {
			t.Fatalf("/status: no point shows the strategy %s (got %q); the fixture must show every label", want, strategies)
		}
	}
	return len(status.Points)
}

// TestDashboardLayout renders the dashboard in headless Chromium at a
// wide window and at the width that makes its cards narrowest (three
// columns of 255px, their minimum, at 813px), with points that show every
// strategy label the limiter has (the shared bucket's needs Redis: it is
// shorter than the longest here), and checks that no label is cut: each
// label element's text fits its box (scrollWidth <= clientWidth). It then
// reads the event list, which must be newest first, by time, when a
// recovery entered the history after a later trip (events.FlapHold).
func TestDashboardLayout(t *testing.T) {
	needChromium(t)
	f, at := layoutFixture(t)
	cards := checkLayoutStatus(t, f)

	b := newBrowser(t)
	expr := strings.NewReplacer("SELECTORS", mustJSON(t, dashboardLabels), "CARDS", fmt.Sprint(cards)).Replace(measureLabels)
	for _, width := range []int{1400, 813} {
		b.open(f.srv.URL+"/", width, 3000)
		var got struct {
			Cut      []string
			Measured int
		}
		b.eval(expr, &got)
		if got.Measured < 40 {
			t.Errorf("%dpx wide: measured %d label elements, want every card's (40 or more)", width, got.Measured)
		}
		for _, c := range got.Cut {
			t.Errorf("%dpx wide: label cut off: %s", width, c)
		}
	}

	// The summary counts every state, recovering included.
	var summary string
	b.eval(`document.getElementById("summary").textContent`, &summary)
	if want := "2 closed0 open0 delay1 recovering0 shadow"; summary != want {
		t.Errorf("the summary: got %q, want %q", summary, want)
	}

	// The event list, newest first: b's trip (:44) above a's recovery
	// (:43), above a's trip (:42), above the fixture's own events.
	var list []string
	b.eval(`Array.from(document.querySelectorAll("#events li")).map(function (li) {
	  return li.children[0].textContent + " " + li.children[1].textContent + " " + li.children[2].textContent;
	})`, &list)
	clock := func(s int) string { return at(s).Format("15:04:05") }
	want := []string{clock(44) + " trip b", clock(43) + " recover a", clock(42) + " trip a"}
	if len(list) < len(want)+1 || !slices.Equal(list[:len(want)], want) {
		t.Errorf("event list: got %q, want it to start with %q and go on with the fixture's events", list, want)
	}
	for i := 1; i < len(list); i++ {
		if list[i][:8] > list[i-1][:8] {
			t.Errorf("event list: %q below %q, want newest first", list[i], list[i-1])
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
