package main_test

// End-to-end tests of the strategies, reloads, streams, signals and
// commands; the harness is harness_test.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/upstream"
)

// checkTrip checks the "point tripped" log line and /status's last trip of
// point p. A threshold below 0 is not checked.
func (e *env) checkTrip(strategy string, threshold int64) {
	e.t.Helper()
	tripped := e.proxy.waitLog(e.t, 0, 2*time.Second, pointLog("point tripped", "p"))
	if tripped["strategy"] != strategy {
		e.t.Errorf("trip log strategy: got %v, want %s", tripped["strategy"], strategy)
	}
	if _, ok := tripped["count"]; !ok {
		e.t.Errorf("trip log %v: no count", tripped)
	}
	if threshold >= 0 && tripped["threshold"] != float64(threshold) {
		e.t.Errorf("trip log threshold: got %v, want %d", tripped["threshold"], threshold)
	}
	if p := e.point("p"); p.LastTrip == nil || p.LastTrip.Strategy != strategy {
		e.t.Errorf("/status lastTrip: got %+v, want strategy %s", p.LastTrip, strategy)
	}
}

// recover polls with good requests until one passes, then checks the
// "point recovered" line and sds_point_tripped, and with again that the
// next good request passes too.
func (e *env) recover(good string, again bool) {
	e.t.Helper()
	mark := e.proxy.stderr.mark()
	start := time.Now()
	if !eventually(5*time.Second, func() bool { return e.get(good).degraded() == "" }) {
		e.t.Fatalf("no request passed within 5s")
	}
	e.t.Logf("a request passed %v after polling began", time.Since(start))
	e.proxy.waitLog(e.t, mark, 2*time.Second, pointLog("point recovered", "p"))
	e.metricIs(0, "sds_point_tripped", "point", "p")
	if !again {
		return
	}
	if r := e.get(good); r.status != 200 || r.degraded() != "" {
		e.t.Errorf("after recovery: got %v, want 200 from the upstream", r)
	}
}

// TestStrategies runs the SDS reference scenarios (issue 2, (a)-(e), with
// latencies scaled down) against the running proxy: each strategy trips
// with the scenario's exact numbers, then recovers.
//
// The exact counts use a 10s window, far longer than a scenario takes even
// on a loaded machine. Recovery from the window strategies (visit,
// timeout, exception, exception_rate) runs the scenario again on a second
// proxy with a 1s window, which empties soon after; concurrent and
// token_bucket recover without the window, on the same proxy.
func TestStrategies(t *testing.T) {
	// windowed runs a window strategy: trip with exact counts on a 10s
	// window, then trip again on a 1s window and wait for recovery.
	windowed := func(t *testing.T, settings, path, strategy string, status int, threshold int64, good string, checks func(*env)) {
		t.Run("trip", func(t *testing.T) {
			e := setup(t, "10s", 10, pointRoute+settings)
			if got := e.countDegraded(10, path, strategy+"; point=p", status); got != 5 {
				t.Errorf("degraded: got %d of 10, want 5", got)
			}
			e.checkTrip(strategy, threshold)
			e.metricIs(1, "sds_point_tripped", "point", "p")
			if p := e.point("p"); p.State != "tripped" {
				t.Errorf("/status state: got %q, want tripped", p.State)
			}
			checks(e)
		})
		t.Run("recover", func(t *testing.T) {
			e := setup(t, "1s", 10, pointRoute+settings)
			for i := 0; e.get(path).degraded() == ""; i++ {
				if i == 20 {
					t.Fatalf("no trip within 20 calls")
				}
			}
			// Visits leave the window bucket by bucket: the request that
			// passes may be the 5th allowed, and the next degraded again.
			e.recover(good, strategy != "visit")
		})
	}

	t.Run("visit", func(t *testing.T) {
		// (b) visitThreshold 5, ten calls: 5 degraded, 429 with Retry-After.
		windowed(t, "    visitThreshold: 5\n", "/v", "visit", 429, 5, "/v", func(e *env) {
			if r := e.get("/v"); r.header.Get("Retry-After") == "" {
				t.Errorf("degraded by visit: got %v with no Retry-After", r)
			}
			if n, _ := e.upstreamStats(); n != 5 {
				t.Errorf("upstream requests: got %d, want 5 (degraded ones never reach it)", n)
			}
			e.metricIs(5, "sds_requests_total", "point", "p", "result", "proxied")
			e.metricIs(6, "sds_requests_total", "point", "p", "result", "degraded")
			e.metricIs(6, "sds_degraded_total", "point", "p", "strategy", "visit")
		})
	})

	t.Run("timeout", func(t *testing.T) {
		// (a) timeoutThreshold 90ms, count 5, ten sequential 95ms calls.
		windowed(t, "    timeoutThreshold: 90ms\n    timeoutCountThreshold: 5\n", "/t?sleep=95ms", "timeout", 503, 5, "/t", func(e *env) {
			e.metricIs(5, "sds_timeouts_total", "point", "p")
			if p := e.point("p"); p.Window.Timeouts != 5 {
				t.Errorf("/status timeouts: got %d, want 5", p.Window.Timeouts)
			}
		})
	})

	t.Run("exception_rate", func(t *testing.T) {
		// (c) exceptionRateThreshold 50, start 5, ten failing calls.
		windowed(t, "    exceptionRateThreshold: 50\n    exceptionRateStart: 5\n", "/f?status=500", "exception_rate", 503, 50, "/f", func(e *env) {
			e.metricIs(5, "sds_upstream_errors_total", "point", "p", "kind", "status_5xx")
		})
	})

	t.Run("exception", func(t *testing.T) {
		// exceptionThreshold 5, ten failing calls: the 6th trips.
		windowed(t, "    exceptionThreshold: 5\n", "/f?status=502", "exception", 503, 5, "/f", func(e *env) {
			if p := e.point("p"); p.Window.Exceptions != 5 || p.Window.Visits != 10 || p.Window.Degraded != 5 {
				t.Errorf("/status window: got %+v, want 10 visits, 5 degraded, 5 exceptions", p.Window)
			}
		})
	})

	t.Run("concurrent", func(t *testing.T) {
		// (d) concurrentThreshold 2, five concurrent callers x 10 rounds of
		// 200ms calls: 3 degraded per round, 30 in all.
		e := setup(t, "10s", 10, pointRoute+"    concurrentThreshold: 2\n")
		const callers, rounds = 5, 10
		total := 0
		for round := range rounds {
			start := make(chan struct{})
			results := make(chan reply, callers)
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					req, _ := http.NewRequest("GET", e.proxy.url+"/c?sleep=200ms", nil)
					<-start
					r, err := e.do(req)
					if err != nil {
						t.Errorf("round %d: %v", round, err)
					}
					results <- r
				})
			}
			close(start)
			wg.Wait()
			close(results)
			degraded := 0
			for r := range results {
				switch {
				case r.degraded() == "concurrent; point=p" && r.status == 503:
					degraded++
				case r.degraded() != "" || r.status != 200:
					t.Errorf("round %d: got %v, want 200 or a concurrent 503", round, r)
				}
			}
			if degraded != callers-2 {
				t.Errorf("round %d: got %d degraded, want %d", round, degraded, callers-2)
			}
			total += degraded
			// The client can see a response end a moment before the
			// proxy frees its slot: wait for the slots, not for time.
			if !eventually(2*time.Second, func() bool { v, _ := e.metric("sds_inflight", "point", "p"); return v == 0 }) {
				t.Fatalf("round %d: sds_inflight did not return to 0", round)
			}
		}
		if total != 30 {
			t.Errorf("degraded: got %d, want 30", total)
		}
		e.checkTrip("concurrent", 2)
		e.recover("/c", true)
	})

	t.Run("token_bucket", func(t *testing.T) {
		// (e) 15 tokens/s, size 20, 100 calls fired at once: 80 degraded,
		// less the tokens refilled while they ran.
		e := setup(t, "10s", 10, pointRoute+"    tokenBucketGeneratedTokensInSecond: 15\n    tokenBucketSize: 20\n")
		start := time.Now()
		got := e.countDegraded(100, "/b", "token_bucket; point=p", 429)
		elapsed := time.Since(start)
		refill := int(15*elapsed.Seconds()) + 1
		if got > 80 || got < 80-refill {
			t.Errorf("degraded: got %d in %v, want 80 less at most %d refilled", got, elapsed, refill)
		}
		t.Logf("token bucket: %d of 100 degraded in %v", got, elapsed)
		e.checkTrip("token_bucket", -1)
		e.recover("/b", false)
	})
}

// TestDelay checks delayTime and retryInterval: a trip degrades everything
// with "; delay" until a probe succeeds (or the delay passes), then the
// point starts afresh.
func TestDelay(t *testing.T) {
	t.Run("good probe ends the delay", func(t *testing.T) {
		e := setup(t, "10s", 10, "routes:\n  - point: d\n    match: {}\npoints:\n  d:\n    exceptionThreshold: 1\n    delayTime: 30s\n    retryInterval: 300ms\n")
		if r := e.get("/x?status=500"); r.status != 500 || r.degraded() != "" {
			t.Fatalf("failing call: got %v, want the upstream's 500", r)
		}
		tripAt := time.Now()
		// The request that trips is judged by the strategies; the ones
		// after it are inside the delay.
		if r := e.get("/x"); r.status != 503 || r.degraded() != "exception; point=d" {
			t.Fatalf("the tripping call: got %v, want 503 with Sds-Degraded \"exception; point=d\"", r)
		}
		if r := e.get("/x"); r.status != 503 || r.degraded() != "exception; point=d; delay" {
			t.Fatalf("in the delay: got %v, want 503 with Sds-Degraded \"exception; point=d; delay\"", r)
		}
		e.proxy.waitLog(t, 0, 2*time.Second, pointLog("delay started", "d"))
		if p := e.point("d"); p.State != "delay" {
			t.Errorf("/status state: got %q, want delay", p.State)
		}
		// A probe goes through after retryInterval; it succeeds, which ends
		// the delay and clears the window.
		var passedAt time.Time
		if !eventually(3*time.Second, func() bool {
			r := e.get("/x")
			if r.degraded() == "" {
				passedAt = time.Now()
				return true
			}
			if r.degraded() != "exception; point=d; delay" {
				t.Errorf("in the delay: got %v, want degraded with \"; delay\"", r)
			}
			return false
		}) {
			t.Fatalf("no probe passed within 3s (retryInterval 300ms)")
		}
		if d := passedAt.Sub(tripAt); d < 250*time.Millisecond || d > 2*time.Second {
			t.Errorf("first probe passed %v after the trip, want about retryInterval (300ms)", d)
		}
		e.proxy.waitLog(t, 0, 2*time.Second, pointLog("delay ended", "d"))
		for range 3 {
			if r := e.get("/x"); r.status != 200 || r.degraded() != "" {
				t.Errorf("after the delay: got %v, want 200 (the window was cleared)", r)
			}
		}
		if p := e.point("d"); p.State != "closed" || p.Window.Exceptions != 0 {
			t.Errorf("/status after the delay: got %+v, want closed with no exceptions", p)
		}
	})

	t.Run("failed probe waits another interval", func(t *testing.T) {
		e := setup(t, "10s", 10, "routes:\n  - point: d\n    match: {}\npoints:\n  d:\n    exceptionThreshold: 1\n    delayTime: 30s\n    retryInterval: 300ms\n")
		e.get("/x?status=500")
		e.get("/x") // trips, starts the delay
		// Failing probes: each is forwarded (the upstream's 500 comes back).
		var probes []time.Time
		eventually(3*time.Second, func() bool {
			if r := e.get("/x?status=500"); r.degraded() == "" {
				probes = append(probes, time.Now())
			}
			return len(probes) == 2
		})
		if len(probes) != 2 {
			t.Fatalf("failing probes: got %d within 3s, want 2", len(probes))
		}
		if gap := probes[1].Sub(probes[0]); gap < 250*time.Millisecond {
			t.Errorf("second probe %v after the first, want about retryInterval (300ms)", gap)
		}
		if p := e.point("d"); p.State != "delay" {
			t.Errorf("/status after failed probes: got %q, want delay", p.State)
		}
	})

	t.Run("delay passes", func(t *testing.T) {
		e := setup(t, "10s", 10, "routes:\n  - point: d\n    match: {}\npoints:\n  d:\n    exceptionThreshold: 1\n    delayTime: 500ms\n")
		e.get("/x?status=500")
		tripAt := time.Now()
		e.get("/x") // trips
		if r := e.get("/x"); r.degraded() != "exception; point=d; delay" {
			t.Fatalf("after the trip: got %v, want degraded in the delay", r)
		}
		if !eventually(3*time.Second, func() bool { return e.get("/x").degraded() == "" }) {
			t.Fatalf("still degraded 3s after a 500ms delay")
		}
		if d := time.Since(tripAt); d < 450*time.Millisecond {
			t.Errorf("delay ended %v after the trip, want at least delayTime (500ms)", d)
		}
		e.proxy.waitLog(t, 0, 2*time.Second, pointLog("delay ended", "d"))
	})
}

// TestHungUpstream checks that a call that never ends trips the timeout
// strategy within timeoutThreshold + 100ms, and that degraded answers are
// then fast.
func TestHungUpstream(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: hung\n    match: {}\npoints:\n  hung:\n    timeoutThreshold: 200ms\n    timeoutCountThreshold: 1\n")
	// Open the connections first (client to proxy, proxy to upstream), so
	// that dialling does not blur the measurement.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", e.proxy.url+"/warm?sleep=20ms", nil)
			if _, err := e.do(req); err != nil {
				t.Errorf("warm-up: %v", err)
			}
		})
	}
	wg.Wait()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.proxy.url+"/hang?hang=1", nil)
	hungDone := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := e.do(req)
		hungDone <- err
	}()

	var tripAt time.Duration
	if !eventually(3*time.Second, func() bool {
		r := e.get("/fast")
		if r.degraded() != "" {
			tripAt = time.Since(start)
			if r.degraded() != "timeout; point=hung" || r.status != 503 {
				t.Errorf("first degraded answer: got %v, want a timeout 503", r)
			}
			return true
		}
		return false
	}) {
		t.Fatalf("a hung call did not trip timeoutThreshold 200ms within 3s")
	}
	t.Logf("hung upstream: first degraded answer %v after the hung call started", tripAt)
	if tripAt < 200*time.Millisecond || tripAt > 300*time.Millisecond {
		t.Errorf("first degraded answer after %v, want within [200ms, 300ms]", tripAt)
	}

	var took []time.Duration
	for range 20 {
		r := e.get("/fast")
		if r.degraded() != "timeout; point=hung" {
			t.Fatalf("while hung: got %v, want degraded by timeout", r)
		}
		took = append(took, r.took)
	}
	slices.Sort(took)
	if median := took[len(took)/2]; median >= 50*time.Millisecond {
		t.Errorf("degraded answers: median %v, want under 50ms (all: %v)", median, took)
	}
	if p := e.point("hung"); p.Window.InFlight != 1 || p.Window.Timeouts != 1 {
		t.Errorf("/status while hung: got %+v, want 1 in flight and 1 timeout", p.Window)
	}
	cancel()
	if err := <-hungDone; !errors.Is(err, context.Canceled) {
		t.Errorf("hung call: got %v, want context.Canceled", err)
	}
	if !eventually(2*time.Second, func() bool { _, inFlight := e.upstreamStats(); return inFlight == 0 }) {
		t.Errorf("the upstream still serves the hung call after the client went away")
	}
}

// TestFallback checks that a degraded answer is exactly the point's
// fallback, from body or bodyFile, and the default one.
func TestFallback(t *testing.T) {
	needBinaries(t)
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "maintenance.html")
	const page = "<html><body>Back soon.</body></html>\n"
	if err := os.WriteFile(bodyFile, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	e := setup(t, "10s", 10, fmt.Sprintf(`routes:
  - point: inline
    match: {pathPrefix: /inline}
  - point: file
    match: {pathPrefix: /file}
  - point: default
    match: {pathPrefix: /default}
points:
  inline:
    visitThreshold: 0
    fallback:
      status: 503
      headers:
        Content-Type: application/json
        X-Fallback: "yes"
        X-Multi: [a, b]
      body: '{"error":"degraded","point":"inline"}'
  file:
    visitThreshold: 0
    fallback:
      status: 200
      headers: {Content-Type: text/html; charset=utf-8}
      bodyFile: %s
  default:
    visitThreshold: 0
`, bodyFile))

	r := e.get("/inline/x")
	if r.status != 503 || r.body != `{"error":"degraded","point":"inline"}` {
		t.Errorf("inline: got %v, want 503 and the exact body", r)
	}
	for k, want := range map[string][]string{
		"Content-Type":   {"application/json"},
		"X-Fallback":     {"yes"},
		"X-Multi":        {"a", "b"},
		"Sds-Degraded":   {"visit; point=inline"},
		"Content-Length": {strconv.Itoa(len(r.body))},
	} {
		if got := r.header.Values(k); !slices.Equal(got, want) {
			t.Errorf("inline: header %s got %q, want %q", k, got, want)
		}
	}

	r = e.get("/file")
	if r.status != 200 || r.body != page || r.header.Get("Content-Type") != "text/html; charset=utf-8" || r.degraded() != "visit; point=file" {
		t.Errorf("bodyFile: got %v %v, want 200, text/html and the file's content", r, r.header)
	}

	r = e.get("/default")
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.degraded() != "visit; point=default" {
		t.Errorf("default fallback: got %v %v, want 429 with Retry-After", r, r.header)
	}
	if n, _ := e.upstreamStats(); n != 0 {
		t.Errorf("upstream requests: got %d, want 0 (every request was degraded)", n)
	}

	// HEAD gets the headers without the body.
	req, _ := http.NewRequest("HEAD", e.proxy.url+"/inline", nil)
	if r, err := e.do(req); err != nil || r.status != 503 || r.body != "" {
		t.Errorf("HEAD: got %v, %v; want 503 and no body", r, err)
	}
}

// TestShadowMode checks that a shadow point degrades nothing and reports
// every would-be trip.
func TestShadowMode(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: sh\n    match: {}\npoints:\n  sh:\n    visitThreshold: 5\n    mode: shadow\n")
	shadowed := 0
	for i := range 10 {
		r := e.get("/s")
		if r.status != 200 || r.degraded() != "" || !strings.HasPrefix(r.body, "upstream: GET /s") {
			t.Errorf("call %d: got %v, want the upstream's 200", i+1, r)
		}
		switch s := r.header.Get("Sds-Shadow-Degraded"); {
		case s == "":
		case s == "visit; point=sh" && i >= 5:
			shadowed++
		default:
			t.Errorf("call %d: Sds-Shadow-Degraded %q, want none for calls 1-5 and \"visit; point=sh\" after", i+1, s)
		}
	}
	if shadowed != 5 {
		t.Errorf("shadow-degraded: got %d, want 5", shadowed)
	}
	if n, _ := e.upstreamStats(); n != 10 {
		t.Errorf("upstream requests: got %d, want 10", n)
	}
	e.metricIs(5, "sds_requests_total", "point", "sh", "result", "shadow_degraded")
	e.metricIs(0, "sds_requests_total", "point", "sh", "result", "degraded")
	e.metricIs(5, "sds_degraded_total", "point", "sh", "strategy", "visit")
	e.metricIs(1, "sds_point_tripped", "point", "sh")
	p := e.point("sh")
	if p.State != "tripped" || p.Mode != "shadow" || p.Window.Visits != 10 || p.Window.Degraded != 5 {
		t.Errorf("/status: got %+v, want tripped, shadow, 10 visits and 5 degraded", p)
	}
	e.proxy.waitLog(t, 0, 2*time.Second, pointLog("point tripped", "sh"))
}

// TestHotReload edits the config of a running proxy.
func TestHotReload(t *testing.T) {
	body := func(visitThreshold string) string {
		return "routes:\n  - point: r\n    match: {pathPrefix: /r}\npoints:\n  r:\n    visitThreshold: " + visitThreshold + "\n"
	}
	t.Run("file edits", func(t *testing.T) {
		e := setup(t, "10s", 10, body("0"))
		header := configHeader(e.upstream, "10s", 10)
		if r := e.get("/r"); r.degraded() != "visit; point=r" {
			t.Fatalf("visitThreshold 0: got %v, want degraded", r)
		}

		// A valid edit applies within a second.
		mark := e.proxy.stderr.mark()
		edited := time.Now()
		e.write(e.config, header+body("1000"))
		if !eventually(3*time.Second, func() bool { return e.get("/r").degraded() == "" }) {
			t.Fatalf("visitThreshold 1000 not applied within 3s")
		}
		if d := time.Since(edited); d > 1500*time.Millisecond {
			t.Errorf("edit applied after %v, want within 1s", d)
		}
		e.proxy.waitLog(t, mark, 2*time.Second, msgIs("config reloaded"))
		e.metricIs(1, "sds_config_last_reload_successful")

		// An invalid edit, which would degrade everything if any of it
		// applied, changes nothing.
		mark = e.proxy.stderr.mark()
		e.write(e.config, header+body("0")+"    bogusKey: 1\n")
		rejected := e.proxy.waitLog(t, mark, 3*time.Second, msgStarts("config rejected"))
		if !strings.Contains(fmt.Sprint(rejected["error"]), "bogusKey") {
			t.Errorf("rejection log: got %v, want the error naming bogusKey", rejected)
		}
		for range 5 {
			if r := e.get("/r"); r.status != 200 || r.degraded() != "" {
				t.Errorf("after an invalid edit: got %v, want 200 (visitThreshold 1000 kept)", r)
			}
		}
		e.metricIs(0, "sds_config_last_reload_successful")
		e.metricIs(1, "sds_config_reloads_total", "result", "failure")
		if st := e.status(); st.Config.LastReload == nil || st.Config.LastReload.OK || st.Config.LastReload.Error == "" {
			t.Errorf("/status config.lastReload: got %+v, want ok false with the error", st.Config.LastReload)
		}

		// A later valid edit still applies.
		mark = e.proxy.stderr.mark()
		e.write(e.config, header+body("0"))
		if !eventually(3*time.Second, func() bool { return e.get("/r").degraded() == "visit; point=r" }) {
			t.Fatalf("a valid edit after an invalid one was not applied within 3s")
		}
		e.proxy.waitLog(t, mark, 2*time.Second, msgIs("config reloaded"))
		e.metricIs(1, "sds_config_last_reload_successful")
		e.metricIs(2, "sds_config_reloads_total", "result", "success")
	})

	t.Run("SIGHUP", func(t *testing.T) {
		// The config path is a symlink into a directory the proxy does not
		// watch, so an edit there is seen only when SIGHUP forces a reload.
		e := newEnv(t)
		real := filepath.Join(e.dir, "data", "sds.yaml")
		os.Mkdir(filepath.Dir(real), 0o755)
		os.Mkdir(filepath.Join(e.dir, "conf"), 0o755)
		e.write(real, configHeader(e.upstream, "10s", 10)+body("0"))
		e.config = filepath.Join(e.dir, "conf", "sds.yaml")
		if err := os.Symlink(real, e.config); err != nil {
			t.Fatal(err)
		}
		e.proxy = startProxy(t, e.config)
		if r := e.get("/r"); r.degraded() == "" {
			t.Fatalf("visitThreshold 0: got %v, want degraded", r)
		}
		e.write(real, configHeader(e.upstream, "10s", 10)+body("1000"))
		mark := e.proxy.stderr.mark()
		e.proxy.signal(syscall.SIGHUP)
		if !eventually(3*time.Second, func() bool { return e.get("/r").degraded() == "" }) {
			t.Fatalf("SIGHUP did not apply the edit within 3s")
		}
		e.proxy.waitLog(t, mark, 2*time.Second, msgIs("config reloaded"))
	})
}

// TestHotReloadFileEvents checks the ways a config file changes besides an
// edit: it is deleted and comes back, and a Kubernetes ConfigMap swaps the
// ..data symlink of its folder.
func TestHotReloadFileEvents(t *testing.T) {
	body := func(visitThreshold string) string {
		return "routes:\n  - point: r\n    match: {}\npoints:\n  r:\n    visitThreshold: " + visitThreshold + "\n"
	}
	t.Run("deleted and back", func(t *testing.T) {
		e := setup(t, "10s", 10, body("0"))
		mark := e.proxy.stderr.mark()
		if err := os.Remove(e.config); err != nil {
			t.Fatal(err)
		}
		rejected := e.proxy.waitLog(t, mark, 3*time.Second, msgStarts("config rejected"))
		t.Logf("deleted: %v", rejected["error"])
		if r := e.get("/r"); r.degraded() != "visit; point=r" {
			t.Errorf("with the file deleted: got %v, want the last good config (degraded)", r)
		}
		back := time.Now()
		e.write(e.config, configHeader(e.upstream, "10s", 10)+body("1000"))
		if !eventually(3*time.Second, func() bool { return e.get("/r").degraded() == "" }) {
			t.Fatalf("the file came back with visitThreshold 1000, not applied within 3s")
		}
		if d := time.Since(back); d > 1500*time.Millisecond {
			t.Errorf("the file came back: applied after %v, want within 1s", d)
		}
	})

	t.Run("ConfigMap symlink swap", func(t *testing.T) {
		// The kubelet's layout: sds.yaml -> ..data/sds.yaml, ..data ->
		// ..v1; an update writes ..v2 and renames a new ..data over the old.
		e := newEnv(t)
		version := func(name, content string) {
			os.Mkdir(filepath.Join(e.dir, name), 0o755)
			if err := os.WriteFile(filepath.Join(e.dir, name, "sds.yaml"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(e.dir, "..data_tmp")
			if err := os.Symlink(name, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(e.dir, "..data")); err != nil {
				t.Fatal(err)
			}
		}
		version("..v1", configHeader(e.upstream, "10s", 10)+body("0"))
		e.config = filepath.Join(e.dir, "sds.yaml")
		if err := os.Symlink(filepath.Join("..data", "sds.yaml"), e.config); err != nil {
			t.Fatal(err)
		}
		e.proxy = startProxy(t, e.config)
		if r := e.get("/r"); r.degraded() == "" {
			t.Fatalf("visitThreshold 0: got %v, want degraded", r)
		}
		version("..v2", configHeader(e.upstream, "10s", 10)+body("1000"))
		if !eventually(3*time.Second, func() bool { return e.get("/r").degraded() == "" }) {
			t.Fatalf("first swap not applied within 3s")
		}
		version("..v3", configHeader(e.upstream, "10s", 10)+body("0"))
		if !eventually(3*time.Second, func() bool { return e.get("/r").degraded() != "" }) {
			t.Fatalf("second swap not applied within 3s (the watch was lost after the first)")
		}
	})
}

// TestPointOptions checks pressure-test traffic, downgradeRate 0 and a
// request that matches no route.
func TestPointOptions(t *testing.T) {
	e := setup(t, "10s", 10, `pressureTestHeader: X-Pressure-Test
routes:
  - point: pt
    match: {pathPrefix: /pt}
  - point: never
    match: {pathPrefix: /never}
points:
  pt:
    visitThreshold: 1000
    pressureTestDowngrade: true
  never:
    visitThreshold: 0
    downgradeRate: 0
`)
	req, _ := http.NewRequest("GET", e.proxy.url+"/pt", nil)
	req.Header.Set("X-Pressure-Test", "true")
	if r, err := e.do(req); err != nil || r.degraded() != "pressure_test; point=pt" || r.status != 503 {
		t.Errorf("pressure-test request: got %v, %v; want a pressure_test 503", r, err)
	}
	if r := e.get("/pt"); r.status != 200 || r.degraded() != "" {
		t.Errorf("ordinary request: got %v, want 200", r)
	}
	for range 3 {
		if r := e.get("/never"); r.status != 200 || r.degraded() != "" {
			t.Errorf("downgradeRate 0: got %v, want 200", r)
		}
	}
	e.metricIs(1, "sds_point_tripped", "point", "never")
	if r := e.get("/elsewhere"); r.status != 200 || r.body != "upstream: GET /elsewhere\n" {
		t.Errorf("unrouted request: got %v, want the upstream's answer", r)
	}
	if n, _ := e.upstreamStats(); n != 5 {
		t.Errorf("upstream requests: got %d, want 5", n)
	}
}

// TestBadClientBody checks that a request body shorter than its
// Content-Length, the client's fault, is not an upstream exception.
func TestBadClientBody(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    exceptionThreshold: 1\n")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// /api/orders reads the body, so the upstream call waits for the
	// missing bytes until the proxy sees the client's body end early.
	io.WriteString(conn, "POST /api/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"item\":")
	conn.(*net.TCPConn).CloseWrite()
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		t.Logf("short body: answered %d", resp.StatusCode)
		resp.Body.Close()
	}
	if !eventually(2*time.Second, func() bool { return e.point("p").Window.InFlight == 0 }) {
		t.Fatalf("the call of the short body never ended")
	}
	if p := e.point("p"); p.Window.Exceptions != 0 {
		t.Errorf("/status: got %d exceptions, want 0 for a client's short body", p.Window.Exceptions)
	}
	if r := e.get("/api/orders"); r.status != 200 || r.degraded() != "" {
		t.Errorf("next call: got %v, want 200 (exceptionThreshold 1 not reached)", r)
	}
}

// TestLargeBody checks that a large response passes through intact.
func TestLargeBody(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    timeoutThreshold: 5s\n    timeoutCountThreshold: 5\n")
	const n = 8 << 20
	r := e.get("/big?body=" + strconv.Itoa(n))
	if r.status != 200 || len(r.body) != n || strings.Trim(r.body, "x") != "" {
		t.Errorf("body=%d: got status %d and %d bytes, want 200 and %d x's", n, r.status, len(r.body), n)
	}
}

// TestSIGTERMDrains checks that SIGTERM fails /readyz, lets a slow call in
// flight finish, refuses new connections and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
	if r := e.getURL(e.proxy.admin + "/readyz"); r.status != 200 {
		t.Fatalf("/readyz while serving: got %v, want 200", r)
	}
	if r := e.getURL(e.proxy.admin + "/healthz"); r.status != 200 {
		t.Fatalf("/healthz: got %v, want 200", r)
	}
	slow := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest("GET", e.proxy.url+"/slow?sleep=1s", nil)
		r, err := e.do(req)
		if err != nil {
			t.Errorf("slow call: %v", err)
		}
		slow <- r
	}()
	if !eventually(3*time.Second, func() bool { _, n := e.upstreamStats(); return n == 1 }) {
		t.Fatalf("the slow call never reached the upstream")
	}
	e.proxy.signal(syscall.SIGTERM)

	admin := newClient(t)
	if !eventually(900*time.Millisecond, func() bool {
		resp, err := admin.Get(e.proxy.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	}) {
		t.Errorf("/readyz did not turn 503 during the drain")
	}
	select {
	case r := <-slow:
		t.Fatalf("the slow call ended before /readyz turned 503: %v", r)
	default:
	}
	fresh := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 2 * time.Second}
	if resp, err := fresh.Get(e.proxy.url + "/new"); err == nil {
		resp.Body.Close()
		t.Errorf("a new connection during the drain: got %d, want it refused", resp.StatusCode)
	}

	if r := <-slow; r.status != 200 || !strings.HasPrefix(r.body, "upstream: GET /slow") {
		t.Errorf("slow call in flight at SIGTERM: got %v, want the upstream's 200", r)
	}
	e.proxy.waitExit(t, 5*time.Second)
}

// TestStreams checks that server-sent events arrive as they are sent and
// that a WebSocket passes through, and that neither holds its point's
// timeout or concurrency past the response headers.
func TestStreams(t *testing.T) {
	e := setup(t, "10s", 10, `routes:
  - point: sse
    match: {path: /sse}
  - point: ws
    match: {path: /ws}
points:
  sse:
    timeoutThreshold: 100ms
    timeoutCountThreshold: 1
  ws:
    concurrentThreshold: 1
`)
	t.Run("SSE", func(t *testing.T) {
		start := time.Now()
		resp, err := e.client.Get(e.proxy.url + "/sse?events=5&interval=200ms")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("got %d %q, want 200 text/event-stream", resp.StatusCode, ct)
		}
		br := bufio.NewReader(resp.Body)
		var arrived []time.Duration
		for i := 1; i <= 5; i++ {
			line, err := br.ReadString('\n')
			if err != nil || line != fmt.Sprintf("data: %d\n", i) {
				t.Fatalf("event %d: got %q, %v", i, line, err)
			}
			arrived = append(arrived, time.Since(start))
			if blank, _ := br.ReadString('\n'); blank != "\n" {
				t.Fatalf("event %d: got %q after it, want a blank line", i, blank)
			}
		}
		if rest, _ := io.ReadAll(br); len(rest) != 0 {
			t.Errorf("after the last event: got %q, want the end", rest)
		}
		t.Logf("SSE events arrived at %v", arrived)
		if arrived[0] > 400*time.Millisecond {
			t.Errorf("first event arrived after %v, want it at once (the stream takes 800ms)", arrived[0])
		}
		if arrived[4] < 700*time.Millisecond {
			t.Errorf("last event arrived after %v, want about 800ms", arrived[4])
		}
		// The stream's call ended at its headers: no timeout was counted
		// though it lasted 800ms against a 100ms threshold.
		e.metricIs(0, "sds_timeouts_total", "point", "sse")
		if r := e.get("/sse?events=1"); r.degraded() != "" || r.body != "data: 1\n\n" {
			t.Errorf("second stream: got %v, want it passed", r)
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		br, err := upstream.Handshake(conn, "chat.example", "/ws")
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range []string{"hello through the proxy", strings.Repeat("0123456789", 50)} {
			if err := upstream.WriteClientFrame(conn, 0x1, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			op, payload, err := upstream.ReadServerFrame(br)
			if err != nil || op != 0x1 || string(payload) != msg {
				t.Errorf("echo: got opcode %#x %.40q (%v), want text %.40q", op, payload, err, msg)
			}
		}
		// An upgraded connection holds no concurrency slot: with
		// concurrentThreshold 1, a second WebSocket still opens.
		if v, _ := e.metric("sds_inflight", "point", "ws"); v != 0 {
			t.Errorf("sds_inflight of an open WebSocket: got %v, want 0", v)
		}
		if err := upstream.WriteClientFrame(conn, 0x8, []byte{0x03, 0xe8}); err != nil {
			t.Fatal(err)
		}
		if op, payload, err := upstream.ReadServerFrame(br); err != nil || op != 0x8 || !bytes.Equal(payload, []byte{0x03, 0xe8}) {
			t.Errorf("close: got opcode %#x % x (%v), want a close 1000", op, payload, err)
		}
	})
}

// TestUpstreamErrors checks 502, 504, fallbackOnError, and a client that
// goes away.
func TestUpstreamErrors(t *testing.T) {
	e := setup(t, "10s", 10, `routes:
  - point: plain
    match: {pathPrefix: /plain}
  - point: fb
    match: {pathPrefix: /fb}
points:
  plain:
    exceptionThreshold: 100
    upstreamTimeout: 100ms
  fb:
    exceptionThreshold: 100
    upstreamTimeout: 100ms
    fallbackOnError: true
    fallback:
      status: 503
      headers: {Content-Type: text/plain}
      body: "fallback body"
`)
	t.Run("closed connection", func(t *testing.T) {
		if r := e.get("/plain?close=1"); r.status != 502 || r.degraded() != "" {
			t.Errorf("close=1: got %v, want 502", r)
		}
		e.metricIs(1, "sds_upstream_errors_total", "point", "plain", "kind", "transport")
		if r := e.get("/fb?close=1"); r.status != 503 || r.body != "fallback body" {
			t.Errorf("close=1 with fallbackOnError: got %v, want the fallback", r)
		}
	})
	t.Run("upstreamTimeout", func(t *testing.T) {
		r := e.get("/plain?sleep=1s")
		if r.status != 504 || r.took > 800*time.Millisecond {
			t.Errorf("sleep=1s with upstreamTimeout 100ms: got %v after %v, want 504 after about 100ms", r, r.took)
		}
		e.metricIs(1, "sds_upstream_errors_total", "point", "plain", "kind", "upstream_timeout")
		if r := e.get("/fb?sleep=1s"); r.status != 503 || r.body != "fallback body" {
			t.Errorf("upstreamTimeout with fallbackOnError: got %v, want the fallback", r)
		}
	})
	t.Run("5xx relayed", func(t *testing.T) {
		if r := e.get("/fb?status=500"); r.status != 500 || !strings.HasPrefix(r.body, "upstream") {
			t.Errorf("an upstream 500 with fallbackOnError: got %v, want the upstream's 500 relayed", r)
		}
	})
	if p := e.point("plain"); p.Window.Exceptions != 2 {
		t.Errorf("/status exceptions of plain: got %d, want 2 (close and upstreamTimeout)", p.Window.Exceptions)
	}
}

// TestClientGoesAway checks that a client that goes away mid-request is not
// an exception and frees its concurrency slot.
func TestClientGoesAway(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: c\n    match: {}\npoints:\n  c:\n    exceptionThreshold: 1\n    concurrentThreshold: 1\n")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.proxy.url+"/gone?sleep=5s", nil)
	done := make(chan error, 1)
	go func() {
		_, err := e.do(req)
		done <- err
	}()
	if !eventually(3*time.Second, func() bool { _, n := e.upstreamStats(); return n == 1 }) {
		t.Fatalf("the call never reached the upstream")
	}
	cancel()
	<-done
	if !eventually(2*time.Second, func() bool { _, n := e.upstreamStats(); return n == 0 }) {
		t.Errorf("the upstream call was not cancelled when the client went away")
	}
	if !eventually(2*time.Second, func() bool { return e.point("c").Window.InFlight == 0 }) {
		t.Fatalf("the concurrency slot was not freed")
	}
	if p := e.point("c"); p.Window.Exceptions != 0 {
		t.Errorf("/status: got %d exceptions, want 0 for a client that went away", p.Window.Exceptions)
	}
	// With exceptionThreshold 1 and concurrentThreshold 1, the next call
	// passes only if neither was charged.
	if r := e.get("/next"); r.status != 200 || r.degraded() != "" {
		t.Errorf("next call: got %v, want 200", r)
	}
	e.metricIs(0, "sds_upstream_errors_total", "point", "c", "kind", "transport")
}

// TestForwardedHeaders checks X-Forwarded-* and that the client's Host
// reaches the upstream.
func TestForwardedHeaders(t *testing.T) {
	echo := func(e *env, spoof bool) (got struct {
		Host   string
		Header http.Header
	}) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.proxy.url+"/echo-headers", nil)
		req.Host = "shop.example"
		if spoof {
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("X-Forwarded-Host", "evil.example")
		}
		r, err := e.do(req)
		if err != nil || r.status != 200 {
			t.Fatalf("/echo-headers: %v %v", r, err)
		}
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Run("on", func(t *testing.T) {
		e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
		for _, spoof := range []bool{false, true} {
			got := echo(e, spoof)
			if got.Host != "shop.example" {
				t.Errorf("spoof %v: Host got %q, want the client's shop.example", spoof, got.Host)
			}
			for k, want := range map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "shop.example"} {
				if v := got.Header.Values(k); len(v) != 1 || v[0] != want {
					t.Errorf("spoof %v: %s got %q, want %q", spoof, k, v, want)
				}
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		e := setup(t, "10s", 10, "forwardedHeaders: false\nroutes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
		got := echo(e, true)
		if got.Host != "shop.example" {
			t.Errorf("Host got %q, want shop.example", got.Host)
		}
		for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
			if v := got.Header.Values(k); len(v) != 0 {
				t.Errorf("forwardedHeaders false: %s got %q, want none", k, v)
			}
		}
	})
}

// TestCommands checks validate and version.
func TestCommands(t *testing.T) {
	needBinaries(t)
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := command("sds-proxy", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return out.String(), 0
		case errors.As(err, &exit):
			return out.String(), exit.ExitCode()
		}
		t.Fatalf("sds-proxy %q: %v", args, err)
		return "", -1
	}
	dir := t.TempDir()

	t.Run("validate broken", func(t *testing.T) {
		path := filepath.Join(dir, "broken.yaml")
		os.WriteFile(path, []byte(`upstream: http://127.0.0.1:9
window: 10s
bogus: 1
routes:
  - point: nosuch
    match: {}
points:
  a:
    timeoutCountThreshold: 5
`), 0o644)
		out, code := run("validate", "-config", path)
		if code != 1 {
			t.Errorf("exit code: got %d, want 1", code)
		}
		lineRE := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:(\d+):(\d+): \S.*$`)
		lines := map[string]bool{}
		for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			m := lineRE.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("output line %q: want FILE:LINE:COL: message", l)
				continue
			}
			lines[m[1]] = true
		}
		for _, want := range []string{"3", "5", "9"} { // bogus, nosuch, timeoutCountThreshold alone
			if !lines[want] {
				t.Errorf("no problem reported on line %s; got:\n%s", want, out)
			}
		}
	})
	t.Run("validate good", func(t *testing.T) {
		path := filepath.Join(dir, "good.yaml")
		os.WriteFile(path, []byte(configHeader("http://127.0.0.1:9", "10s", 10)+"routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 5\n"), 0o644)
		if out, code := run("validate", "-config", path); code != 0 || out != "OK\n" {
			t.Errorf("got exit %d and %q, want 0 and OK", code, out)
		}
	})
	t.Run("validate the example", func(t *testing.T) {
		path, _ := filepath.Abs("../../sds.yaml")
		if _, err := os.Stat(path); err != nil {
			t.Skip("no sds.yaml at the repo root")
		}
		if out, code := run("validate", "-config", path); code != 0 || out != "OK\n" {
			t.Errorf("sds.yaml: got exit %d and %q, want 0 and OK", code, out)
		}
	})
	t.Run("version", func(t *testing.T) {
		if out, code := run("version"); code != 0 || !strings.HasPrefix(out, "sds-proxy ") || !strings.Contains(out, "go1.") {
			t.Errorf("got exit %d and %q, want 0 and the version with the Go version", code, out)
		}
	})
}
