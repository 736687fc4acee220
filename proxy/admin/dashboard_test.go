package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
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

// TestAdminDashboardChromium renders the dashboard in headless Chromium
// against a live admin port over a real Handler and reads the DOM it built.
func TestAdminDashboardChromium(t *testing.T) {
	needChromium(t)
	const evil = `q<img src=x onerror=alert(1)>`

	t.Run("states", func(t *testing.T) {
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
			adminPoint{name: evil, path: "/evil"},
		)
		for range 25 {
			f.send(t, "/open")
			f.send(t, "/shadow")
		}
		for range 3 {
			f.send(t, "/closed")
		}
		f.send(t, "/evil")
		if got := f.send(t, "/delay/fail").StatusCode; got != 500 {
			t.Fatalf("GET /delay/fail: got %d, want 500", got)
		}
		if got := f.send(t, "/delay").StatusCode; got == 200 {
			t.Fatalf("GET /delay after its exception: got %d, want it degraded (the delay)", got)
		}
		// The trip of orders.open as /status reports it: the timeline must
		// show that entry.
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
				`25 visits, 5 degraded, 0 in flight`,
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
			{evil, []string{
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
	})

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

// TestDashboardFilterSort loads a board of 200 points with a view in the
// URL's fragment and reads which cards show, in which order.
func TestDashboardFilterSort(t *testing.T) {
	needChromium(t)
	board := &syntheticBoard{n: 200, tripped: true, from: 14 * time.Minute}
	srv := serveBoard(t, board)
	doc := board.doc(boardT0.Add(board.from))
	var all []string
	stateOf := make(map[string]string)
	for _, p := range doc["points"].([]obj) {
		name := p["name"].(string)
		all = append(all, name)
		stateOf[name] = p["state"].(string)
	}

	for _, tc := range []struct {
		view  string
		want  func() []string
		shown string
	}{
		{"", func() []string { return all }, "200 points"},
		{"#q=ORDERS.&sort=name", func() []string {
			var names []string
			for _, n := range all {
				if strings.HasPrefix(n, "orders.") {
					names = append(names, n)
				}
			}
			slices.Sort(names)
			return names
		}, "showing 10 of 200"},
		{"#state=trouble&sort=severity", func() []string {
			var names []string
			for _, state := range []string{"open", "delay", "shadow"} {
				for _, n := range all {
					if stateOf[n] == state {
						names = append(names, n)
					}
				}
			}
			return names
		}, "showing 12 of 200"},
		{"#state=shadow", func() []string {
			var names []string
			for _, n := range all {
				if stateOf[n] == "shadow" {
					names = append(names, n)
				}
			}
			return names
		}, "showing 3 of 200"},
	} {
		t.Run(tc.view, func(t *testing.T) {
			dom := dumpDOM(t, srv.URL+"/"+tc.view)
			shown, hidden := cardOrder(dom)
			if want := tc.want(); !slices.Equal(shown, want) {
				t.Errorf("view %q: got cards shown in order\n%q\nwant\n%q", tc.view, shown, want)
			}
			if len(shown)+len(hidden) != 200 {
				t.Errorf("view %q: got %d cards shown and %d hidden, want 200 in all", tc.view, len(shown), len(hidden))
			}
			if want := `<span id="shown" class="muted">` + tc.shown + `</span>`; !strings.Contains(dom, want) {
				t.Errorf("view %q: DOM lacks %q", tc.view, want)
			}
		})
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
		t.Skipf("no %s: %v", chromiumPath, err)
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

// obj is a JSON object of a synthetic /status document.
type obj = map[string]any

// boardT0 is the first instant of a synthetic board's polls.
var boardT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// syntheticBoard serves a made-up /status document of many points, for what
// a real proxy cannot show in a test's few seconds: 200 points with 15
// minutes of traffic, trips, delays, probes and reloads behind them. Each
// poll of /status moves its clock on by step.
type syntheticBoard struct {
	n       int
	tripped bool
	// from is the board's first instant after boardT0; step is how far
	// each poll moves its clock on (0: a frozen board).
	from, step time.Duration
	polls      atomic.Int64
}

// boardIncident is a point's trouble on a synthetic board: from at on it
// reads state, for the strategy.
type boardIncident struct {
	state, strategy string
	at              time.Duration // since boardT0
	recoverAfter    time.Duration // 0: still in trouble at the end
}

var boardServices = []string{"orders", "payments", "catalog", "users", "cart", "search", "inventory", "shipping",
	"pricing", "reviews", "auth", "notify", "media", "ledger", "quotes", "returns", "loyalty", "tax", "fraud", "geo"}
var boardOps = []string{"read", "write", "list", "get", "create", "update", "delete", "search", "export", "sync"}

func boardName(i int) string {
	return boardServices[i/len(boardOps)%len(boardServices)] + "." + boardOps[i%len(boardOps)]
}

// incidents are the synthetic board's troubles by point index: on the
// healthy board only the ones that have recovered.
func (b *syntheticBoard) incident(i int) (boardIncident, bool) {
	past := map[int]boardIncident{
		12:  {"open", "visit", 90 * time.Second, 40 * time.Second},
		47:  {"open", "exception", 4 * time.Minute, 70 * time.Second},
		101: {"open", "timeout", 6 * time.Minute, 30 * time.Second},
		150: {"shadow", "visit", 3 * time.Minute, 50 * time.Second},
	}
	if in, ok := past[i]; ok {
		return in, true
	}
	if !b.tripped {
		return boardIncident{}, false
	}
	in, ok := map[int]boardIncident{
		3:   {"open", "visit", 8 * time.Minute, 0},
		17:  {"open", "exception", 11 * time.Minute, 0},
		42:  {"open", "timeout", 12*time.Minute + 30*time.Second, 0},
		88:  {"open", "concurrent", 13 * time.Minute, 0},
		120: {"open", "exception_rate", 9 * time.Minute, 0},
		177: {"open", "token_bucket", 14 * time.Minute, 0},
		9:   {"delay", "exception", 10*time.Minute + 30*time.Second, 0},
		64:  {"delay", "timeout", 11*time.Minute + 20*time.Second, 0},
		140: {"delay", "visit", 12 * time.Minute, 0},
		27:  {"shadow", "visit", 7 * time.Minute, 0},
		71:  {"shadow", "exception", 10*time.Minute + 40*time.Second, 0},
		158: {"shadow", "timeout", 13*time.Minute + 10*time.Second, 0},
	}[i]
	return in, ok
}

func (b *syntheticBoard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := boardT0.Add(b.from + time.Duration(b.polls.Add(1)-1)*b.step)
	body, err := json.Marshal(b.doc(now))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// doc returns the board's /status document at now, in the shape of
// /work/notes/status-shape.md.
func (b *syntheticBoard) doc(now time.Time) obj {
	var points, events []obj
	for i := range b.n {
		p, pointEvents := b.point(i, now)
		points = append(points, p)
		events = append(events, pointEvents...)
	}
	for _, r := range []struct {
		at   time.Duration
		kind string
		text string
	}{
		{2 * time.Minute, "reload", "points added [geo.sync]; routes changed"},
		{9*time.Minute + 30*time.Second, "reload_rejected", `sds.yaml:41:5: unknown key "visitThreshhold"`},
		{10 * time.Minute, "reload", "orders.read: visitThreshold 100 -> 200"},
	} {
		if at := boardT0.Add(r.at); !at.After(now) {
			events = append(events, obj{"at": at, "kind": r.kind, "detail": r.text})
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i]["at"].(time.Time).Before(events[j]["at"].(time.Time)) })
	if points == nil {
		points = []obj{}
	}
	if events == nil {
		events = []obj{}
	}
	return obj{
		"now":   now,
		"build": obj{"version": "v0.3.0", "goVersion": "go1.26.8"},
		"config": obj{"path": "/etc/sds/sds.yaml", "hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			"loadedAt": boardT0.Add(10 * time.Minute), "lastReload": obj{"at": boardT0.Add(10 * time.Minute), "ok": true,
				"change": "orders.read: visitThreshold 100 -> 200"}},
		"events": events,
		"points": points,
	}
}

// point returns point i of the board at now and its events. Its figures
// agree with each other as a real point's would: the strategies' counts
// are the window's sums, and an incident's strategy is over its threshold.
func (b *syntheticBoard) point(i int, now time.Time) (obj, []obj) {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(now.Unix())))
	name := boardName(i)
	in, troubled := b.incident(i)
	tripAt := boardT0.Add(in.at)
	active := troubled && !now.Before(tripAt) && (in.recoverAfter == 0 || now.Before(tripAt.Add(in.recoverAfter)))
	shadow := i%50 == 5 || i%37 == 27 || (troubled && in.state == "shadow")
	mode := "enforce"
	if shadow {
		mode = "shadow"
	}
	base := 2 + float64((i*7919)%97)/2
	rate := base * (1 + 0.35*math.Sin(float64(now.Unix())/97+float64(i)))

	// The window: ten 1s buckets. A visit incident's threshold is fixed;
	// once the passed visits reach it, an enforced point degrades the rest.
	visitLimit := int64(4 * base)
	buckets := make([]obj, 10)
	var visits, degraded, exceptions, timeouts int64
	for j := range buckets {
		v := int64(rate * (0.7 + 0.6*rng.Float64()))
		var d, e, to int64
		if rng.IntN(12) == 0 {
			e = 1
		}
		if i%4 == 0 && rng.IntN(20) == 0 {
			to = 1
		}
		if active {
			late := j >= 5
			switch {
			case in.state == "delay":
				d = v - min(v, 1) // all but the probe
			case in.strategy == "exception" && late:
				e = 5
			case in.strategy == "timeout" && late && j >= 6:
				to = 3
			case in.strategy == "exception_rate" && late:
				e = v * 2 / 3
			}
			if in.state == "open" && late {
				d = v * 3 / 4
			}
			if in.state == "open" && in.strategy == "visit" {
				d = v - max(0, min(v, visitLimit-(visits-degraded)))
			}
		}
		buckets[j] = obj{"visits": v, "degraded": d, "exceptions": e, "timeouts": to}
		visits, degraded, exceptions, timeouts = visits+v, degraded+d, exceptions+e, timeouts+to
	}
	passed := visits - degraded
	inFlight := int64(rng.IntN(5))

	thresholds := obj{"visitThreshold": int64(math.Ceil(base*20/100) * 100), "downgradeRate": 100}
	if troubled && in.strategy == "visit" {
		thresholds["visitThreshold"] = visitLimit
	}
	var strategies []obj
	reading := func(strategy string, count, threshold int64) {
		trips := count >= threshold
		strategies = append(strategies, obj{"strategy": strategy, "count": count, "threshold": threshold, "trips": trips})
	}
	reading("visit", passed, thresholds["visitThreshold"].(int64))
	tokens := int64(-1)
	if i%7 == 0 || in.strategy == "token_bucket" {
		thresholds["tokenBucketGeneratedTokensInSecond"], thresholds["tokenBucketSize"] = int64(50), int64(100)
		tokens = 100 - int64(rate)
		if active && in.strategy == "token_bucket" {
			tokens = 0
		}
		reading("token_bucket", 100-tokens, 100)
	}
	if i%5 == 0 || in.strategy == "concurrent" {
		thresholds["concurrentThreshold"] = int64(64)
		if active && in.strategy == "concurrent" {
			inFlight = 64
		}
		reading("concurrent", inFlight, 64)
	}
	if i%4 == 0 || in.strategy == "timeout" {
		thresholds["timeoutThreshold"], thresholds["timeoutCountThreshold"] = "250ms", int64(10)
		reading("timeout", timeouts, 10)
	}
	if i%3 == 0 || in.strategy == "exception" {
		thresholds["exceptionThreshold"] = int64(20)
		reading("exception", exceptions, 20)
	}
	if i%6 == 0 || in.strategy == "exception_rate" {
		thresholds["exceptionRateThreshold"], thresholds["exceptionRateStart"] = int64(50), int64(20)
		reading("exception_rate", exceptions*100/max(1, passed), 50)
	}

	p := obj{"name": name, "mode": mode, "state": "closed"}
	var reason obj
	for _, s := range strategies {
		if s["strategy"] == in.strategy {
			reason = s
		}
	}
	var pointEvents []obj
	event := func(at time.Time, kind, strategy, detail string) {
		e := obj{"at": at, "kind": kind, "point": name, "detail": detail}
		if strategy != "" {
			e["strategy"] = strategy
		}
		if shadow {
			e["shadow"] = true
		}
		pointEvents = append(pointEvents, e)
	}
	if troubled && !now.Before(tripAt) {
		threshold := reason["threshold"].(int64)
		event(tripAt, "trip", in.strategy, fmt.Sprintf("%s %d > %d", in.strategy, threshold+1, threshold))
		p["lastTrip"] = obj{"strategy": in.strategy, "at": tripAt, "count": threshold + 1, "threshold": threshold,
			"window": obj{"visits": visits, "degraded": 0, "exceptions": exceptions, "timeouts": timeouts}, "inFlight": inFlight}
		if in.state == "delay" {
			event(tripAt, "delay_start", in.strategy, "delay 5m0s")
			for at := tripAt.Add(time.Minute); !at.After(now); at = at.Add(time.Minute) {
				event(at, "probe", in.strategy, "a request let through")
				event(at.Add(300*time.Millisecond), "probe_failed", in.strategy, "probe answered 503")
			}
		}
		if !active {
			event(tripAt.Add(in.recoverAfter), "recover", "", "window slid past the trip")
		}
	}
	if active {
		switch in.state {
		case "delay":
			thresholds["delayTime"], thresholds["retryInterval"] = "5m0s", "1m0s"
			probes := now.Sub(tripAt)/time.Minute + 1
			p["state"] = "delay"
			p["delay"] = obj{"strategy": in.strategy, "until": tripAt.Add(5 * time.Minute),
				"nextProbe": tripAt.Add(probes * time.Minute), "probing": false}
		default:
			p["state"] = in.state
			p["reason"] = obj{"strategy": in.strategy, "count": reason["count"], "threshold": reason["threshold"]}
		}
	}

	errPct := 100 * float64(exceptions) / max(1, float64(passed))
	traffic := obj{"seconds": 10, "requestsPerSecond": math.Round(rate*10) / 10, "degradedPerSecond": float64(degraded) / 10,
		"shadowDegradedPerSecond": 0.0, "errorPercent": math.Round(errPct*10) / 10,
		"p50": 0.004 + float64(i%13)/1000, "p99": 0.05 + float64(i%29)/100}
	if p["state"] == "shadow" {
		traffic["shadowDegradedPerSecond"] = math.Round(rate*2.5) / 10
	}
	p["strategies"] = strategies
	p["window"] = obj{"visits": visits, "degraded": degraded, "exceptions": exceptions, "timeouts": timeouts, "inFlight": inFlight}
	if tokens >= 0 {
		p["tokens"] = tokens
	}
	p["traffic"] = traffic
	p["thresholds"] = thresholds
	p["series"] = obj{"bucketSeconds": 1, "buckets": buckets}
	if pointEvents == nil {
		pointEvents = []obj{}
	}
	p["events"] = pointEvents
	return p, pointEvents
}

// serveBoard serves the dashboard page from a real admin port and /status
// from board.
func serveBoard(t *testing.T, board http.Handler) *httptest.Server {
	t.Helper()
	f := newAdminFixture(t)
	mux := http.NewServeMux()
	mux.Handle("GET /status", board)
	mux.Handle("/", f.admin)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestDashboardScreenshots renders a healthy and a tripped board of 200
// points, 15 minutes into their history, and saves them as PNGs: into the
// test's temporary folder, or into docs/ (the README's pictures) with
// SDS_UPDATE_SCREENSHOTS=1.
func TestDashboardScreenshots(t *testing.T) {
	needChromium(t)
	dir := t.TempDir()
	if os.Getenv("SDS_UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "docs")
	}
	for _, tc := range []struct {
		name    string
		tripped bool
		view    string
	}{
		{"dashboard-healthy.png", false, ""},
		{"dashboard-tripped.png", true, "#sort=severity"},
	} {
		board := &syntheticBoard{n: 200, tripped: tc.tripped, step: 30 * time.Second}
		srv := serveBoard(t, board)
		file := screenshot(t, 30*time.Second, srv.URL+"/"+tc.view, dir, tc.name)
		t.Logf("%s after %d polls", file, board.polls.Load())
	}
}
