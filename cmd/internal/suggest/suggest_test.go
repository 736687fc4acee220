package suggest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/suggest"
	"github.com/sds-proxy/sds-proxy/config"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// accessLine is an access log line as sds-proxy writes it.
func accessLine(point string, end time.Time, status int, degraded bool, latency time.Duration) string {
	return fmt.Sprintf(`{"level":"info","ts":"%s","logger":"access","msg":"request","point":%q,"method":"GET","path":"/","status":%d,"strategy":"","degraded":%v,"shadow":false,"upstream_latency":"%s"}`,
		end.Format("2006-01-02T15:04:05.000Z0700"), point, status, degraded, latency)
}

// testLog is a log whose figures are known (see TestRead).
func testLog() string {
	var lines []string
	// api: 200 calls, one every 50ms over 10s, latencies 1ms..20ms (10
	// of each), a 500 every 50th call.
	for i := range 200 {
		status := 200
		if i%50 == 0 {
			status = 500
		}
		lines = append(lines, accessLine("api", t0.Add(time.Duration(i)*50*time.Millisecond), status, false, time.Duration(i%20+1)*time.Millisecond))
	}
	// 3 calls in flight together, [5.020s, 5.040s), overlapping no other.
	for range 3 {
		lines = append(lines, accessLine("api", t0.Add(5040*time.Millisecond), 200, false, 20*time.Millisecond))
	}
	// 10 degraded requests, in the 11th second.
	for range 10 {
		lines = append(lines, accessLine("api", t0.Add(10500*time.Millisecond), 429, true, 0))
	}
	// tiny: too few calls.
	for i := range 3 {
		lines = append(lines, accessLine("tiny", t0.Add(time.Duration(i)*time.Second), 200, false, time.Millisecond))
	}
	lines = append(lines,
		`{"level":"warn","ts":"2026-12-01T08:00:05.000Z","msg":"point tripped","point":"api","strategy":"visit"}`,
		"",
		"garbage that is not JSON",
		`{"ts":"2026-12-01T08:00:01.000Z","logger":"access","msg":"request","point":"api"}`,
		`{"ts":"2026-12-01T08:00:01.000Z","logger":"access","msg":"request","point":"api","status":200,"degraded":false,"upstream_latency":"fast"}`,
		`{"ts":"yesterday","logger":"access","msg":"request","point":"api","status":200,"degraded":false,"upstream_latency":"1ms"}`,
		strings.Repeat("x", 2<<20),
	)
	return strings.Join(lines, "\n") + "\n"
}

func TestRead(t *testing.T) {
	t.Parallel()
	rep, err := suggest.Read(strings.NewReader(testLog()), suggest.Options{Window: 10 * time.Second, Buckets: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 216 || rep.Malformed != 5 || rep.Other != 1 || rep.Lines != 222 {
		t.Errorf("requests %d malformed %d other %d lines %d; want 216, 5, 1, 222", rep.Requests, rep.Malformed, rep.Other, rep.Lines)
	}
	if len(rep.Problems) != 5 || !strings.HasPrefix(rep.Problems[0], "line 218: not a JSON log line") {
		t.Errorf("problems: %q", rep.Problems)
	}
	if len(rep.Points) != 2 || rep.Points[0].Name != "api" || rep.Points[1].Name != "tiny" {
		t.Fatalf("points: %+v", rep.Points)
	}
	api := rep.Points[0]
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"requests", api.Requests, 213},
		{"forwarded", api.Forwarded, 203},
		{"degraded", api.Degraded, 10},
		{"errors", api.Errors, 4},
		{"p50", api.P50, 11 * time.Millisecond},
		{"p90", api.P90, 19 * time.Millisecond},
		{"p99", api.P99, 20 * time.Millisecond},
		{"max", api.Max, 20 * time.Millisecond},
		{"peak window", api.PeakWindow, 203}, // the first 10 seconds
		{"scaled", api.Scaled, false},
		{"peak in flight", api.PeakInFlight, 3},
		{"worst error percent", api.WorstErrorPercent, 5.0}, // 1 of the first second's 20
		{"over timeout", api.OverTimeout, 0},
	} {
		if c.got != c.want {
			t.Errorf("api %s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	want := map[string]string{
		"timeoutThreshold":       "60ms",
		"timeoutCountThreshold":  "5",
		"visitThreshold":         "406",
		"concurrentThreshold":    "6",
		"exceptionRateThreshold": "15",
		"exceptionRateStart":     "20",
	}
	props := api.Proposals(rep.Window)
	if len(props) != len(want) {
		t.Fatalf("proposals: %+v", props)
	}
	for _, p := range props {
		if p.Value != want[p.Key] {
			t.Errorf("%s: got %s, want %s (%s)", p.Key, p.Value, want[p.Key], p.Why)
		}
	}
	if rep.Points[1].Proposals(rep.Window) != nil {
		t.Errorf("tiny, with 3 calls, got proposals")
	}
}

// The block is sds.yaml: appended to a config's head, it validates, and
// its values are the proposals.
func TestWriteYAMLIsAValidPointsBlock(t *testing.T) {
	t.Parallel()
	rep, err := suggest.Read(strings.NewReader(testLog()), suggest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := rep.WriteYAML(&out, "access.log"); err != nil {
		t.Fatal(err)
	}
	block := out.String()
	for _, s := range []string{
		"# sds-proxy suggest, from access.log: 216 requests from 2026-12-01T08:00:00Z to 2026-12-01T08:00:10Z (11s), for a 10s window in 10 buckets.",
		"# Lines read: 222; malformed: 5; other log lines skipped: 1.",
		"#   malformed line 218: not a JSON log line",
		"timeoutThreshold: 60ms",
		"# p99 20ms × 3",
		"visitThreshold: 406",
		"# the most forwarded calls in one 10s window (203) × 2, not counting the 10 degraded requests",
		"  # tiny: 3 requests (3 forwarded, 0 degraded)",
		"  #   3 forwarded calls are too few to propose thresholds (at least 50); nothing proposed, keep its settings.",
	} {
		if !strings.Contains(block, s) {
			t.Errorf("the block lacks %q:\n%s", s, block)
		}
	}
	// tiny has no key: a config that routes to it is refused, rather
	// than tiny's thresholds silently turned off.
	withTiny := "upstream: http://127.0.0.1:9000\nroutes:\n  - point: api\n    match: {pathPrefix: /api}\n  - point: tiny\n    match: {}\n" + block
	if _, err := config.Parse("sds.yaml", []byte(withTiny), config.Options{}); err == nil || !strings.Contains(err.Error(), `point "tiny" is not defined`) {
		t.Errorf("the block applied to a config routing to tiny: got %v, want tiny not defined", err)
	}
	src := "upstream: http://127.0.0.1:9000\nroutes:\n  - point: api\n    match: {}\n" + block
	f, err := config.Parse("sds.yaml", []byte(src), config.Options{})
	if err != nil {
		t.Fatalf("the block does not validate: %v\n%s", err, src)
	}
	p := f.Point("api")
	if p.TimeoutThreshold != 60*time.Millisecond {
		t.Errorf("timeoutThreshold as parsed: got %v, want 60ms", p.TimeoutThreshold)
	}
	if n, on := p.VisitThreshold.Get(); !on || n != 406 {
		t.Errorf("visitThreshold as parsed: got %d (on %v), want 406", n, on)
	}
}

// A log shorter than a window saw part of one: its count is scaled to a
// whole window by its rate.
func TestReadScalesALogShorterThanAWindow(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 200 { // 200 calls over 1.99s
		b.WriteString(accessLine("api", t0.Add(time.Duration(i)*10*time.Millisecond), 200, false, time.Millisecond) + "\n")
	}
	rep, err := suggest.Read(strings.NewReader(b.String()), suggest.Options{Window: 10 * time.Second, Buckets: 10})
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Points[0]
	if !p.Scaled || p.PeakWindow != 1006 || p.Span != 1990*time.Millisecond {
		t.Errorf("got scaled %v peak %d span %v, want true, 1006 (200 × 10s / 1.99s, rounded up), 1.99s", p.Scaled, p.PeakWindow, p.Span)
	}
	for _, pr := range p.Proposals(rep.Window) {
		if pr.Key == "visitThreshold" && (pr.Value != "2012" || pr.Why != "200 forwarded calls in 1.99s, less than a 10s window, scaled to one (1006) × 2") {
			t.Errorf("visitThreshold: got %s # %s", pr.Value, pr.Why)
		}
	}
}

// With the config's points: their order, their current values beside the
// proposals, the points the log did not see, and those it saw that the
// config lacks.
func TestWriteYAMLAgainstTheConfig(t *testing.T) {
	t.Parallel()
	rep, err := suggest.Read(strings.NewReader(testLog()), suggest.Options{Points: []suggest.Current{
		{Name: "quiet"},
		{Name: "api", Values: map[string]string{"timeoutThreshold": "250ms", "visitThreshold": "1000"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := rep.WriteYAML(&out, "access.log"); err != nil {
		t.Fatal(err)
	}
	block := out.String()
	for _, s := range []string{
		"timeoutThreshold: 60ms      # p99 20ms × 3; now 250ms",
		"visitThreshold: 406         # the most forwarded calls in one 10s window (203) × 2, not counting the 10 degraded requests; now 1000",
		"concurrentThreshold: 6      # the most calls in flight at once (3) × 2, at least 4; now off",
		"  # tiny: 3 requests (3 forwarded, 0 degraded); upstream latency p50 1ms p90 1ms p99 1ms max 1ms; errors 0.0%; not a point of the config",
		"  # quiet: no request in the log; nothing proposed, keep its settings.",
	} {
		if !strings.Contains(block, s) {
			t.Errorf("the block lacks %q:\n%s", s, block)
		}
	}
	if strings.Index(block, "  api:") > strings.Index(block, "# tiny:") {
		t.Errorf("api, a point of the config, comes after tiny, which is not:\n%s", block)
	}
}

func TestWriteYAMLWithoutAccessLines(t *testing.T) {
	t.Parallel()
	rep, err := suggest.Read(strings.NewReader(`{"level":"info","msg":"serving"}`+"\n"), suggest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := rep.WriteYAML(&out, "-"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "No access log line was found: turn on accessLog: true") || strings.Contains(out.String(), "points:") {
		t.Errorf("got:\n%s", out.String())
	}
}

// A point name that is not a valid one is quoted, so that a hostile log
// cannot add keys to the block.
func TestWriteYAMLQuotesOddNames(t *testing.T) {
	t.Parallel()
	name := "a: {visitThreshold: 0}\n  b"
	var log strings.Builder
	for i := range suggest.MinForwarded {
		log.WriteString(accessLine(name, t0.Add(time.Duration(i)*time.Second), 200, false, time.Millisecond) + "\n")
	}
	rep, err := suggest.Read(strings.NewReader(log.String()), suggest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := rep.WriteYAML(&out, "-"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `  "a: {visitThreshold: 0}\n  b":`) {
		t.Errorf("got:\n%s", out.String())
	}
}

func TestRoundUp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p99  time.Duration
		want string
	}{
		{100 * time.Microsecond, "1ms"},
		{time.Millisecond, "3ms"},
		{31 * time.Millisecond, "93ms"},
		{31100 * time.Microsecond, "94ms"},
		{411 * time.Millisecond, "1.3s"},
		{4 * time.Second, "12s"},
	} {
		p := &suggest.Point{Forwarded: suggest.MinForwarded, P99: c.p99}
		got, _ := p.TimeoutThreshold()
		if got.String() != c.want {
			t.Errorf("p99 %v: timeoutThreshold %v, want %s", c.p99, got, c.want)
		}
	}
}

// TestInFlightFromStarts: four closed-loop clients, each making 300 calls
// of 200µs back to back (50µs between a response and its next request),
// so that at most 4 are ever in flight. From the lines' starts, to the
// microsecond, the peak is 4; from their millisecond ts alone, calls in
// the same millisecond look simultaneous and the peak is far more.
func TestInFlightFromStarts(t *testing.T) {
	t.Parallel()
	const clients, calls, took, gap = 4, 300, 200 * time.Microsecond, 50 * time.Microsecond
	log := func(withStart bool) string {
		var b strings.Builder
		for c := range clients {
			at := t0.Add(time.Duration(c) * 13 * time.Microsecond)
			for range calls {
				line := accessLine("api", at.Add(took), 200, false, took)
				if withStart {
					line = strings.TrimSuffix(line, "}") + fmt.Sprintf(`,"start":%q}`, at.Format("2006-01-02T15:04:05.000000Z07:00"))
				}
				b.WriteString(line + "\n")
				at = at.Add(took + gap)
			}
		}
		return b.String()
	}
	for _, tc := range []struct {
		withStart bool
		check     func(int) bool
		want      string
	}{
		{true, func(n int) bool { return n == clients }, "4, the clients"},
		{false, func(n int) bool { return n > clients }, "more than 4 (the millisecond ts blurs them)"},
	} {
		rep, err := suggest.Read(strings.NewReader(log(tc.withStart)), suggest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Points[0].PeakInFlight; !tc.check(got) {
			t.Errorf("with start %v: most calls in flight %d, want %s", tc.withStart, got, tc.want)
		}
	}
}

// TestVisitThresholdFromForwarded: a point that degraded most of its
// demand (a visitThreshold of 50 per window against 10 times that) is
// proposed a visitThreshold from what the upstream served, never from the
// demand it turned away.
func TestVisitThresholdFromForwarded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 6000 { // 500 a second over 12s: 50 forwarded a second, the rest degraded
		at := t0.Add(time.Duration(i) * 2 * time.Millisecond)
		b.WriteString(accessLine("api", at, 200, i%10 != 0, time.Millisecond) + "\n")
	}
	rep, err := suggest.Read(strings.NewReader(b.String()), suggest.Options{Window: 10 * time.Second, Buckets: 10})
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Points[0]
	if p.Forwarded != 600 || p.Degraded != 5400 || p.PeakForwarded != 500 || p.PeakWindow != 5000 {
		t.Fatalf("got %d forwarded, %d degraded, peak forwarded %d, peak demand %d; want 600, 5400, 500, 5000", p.Forwarded, p.Degraded, p.PeakForwarded, p.PeakWindow)
	}
	for _, pr := range p.Proposals(rep.Window) {
		if pr.Key == "visitThreshold" && (pr.Value != "1000" || !strings.Contains(pr.Why, "not counting the 5400 degraded requests")) {
			t.Errorf("visitThreshold: got %s # %s, want 1000 from the 500 forwarded, the degraded left out", pr.Value, pr.Why)
		}
	}
}
