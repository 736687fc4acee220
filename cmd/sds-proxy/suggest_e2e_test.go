package main_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// suggestLoad sends at most n GETs of path to the proxy from workers
// goroutines, each waiting for its answer, and stops early once stop
// says so of an answer. It returns the answers, in no order. Transport
// errors fail the test.
func (e *env) suggestLoad(path string, n, workers int, stop func(reply) bool) []reply {
	e.t.Helper()
	var (
		mu      sync.Mutex
		replies []reply
		sent    atomic.Int64
		done    atomic.Bool
		failed  atomic.Value
		wg      sync.WaitGroup
	)
	deadline := time.Now().Add(4 * wait)
	for range workers {
		wg.Go(func() {
			for !done.Load() && sent.Add(1) <= int64(n) && time.Now().Before(deadline) {
				req, err := http.NewRequest(http.MethodGet, e.proxy.url+path, nil)
				if err == nil {
					var r reply
					if r, err = e.do(req); err == nil {
						mu.Lock()
						replies = append(replies, r)
						mu.Unlock()
						if stop != nil && stop(r) {
							done.Store(true)
						}
						continue
					}
				}
				failed.Store(err)
				done.Store(true)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	return replies
}

// An access log recorded in front of a known upstream (20ms a call) gives
// a points: block that, applied, does not trip on that upstream healthy
// and trips on it made slow.
func TestSuggestE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	e := &env{t: t, dir: t.TempDir(), upstream: "http://" + startUpstream(t, "-latency", "20ms"), client: newClient(t)}
	head := configHeader(e.upstream, "2s", 10) + "accessLog: true\nroutes:\n  - point: api\n    match: {pathPrefix: /api}\n"
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, head+"points:\n  api: {}\n")
	e.proxy = startProxy(t, e.config)

	// Record: 600 calls from 4 clients, about 3s at 20ms a call: longer
	// than the 2s window.
	const calls, workers = 600, 4
	logFile := e.recordAccessLog(calls, workers)

	block, stderr, code := runCLI(t, "suggest", "-access-log", logFile, "-config", e.config)
	if code != 0 {
		t.Fatalf("suggest: exit %d: %s", code, stderr)
	}
	t.Logf("suggest proposed:\n%s", block)
	timeout := checkSuggested(t, block, calls, workers)

	// Apply the block.
	mark := e.proxy.stderr.mark()
	e.write(e.config, head+block)
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))

	// Healthy: the same load degrades nothing.
	degraded := 0
	for _, r := range e.suggestLoad("/api/orders", calls, workers, nil) {
		if r.degraded() != "" || r.status != http.StatusOK {
			degraded++
			t.Errorf("healthy upstream, proposed thresholds: %v", r)
		}
	}
	t.Logf("healthy: %d of %d calls degraded", degraded, calls)

	// Slow: every call takes twice the proposed timeoutThreshold (at least
	// 200ms); the point trips, and it is the timeout strategy. Each client
	// waits for its answer, so timeouts come a batch at a time and are
	// judged when the batch ends: 8 clients make a batch of 8 timeouts,
	// over timeoutCountThreshold's least (5), and fewer than the proposed
	// concurrentThreshold's least (2 × the 4 recording clients).
	slow := max(2*timeout, 200*time.Millisecond)
	if r := e.postForm(e.upstream+"/_control", url.Values{"latency": {slow.String()}}); r.status != http.StatusOK {
		t.Fatalf("setting the upstream's latency: %v", r)
	}
	start := time.Now()
	replies := e.suggestLoad("/api/orders", 100, 2*workers, func(r reply) bool { return r.degraded() != "" })
	var trip *reply
	for i := range replies {
		if replies[i].degraded() != "" {
			trip = &replies[i]
			break
		}
	}
	if trip == nil {
		t.Fatalf("upstream slowed to %v: no call of %d degraded", slow, len(replies))
	}
	t.Logf("upstream slowed to %v (timeoutThreshold %v): degraded after %d calls, %v: %v", slow, timeout, len(replies),
		time.Since(start).Round(time.Millisecond), trip)
	if !strings.HasPrefix(trip.degraded(), "timeout; point=api") {
		t.Errorf("the trip on the slow upstream: got %q, want timeout; point=api", trip.degraded())
	}
}

// recordAccessLog sends GET /api/orders calls times from workers
// closed-loop clients, each call answered 200, waits for the proxy to log
// them, and writes its log with a malformed line added to access.log in
// the test's directory, whose path it returns.
func (e *env) recordAccessLog(calls, workers int) string {
	t := e.t
	t.Helper()
	start := time.Now()
	for _, r := range e.suggestLoad("/api/orders", calls, workers, nil) {
		if r.status != http.StatusOK {
			t.Fatalf("recording: %v", r)
		}
	}
	t.Logf("recorded %d calls in %v", calls, time.Since(start).Round(time.Millisecond))
	isAccess := func(s string) bool {
		l := parseLog(s)
		return l != nil && l["logger"] == "access" && l["msg"] == "request"
	}
	if !eventually(wait, func() bool { return e.proxy.stderr.count(0, isAccess) >= calls }) {
		t.Fatalf("the proxy logged %d access lines, want %d", e.proxy.stderr.count(0, isAccess), calls)
	}
	logFile := filepath.Join(e.dir, "access.log")
	if err := os.WriteFile(logFile, []byte(e.proxy.stderr.String()+"\na line that is no JSON\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return logFile
}

// checkSuggested checks the block suggest proposed from a log of calls by
// workers closed-loop clients (with one malformed line, on a 2s window in
// 10 buckets), and returns the timeoutThreshold it proposes.
func checkSuggested(t *testing.T, block string, calls, workers int) time.Duration {
	t.Helper()
	// Closed-loop clients: never more calls in flight than clients,
	// counted from each call's start, to the microsecond.
	if m := regexp.MustCompile(`the most calls in flight at once \((\d+)\)`).FindStringSubmatch(block); m == nil {
		t.Errorf("no in-flight figure in the block:\n%s", block)
	} else if n, _ := strconv.Atoi(m[1]); n < 1 || n > workers {
		t.Errorf("most calls in flight: got %d, want 1 to %d (the clients)", n, workers)
	}
	if !strings.Contains(block, fmt.Sprintf(": %d requests from", calls)) || !strings.Contains(block, "malformed: 1;") || !strings.Contains(block, "for a 2s window in 10 buckets") {
		t.Errorf("the block's header does not count the malformed line or name the window:\n%s", block)
	}
	m := regexp.MustCompile(`(?m)^    timeoutThreshold: (\S+)`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("no timeoutThreshold proposed:\n%s", block)
	}
	timeout, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return timeout
}

// postForm POSTs form to url; a transport error fails the test.
func (e *env) postForm(target string, form url.Values) reply {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r, err := e.do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", target, err)
	}
	return r
}
