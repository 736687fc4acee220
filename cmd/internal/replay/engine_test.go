package replay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sds-proxy/sds-proxy/cmd/internal/replay"
	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
)

// engT0 is where the engine tests' clocks start: on a whole second, as a
// window's buckets are.
var engT0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// engLayout is the access log's layout of its instants.
const engLayout = "2006-01-02T15:04:05.000000Z07:00"

// engConfig is the config of the recorded run, its thresholds scaled by
// n (counts) and d (durations): every strategy the replay must reproduce,
// each on a point of its own.
func engConfig(t *testing.T, n func(int64) int64, d func(time.Duration) time.Duration) *config.File {
	t.Helper()
	text := fmt.Sprintf(`upstream: http://upstream.test
window: 10s
buckets: 10
pressureTestHeader: X-Pressure-Test
accessLog: true
routes:
  - {point: visits, match: {path: /visit}}
  - {point: tokens, match: {path: /tokens}}
  - {point: conc, match: {path: /conc}}
  - {point: errors, match: {path: /errors}}
  - {point: slow, match: {path: /slow}}
  - {point: rate, match: {path: /rate}}
  - {point: shed, match: {path: /shed/export}, priority: sheddable}
  - {point: shed, match: {path: /shed}}
  - {point: keyed, match: {path: /keyed}}
  - {point: lucky, match: {path: /lucky}}
  - {point: shadowed, match: {path: /shadowed}}
points:
  visits: {visitThreshold: %d, pressureTestDowngrade: true}
  tokens: {tokenBucketGeneratedTokensInSecond: %d, tokenBucketSize: %d}
  conc: {concurrentThreshold: %d}
  errors: {exceptionThreshold: %d, delayTime: 3s, retryInterval: 1s}
  slow: {timeoutThreshold: %dms, timeoutCountThreshold: %d, delayTime: 2s, retryInterval: 500ms}
  rate: {exceptionRateThreshold: %d, exceptionRateStart: 4}
  shed: {visitThreshold: %d, sheddableShare: 50}
  keyed:
    visitThreshold: 100
    perKey:
      - {key: header:X-Api-Key, visitThreshold: %d, concurrentThreshold: %d, missing: degrade}
      - {key: query:tenant, tokenBucketGeneratedTokensInSecond: %d, tokenBucketSize: %d}
  lucky: {visitThreshold: %d, downgradeRate: 50}
  shadowed: {concurrentThreshold: %d, mode: shadow}
`, n(5), n(2), n(4), n(2), n(3), d(200*time.Millisecond).Milliseconds(), n(2), min(n(50), 100), n(6),
		n(3), n(1), n(1), n(2), n(2), n(1))
	f, err := config.ParseText("sds.yaml", []byte(text), config.Options{})
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	return f
}

// engClock is the fake clock of a recorded run, shared by the Handler and
// its access log. Safe for concurrent use.
type engClock struct{ ns atomic.Int64 }

func (c *engClock) Now() time.Time                         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *engClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
func (c *engClock) add(d time.Duration)                    { c.ns.Add(int64(d)) }

// engRig drives a real proxy.Handler on a fake clock against a fake
// upstream (its RoundTrip): a request is answered the status of its
// query's status (200 without), at once, or, with hold=ID, once the test
// releases it.
type engRig struct {
	t     *testing.T
	clock *engClock
	h     *proxy.Handler
	logs  *observer.ObservedLogs

	mu      sync.Mutex
	answers map[string]chan int      // by hold ID: the status to answer
	reached map[string]chan struct{} // by hold ID: closed when the upstream has the call
	firsts  map[string]time.Time     // by point: the arrival the script expects to trip it first
}

func newEngRig(t *testing.T, f *config.File) *engRig {
	t.Helper()
	g := &engRig{t: t, clock: &engClock{}, answers: map[string]chan int{}, reached: map[string]chan struct{}{}, firsts: map[string]time.Time{}}
	g.clock.ns.Store(engT0.UnixNano())
	core, logs := observer.New(zap.InfoLevel)
	g.logs = logs
	var h *proxy.Handler
	opts := proxy.Options{
		Logger:    zap.NewNop(),
		AccessLog: zap.New(core, zap.WithClock(g.clock)),
		Metrics:   metrics.NewSet(prometheus.NewRegistry(), func() []metrics.Source { return h.Sources() }),
		Transport: g,
		Now:       g.clock.Now,
	}
	// No Handler.Run: its sweep runs on a real ticker. So the proxy counts
	// each timeout when its call ends.
	h = proxy.New(engTranslate(t, f), opts)
	g.h = h
	return g
}

// engTranslate builds the request path's config of f as cmd/sds-proxy's
// translate.go does.
func engTranslate(t *testing.T, f *config.File) *proxy.Config {
	t.Helper()
	u, err := url.Parse(f.Upstream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &proxy.Config{Upstream: u, ForwardedHeaders: f.ForwardedHeaders, PressureTestHeader: f.PressureTestHeader, AccessLog: f.AccessLog}
	missing := map[string]proxy.Missing{"": proxy.MissingPass, "pass": proxy.MissingPass, "degrade": proxy.MissingDegrade, "shared": proxy.MissingShared}
	byName := map[string]*proxy.Point{}
	for i := range f.Points {
		cp := &f.Points[i]
		lim, err := limiter.NewPoint(cp.Name, f.Settings(cp))
		if err != nil {
			t.Fatalf("point %s: %v", cp.Name, err)
		}
		var keys []proxy.KeyRule
		for _, k := range cp.PerKey {
			src, err := k.Source()
			if err != nil {
				t.Fatal(err)
			}
			table, err := perkey.New(f.KeySettings(k))
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, proxy.KeyRule{Source: src, Missing: missing[k.Missing], Table: table})
		}
		p := proxy.NewPoint(lim, proxy.PointOptions{UpstreamTimeout: cp.UpstreamTimeout, Keys: keys})
		byName[cp.Name] = p
		cfg.Points = append(cfg.Points, p)
	}
	for _, r := range f.Routes {
		rt, err := proxy.NewRoute(proxy.Route{Point: byName[r.Point], Priority: r.Priority, Rule: r.Rule()})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Routes = append(cfg.Routes, rt)
	}
	return cfg
}

func (g *engRig) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	status := http.StatusOK
	if s := q.Get("status"); s != "" {
		status, _ = strconv.Atoi(s)
	}
	if id := q.Get("hold"); id != "" {
		g.mu.Lock()
		answer, reached := g.answers[id], g.reached[id]
		g.mu.Unlock()
		close(reached)
		status = <-answer
	}
	return &http.Response{
		Status: strconv.Itoa(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: r,
	}, nil
}

// request returns a GET of target with header pairs kv.
func engRequest(target string, kv ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://svc.test"+target, nil)
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

// get sends a GET of target 1 ms after the last instant, so that no two
// arrivals share one, and returns when it is answered, with its arrival.
func (g *engRig) get(target string, kv ...string) time.Time {
	g.clock.add(time.Millisecond)
	at := g.clock.Now()
	g.h.ServeHTTP(httptest.NewRecorder(), engRequest(target, kv...))
	return at
}

// first notes that the script expects the request that arrived at to
// trip point first.
func (g *engRig) first(point string, at time.Time) { g.firsts[point] = at }

// engHeld is a request whose upstream answer waits for release.
type engHeld struct {
	g      *engRig
	answer chan int
	done   chan struct{}
}

// hold sends a GET of target (plus hold=id) 1 ms after the last instant,
// and returns once the upstream has it, or once it is answered without
// reaching it (degraded).
func (g *engRig) hold(target, id string, kv ...string) *engHeld {
	g.clock.add(time.Millisecond)
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	r := engRequest(target+sep+"hold="+id, kv...)
	held := &engHeld{g: g, answer: make(chan int, 1), done: make(chan struct{})}
	reached := make(chan struct{})
	g.mu.Lock()
	g.answers[id], g.reached[id] = held.answer, reached
	g.mu.Unlock()
	go func() {
		defer close(held.done)
		g.h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	select {
	case <-reached:
	case <-held.done:
	}
	return held
}

// release answers the held call with status at the clock's instant, and
// returns once the request is over.
func (held *engHeld) release(status int) {
	held.answer <- status
	<-held.done
}

// engScript is the recorded run: each point's strategies tripped once at
// least, a delay's probes failing and passing, and the window sliding.
func engScript(g *engRig) {
	// visit: 5 per window, then a pressure test; a new window, and an
	// operator's switches.
	for i := range 7 {
		if at := g.get("/visit"); i == 5 {
			g.first("visits", at)
		}
	}
	g.get("/visit", "X-Pressure-Test", "1")
	g.clock.add(11 * time.Second)
	if _, err := g.h.Force("visits", proxy.ForceDegrade, time.Minute, "test"); err != nil {
		g.t.Fatal(err)
	}
	g.get("/visit")
	if _, err := g.h.Force("visits", proxy.ForcePass, time.Minute, "test"); err != nil {
		g.t.Fatal(err)
	}
	g.get("/visit")
	g.h.Unforce("visits")
	g.get("/visit")
	g.get("/visit")

	// token_bucket: 4 tokens, 2 a second.
	for i := range 6 {
		if at := g.get("/tokens"); i == 4 {
			g.first("tokens", at)
		}
	}
	g.clock.add(600 * time.Millisecond)
	g.get("/tokens")

	// concurrent: 2 in flight.
	a, b := g.hold("/conc", "a"), g.hold("/conc", "b")
	g.first("conc", g.get("/conc"))
	g.clock.add(50 * time.Millisecond)
	a.release(http.StatusOK)
	g.get("/conc")
	g.clock.add(10 * time.Millisecond)
	b.release(http.StatusOK)

	// exception: the 3rd trips it, a delay of 3s with a probe a second: the
	// first fails, the second passes and ends the delay.
	for range 3 {
		g.get("/errors?status=500")
	}
	g.first("errors", g.get("/errors"))
	g.get("/errors")
	g.clock.add(time.Second)
	g.get("/errors?status=500") // a failed probe
	g.get("/errors")
	g.clock.add(time.Second)
	g.get("/errors") // a good probe
	g.get("/errors")

	// timeout: 200ms, 2 trip it; a delay of 2s, a probe each 500ms.
	s1 := g.hold("/slow", "s1")
	g.clock.add(300 * time.Millisecond) // counted in flight by the replay, at the end by the proxy
	s1.release(http.StatusOK)
	s2 := g.hold("/slow", "s2")
	g.clock.add(200 * time.Millisecond) // exactly the threshold
	s2.release(http.StatusOK)
	g.first("slow", g.get("/slow"))
	g.get("/slow")
	g.clock.add(500 * time.Millisecond)
	probe := g.hold("/slow", "s5")
	g.clock.add(100 * time.Millisecond)
	probe.release(http.StatusOK)
	g.get("/slow")

	// exception_rate: 50% past 4 visits.
	for _, status := range []int{200, 500, 200, 500, 500} {
		g.get("/rate?status=" + strconv.Itoa(status))
	}
	g.first("rate", g.get("/rate"))
	g.get("/rate")

	// A sheddable share: exports may use 3 of the 6 visits.
	for range 4 {
		g.get("/shed/export")
	}
	for range 3 {
		g.get("/shed")
	}
	g.first("shed", g.get("/shed"))

	// Per-key rules: 3 visits a key, 1 in flight, a request without the
	// key degraded; 2 tokens a tenant.
	for range 4 {
		g.get("/keyed", "X-Api-Key", "A")
	}
	b1 := g.hold("/keyed", "b1", "X-Api-Key", "B")
	g.get("/keyed", "X-Api-Key", "B")
	g.clock.add(10 * time.Millisecond)
	b1.release(http.StatusOK)
	g.get("/keyed", "X-Api-Key", "B") // B's place is free again
	g.get("/keyed")
	for range 3 {
		g.get("/keyed?tenant=t1", "X-Api-Key", "C")
	}

	// downgradeRate 50: the proxy draws at random, the log tells the draws.
	for range 8 {
		g.get("/lucky")
	}

	// Shadow mode: marked and forwarded.
	x := g.hold("/shadowed", "x")
	y := g.hold("/shadowed", "y")
	g.first("shadowed", g.clock.Now())
	g.clock.add(10 * time.Millisecond)
	x.release(http.StatusOK)
	y.release(http.StatusOK)
}

// engEntries turns the access lines logs kept into Entries, in arrival
// order, from their fields as the Handler logged them.
func engEntries(t *testing.T, logs *observer.ObservedLogs) []replay.Entry {
	t.Helper()
	var out []replay.Entry
	for i, le := range logs.All() {
		m := le.ContextMap()
		s := func(k string) string { v, _ := m[k].(string); return v }
		b := func(k string) bool { v, _ := m[k].(bool); return v }
		d := func(k string) time.Duration { v, _ := m[k].(time.Duration); return v }
		instant := func(k string) time.Time {
			if s(k) == "" {
				return time.Time{}
			}
			at, err := time.Parse(engLayout, s(k))
			if err != nil {
				t.Fatalf("line %d: %s: %v", i+1, k, err)
			}
			return at
		}
		status, _ := m["status"].(int64)
		e := replay.Entry{
			Line: i + 1, Point: s("point"), Arrived: instant("arrived"), Written: le.Time,
			Host: s("host"), Method: s("method"), Path: s("path"), Priority: s("priority"),
			Status: int(status), Strategy: s("strategy"), Degraded: b("degraded"), Shadow: b("shadow"),
			Stale: b("stale"), Forced: s("forced"), PressureTest: b("pressure_test"),
			Start: instant("start"), Ended: instant("ended"), UpstreamLatency: d("upstream_latency"),
			Outcome: s("outcome"), Error: s("error"), Waited: d("waited"),
		}
		if keys, ok := m["keys"].([]any); ok {
			for _, k := range keys {
				e.Keys = append(e.Keys, k.(string))
			}
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b replay.Entry) int { return a.Arrived.Compare(b.Arrived) })
	return out
}

// engNext returns a next func over es.
func engNext(es []replay.Entry) func() (replay.Entry, bool) {
	i := 0
	return func() (replay.Entry, bool) {
		if i == len(es) {
			return replay.Entry{}, false
		}
		i++
		return es[i-1], true
	}
}

func engRun(t *testing.T, f *config.File, es []replay.Entry, opts replay.Options) *replay.Report {
	t.Helper()
	rep, err := replay.Run(f, engNext(es), opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func engSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func same(n int64) int64                  { return n }
func sameD(d time.Duration) time.Duration { return d }

// TestEngineReproducesTheLog records a real Handler's access log through
// every replayable strategy and replays it with the same config: no
// decision may change. Then with thresholds doubled, fewer degraded; with
// them halved, more.
func TestEngineReproducesTheLog(t *testing.T) {
	f := engConfig(t, same, sameD)
	g := newEngRig(t, f)
	engScript(g)
	es := engEntries(t, g.logs)

	// The recorded run did what the script means: each point degraded.
	want := map[string]map[string]int{
		"visits":   {"visit": 2, "pressure_test": 1, "forced": 1},
		"tokens":   {"token_bucket": 2},
		"conc":     {"concurrent": 1},
		"errors":   {"exception": 3},
		"slow":     {"timeout": 2},
		"rate":     {"exception_rate": 2},
		"shed":     {"visit": 2},
		"keyed":    {"key_visit": 2, "key_concurrent": 1, "key_token_bucket": 1},
		"shadowed": {},
	}
	rep := engRun(t, f, es, replay.Options{})
	for _, p := range rep.Points {
		if w, ok := want[p.Point]; ok && !maps.Equal(p.Degraded, w) {
			t.Errorf("%s: the log has degraded %v, want %v (the script no longer trips what it means to)", p.Point, p.Degraded, w)
		}
	}
	if len(es) != rep.Requests || rep.Unrouted != 0 {
		t.Errorf("got %d requests and %d unrouted, want %d and 0", rep.Requests, rep.Unrouted, len(es))
	}

	// The same config: nothing changes.
	if rep.BecameDegraded != 0 || rep.BecameForwarded != 0 || rep.Unknown != 0 {
		t.Errorf("same config: became degraded %d, became forwarded %d, unknown %d; want 0, 0, 0",
			rep.BecameDegraded, rep.BecameForwarded, rep.Unknown)
	}
	for _, p := range rep.Points {
		if !maps.Equal(p.WouldDegrade, p.Degraded) {
			t.Errorf("%s: would degrade %v, the log has %v", p.Point, p.WouldDegrade, p.Degraded)
		}
		if !maps.Equal(p.WouldShadow, p.Shadow) {
			t.Errorf("%s: would mark %v, the log has %v", p.Point, p.WouldShadow, p.Shadow)
		}
		var got time.Time
		if p.FirstTrip != nil {
			got = *p.FirstTrip
		}
		if at := g.firsts[p.Point]; !got.Equal(at) && p.Point != "lucky" {
			t.Errorf("%s: first trip at %s, want %s", p.Point, got.Format(engLayout), at.Format(engLayout))
		}
	}
	if len(rep.Points[9].Shadow) == 0 {
		t.Errorf("shadowed: the log marked nothing")
	}
	// Only the switches and the timeout counted in flight are approximate.
	wantApprox := map[string]int{replay.ApproxForced: 2, replay.ApproxTimeout: 1}
	if !maps.Equal(rep.Approximate, wantApprox) {
		t.Errorf("approximate: got %v, want %v", rep.Approximate, wantApprox)
	}

	// Doubled thresholds: fewer degraded; halved: more.
	for _, c := range []struct {
		name  string
		n     func(int64) int64
		d     func(time.Duration) time.Duration
		fewer bool
	}{
		{"doubled", func(n int64) int64 { return 2 * n }, func(d time.Duration) time.Duration { return 2 * d }, true},
		{"halved", func(n int64) int64 { return max(1, n/2) }, func(d time.Duration) time.Duration { return d / 2 }, false},
	} {
		got := engRun(t, engConfig(t, c.n, c.d), es, replay.Options{})
		for _, p := range got.Points {
			would, did := engSum(p.WouldDegrade), engSum(p.Degraded)
			if c.fewer && would > did || !c.fewer && would < did {
				t.Errorf("%s: %s would degrade %d (%v), the log %d (%v)", c.name, p.Point, would, p.WouldDegrade, did, p.Degraded)
			}
		}
		if c.fewer && (got.WouldDegrade >= got.Degraded || got.BecameForwarded == 0 || got.Unknown == 0) ||
			!c.fewer && (got.WouldDegrade <= got.Degraded || got.BecameDegraded == 0) {
			t.Errorf("%s: would degrade %d, the log %d; became degraded %d, forwarded %d, unknown %d",
				c.name, got.WouldDegrade, got.Degraded, got.BecameDegraded, got.BecameForwarded, got.Unknown)
		}
	}
}

// engFile parses a candidate config of points and routes.
func engFile(t *testing.T, text string) *config.File {
	t.Helper()
	f, err := config.ParseText("sds.yaml", []byte("upstream: http://upstream.test\n"+text), config.Options{})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return f
}

// engAt is an entry on point p of path path that arrived at engT0+at;
// forwarded for d with outcome o unless o is "", degraded as strategy
// when strategy is not "".
func engAt(p, path string, at, d time.Duration, o, strategy string) replay.Entry {
	e := replay.Entry{Point: p, Arrived: engT0.Add(at), Host: "svc.test", Method: http.MethodGet, Path: path, Priority: "default"}
	if strategy != "" {
		e.Degraded, e.Strategy = true, strategy
		return e
	}
	if o != "" {
		e.Start, e.Ended, e.UpstreamLatency, e.Outcome = e.Arrived, e.Arrived.Add(d), d, o
	}
	return e
}

func TestRunUnrouted(t *testing.T) {
	f := engFile(t, `routes: [{point: a, match: {path: /a}}]
points: {a: {visitThreshold: 10}}
`)
	rep := engRun(t, f, []replay.Entry{
		engAt("a", "/a", 0, time.Millisecond, "ok", ""),
		engAt("old", "/b", time.Millisecond, time.Millisecond, "ok", ""),
		engAt("a", "/a/deeper", 2*time.Millisecond, time.Millisecond, "ok", ""),
	}, replay.Options{})
	if rep.Unrouted != 2 || rep.Requests != 1 || rep.Points[0].Requests != 1 {
		t.Errorf("got %d unrouted, %d requests (%d on a), want 2, 1 (1)", rep.Unrouted, rep.Requests, rep.Points[0].Requests)
	}
}

// TestRunUnknown: a request degraded in reality that the candidate
// forwards has no call in the log: it ends at once, or, with
// AssumeNeighbours, lasts as the last call forwarded on its point.
func TestRunUnknown(t *testing.T) {
	f := engFile(t, `routes: [{point: a, match: {}}]
points: {a: {visitThreshold: 5, concurrentThreshold: 1, exceptionThreshold: 1}}
`)
	es := []replay.Entry{
		engAt("a", "/", 0, 100*time.Millisecond, "ok", ""),
		engAt("a", "/", 200*time.Millisecond, 0, "", "visit"),
		engAt("a", "/", 250*time.Millisecond, 10*time.Millisecond, "ok", ""),
	}
	for _, c := range []struct {
		opts replay.Options
		// the third is degraded (concurrent) when the second lasts 100ms
		want map[string]int
	}{
		{replay.Options{}, map[string]int{}},
		{replay.Options{AssumeNeighbours: true}, map[string]int{"concurrent": 1}},
	} {
		rep := engRun(t, f, es, c.opts)
		p := rep.Points[0]
		if p.Unknown != 1 || rep.Unknown != 1 || p.BecameForwarded != 1 {
			t.Errorf("%+v: unknown %d (total %d), became forwarded %d; want 1, 1, 1", c.opts, p.Unknown, rep.Unknown, p.BecameForwarded)
		}
		if !maps.Equal(p.WouldDegrade, c.want) {
			t.Errorf("%+v: would degrade %v, want %v", c.opts, p.WouldDegrade, c.want)
		}
	}

	// A neighbour's outcome too: the second fails as the first did, and
	// the two exceptions trip the third.
	f = engFile(t, `routes: [{point: a, match: {}}]
points: {a: {visitThreshold: 5, exceptionThreshold: 2}}
`)
	es[0].Outcome, es[0].Error = "failed", "status_5xx"
	es[2] = engAt("a", "/", 400*time.Millisecond, 10*time.Millisecond, "ok", "") // after the second's end
	for _, c := range []struct {
		opts replay.Options
		want map[string]int
	}{
		{replay.Options{}, map[string]int{}},
		{replay.Options{AssumeNeighbours: true}, map[string]int{"exception": 1}},
	} {
		if got := engRun(t, f, es, c.opts).Points[0].WouldDegrade; !maps.Equal(got, c.want) {
			t.Errorf("a failed neighbour, %+v: would degrade %v, want %v", c.opts, got, c.want)
		}
	}
}

// TestRunClientGoneWhileWaiting: a request whose client went away in the
// queue was neither forwarded nor degraded, and becomes neither.
func TestRunClientGoneWhileWaiting(t *testing.T) {
	f := engFile(t, "routes: [{point: a, match: {}}]\npoints: {a: {visitThreshold: 0}}\n")
	e := engAt("a", "/", 0, 0, "", "")
	e.Status, e.Waited = proxy.StatusClientClosedRequest, time.Second
	p := engRun(t, f, []replay.Entry{e}, replay.Options{}).Points[0]
	if p.BecameDegraded != 0 || p.WouldDegrade["visit"] != 1 {
		t.Errorf("became degraded %d, would degrade %v; want 0, visit 1", p.BecameDegraded, p.WouldDegrade)
	}
}

// TestRunApproximate: what the log cannot replay is counted by reason.
func TestRunApproximate(t *testing.T) {
	f := engFile(t, `routes:
  - {point: q, match: {path: /q}}
  - {point: z, match: {path: /z}}
points:
  q: {concurrentThreshold: 1, queue: {}}
  z: {visitThreshold: 0}
`)
	forced := func(e replay.Entry, action string) replay.Entry { e.Forced = action; return e }
	es := []replay.Entry{
		engAt("q", "/q", 0, 10*time.Millisecond, "ok", ""),
		engAt("q", "/q", time.Millisecond, 10*time.Millisecond, "ok", ""),
		forced(engAt("z", "/z", 2*time.Millisecond, 0, "", ""), "degrade"),
		forced(engAt("z", "/z", 3*time.Millisecond, time.Millisecond, "ok", ""), "pass"),
		engAt("z", "/z", 4*time.Millisecond, time.Millisecond, "ok", ""),
	}
	es[2].Degraded = true
	rep := engRun(t, f, es, replay.Options{})
	q, z := rep.Points[0], rep.Points[1]
	if want := map[string]int{replay.ApproxQueue: 2}; !maps.Equal(q.Approximate, want) {
		t.Errorf("q: approximate %v, want %v", q.Approximate, want)
	}
	// Nothing waits: the second is degraded where the proxy queued it.
	if want := map[string]int{"concurrent": 1}; !maps.Equal(q.WouldDegrade, want) {
		t.Errorf("q: would degrade %v, want %v", q.WouldDegrade, want)
	}
	// The switches as logged, whatever visitThreshold: 0 says.
	if want := map[string]int{replay.ApproxForced: 2}; !maps.Equal(z.Approximate, want) || z.ApproximateRequests != 2 {
		t.Errorf("z: approximate %v (%d requests), want %v (2)", z.Approximate, z.ApproximateRequests, want)
	}
	if want := map[string]int{"forced": 1, "visit": 1}; !maps.Equal(z.WouldDegrade, want) {
		t.Errorf("z: would degrade %v, want %v", z.WouldDegrade, want)
	}
	if rep.Approximate[replay.ApproxQueue] != 2 || rep.Approximate[replay.ApproxForced] != 2 || rep.ApproximateRequests != 4 {
		t.Errorf("total approximate %v (%d requests), want queue 2, forced 2 (4)", rep.Approximate, rep.ApproximateRequests)
	}
}

// TestRunFleetBucket: the fleet's bucket refuses what the log says it
// refused, and every request it judges is approximate.
func TestRunFleetBucket(t *testing.T) {
	f := engFile(t, `cluster: {addresses: ["127.0.0.1:6379"]}
routes: [{point: a, match: {}}]
points: {a: {clusterTokenBucket: {tokensPerSecond: 1}}}
`)
	rep := engRun(t, f, []replay.Entry{
		engAt("a", "/", 0, time.Millisecond, "ok", ""),
		engAt("a", "/", time.Millisecond, 0, "", "cluster_token_bucket"),
	}, replay.Options{})
	p := rep.Points[0]
	if p.BecameDegraded != 0 || p.BecameForwarded != 0 || p.Approximate[replay.ApproxCluster] != 2 {
		t.Errorf("became degraded %d, forwarded %d, approximate %v; want 0, 0, cluster_token_bucket 2", p.BecameDegraded, p.BecameForwarded, p.Approximate)
	}
}

// TestRunTimeouts: a call's timeout counts in flight at its start plus
// the candidate's timeoutThreshold, from its upstream time, not its
// length (time on a slow client is not the upstream's); a candidate
// upstreamTimeout cuts a longer call.
func TestRunTimeouts(t *testing.T) {
	slowClient := engAt("a", "/", 0, 500*time.Millisecond, "ok", "")
	slowClient.UpstreamLatency = 50 * time.Millisecond
	hung := engAt("a", "/", 0, 2*time.Second, "ok", "")
	for _, c := range []struct {
		name   string
		points string
		es     []replay.Entry
		want   map[string]int
		approx map[string]int
	}{{
		"in flight", `{a: {timeoutThreshold: 100ms, timeoutCountThreshold: 1}}`,
		[]replay.Entry{hung, engAt("a", "/", 150*time.Millisecond, time.Millisecond, "ok", "")},
		map[string]int{"timeout": 1}, map[string]int{replay.ApproxTimeout: 1},
	}, {
		"before the threshold", `{a: {timeoutThreshold: 100ms, timeoutCountThreshold: 1}}`,
		[]replay.Entry{hung, engAt("a", "/", 99*time.Millisecond, time.Millisecond, "ok", "")},
		map[string]int{}, map[string]int{replay.ApproxTimeout: 1},
	}, {
		"a slow client", `{a: {timeoutThreshold: 100ms, timeoutCountThreshold: 1}}`,
		[]replay.Entry{slowClient, engAt("a", "/", 600*time.Millisecond, time.Millisecond, "ok", "")},
		map[string]int{}, map[string]int{},
	}, {
		"cut", `{a: {exceptionThreshold: 1, upstreamTimeout: 300ms}}`,
		[]replay.Entry{hung, engAt("a", "/", 400*time.Millisecond, time.Millisecond, "ok", "")},
		map[string]int{"exception": 1}, map[string]int{replay.ApproxUpstreamTimeout: 1},
	}} {
		t.Run(c.name, func(t *testing.T) {
			f := engFile(t, "routes: [{point: a, match: {}}]\npoints: "+c.points+"\n")
			p := engRun(t, f, c.es, replay.Options{}).Points[0]
			if !maps.Equal(p.WouldDegrade, c.want) {
				t.Errorf("would degrade %v, want %v", p.WouldDegrade, c.want)
			}
			if !maps.Equal(p.Approximate, c.approx) && (len(p.Approximate) > 0 || len(c.approx) > 0) {
				t.Errorf("approximate %v, want %v", p.Approximate, c.approx)
			}
		})
	}
}

// TestRunEndsBeforeArrivals: a call that ends at the instant a request
// arrives has freed its slot for it.
func TestRunEndsBeforeArrivals(t *testing.T) {
	f := engFile(t, "routes: [{point: a, match: {}}]\npoints: {a: {concurrentThreshold: 1}}\n")
	for _, c := range []struct {
		second time.Duration
		want   map[string]int
	}{
		{10*time.Millisecond - time.Microsecond, map[string]int{"concurrent": 1}},
		{10 * time.Millisecond, map[string]int{}},
	} {
		p := engRun(t, f, []replay.Entry{
			engAt("a", "/", 0, 10*time.Millisecond, "ok", ""),
			engAt("a", "/", c.second, time.Millisecond, "ok", ""),
		}, replay.Options{}).Points[0]
		if !maps.Equal(p.WouldDegrade, c.want) {
			t.Errorf("a call of 10ms, the next at %s: would degrade %v, want %v", c.second, p.WouldDegrade, c.want)
		}
	}
}

// TestRunLate: an entry without an arrival is an error; one out of
// arrival order (the reader's late line) is judged as if it arrived with
// the entry before it, and counted approximate.
func TestRunLate(t *testing.T) {
	f := engFile(t, "routes: [{point: a, match: {}}]\npoints: {a: {visitThreshold: 1}}\n")
	if _, err := replay.Run(f, engNext([]replay.Entry{{Line: 1, Point: "a", Path: "/"}}), replay.Options{}); err == nil {
		t.Error("Run of an entry without arrival: no error")
	}
	rep := engRun(t, f, []replay.Entry{engAt("a", "/", time.Second, 0, "ok", ""), engAt("a", "/", 0, 0, "ok", "")}, replay.Options{})
	if rep.Approximate[replay.ApproxLate] != 1 || rep.WouldDegrade != 1 {
		t.Errorf("an entry out of order: approximate %v, %d would be degraded; want it counted late, and judged second (degraded by visitThreshold 1)", rep.Approximate, rep.WouldDegrade)
	}
}

// TestReportJSON: the shape `sds-proxy replay -o json` prints.
func TestReportJSON(t *testing.T) {
	f := engFile(t, "routes: [{point: a, match: {}}]\npoints: {a: {visitThreshold: 1}}\n")
	rep := engRun(t, f, []replay.Entry{
		engAt("a", "/", 0, time.Millisecond, "ok", ""),
		engAt("a", "/", time.Millisecond, time.Millisecond, "ok", ""),
	}, replay.Options{})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Points []map[string]json.RawMessage `json:"points"`
		Approx map[string]int               `json:"approximate"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"point", "requests", "degraded", "wouldDegrade", "becameDegraded", "becameForwarded", "firstTrip"} {
		if _, ok := got.Points[0][k]; !ok {
			t.Errorf("points[0] has no %q: %s", k, b)
		}
	}
	if got.Approx == nil {
		t.Errorf("no approximate object: %s", b)
	}
	if first := string(got.Points[0]["firstTrip"]); first != `"2026-12-05T10:00:00.001Z"` {
		t.Errorf("firstTrip %s, want the second request's arrival", first)
	}
}

func ExampleRun() {
	f, err := config.ParseText("sds.yaml", []byte(`upstream: http://127.0.0.1:9000
routes: [{point: api, match: {pathPrefix: /api}}]
points: {api: {visitThreshold: 2}}
`), config.Options{})
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var es []replay.Entry
	for i := range 3 { // three calls of 10ms, all forwarded by the config in force
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		es = append(es, replay.Entry{Point: "api", Arrived: at, Method: "GET", Host: "shop.example", Path: "/api/orders",
			Start: at, Ended: at.Add(10 * time.Millisecond), UpstreamLatency: 10 * time.Millisecond, Outcome: "ok"})
	}
	next := func() (replay.Entry, bool) {
		if len(es) == 0 {
			return replay.Entry{}, false
		}
		e := es[0]
		es = es[1:]
		return e, true
	}
	rep, err := replay.Run(f, next, replay.Options{})
	if err != nil {
		log.Fatal(err)
	}
	p := rep.Points[0]
	fmt.Println(p.Point, p.Requests, p.WouldDegrade, p.BecameDegraded, p.FirstTrip.Format("15:04:05.000"))
	// Output: api 3 map[visit:1] 1 10:00:00.200
}

// BenchmarkRun replays a log of one point with a visit limit and calls in
// flight, per entry.
func BenchmarkRun(b *testing.B) {
	f, err := config.ParseText("sds.yaml", []byte(`upstream: http://upstream.test
routes: [{point: a, match: {pathPrefix: /api}}]
points: {a: {visitThreshold: 500, concurrentThreshold: 8, timeoutThreshold: 40ms, timeoutCountThreshold: 50}}
`), config.Options{})
	if err != nil {
		b.Fatal(err)
	}
	es := make([]replay.Entry, 100_000)
	for i := range es {
		at := engT0.Add(time.Duration(i) * time.Millisecond)
		d := time.Duration(1+i%50) * time.Millisecond
		es[i] = replay.Entry{Point: "a", Arrived: at, Method: http.MethodGet, Host: "svc.test", Path: "/api/orders",
			Start: at, Ended: at.Add(d), UpstreamLatency: d, Outcome: "ok"}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := replay.Run(f, engNext(es), replay.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/entry")
}
