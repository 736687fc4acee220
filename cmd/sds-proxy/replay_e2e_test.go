package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// replayConfig is the determinism test's config: visit, token bucket,
// concurrent, exception (with a delay and its probes), exception rate,
// timeout, pressure test, a sheddable share and a per-key rule, on points
// routed by path; visits, tokens and concurrency scaled by k (1, 2 or a
// half).
func replayConfig(upstream string, k float64) string {
	n := func(v int) int { return max(1, int(float64(v)*k)) }
	return configHeader(upstream, "2s", 4) + fmt.Sprintf(`accessLog: true
pressureTestHeader: X-Pressure
routes:
  - {point: busy, match: {pathPrefix: /busy}}
  - {point: tokens, match: {pathPrefix: /tokens}}
  - {point: slow, match: {pathPrefix: /slow}}
  - {point: flaky, match: {pathPrefix: /flaky}}
  - {point: shed, match: {pathPrefix: /shed/low}, priority: sheddable}
  - {point: shed, match: {pathPrefix: /shed}}
  - {point: keyed, match: {pathPrefix: /keyed}}
  - {point: rate, match: {pathPrefix: /rate}}
points:
  busy: {visitThreshold: %d, pressureTestDowngrade: true}
  tokens: {tokenBucketGeneratedTokensInSecond: %d, tokenBucketSize: %d}
  slow: {concurrentThreshold: %d, timeoutThreshold: 150ms, timeoutCountThreshold: %d}
  flaky: {exceptionThreshold: %d, delayTime: 1s, retryInterval: 300ms, exceptionRateThreshold: 60, exceptionRateStart: 4}
  shed: {visitThreshold: %d, sheddableShare: 50}
  keyed:
    visitThreshold: 1000
    perKey:
      - {key: header:X-Api-Key, visitThreshold: %d}
  rate: {exceptionRateThreshold: %d, exceptionRateStart: 4}
`, n(6), n(3), n(3), n(2), n(3), n(3), n(8), n(3), min(100, n(40)))
}

// replayTraffic sends the determinism test's traffic: bursts, overlapping
// slow calls, failures, probes during a delay, sheddable and keyed
// requests. Every loop is bounded; waits are the upstream's (?sleep).
func replayTraffic(t *testing.T, e *env) {
	t.Helper()
	get := func(path string, header ...string) {
		req, err := http.NewRequest(http.MethodGet, e.proxy.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if _, err := e.do(req); err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
	}
	together := func(n int, path string) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { get(path) })
		}
		wg.Wait()
	}
	for i := range 12 {
		get("/busy/a")
		if i%4 == 0 {
			get("/busy/a", "X-Pressure", "1")
		}
	}
	for range 8 {
		get("/tokens/a")
	}
	together(6, "/slow/a?sleep=250ms")
	together(6, "/slow/a?sleep=250ms") // 4 calls past timeoutThreshold in the window
	get("/slow/a")                     // judged on them: timeout
	for range 8 {
		get("/flaky/a?status=503")
	}
	for range 6 {
		get("/flaky/a?sleep=120ms") // some are probes of the delay, some degraded in it
	}
	for i := range 12 {
		get("/shed/low/a")
		if i%3 == 0 {
			get("/shed/a")
		}
	}
	for i := range 10 {
		get("/keyed/a", "X-Api-Key", []string{"heavy", "heavy", "light"}[i%3])
	}
	for i := range 10 {
		get([]string{"/rate/a?status=503", "/rate/a"}[i%2])
	}
}

// replayOf runs sds-proxy replay -o json of logPath through config and
// returns its report.
func replayOf(t *testing.T, config, logPath string) (rep struct {
	Requests, Degraded, WouldDegrade, BecameDegraded, BecameForwarded int
	Approximate                                                       map[string]int
	Points                                                            []struct {
		Point                           string
		Degraded, WouldDegrade          map[string]int
		BecameDegraded, BecameForwarded int
	}
	Log struct{ Access, Malformed, Late int }
}) {
	t.Helper()
	out, ended, err := runWithin(command("sds-proxy", "replay", "-o", "json", "-config", config, logPath), wait)
	if !ended || err != nil {
		t.Fatalf("replay: ended %v, %v: %s", ended, err, out)
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("replay -o json: %v: %s", err, out)
	}
	return rep
}

// TestReplayDeterminism: the real binary's access log, replayed through
// the config that produced it, changes no request, strategy by strategy;
// through doubled thresholds it degrades fewer, through halved ones more.
func TestReplayDeterminism(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, replayConfig(e.upstream, 1))
	e.proxy = startProxy(t, e.config)
	replayTraffic(t, e)
	e.proxy.stop(5 * time.Second)
	logPath := filepath.Join(e.dir, "proxy.log")
	if err := os.WriteFile(logPath, []byte(e.proxy.stderr.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	same := replayOf(t, e.config, logPath)
	if same.Log.Access != 86 || same.Log.Malformed != 0 {
		t.Fatalf("replay read %d access lines, %d malformed; want the 86 requests sent, none malformed", same.Log.Access, same.Log.Malformed)
	}
	if same.BecameDegraded != 0 || same.BecameForwarded != 0 {
		t.Errorf("the same config: %d newly degraded, %d newly forwarded, want no request changed", same.BecameDegraded, same.BecameForwarded)
	}
	tripped := map[string]bool{}
	for _, p := range same.Points {
		if fmt.Sprint(p.Degraded) != fmt.Sprint(p.WouldDegrade) {
			t.Errorf("point %s: degraded %v in the log, %v in the replay; want the same by strategy", p.Point, p.Degraded, p.WouldDegrade)
		}
		for s := range p.Degraded {
			tripped[s] = true
		}
	}
	for _, s := range []string{"visit", "pressure_test", "token_bucket", "concurrent", "timeout", "exception", "exception_rate", "key_visit"} {
		if !tripped[s] {
			t.Errorf("the traffic tripped no %s (tripped %v): the test does not exercise it", s, tripped)
		}
	}
	for _, p := range same.Points {
		if p.Point == "shed" && p.Degraded["visit"] == 0 {
			t.Errorf("point shed: degraded %v, want sheddable requests past their share (visit)", p.Degraded)
		}
	}
	t.Logf("tripped %v; approximate %v", tripped, same.Approximate)

	doubled := filepath.Join(e.dir, "doubled.yaml")
	e.write(doubled, replayConfig(e.upstream, 2))
	halved := filepath.Join(e.dir, "halved.yaml")
	e.write(halved, replayConfig(e.upstream, 0.5))
	more, fewer := replayOf(t, halved, logPath), replayOf(t, doubled, logPath)
	if fewer.WouldDegrade >= same.Degraded || fewer.BecameDegraded != 0 {
		t.Errorf("doubled thresholds: %d would be degraded (%d newly) against %d, want fewer and none newly", fewer.WouldDegrade, fewer.BecameDegraded, same.Degraded)
	}
	if more.WouldDegrade <= same.Degraded {
		t.Errorf("halved thresholds: %d would be degraded against %d, want more", more.WouldDegrade, same.Degraded)
	}
	t.Logf("degraded %d; doubled thresholds %d; halved %d", same.Degraded, fewer.WouldDegrade, more.WouldDegrade)
}

// TestReplayStdinAndErrors: replay reads standard input with -, and a
// command line without -config or a log is a usage error (exit 2).
func TestReplayStdinAndErrors(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sds.yaml")
	if err := os.WriteFile(cfg, []byte(configHeader("http://127.0.0.1:9", "10s", 10)+pointRoute+"    visitThreshold: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	line := `{"level":"info","ts":"2026-12-05T10:00:00.001Z","logger":"access","msg":"request","point":"p","arrived":"2026-12-05T10:00:00.000000Z","host":"a","method":"GET","path":"/","priority":"default","status":200,"strategy":"","degraded":false,"shadow":false,"upstream_latency":"1ms","start":"2026-12-05T10:00:00.000000Z","outcome":"ok","ended":"2026-12-05T10:00:00.001000Z"}`
	cmd := command("sds-proxy", "replay", "-config", cfg, "-")
	cmd.Stdin = strings.NewReader(line + "\n" + strings.Replace(line, "00.000000Z", "00.500000Z", 2) + "\n")
	out, ended, err := runWithin(cmd, wait)
	if !ended || err != nil || !strings.Contains(string(out), "replay of 2 requests") || !strings.Contains(string(out), "1 requests change: 1 newly degraded") {
		t.Errorf("replay of stdin: %v %v:\n%s\nwant 2 requests, the second newly degraded by visitThreshold 1", ended, err, out)
	}
	for _, args := range [][]string{{"replay", "-"}, {"replay", "-config", cfg}, {"replay", "-config", cfg, "-o", "yaml", "-"}} {
		out, _, err := runWithin(command("sds-proxy", args...), wait)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("sds-proxy %s: %v, want exit 2: %s", strings.Join(args, " "), err, out)
		}
	}
}
