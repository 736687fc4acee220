package main_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The end-to-end proofs of the recovery ramp, adaptive concurrency and
// priority shedding (docs/protections.md, "Recovery ramp, adaptive concurrency,
// priority shedding"). Load is paced by tickers and bounded in count and
// time; the figures are logged, and the assertions hold with wide margins
// on a loaded 2-core machine.

// outcome is one answer of a paced load.
type outcome struct {
	at       time.Time // sent
	took     time.Duration
	status   int
	degraded string // Sds-Degraded
}

// pace sends GET path every interval for d (at most d/interval
// requests), each on its own goroutine, so that the rate offered holds
// when answers are slow (a busy machine running the suite's tests side
// by side), and returns what came back, in the order sent. A tick the
// loop misses (a starved machine) is dropped, not made up in a bunch: the
// rate offered never exceeds one request an interval, which the tests'
// thresholds count on. A transport error fails the test.
func (e *env) pace(path string, interval, d time.Duration) []outcome {
	e.t.Helper()
	n := int(d / interval)
	out := make([]outcome, n)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	sent := 0
	for ; sent < n && time.Now().Before(end); <-tick.C {
		e.paceOne(&wg, path, out, sent)
		sent++
	}
	wg.Wait()
	return slices.DeleteFunc(out[:sent], func(o outcome) bool { return o.at.IsZero() })
}

// paceOne sends pace's request i on its own goroutine, counted in wg, and
// writes what came back into out[i].
func (e *env) paceOne(wg *sync.WaitGroup, path string, out []outcome, i int) {
	wg.Go(func() {
		req, err := http.NewRequest(http.MethodGet, e.proxy.url+path, nil)
		if err != nil {
			e.t.Error(err)
			return
		}
		at := time.Now()
		r, err := e.do(req)
		if err != nil {
			e.t.Errorf("GET %s: %v", path, err)
			return
		}
		out[i] = outcome{at: at, took: r.took, status: r.status, degraded: r.degraded()}
	})
}

// TestRecoveryRamp: after a delay ends under steady load, the share of
// requests admitted follows the ramp, 10% to 100% over recoveryTime,
// measured per half-second bucket; the others are degraded as recovery.
// An upstream still failing when the delay ends trips the point again at
// the first request after the failed one.
func TestRecoveryRamp(t *testing.T) {
	t.Parallel()
	t.Run("share follows the ramp", rampShare)

	t.Run("the ramp reads recovering", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "10s", 10, "routes:\n  - point: r\n    match: {}\npoints:\n  r:\n    exceptionThreshold: 1\n    delayTime: 500ms\n    recoveryTime: 30s\n")
		e.get("/x?status=500")
		e.get("/x") // trips, starts the delay
		if !eventually(wait, func() bool { return e.point("r").State == "recovering" }) {
			t.Fatalf("/status: state %q after the delay, want recovering", e.point("r").State)
		}
		p := e.point("r")
		if p.Recovery == nil || p.Recovery.Share <= 0 || p.Recovery.Share >= 1 {
			t.Errorf("/status recovery: got %+v, want a share between 0 and 1", p.Recovery)
		}
		e.metricIs(1, "sds_point_state", "point", "r", "state", "recovering")
		e.metricIs(0, "sds_point_state", "point", "r", "state", "closed")
		out, _, code := runCLI(t, "status", "-admin", e.proxy.admin)
		if code != 0 || !regexp.MustCompile(`(?m)^r\s+enforce\s+recovering\s+admits \d+%, all in `).MatchString(out) {
			t.Errorf("sds-proxy status (exit %d):\n%s\nwant r recovering with the share it admits", code, out)
		}
	})

	t.Run("a failure re-trips at once", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "10s", 10, "routes:\n  - point: r\n    match: {}\npoints:\n  r:\n    exceptionThreshold: 1\n    delayTime: 500ms\n    recoveryTime: 10s\n")
		e.get("/x?status=500")
		e.get("/x") // trips, starts the delay
		// The upstream still fails: the first request the ramp admits
		// after the delay comes back 500, and the very next one trips.
		var failedAt int
		var seq []reply
		if !eventually(wait, func() bool {
			r := e.get("/x?status=500")
			seq = append(seq, r)
			return r.degraded() == ""
		}) {
			t.Fatalf("the delay never ended: %v", seq[len(seq)-1])
		}
		failedAt = len(seq) - 1
		if r := seq[failedAt]; r.status != 500 {
			t.Fatalf("first request after the delay: got %v, want the upstream's 500", r)
		}
		next := e.get("/x")
		if next.status != 503 || next.degraded() != "recovery; point=r" {
			t.Fatalf("the request after the failure: got %v, want 503 recovery; point=r", next)
		}
		if r := e.get("/x"); r.degraded() != "recovery; point=r; delay" {
			t.Errorf("then: got %v, want the new delay", r)
		}
		tripped := e.proxy.waitLog(t, 0, wait, func(l logEntry) bool {
			return l["msg"] == "point tripped" && l["strategy"] == "recovery"
		})
		p := e.point("r")
		if p.State != "delay" || p.LastTrip == nil || p.LastTrip.Strategy != "recovery" {
			t.Errorf("/status: state %s, last trip %+v; want delay after recovery", p.State, p.LastTrip)
		}
		t.Logf("re-tripped at the request after the failed one (%d requests in the delay before it); log: %v", failedAt, tripped)
	})
}

// rampShare: under 100 requests a second, the share admitted after the
// delay follows the ramp, per half-second bucket, and all are admitted
// once it is over.
func rampShare(t *testing.T) {
	t.Parallel()
	const ramp = 4 * time.Second
	e := setup(t, "10s", 10, "routes:\n  - point: r\n    match: {}\npoints:\n  r:\n    exceptionThreshold: 1\n    delayTime: 1s\n    recoveryTime: 4s\n")
	if r := e.get("/x?status=500"); r.status != 500 {
		t.Fatalf("failing call: got %v, want the upstream's 500", r)
	}
	if r := e.get("/x"); r.degraded() != "exception; point=r" {
		t.Fatalf("tripping call: got %v", r)
	}
	// 100 requests a second through the delay (1s) and the ramp (4s).
	load := e.pace("/x", 10*time.Millisecond, 6*time.Second)
	start := slices.IndexFunc(load, func(o outcome) bool { return !strings.HasSuffix(o.degraded, "; delay") })
	if start < 0 {
		t.Fatalf("the delay never ended in %d requests", len(load))
	}
	from := load[start].at
	const buckets = 8
	var admitted, total [buckets + 2]int
	for _, o := range load[start:] {
		switch o.degraded {
		case "":
			if o.status != 200 {
				t.Errorf("admitted request: got %d, want 200", o.status)
			}
		case "recovery; point=r":
			if o.status != 503 {
				t.Errorf("degraded by the ramp: got %d, want 503", o.status)
			}
		default:
			t.Errorf("after the delay: got Sds-Degraded %q, want none or recovery", o.degraded)
		}
		i := min(int(o.at.Sub(from)/(ramp/buckets)), buckets+1)
		total[i]++
		if o.degraded == "" {
			admitted[i]++
		}
	}
	var figures []string
	for i := range buckets {
		if total[i] == 0 {
			t.Errorf("bucket %d: no request (the machine stalled?)", i)
			continue
		}
		want := 0.1 + 0.9*(float64(i)+0.5)/buckets
		got := float64(admitted[i]) / float64(total[i])
		figures = append(figures, fmt.Sprintf("%.1fs: %d/%d = %.2f (ramp %.2f)", float64(i)*ramp.Seconds()/buckets, admitted[i], total[i], got, want))
		if math.Abs(got-want) > 0.15 {
			t.Errorf("bucket %d: admitted %.2f, want %.2f±0.15", i, got, want)
		}
	}
	t.Logf("admitted share per bucket after the delay:\n  %s", strings.Join(figures, "\n  "))
	if n := total[buckets+1]; n > 0 && admitted[buckets+1] != n {
		t.Errorf("after the ramp: %d of %d admitted, want all", admitted[buckets+1], n)
	}
}

// TestPriorityShedding: at twice a point's visit threshold, most of it
// sheddable, the critical requests are never degraded and the sheddable
// ones take the degradations, answered with "; priority=sheddable".
//
// A threshold is one shared count: sheddable requests may hold up to
// sheddableShare of it, taken while critical traffic paused (a stalled
// client, a scheduler on a busy machine), and keep it for a window. So
// critical traffic is guaranteed its capacity when its rate fits beside
// the share: 55/s of critical beside a 40% share of 100 leaves 5 to spare
// for bunching, whatever the order in which the two arrive. (Critical
// traffic at the whole threshold would sit on its boundary; an earlier
// version of this test at 90/s beside 80% degraded 14 critical requests
// on a loaded machine.)
func TestPriorityShedding(t *testing.T) {
	t.Parallel()
	e := setup(t, "1s", 10, `routes:
  - {point: p, match: {path: /critical}, priority: critical}
  - {point: p, match: {path: /shed}, priority: sheddable}
points:
  p:
    visitThreshold: 100
    sheddableShare: 40
`)
	var critical, shed []outcome
	var wg sync.WaitGroup
	wg.Go(func() { critical = e.pace("/critical", time.Second/55, 5*time.Second) })
	wg.Go(func() { shed = e.pace("/shed", time.Second/145, 5*time.Second) })
	wg.Wait()
	count := func(os []outcome) (degraded int, headers map[string]int) {
		headers = map[string]int{}
		for _, o := range os {
			if o.degraded != "" {
				degraded++
				headers[fmt.Sprintf("%d %s", o.status, o.degraded)]++
			}
		}
		return degraded, headers
	}
	cd, ch := count(critical)
	sd, sh := count(shed)
	t.Logf("critical: %d sent, %d degraded %v; sheddable: %d sent, %d degraded %v", len(critical), cd, ch, len(shed), sd, sh)
	if cd != 0 {
		t.Errorf("critical requests degraded: %d of %d (%v), want none", cd, len(critical), ch)
	}
	// Sheddable requests are admitted only while the window holds fewer
	// than 40 (sheddableShare of 100): at most 40 a second, plus one
	// window at the edges, however many the machine managed to send. A
	// machine that sent too little to pass the threshold proves nothing
	// of shedding: say so.
	if admitted, most := len(shed)-sd, 40*5+40; admitted > most {
		t.Errorf("sheddable requests admitted: %d of %d, want at most %d (40 a second over 5 s, and a window)", admitted, len(shed), most)
	}
	if offered := len(critical) + len(shed); offered < 600 {
		t.Logf("the machine offered %d requests in 5 s (%d a second), not twice the threshold: shedding was barely needed", offered, offered/5)
	} else if sd == 0 {
		t.Errorf("%d requests offered in 5 s against a threshold of 100 a second, and no sheddable one degraded", offered)
	}
	if n := sh["429 visit; point=p; priority=sheddable"]; n < sd*9/10 {
		t.Errorf("sheddable degradations marked priority=sheddable: %d of %d (%v)", n, sd, sh)
	}
}

// loadResult is one run of an open-loop load against one host of the
// adaptive concurrency test.
type loadResult struct {
	sent, ok, degraded int
	latencies          []time.Duration // of the answers from the upstream
	// seconds is the span from the first counted request sent to the last
	// answer received: a queue that drains after the load still counts.
	seconds     float64
	first, last time.Time
}

func (r loadResult) goodput() float64 { return float64(r.ok) / r.seconds }

func (r loadResult) p99() time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	slices.Sort(r.latencies)
	return r.latencies[len(r.latencies)*99/100]
}

func (r loadResult) String() string {
	return fmt.Sprintf("%d sent, goodput %.0f/s, %d degraded, p99 %v", r.sent, r.goodput(), r.degraded, r.p99().Round(time.Millisecond))
}

// openLoad sends GET /api/queue with Host host at rate requests a second
// for d, each in its own goroutine whatever the answers take (an open
// loop, as clients of a service are), and returns the answers of the
// requests scheduled from skip on, once every request has ended. Request
// n is due at n/rate: a loaded machine that wakes the loop late gets the
// requests due meanwhile at once, so the offered load stays rate × d.
func openLoad(t *testing.T, client *http.Client, proxy, host string, rate int, d, skip time.Duration) loadResult {
	var mu sync.Mutex
	var res loadResult
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	total := int(d / interval)
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; n < total; n++ {
		if due := start.Add(time.Duration(n) * interval); time.Now().Before(due) {
			<-tick.C // pacing the load
		}
		counted := time.Duration(n)*interval >= skip
		wg.Go(func() {
			req, err := http.NewRequest("GET", proxy+"/api/queue", nil)
			if err != nil {
				t.Error(err)
				return
			}
			req.Host = host
			sent := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("GET %s/api/queue: %v", host, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took := time.Since(sent)
			if !counted {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.first.IsZero() || sent.Before(res.first) {
				res.first = sent
			}
			res.last = later(res.last, sent.Add(took))
			res.sent++
			switch {
			case resp.Header.Get("Sds-Degraded") != "":
				res.degraded++
			case resp.StatusCode == 200:
				res.ok++
				res.latencies = append(res.latencies, took)
			default:
				t.Errorf("GET %s/api/queue: got %d", host, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	res.seconds = res.last.Sub(res.first).Seconds()
	return res
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestAdaptiveConcurrency drives an upstream of capacity C (8 workers of
// 40ms each: 200 requests a second, /api/queue) at twice its capacity
// (the run of issue 23) through points that differ only in their limit,
// one at a time: none, fixed concurrentThresholds (a sweep), and
// adaptiveConcurrency with its defaults. With no limit the queue and p99
// grow without bound; the adaptive limit settles near C, with goodput
// close to the best fixed threshold's and p99 near it; a fresh adaptive
// point forwards most of what the upstream serves in its first second.
// Then the capacity halves during the run and the limit follows. The
// limiter's TestAdaptiveSweep and TestAdaptiveHalved hold the exact
// figures on a simulated upstream; the bounds here are for a loaded
// machine, and each would fail at the gradient controller this replaced
// (limit 14, 1.75C; p99 1.9x the fixed limit's; 124 forwarded in the first
// second).
//
// It does not run in parallel with this package's other tests: a
// latency-based limit reads the host's own scheduling delay as the
// upstream's queue, and beside the whole suite under -race it settled at
// 7 with 67% of the best fixed limit's goodput, a figure of the machine,
// not of the upstream (docs/protections.md says so).
func TestAdaptiveConcurrency(t *testing.T) {
	e := newEnv(t)
	const capacity, rate = 8, 400
	sweep := []int{6, 8, 10, 14}
	e.config = e.dir + "/sds.yaml"
	e.write(e.config, adaptiveConfig(e.upstream, sweep))
	e.proxy = startProxy(t, e.config)
	if r := e.getURL(e.upstream + fmt.Sprintf("/_control?queueCapacity=%d&queueService=40ms", capacity)); r.status != 200 {
		t.Fatalf("upstream control: %v", r)
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2000, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	base := unloadedLatency(t, client, e.proxy.url, "unlimited.test")
	t.Logf("unloaded latency: median %v", base.Round(time.Millisecond))

	none := openLoad(t, client, e.proxy.url, "unlimited.test", rate, 2*time.Second, 0)
	t.Logf("no limit, %d/s for 2s: %v", rate, none)
	best, bestAt := bestFixed(t, client, e.proxy.url, rate, sweep)
	first := openLoad(t, client, e.proxy.url, "fresh.test", rate, time.Second, 0)
	t.Logf("a fresh adaptive point's first second: %d of %d forwarded", first.ok, first.sent)

	// The adaptive point: 6s at capacity 8, then 6s at capacity 4, with
	// the limit read from /metrics every 100ms.
	start := time.Now()
	samples := sampleLimit(e.proxy.admin, "adaptive", start)
	adaptive := openLoad(t, client, e.proxy.url, "adaptive.test", rate, 6*time.Second, 2*time.Second)
	halvedAt := time.Since(start)
	if r := e.getURL(e.upstream + fmt.Sprintf("/_control?queueCapacity=%d", capacity/2)); r.status != 200 {
		t.Fatalf("upstream control: %v", r)
	}
	halved := openLoad(t, client, e.proxy.url, "adaptive.test", rate, 6*time.Second, 2*time.Second)
	before, after, followedIn := splitLimit(samples(), halvedAt, 1.5*capacity/2)
	if len(before) < 10 || len(after) < 10 {
		t.Fatalf("limit samples: %d before, %d after the halving, want 10 or more", len(before), len(after))
	}
	medianBefore, medianAfter := before[len(before)/2], after[len(after)/2]
	t.Logf("adaptive at capacity %d: %v; limit median %.0f (min %.0f, max %.0f)", capacity, adaptive, medianBefore, before[0], before[len(before)-1])
	t.Logf("adaptive at capacity %d: %v; limit median %.0f (min %.0f, max %.0f); the limit came to 1.5x the new capacity %v after the halving",
		capacity/2, halved, medianAfter, after[0], after[len(after)-1], followedIn.Round(100*time.Millisecond))
	t.Logf("best fixed concurrentThreshold: %d, goodput %.0f/s, p99 %v; adaptive goodput %.0f%% of it, p99 %.2fx its; no limit p99 %.1fx the unloaded latency",
		bestAt, best.goodput(), best.p99().Round(100*time.Microsecond), 100*adaptive.goodput()/best.goodput(), float64(adaptive.p99())/float64(best.p99()), float64(none.p99())/float64(base))

	// The qualitative outcomes, with margins for a loaded machine.
	if none.p99() < 10*base {
		t.Errorf("no limit: p99 %v, want the queue to grow it past 10x the unloaded %v", none.p99(), base)
	}
	if medianBefore < 0.75*capacity || medianBefore > 1.5*capacity {
		t.Errorf("adaptive limit median %.0f at capacity %d, want from 0.75x to 1.5x it", medianBefore, capacity)
	}
	if adaptive.goodput() < 0.85*best.goodput() {
		t.Errorf("adaptive goodput %.0f/s, want at least 85%% of the best fixed threshold's %.0f/s", adaptive.goodput(), best.goodput())
	}
	if adaptive.p99() > best.p99()*3/2 {
		t.Errorf("adaptive p99 %v, want within 1.5x the best fixed threshold's %v", adaptive.p99(), best.p99())
	}
	if first.ok < 150 {
		t.Errorf("a fresh adaptive point forwarded %d in its first second, want at least 150 of the ~200 the upstream serves", first.ok)
	}
	if followedIn < 0 || followedIn > 2*time.Second {
		t.Errorf("after the capacity halved the limit came to 1.5x the new capacity after %v, want within 2s", followedIn)
	}
	if medianAfter < 0.75*capacity/2 || medianAfter > 1.5*capacity/2 {
		t.Errorf("limit median %.0f after the halving, want from 0.75x to 1.5x the new capacity %d", medianAfter, capacity/2)
	}
}

// adaptiveConfig routes host unlimited.test to a point with no limit,
// adaptive.test and fresh.test each to an adaptive point, and fixedC.test
// to a point of concurrentThreshold C for each C of sweep.
func adaptiveConfig(upstream string, sweep []int) string {
	var cfg strings.Builder
	cfg.WriteString(configHeader(upstream, "10s", 10))
	cfg.WriteString("routes:\n  - {point: unlimited, match: {host: unlimited.test}}\n  - {point: adaptive, match: {host: adaptive.test}}\n  - {point: fresh, match: {host: fresh.test}}\n")
	for _, c := range sweep {
		fmt.Fprintf(&cfg, "  - {point: fixed%d, match: {host: fixed%d.test}}\n", c, c)
	}
	cfg.WriteString("points:\n  unlimited: {}\n  adaptive:\n    adaptiveConcurrency: {}\n  fresh:\n    adaptiveConcurrency: {}\n")
	for _, c := range sweep {
		fmt.Fprintf(&cfg, "  fixed%d:\n    concurrentThreshold: %d\n", c, c)
	}
	return cfg.String()
}

// unloadedLatency is the median latency of 20 GET /api/queue with Host
// host, one at a time.
func unloadedLatency(t *testing.T, client *http.Client, proxy, host string) time.Duration {
	t.Helper()
	var unloaded []time.Duration
	for range 20 {
		req, _ := http.NewRequest("GET", proxy+"/api/queue", nil)
		req.Host = host
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		unloaded = append(unloaded, time.Since(start))
	}
	return median(unloaded)
}

// bestFixed runs the load against each fixed threshold of sweep, one at a
// time, and returns the best run and its threshold: the highest goodput,
// or within 2% of it with a lower p99.
func bestFixed(t *testing.T, client *http.Client, proxy string, rate int, sweep []int) (best loadResult, bestAt int) {
	for _, c := range sweep {
		r := openLoad(t, client, proxy, fmt.Sprintf("fixed%d.test", c), rate, 2500*time.Millisecond, 500*time.Millisecond)
		t.Logf("concurrentThreshold %d: %v", c, r)
		if bestAt == 0 || r.goodput() > 1.02*best.goodput() || r.goodput() >= 0.98*best.goodput() && r.p99() < best.p99() {
			best, bestAt = r, c
		}
	}
	return best, bestAt
}

// limitSample is the adaptive limit read at some time after a start.
type limitSample struct {
	at    time.Duration
	limit float64
}

// sampleLimit reads the point's sds_adaptive_concurrency_limit from the
// admin address every 100ms until the returned function is called, which
// returns the samples.
func sampleLimit(admin, point string, start time.Time) (stop func() []limitSample) {
	var samples []limitSample
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ms, err := scrape(admin)
			if err != nil {
				continue
			}
			if v, ok := ms.value("sds_adaptive_concurrency_limit", "point", point); ok {
				samples = append(samples, limitSample{time.Since(start), v})
			}
		}
	})
	return func() []limitSample {
		close(done)
		sampler.Wait()
		return samples
	}
}

// splitLimit sorts the limits sampled from 2s after the start to the
// halving, and from 2s after the halving on, and says how long after the
// halving the limit first came to at most follow (-1: never).
func splitLimit(samples []limitSample, halvedAt time.Duration, follow float64) (before, after []float64, followedIn time.Duration) {
	followedIn = -1
	for _, s := range samples {
		switch {
		case s.at >= 2*time.Second && s.at < halvedAt:
			before = append(before, s.limit)
		case s.at >= halvedAt+2*time.Second:
			after = append(after, s.limit)
		}
	}
	slices.Sort(before)
	slices.Sort(after)
	for _, s := range samples {
		if s.at > halvedAt && s.limit <= follow {
			followedIn = s.at - halvedAt
			break
		}
	}
	return before, after, followedIn
}
