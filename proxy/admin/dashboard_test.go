package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/internal/testclock"
	"github.com/sds-proxy/sds-proxy/internal/tooltest"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/events"
)

func TestAdminDashboardPage(t *testing.T) {
	f := newAdminFixture(t)
	resp, body := f.get(t, http.MethodGet, "/")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: got status %d, want 200", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("GET /: got Content-Type %q, want text/html; charset=utf-8", got)
	}
	for _, want := range []string{`const STATUS_URL = "status";`, `fetch(STATUS_URL`, `"disconnected"`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /: page lacks %q", want)
		}
	}
	// Self-contained: nothing loaded from elsewhere, and no markup built
	// from strings.
	for _, bad := range []string{"<link", " src=", "@import", "url(", "innerHTML", "outerHTML", "insertAdjacentHTML",
		"document.write", "eval(", "new Function", " style=", ".style.", `"style"`} {
		if strings.Contains(body, bad) {
			t.Errorf("GET /: page contains %q", bad)
		}
	}
	// One inline script and one inline style, bare, as the CSP's two hashes
	// allow.
	for _, tag := range []string{"script", "style"} {
		if n := strings.Count(body, "<"+tag); n != 1 || !strings.Contains(body, "<"+tag+">") {
			t.Errorf("GET /: got %d <%s elements, want one bare <%s>", n, tag, tag)
		}
	}
	if n := strings.Count(body, "http"); n != 1 || !strings.Contains(body, `"http://www.w3.org/2000/svg"`) {
		t.Errorf("GET /: got %d mentions of http, want only the SVG namespace", n)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "connect-src 'self'", "script-src 'sha256-", "style-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("GET /: Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Count(csp, "'sha256-") != 2 {
		t.Errorf("GET /: Content-Security-Policy %q: want one hash for the script and one for the style", csp)
	}
}

// evilName is a point name that is markup: the dashboard must show it as
// text.
const evilName = `q<img src=x onerror=alert(1)>`

// TestAdminDashboardChromium renders the dashboard in headless Chromium
// against a live admin port over a real Handler and reads the DOM it built.
func TestAdminDashboardChromium(t *testing.T) {
	needChromium(t)
	t.Run("states", dashboardStates)

	// A point whose only setting is pressureTestDowngrade is closed, yet
	// not "always closed": its pressure-test traffic is degraded.
	t.Run("pressure test only", dashboardPressureOnly)

	// A storm's repeats fold into one event each (events.FoldWithin): the
	// card lists its events by when each last happened, so a trip that
	// began 20 minutes ago and still repeats stays on it, and each says how
	// often and when last; the sparkline counts every trip.
	t.Run("repeats", dashboardRepeats)

	t.Run("no points", func(t *testing.T) {
		f := newAdminFixture(t)
		dom := dumpDOM(t, f.srv.URL+"/")
		if !strings.Contains(dom, `<p id="empty" class="muted">No points are configured`) || strings.Contains(dom, "<article") {
			t.Errorf("dashboard DOM with no points: want the no-points note and no cards:\n%s", dom)
		}
		if !strings.Contains(dom, `<li class="muted">no event in the last 15 minutes</li>`) {
			t.Errorf("dashboard DOM with no events: want the empty timeline note:\n%s", dom)
		}
	})

	t.Run("disconnected", func(t *testing.T) {
		f := newAdminFixture(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/status" {
				http.Error(w, "gone", http.StatusBadGateway)
				return
			}
			f.admin.ServeHTTP(w, r)
		}))
		defer srv.Close()
		dom := dumpDOM(t, srv.URL+"/")
		if !strings.Contains(dom, `<span id="conn" class="badge conn-disconnected" title="HTTP 502">disconnected</span>`) {
			t.Errorf("dashboard DOM with /status failing: want the disconnected badge:\n%s", dom)
		}
	})
}

// dashboardStates: a point in each state, and one named with markup; the
// page's header, legend, summary and timeline, and each card.
func dashboardStates(t *testing.T) {
	f := newAdminFixture(t,
		adminPoint{name: "orders.open", path: "/open", settings: func(s *limiter.Settings) { s.VisitThreshold = limiter.At(20) }},
		adminPoint{name: "orders.delay", path: "/delay", settings: func(s *limiter.Settings) {
			s.ExceptionThreshold = limiter.At(1)
			s.DelayTime, s.RetryInterval = 30*time.Second, 2*time.Second
		}},
		adminPoint{name: "orders.shadow", path: "/shadow", settings: func(s *limiter.Settings) {
			s.Shadow = true
			s.VisitThreshold = limiter.At(20)
		}},
		adminPoint{name: "orders.closed", path: "/closed", settings: func(s *limiter.Settings) { s.VisitThreshold = limiter.At(100) }},
		adminPoint{name: evilName, path: "/evil"},
	)
	for range 25 {
		f.send(t, "/open")
		f.send(t, "/shadow")
	}
	for range 3 {
		f.send(t, "/closed")
	}
	f.send(t, "/evil")
	f.tripOnException(t, "/delay")
	tripDetail := openTripDetail(t, f)

	dom := dumpDOM(t, f.srv.URL+"/")
	for _, want := range []string{
		`<span id="conn" class="badge conn-live">live</span>`,
		`<span id="build" class="muted">v9.9.9-test · go`,
		`<span id="updated" class="muted">as of 12:00:00</span>`,
		`<code id="cfg-hash" title="` + f.status.Hash + `">` + f.status.Hash[:12] + `</code>`,
		// The legend: every state by colour class and by word.
		`<span class="badge state-closed">closed</span>`, `<span class="badge state-open">open</span>`,
		`<span class="badge state-delay">delay</span>`, `<span class="badge state-shadow">shadow</span>`,
		// The summary counts each state.
		`>2 closed</button>`, `>1 open</button>`, `>1 delay</button>`, `>1 shadow</button>`,
		// The global timeline lists the trip, and marks it on the axis.
		`<time class="num">12:00:00</time><span class="ev ev-trip">trip</span><span>orders.open</span><span class="muted">` +
			html.EscapeString(tripDetail) + `</span></li>`,
		`<rect class="mark mk-trip"`,
		`<span class="ev ev-shadow-trip">shadow trip</span><span>orders.shadow</span>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("dashboard DOM lacks %q", want)
		}
	}

	checkStateCards(t, dom, tripDetail)
	if strings.Contains(dom, "<img") {
		t.Errorf("dashboard DOM has an <img> element: a point name was parsed as markup")
	}
	for _, series := range []string{"visits", "degraded", "exceptions", "timeouts"} {
		if got := strings.Count(dom, `data-series="`+series+`"`); got != 5 {
			t.Errorf("dashboard DOM: got %d %s charts, want 5 (one per point)", got, series)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// openTripDetail returns the detail of the trip of orders.open as /status
// reports it: the timeline must show that entry.
func openTripDetail(t *testing.T, f *adminFixture) string {
	t.Helper()
	_, body := f.get(t, http.MethodGet, "/status")
	var doc struct {
		Events []struct{ Kind, Point, Detail string }
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	tripDetail := ""
	for _, e := range doc.Events {
		if e.Kind == "trip" && e.Point == "orders.open" {
			tripDetail = e.Detail
		}
	}
	if tripDetail == "" {
		t.Fatalf("GET /status: no trip event of orders.open in %s", body)
	}
	return tripDetail
}

// checkStateCards checks the card of each point of dashboardStates.
func checkStateCards(t *testing.T, dom, tripDetail string) {
	t.Helper()
	for _, tc := range []struct {
		name  string
		wants []string
	}{
		{"orders.open", []string{
			`<article class="card" data-state="open" data-mode="enforce"`,
			`<span class="badge state state-open">open</span>`,
			`<div class="why why-open"><span class="badge mode mode-enforce"></span><span>degrading: visit 20 / 20</span></div>`,
			`<div class="strat trips" data-strategy="visit" title="visit: 20 / 20, the next request would fail it">`,
			`<span class="ratio">20 / 20</span>`,
			`10s window: 25&nbsp;visits, 5&nbsp;degraded, 0&nbsp;in&nbsp;flight`,
			`<figcaption>passed 20 / 20</figcaption>`,
			`<li data-kind="trip"`, `<span class="ev ev-trip">trip</span> ` + html.EscapeString(tripDetail) + `</li>`,
			`visitThreshold</dt><dd>20</dd>`,
		}},
		{"orders.delay", []string{
			`<article class="card" data-state="delay" data-mode="enforce"`,
			`<span class="badge state state-delay">delay</span>`,
			`<span>delay after exception, until 12:00:30, next probe in 2s</span>`,
			`<span class="ratio">1 / 1</span>`,
			`<span class="ev ev-delay_start">delay start</span>`,
		}},
		{"orders.shadow", []string{
			`<article class="card" data-state="shadow" data-mode="shadow"`,
			`<span class="badge state state-shadow">shadow</span>`,
			`<div class="why why-shadow"><span class="badge mode mode-shadow" title="shadow mode: would-be degradations are counted and shown, nothing is degraded">shadow mode</span><span>would degrade: visit 20 / 20 (nothing degraded)</span></div>`,
			`<span class="ratio">20 / 20</span>`,
			`<span class="ev ev-shadow-trip">shadow trip</span>`,
		}},
		{"orders.closed", []string{
			`<article class="card" data-state="closed" data-mode="enforce"`,
			`<span class="badge state state-closed">closed</span>`,
			`<div class="strat" data-strategy="visit" title="visit: 3 / 100">`,
			`<span class="ratio">3 / 100</span>`,
			`<figcaption>passed 3 / 100</figcaption>`,
		}},
		{evilName, []string{
			`<span class="badge state state-closed">closed</span>`,
			`no strategy enabled: always closed`,
		}},
	} {
		card := cardHTML(t, dom, tc.name)
		for _, want := range tc.wants {
			if !strings.Contains(card, want) {
				t.Errorf("card %q lacks %q", tc.name, want)
			}
		}
		if tc.name != "orders.open" && strings.Contains(card, "state-open") {
			t.Errorf("card %q is drawn open", tc.name)
		}
	}
}

// dashboardPressureOnly: a point whose only setting is
// pressureTestDowngrade is closed, yet not "always closed".
func dashboardPressureOnly(t *testing.T) {
	f := newAdminFixture(t,
		adminPoint{name: "orders.pressure", path: "/pressure", settings: func(s *limiter.Settings) { s.PressureTestDowngrade = true }},
		adminPoint{name: "orders.pressure-shadow", path: "/pressure-shadow", settings: func(s *limiter.Settings) {
			s.PressureTestDowngrade, s.Shadow = true, true
		}},
		adminPoint{name: "orders.plain", path: "/plain"},
	)
	dom := dumpDOM(t, f.srv.URL+"/")
	for _, tc := range []struct{ name, want string }{
		{"orders.pressure", `<div class="nostrat muted">only pressureTestDowngrade: pressure-test traffic is degraded, other requests pass</div>`},
		{"orders.pressure-shadow", `<div class="nostrat muted">only pressureTestDowngrade: pressure-test traffic would be degraded (nothing degraded), other requests pass</div>`},
		{"orders.plain", `<div class="nostrat muted">no strategy enabled: always closed</div>`},
	} {
		if card := cardHTML(t, dom, tc.name); !strings.Contains(card, tc.want) {
			t.Errorf("card %q: got\n%s\nwant it to contain %q", tc.name, card, tc.want)
		}
	}
}

// dashboardRepeats: a storm's repeats fold into one event each on the
// card.
func dashboardRepeats(t *testing.T) {
	f := newAdminFixture(t, adminPoint{name: "orders.storm", path: "/storm", settings: func(s *limiter.Settings) { s.VisitThreshold = limiter.At(20) }})
	ago := func(d time.Duration) time.Time { return adminT0.Add(-d) }
	feed := []events.Event{
		{At: ago(14 * time.Minute), Kind: events.Probe, Strategy: "visit"},
		{At: ago(13 * time.Minute), Kind: events.DelayStart, Strategy: "visit", Detail: "for 30s"},
		{At: ago(12 * time.Minute), Kind: events.DelayEnd, Detail: "probe passed"},
		{At: ago(11*time.Minute + 50*time.Second), Kind: events.Recover, Detail: "a request passed"},
	}
	for d := 20 * time.Minute; d >= 30*time.Second; d -= 30 * time.Second { // 40 trips
		feed = append(feed, events.Event{At: ago(d), Kind: events.Trip, Strategy: "visit", Detail: "visit 21 > 20"})
	}
	for d := 5 * time.Minute; d >= 10*time.Second; d -= 10 * time.Second { // 30 failed probes
		feed = append(feed, events.Event{At: ago(d), Kind: events.ProbeFailed, Strategy: "visit", Detail: "timeout"})
	}
	slices.SortStableFunc(feed, func(a, b events.Event) int { return a.At.Compare(b.At) })
	for _, e := range feed {
		e.Point = "orders.storm"
		f.events.Add(e)
	}
	f.events.Flush(adminT0)
	card := cardHTML(t, dumpDOM(t, f.srv.URL+"/"), "orders.storm")
	for _, want := range []string{
		`<span class="ev ev-trip">trip</span> visit 21 &gt; 20 (flapping: 40 trips, last 11:59:30)</li>`,
		`timeout (30 times, last 11:59:50)</li>`,
		`· 40 trips since 11:40:00`,
	} {
		if !strings.Contains(card, want) {
			t.Errorf("card: got\n%s\nwant it to contain %q", card, want)
		}
	}
}

// tripOnException sends GET path/fail, a 500 from the fixture's upstream,
// and then GET path, which the exception must have degraded (a point with
// an exceptionThreshold of 1: the trip, and its delay if it has one).
func (f *adminFixture) tripOnException(t *testing.T, path string) {
	t.Helper()
	if got := f.send(t, path+"/fail").StatusCode; got != 500 {
		t.Fatalf("GET %s/fail: got %d, want 500", path, got)
	}
	if got := f.send(t, path).StatusCode; got == 200 {
		t.Fatalf("GET %s after its exception: got %d, want it degraded", path, got)
	}
}

// cardRE matches a card's opening tag and its name.
var cardRE = regexp.MustCompile(`<article class="card"([^>]*)><div class="card-head"><h2 class="name" title="[^"]*">([^<]*)</h2>`)

// cardOrder returns the names of the cards in the DOM in document order,
// the shown ones and the hidden ones apart.
func cardOrder(dom string) (shown, hidden []string) {
	for _, m := range cardRE.FindAllStringSubmatch(dom, -1) {
		name := html.UnescapeString(m[2])
		if strings.Contains(m[1], ` hidden=""`) {
			hidden = append(hidden, name)
		} else {
			shown = append(shown, name)
		}
	}
	return shown, hidden
}

// cardHTML returns the serialized card of the point named name.
func cardHTML(t *testing.T, dom, name string) string {
	t.Helper()
	i := strings.Index(dom, `">`+html.EscapeString(name)+`</h2>`)
	if i < 0 {
		t.Fatalf("dashboard DOM has no card %q:\n%s", name, dom)
	}
	start := strings.LastIndex(dom[:i], "<article ")
	end := strings.Index(dom[i:], "</article>")
	return dom[start : i+end]
}

// chromiumPath is the browser the dashboard tests drive headless.
const chromiumPath = "/usr/bin/chromium"

// needChromium skips a test that needs the browser when it is missing or
// the tests run with -short.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		tooltest.Skip(t, "chromium", "no "+chromiumPath, "apt-get install chromium (.ci/run does)")
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
}

// runChromium loads url in headless Chromium (in UTC, so the page's clock
// times are the documents'), lets the page run for budget of virtual time
// (one poll of /status a second), and returns what Chromium printed.
func runChromium(t *testing.T, budget time.Duration, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=" + strconv.FormatInt(budget.Milliseconds(), 10)},
		args...)
	cmd := exec.CommandContext(ctx, chromiumPath, append(args, url)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.WaitDelay = 5 * time.Second // chromium's helpers may hold the pipes
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v (context: %v)\nstderr:\n%s", err, ctx.Err(), stderr.String())
	}
	return stdout.String()
}

// dumpDOM loads url in headless Chromium, lets it run for 3s of virtual
// time (three polls of /status), and returns the serialized DOM.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	return runChromium(t, 3*time.Second, url, "--dump-dom")
}

// screenshot saves a 1400x2000 PNG of url after budget of virtual time into
// dir/name, and returns its path.
func screenshot(t *testing.T, budget time.Duration, url, dir, name string) string {
	t.Helper()
	file := filepath.Join(dir, name)
	runChromium(t, budget, url, "--window-size=1400,2000", "--screenshot="+file)
	info, err := os.Stat(file)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if info.Size() < 10_000 {
		t.Errorf("screenshot %s: %d bytes, want a rendered board", name, info.Size())
	}
	return file
}

// boardT0 is the first instant of a simulated board.
var boardT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// A board's point names: service.operation, 200 of them.
var boardServices = []string{"orders", "payments", "catalog", "users", "cart", "search", "inventory", "shipping",
	"pricing", "reviews", "auth", "notify", "media", "ledger", "quotes", "returns", "loyalty", "tax", "fraud", "geo"}
var boardOps = []string{"read", "write", "list", "get", "create", "update", "delete", "search", "export", "sync"}

// boardName is the name of a board's point i (0 to 199).
func boardName(i int) string {
	return boardServices[i/len(boardOps)%len(boardServices)] + "." + boardOps[i%len(boardOps)]
}

// boardIncident is what happens to a point's upstream on a simulated
// board from from to until (since boardT0; until 0: to the end).
type boardIncident struct {
	kind        string // "surge": 15x the requests; "errors": 3x, every call a 500; "slow": 3x, every call 300ms
	from, until time.Duration
}

// boardIncidents by point index. Those of the first 5 minutes end before
// the healthy screenshot; some later ones end too, the others are under way
// at the end (10 minutes). A point held at its threshold trips and recovers
// about once a bucket, each an event: those incidents start late, or their
// trips would push the older events out of the history.
var boardIncidents = map[int]boardIncident{
	12:  {"surge", 60 * time.Second, 80 * time.Second},
	47:  {"errors", 2*time.Minute + 30*time.Second, 3 * time.Minute},
	101: {"slow", 3*time.Minute + 30*time.Second, 4 * time.Minute},
	150: {"surge", 4 * time.Minute, 4*time.Minute + 20*time.Second},
	60:  {"surge", 6 * time.Minute, 6*time.Minute + 15*time.Second},
	99:  {"errors", 7*time.Minute + 40*time.Second, 7*time.Minute + 55*time.Second},
	3:   {"surge", 9*time.Minute + 15*time.Second, 0},
	88:  {"slow", 9*time.Minute + 20*time.Second, 0},
	120: {"errors", 9*time.Minute + 25*time.Second, 0},
	27:  {"surge", 9*time.Minute + 30*time.Second, 0},
	42:  {"surge", 9*time.Minute + 40*time.Second, 0},
	9:   {"errors", 7*time.Minute + 30*time.Second, 0},
	64:  {"slow", 8 * time.Minute, 0},
	140: {"errors", 8*time.Minute + 40*time.Second, 0},
	71:  {"errors", 7*time.Minute + 45*time.Second, 0},
}

// Points of a board in shadow mode, and those with a delay (3m, a probe
// every 30s).
var (
	boardShadow = map[int]bool{5: true, 55: true, 105: true, 155: true, 150: true, 27: true, 71: true}
	boardDelay  = map[int]bool{9: true, 64: true, 140: true, 71: true}
)

// boardRate is point i's requests per second outside incidents.
func boardRate(i int) float64 {
	if i%20 == 0 {
		return 4
	}
	return []float64{0.3, 0.5, 0.5, 1, 1.5}[i%5]
}

// boardSettings are point i's strategies: a visit threshold 3x its usual
// window, and a mix of the others.
func boardSettings(i int, s *limiter.Settings) {
	s.VisitThreshold = limiter.At(int64(math.Ceil(boardRate(i)*30)) + 10)
	in, troubled := boardIncidents[i]
	if i%3 == 0 || (troubled && in.kind == "errors") {
		s.ExceptionThreshold = limiter.At(10)
	}
	if i%4 == 0 || (troubled && in.kind == "slow") {
		s.TimeoutThreshold, s.TimeoutCountThreshold = 250*time.Millisecond, limiter.At(5)
	}
	if i%5 == 0 {
		s.ConcurrentThreshold = limiter.At(64)
	}
	if i%6 == 0 {
		s.ExceptionRateThreshold, s.ExceptionRateStart = limiter.At(50), 20
	}
	if i%7 == 0 {
		tps := int64(math.Ceil(boardRate(i) * 3))
		s.TokensPerSecond, s.TokenBucketSize = limiter.At(tps), limiter.At(2*tps)
	}
	s.Shadow = boardShadow[i]
	if boardDelay[i] {
		s.DelayTime, s.RetryInterval = 3*time.Minute, 30*time.Second
	}
}

// simBoard is a real Handler of 200 points and its admin port, on a
// simulated upstream and clock: each GET /status first runs the traffic of
// the next step of simulated time, one second at a time (requests through
// the Handler, then Tick, as Handler.Run does). The upstream
// answers as the request's path asks ("/<point>/<status>/<latency ms>"),
// moving the clock on by the latency so the Handler times it.
type simBoard struct {
	f    *adminFixture
	mu   sync.Mutex
	at   time.Duration // simulated so far, since boardT0
	step time.Duration // run per poll of /status; 0 freezes the board
	end  time.Duration // the board stops there
}

func newSimBoard(t *testing.T) *simBoard {
	t.Helper()
	var points []adminPoint
	for i := range 200 {
		points = append(points, adminPoint{name: boardName(i), path: "/" + boardName(i) + "/",
			settings: func(s *limiter.Settings) { boardSettings(i, s) }})
	}
	f := newAdminFixtureOn(t, boardT0, func(clock *testclock.Clock) http.RoundTripper { return simUpstream{clock: clock} }, points...)
	f.status = admin.ReloadStatus{Path: "/etc/sds/sds.yaml", Hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		LoadedAt: boardT0.Add(-time.Hour)}
	return &simBoard{f: f}
}

// play makes each poll of /status run step more of the simulation, up to
// end; a step of 0 runs it to end now and freezes it there.
func (b *simBoard) play(t *testing.T, step, end time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.step, b.end = step, end
	if step == 0 {
		b.run(t, end)
	}
}

// run simulates from where the board is to until (since boardT0).
func (b *simBoard) run(t *testing.T, until time.Duration) {
	for ; b.at < until; b.at += time.Second {
		b.second(t, b.at)
	}
}

// second sends the requests of the simulated second at s and ticks.
func (b *simBoard) second(t *testing.T, s time.Duration) {
	start := boardT0.Add(s)
	sec := int(s / time.Second)
	for i := range 200 {
		rate := boardRate(i)
		in, troubled := boardIncidents[i]
		active := troubled && s >= in.from && (in.until == 0 || s < in.until)
		switch {
		case active && in.kind == "surge":
			rate *= 15
		case active:
			rate *= 3 // clients retry what fails
		}
		n := int(math.Floor(float64(sec+1)*rate) - math.Floor(float64(sec)*rate))
		for k := range n {
			// Spread over the first 600ms, so that a call's latency keeps
			// it in its second's bucket.
			at := start.Add(time.Duration(k) * 600 * time.Millisecond / time.Duration(n))
			h := uint32(i*7919+sec*104729+k*1299709) % 1000
			status, latency := 200, 4+i%13*2+int(h%7)
			switch {
			case h < 4:
				status = 500
			case h > 985:
				latency = 120 + int(h-985)*8
			}
			if active && in.kind == "errors" {
				status = 500
			}
			if active && in.kind == "slow" {
				latency = 300
			}
			b.f.clock.Set(at)
			b.f.send(t, fmt.Sprintf("/%s/%d/%d", boardName(i), status, latency))
		}
	}
	// Handler.Run ticks every second; every other second is enough here
	// (the traffic figures need two samples in 10s) and costs half. The
	// tick and the polls of /status fall after the second's requests, in
	// its bucket: what a point is doing, rather than the instant a bucket
	// starts empty.
	settled := start.Add(700 * time.Millisecond)
	b.f.clock.Set(settled)
	if sec%2 == 1 {
		b.f.h.Tick(settled)
	}
	for _, r := range []struct {
		at     time.Duration
		kind   events.Kind
		detail string
	}{
		{90 * time.Second, events.Reload, "points added [geo.sync]; routes changed"},
		{7*time.Minute + 10*time.Second, events.ReloadRejected, `sds.yaml:41:5: unknown key "visitThreshhold"`},
	} {
		if r.at == s {
			b.f.events.Add(events.Event{At: start, Kind: r.kind, Detail: r.detail})
			b.f.status.LastAttempt, b.f.status.LastOK = start, r.kind == events.Reload
			b.f.status.LastError, b.f.status.LastChange = "", ""
			if r.kind == events.Reload {
				b.f.status.LoadedAt, b.f.status.LastChange = start, r.detail
			} else {
				b.f.status.LastError = r.detail
			}
		}
	}
}

// handler serves the admin port, running a step of the simulation first
// on each GET /status.
func (b *simBoard) handler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if r.URL.Path == "/status" && b.step > 0 {
			b.run(t, min(b.end, b.at+b.step))
		}
		b.f.admin.ServeHTTP(w, r)
	})
}

// simUpstream answers "/<point>/<status>/<latency ms>" with that status,
// moving the fixture's clock on by the latency.
type simUpstream struct{ clock *testclock.Clock }

func (u simUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	parts := strings.Split(r.URL.Path, "/")
	status, _ := strconv.Atoi(parts[len(parts)-2])
	latency, _ := strconv.Atoi(parts[len(parts)-1])
	u.clock.Set(u.clock.Now().Add(time.Duration(latency) * time.Millisecond))
	return &http.Response{
		Status: http.StatusText(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("upstream")),
		ContentLength: 8, Request: r,
	}, nil
}

// flapping matches a folded trip in the event list.
var flapping = regexp.MustCompile(`\(flapping: \d+ trips, last \d\d:\d\d:\d\d\)`)

// states returns the names of the board's points in the order of
// its /status, and the state of each.
func (b *simBoard) states(t *testing.T) (all []string, stateOf map[string]string) {
	t.Helper()
	b.mu.Lock()
	_, body := b.f.get(t, http.MethodGet, "/status")
	b.mu.Unlock()
	var doc struct {
		Points []struct{ Name, State string }
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	stateOf = make(map[string]string)
	for _, p := range doc.Points {
		all = append(all, p.Name)
		stateOf[p.Name] = p.State
	}
	return all, stateOf
}

// TestDashboardBoard renders a board of 200 points on a real Handler, 10
// simulated minutes of traffic, trips, delays, probes and reloads: it saves
// screenshots of it healthy (at 5 minutes) and tripped (at 10), and reads
// the filter and sort from the DOM. The screenshots go to the test's
// temporary folder, or to docs/ (the README's pictures) with
// SDS_UPDATE_SCREENSHOTS=1.
func TestDashboardBoard(t *testing.T) {
	needChromium(t)
	dir := t.TempDir()
	if os.Getenv("SDS_UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "docs")
	}
	b := newSimBoard(t)
	srv := httptest.NewServer(b.handler(t))
	t.Cleanup(srv.Close)

	// Each page load polls about 30 times: the page keeps what it polled
	// as its 15-minute history.
	b.play(t, 10*time.Second, 5*time.Minute)
	screenshot(t, 30*time.Second, srv.URL+"/", dir, "dashboard-healthy.png")
	b.play(t, 10*time.Second, 10*time.Minute)
	screenshot(t, 30*time.Second, srv.URL+"/#sort=severity", dir, "dashboard-tripped.png")
	b.play(t, 0, 10*time.Minute)

	all, stateOf := b.states(t)
	inState := func(states ...string) []string {
		var names []string
		for _, state := range states {
			for _, n := range all {
				if stateOf[n] == state {
					names = append(names, n)
				}
			}
		}
		return names
	}
	ordersByName := func() []string {
		var names []string
		for _, n := range all {
			if strings.HasPrefix(n, "orders.") {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return names
	}()
	if got := len(inState("open", "delay", "shadow")); got < 6 {
		t.Fatalf("board at 10 minutes: got %d points not closed, want several to sort", got)
	}
	for _, tc := range []struct {
		view string
		want []string
	}{
		{"", all},
		{"#q=ORDERS.&sort=name", ordersByName},
		{"#state=trouble&sort=severity", inState("open", "delay", "shadow")},
		{"#state=shadow", inState("shadow")},
	} {
		t.Run("view "+tc.view, func(t *testing.T) {
			dom := dumpDOM(t, srv.URL+"/"+tc.view)
			shown, hidden := cardOrder(dom)
			if !slices.Equal(shown, tc.want) {
				t.Errorf("view %q: got cards shown in order\n%q\nwant\n%q", tc.view, shown, tc.want)
			}
			if len(shown)+len(hidden) != 200 {
				t.Errorf("view %q: got %d cards shown and %d hidden, want 200 in all", tc.view, len(shown), len(hidden))
			}
			summary := "200 points"
			if len(tc.want) != 200 {
				summary = fmt.Sprintf("showing %d of 200", len(tc.want))
			}
			if want := `<span id="shown" class="muted">` + summary + `</span>`; !strings.Contains(dom, want) {
				t.Errorf("view %q: DOM lacks %q", tc.view, want)
			}
			// The board's flapping points fold their trips (events.FlapHold).
			if !flapping.MatchString(dom) {
				t.Errorf("view %q: no flapping trip in the event list", tc.view)
			}
		})
	}
}
