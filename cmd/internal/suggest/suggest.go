// Package suggest reads sds-proxy's own access log and proposes a points:
// block of sds.yaml from what it saw: per point, the volume, the upstream
// latency quantiles, the error rate and the calls in flight, and
// thresholds derived from them, each with a comment that says how. It is
// `sds-proxy suggest`; it imports nothing of the proxy, only the log's
// format (proxy.Handler's access lines, README "Logs").
//
// The rules, applied to one point's history (H = Headroom, K =
// TimeoutFactor):
//
//	timeoutThreshold       p99 of the upstream latency × K, rounded up
//	timeoutCountThreshold  2 × the most calls at or over that threshold in one window, at least MinTimeoutCount
//	visitThreshold         the most forwarded calls in one window × H (what the
//	                       upstream served; degraded requests are left out)
//	concurrentThreshold    the most calls in flight at once × H, at least MinConcurrent
//	                       (each call from its start, to the microsecond)
//	exceptionRateThreshold 3 × the worst window's error rate, at least MinErrorRate percent, at most 100
//	exceptionRateStart     a tenth of the most requests in one window, at least MinRateStart
//
// A window is the config's (Options.Window, slid bucket by bucket). A
// point with fewer than MinForwarded forwarded calls gets no proposal,
// only its figures. Policy choices that history cannot make (delayTime,
// retryInterval, downgradeRate, the token bucket, fallbacks) are not
// proposed.
package suggest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The rules' constants (see the package doc).
const (
	TimeoutFactor   = 3
	Headroom        = 2
	MinTimeoutCount = 5
	MinConcurrent   = 4
	MinErrorRate    = 10
	MinRateStart    = 10
	MinForwarded    = 50
	// minRateCalls is the fewest forwarded calls a window needs for its
	// error rate to count as the worst.
	minRateCalls = 10
	// maxLine bounds a log line, in bytes; a longer one is malformed.
	maxLine = 1 << 20
	// maxLatency bounds an upstream latency; a longer one is malformed
	// (no call a threshold is derived from lasts that long, and the
	// arithmetic on it stays far from overflowing).
	maxLatency = 1000 * time.Hour
)

// Options shape a Read.
type Options struct {
	// Window and Buckets are the sliding window the thresholds are for,
	// as sds.yaml's window and buckets; zero means 10s and 10.
	Window  time.Duration
	Buckets int
	// Points are the points of the config in force, in its order, each
	// with its current value of the proposed keys (as sds.yaml writes
	// them; a key absent is off): the block follows their order, names
	// those the log did not see, and shows each value beside its
	// proposal. nil: no config, points in name order.
	Points []Current
}

// Current is a point of the config and its current values, by key.
type Current struct {
	Name   string
	Values map[string]string
}

// Report is what Read found.
type Report struct {
	// Lines counts every line read; Requests the access log lines among
	// them; Malformed the lines that are neither JSON log lines nor
	// complete access log lines (each also in Problems, the first few);
	// Other the proxy's other log lines (trips, reloads), skipped.
	Lines, Requests, Malformed, Other int
	// Problems describes the first malformed lines, "line N: why".
	Problems []string
	// First and Last are the times of the first and last request.
	First, Last time.Time
	// Window and Buckets are the window the thresholds are for.
	Window  time.Duration
	Buckets int
	// Points are the points seen: those of Options.Points first, in
	// their order, then the others by name.
	Points []*Point
	// Unseen are the points of Options.Points with no request in the
	// log, in config order.
	Unseen []string
	// current is Options.Points by name.
	current map[string]map[string]string
}

// maxProblems bounds Report.Problems.
const maxProblems = 5

// Point is one point's history and the thresholds it suggests.
type Point struct {
	Name string
	// Requests counts every request; Forwarded those sent to the upstream
	// (shadow ones included); Degraded those answered by the fallback;
	// Errors the forwarded calls answered 5xx (an upstream error, a
	// failed call's 502/504, or its fallback).
	Requests, Forwarded, Degraded, Errors int
	// P50, P90, P99 and Max are the forwarded calls' upstream latency.
	P50, P90, P99, Max time.Duration
	// PeakWindow is the most requests in one window (when the point's
	// requests span less than a window, their count scaled up to one
	// window, and Scaled is set); PeakInFlight the
	// most forwarded calls in flight at once (each call taken to span its
	// upstream latency before its log line); WorstErrorPercent the
	// highest error percentage of a window with at least 10 forwarded
	// calls (0 with none).
	PeakWindow, PeakInFlight int
	// PeakForwarded is PeakWindow of the forwarded calls alone (scaled
	// alike): what the upstream served, which visitThreshold is derived
	// from; degraded demand never is.
	PeakForwarded     int
	Scaled            bool
	WorstErrorPercent float64
	// Span is the time from the point's first request to its last.
	Span time.Duration
	// OverTimeout is the most forwarded calls at or over the proposed
	// timeoutThreshold in one window.
	OverTimeout int

	calls []call // forwarded calls
	ends  []int64
}

// call is one forwarded call: its log line's instant and, when the line
// has it, its start (Unix ns; 0 without one), and its upstream latency.
type call struct {
	end, start int64
	latency    time.Duration
	failed     bool
}

// line is an access log line as proxy.Handler writes it; a nil field was
// absent.
type line struct {
	TS       json.RawMessage `json:"ts"`
	Logger   string          `json:"logger"`
	Msg      string          `json:"msg"`
	Point    *string         `json:"point"`
	Status   *int            `json:"status"`
	Degraded *bool           `json:"degraded"`
	Latency  *string         `json:"upstream_latency"`
	// Start is when a forwarded call entered its point, to the
	// microsecond (absent from the logs of older proxies).
	Start *string `json:"start"`
}

// Read reads a log from r: the proxy's log (access lines among the
// others) as JSON lines. Only reading r can fail; a line that cannot be
// used is counted in Report.Malformed.
func Read(r io.Reader, opts Options) (*Report, error) {
	rep := &Report{Window: opts.Window, Buckets: opts.Buckets}
	if rep.Window <= 0 {
		rep.Window = 10 * time.Second
	}
	if rep.Buckets <= 0 {
		rep.Buckets = 10
	}
	points := map[string]*Point{}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		raw, err := readLine(br)
		switch {
		case errors.Is(err, errLongLine):
			rep.Lines++
			rep.malformed(fmt.Sprintf("longer than %d bytes", maxLine))
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			rep.Lines++
			rep.add(points, raw)
		}
		if err != nil { // io.EOF
			break
		}
	}
	rep.current = map[string]map[string]string{}
	for _, c := range opts.Points {
		rep.current[c.Name] = c.Values
		if p := points[c.Name]; p != nil {
			rep.Points = append(rep.Points, p)
			delete(points, c.Name)
		} else {
			rep.Unseen = append(rep.Unseen, c.Name)
		}
	}
	others := make([]*Point, 0, len(points))
	for _, p := range points {
		others = append(others, p)
	}
	slices.SortFunc(others, func(a, b *Point) int { return strings.Compare(a.Name, b.Name) })
	rep.Points = append(rep.Points, others...)
	width := int64(rep.Window) / int64(rep.Buckets)
	for _, p := range rep.Points {
		p.summarize(width, rep.Buckets)
	}
	return rep, nil
}

var errLongLine = errors.New("line too long")

// readLine returns the next line of br without its end; a line longer
// than maxLine is skipped to its end and reported as errLongLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLine {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLongLine
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(buf, "\r\n"), err
	}
}

func (rep *Report) malformed(why string) {
	rep.Malformed++
	if len(rep.Problems) < maxProblems {
		rep.Problems = append(rep.Problems, fmt.Sprintf("line %d: %s", rep.Lines, why))
	}
}

// add reads one line into points.
func (rep *Report) add(points map[string]*Point, raw []byte) {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		rep.malformed("not a JSON log line")
		return
	}
	if l.Logger != "access" || l.Msg != "request" {
		rep.Other++
		return
	}
	at, ok := parseTS(l.TS)
	var latency time.Duration
	var err error
	switch {
	case !ok || at.Year() < 1970 || at.Year() >= 2262:
		rep.malformed("no readable ts (or one outside 1970-2261)")
		return
	case l.Point == nil || *l.Point == "" || l.Status == nil || l.Degraded == nil || l.Latency == nil:
		rep.malformed("an access line without point, status, degraded or upstream_latency")
		return
	default:
		if latency, err = time.ParseDuration(*l.Latency); err != nil || latency < 0 || latency > maxLatency {
			rep.malformed(fmt.Sprintf("upstream_latency %q is not a duration from 0 to %s", *l.Latency, maxLatency))
			return
		}
	}
	rep.Requests++
	if rep.First.IsZero() || at.Before(rep.First) {
		rep.First = at
	}
	if at.After(rep.Last) {
		rep.Last = at
	}
	p := points[*l.Point]
	if p == nil {
		p = &Point{Name: *l.Point}
		points[*l.Point] = p
	}
	p.Requests++
	p.ends = append(p.ends, at.UnixNano())
	if *l.Degraded {
		p.Degraded++
		return
	}
	p.Forwarded++
	failed := *l.Status >= 500
	if failed {
		p.Errors++
	}
	c := call{end: at.UnixNano(), latency: latency, failed: failed}
	if l.Start != nil {
		// The line's ts is to the millisecond, truncated: the start can be
		// up to a millisecond past it.
		if start, err := time.Parse(time.RFC3339Nano, *l.Start); err == nil && start.Before(at.Add(time.Millisecond)) {
			c.start = start.UnixNano()
		}
	}
	p.calls = append(p.calls, c)
}

// tsLayout is the ISO 8601 form sds-proxy's logger writes ts in.
const tsLayout = "2006-01-02T15:04:05.000Z0700"

// parseTS reads a log line's ts: ISO 8601 or RFC 3339 text, or a number
// of seconds since the epoch (zap's default encoding).
func parseTS(raw json.RawMessage) (time.Time, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		for _, layout := range []string{tsLayout, time.RFC3339Nano} {
			if t, err := time.Parse(layout, s); err == nil {
				return t, true
			}
		}
		return time.Time{}, false
	}
	var secs float64
	if json.Unmarshal(raw, &secs) == nil && secs > 0 {
		sec, frac := math.Modf(secs)
		return time.Unix(int64(sec), int64(frac*1e9)), true
	}
	return time.Time{}, false
}

// summarize computes p's figures for windows of buckets buckets of width
// nanoseconds.
func (p *Point) summarize(width int64, buckets int) {
	lat := make([]time.Duration, len(p.calls))
	for i, c := range p.calls {
		lat[i] = c.latency
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		p.P50, p.P90, p.P99, p.Max = quantile(lat, 0.50), quantile(lat, 0.90), quantile(lat, 0.99), lat[len(lat)-1]
	}
	p.PeakWindow = peakWindow(p.ends, width, buckets)
	forwarded := make([]int64, len(p.calls))
	for i, c := range p.calls {
		forwarded[i] = c.end
	}
	p.PeakForwarded = peakWindow(forwarded, width, buckets)
	if len(p.ends) > 0 {
		p.Span = time.Duration(slices.Max(p.ends) - slices.Min(p.ends))
	}
	if window := time.Duration(width) * time.Duration(buckets); p.Span < window {
		// A log shorter than a window saw part of one: its rate, not its
		// count, says what a whole window holds.
		seen := max(p.Span, time.Duration(width))
		p.PeakWindow = int(math.Ceil(float64(p.Requests) * float64(window) / float64(seen)))
		p.PeakForwarded = int(math.Ceil(float64(p.Forwarded) * float64(window) / float64(seen)))
		p.Scaled = true
	}
	p.PeakInFlight = peakInFlight(p.calls)
	p.WorstErrorPercent = worstErrorPercent(p.calls, width, buckets)
	if t, ok := p.TimeoutThreshold(); ok {
		ends := make([]int64, 0, len(p.calls))
		for _, c := range p.calls {
			if c.latency >= t {
				ends = append(ends, c.end)
			}
		}
		p.OverTimeout = peakWindow(ends, width, buckets)
	}
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// peakWindow returns the most events at times (Unix ns) that fall in one
// window of buckets buckets of width ns, windows starting at bucket
// boundaries as the proxy's do.
func peakWindow(times []int64, width int64, buckets int) int {
	counts := map[int64]int{}
	for _, t := range times {
		counts[floorDiv(t, width)]++
	}
	keys := make([]int64, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	best, sum, lo := 0, 0, 0
	for _, k := range keys {
		sum += counts[k]
		for keys[lo] <= k-int64(buckets) {
			sum -= counts[keys[lo]]
			lo++
		}
		best = max(best, sum)
	}
	return best
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// peakInFlight returns the most calls overlapping at once, each spanning
// [start, start+latency) when its line has a start, to the microsecond,
// else [end-latency, end) (the line's ts, to the millisecond: calls
// shorter than that can look simultaneous).
func peakInFlight(calls []call) int {
	type edge struct {
		at    int64
		delta int
	}
	edges := make([]edge, 0, 2*len(calls))
	for _, c := range calls {
		from := c.end - int64(c.latency)
		if c.start != 0 {
			from = c.start
		}
		edges = append(edges, edge{from, 1}, edge{from + int64(c.latency), -1})
	}
	// An end before a start at the same instant: back-to-back calls on one
	// connection are not concurrent.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return cmpInt64(a.at, b.at)
		}
		return a.delta - b.delta
	})
	best, n := 0, 0
	for _, e := range edges {
		n += e.delta
		best = max(best, n)
	}
	return best
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// worstErrorPercent returns the highest error percentage of a window with
// at least minRateCalls forwarded calls.
func worstErrorPercent(calls []call, width int64, buckets int) float64 {
	type counts struct{ calls, failed int }
	per := map[int64]*counts{}
	for _, c := range calls {
		k := floorDiv(c.end, width)
		if per[k] == nil {
			per[k] = &counts{}
		}
		per[k].calls++
		if c.failed {
			per[k].failed++
		}
	}
	keys := make([]int64, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	worst := 0.0
	var sum counts
	lo := 0
	for _, k := range keys {
		sum.calls += per[k].calls
		sum.failed += per[k].failed
		for keys[lo] <= k-int64(buckets) {
			sum.calls -= per[keys[lo]].calls
			sum.failed -= per[keys[lo]].failed
			lo++
		}
		if sum.calls >= minRateCalls {
			worst = max(worst, float64(sum.failed)*100/float64(sum.calls))
		}
	}
	return worst
}

// Enough reports whether p has the history for a proposal.
func (p *Point) Enough() bool { return p.Forwarded >= MinForwarded }

// TimeoutThreshold is the proposed timeoutThreshold: p99 × TimeoutFactor,
// rounded up to two significant digits (at least 1ms); ok is false
// without enough history.
func (p *Point) TimeoutThreshold() (time.Duration, bool) {
	if !p.Enough() {
		return 0, false
	}
	return roundUp(p.P99 * TimeoutFactor), true
}

// roundUp rounds d up to two significant digits of its unit (µs below
// 1ms is rounded up to 1ms): 93.4ms to 94ms, 1.234s to 1.3s.
func roundUp(d time.Duration) time.Duration {
	if d <= time.Millisecond {
		return time.Millisecond
	}
	step := time.Duration(1)
	for d/step >= 100 {
		step *= 10
	}
	step = max(step, time.Millisecond)
	return (d + step - 1) / step * step
}

// Proposal is one proposed key, its value as sds.yaml writes it and how it
// was derived.
type Proposal struct {
	Key, Value, Why string
}

// Proposals returns p's proposed keys, in sds.yaml's order; nil without
// enough history.
func (p *Point) Proposals(window time.Duration) []Proposal {
	timeout, ok := p.TimeoutThreshold()
	if !ok {
		return nil
	}
	w := window.String()
	count := max(MinTimeoutCount, 2*p.OverTimeout)
	rate := min(100, max(MinErrorRate, int(math.Ceil(3*p.WorstErrorPercent))))
	start := max(MinRateStart, p.PeakWindow/10)
	return []Proposal{
		{"timeoutThreshold", timeout.String(), fmt.Sprintf("p99 %s × %d", fmtDuration(p.P99), TimeoutFactor)},
		{"timeoutCountThreshold", strconv.Itoa(count), fmt.Sprintf("2 × the most calls over %s in one %s window (%d), at least %d", timeout, w, p.OverTimeout, MinTimeoutCount)},
		{"visitThreshold", strconv.Itoa(max(1, p.PeakForwarded) * Headroom), p.forwardedWhy(w)},
		{"concurrentThreshold", strconv.Itoa(max(MinConcurrent, p.PeakInFlight*Headroom)), fmt.Sprintf("the most calls in flight at once (%d) × %d, at least %d", p.PeakInFlight, Headroom, MinConcurrent)},
		{"exceptionRateThreshold", strconv.Itoa(rate), fmt.Sprintf("3 × the worst %s window's error rate (%.1f%%), at least %d%%", w, p.WorstErrorPercent, MinErrorRate)},
		{"exceptionRateStart", strconv.Itoa(start), fmt.Sprintf("a tenth of the most requests in one window (%d), at least %d", p.PeakWindow, MinRateStart)},
	}
}

// fmtDuration prints a latency to three significant digits: 12.3ms.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'g', 3, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'g', 3, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'g', 3, 64) + "s"
}

// WriteYAML writes the report as a points: block of sds.yaml, with its
// figures and the reading's counts as comments. source names the log. A
// point without a proposal (too few calls, or none in the log) has only
// comments, no key: a block applied whole then fails validation for a
// routed point it lacks, instead of turning that point's thresholds off.
func (rep *Report) WriteYAML(w io.Writer, source string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# sds-proxy suggest, from %s: %d requests", source, rep.Requests)
	if rep.Requests > 0 {
		fmt.Fprintf(&b, " from %s to %s (%s)", rep.First.UTC().Format(time.RFC3339), rep.Last.UTC().Format(time.RFC3339), rep.Last.Sub(rep.First).Round(time.Second))
	}
	fmt.Fprintf(&b, ", for a %s window in %d buckets.\n", rep.Window, rep.Buckets)
	fmt.Fprintf(&b, "# Lines read: %d; malformed: %d; other log lines skipped: %d.\n", rep.Lines, rep.Malformed, rep.Other)
	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "#   malformed %s\n", p)
	}
	b.WriteString("# Not proposed, as no history decides them: delayTime, retryInterval, downgradeRate, the token bucket, fallbacks.\n")
	b.WriteString("# Review each value before applying it; a quiet period proposes thresholds a busy one trips.\n")
	if len(rep.Points) == 0 {
		b.WriteString("# No access log line was found: turn on accessLog: true in sds.yaml and record some traffic.\n")
	} else {
		b.WriteString("points:\n")
	}
	for _, p := range rep.Points {
		rep.writePoint(&b, p)
	}
	for _, name := range rep.Unseen {
		fmt.Fprintf(&b, "  # %s: no request in the log; nothing proposed, keep its settings.\n", commentText(name))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePoint writes one point's figures and proposals.
func (rep *Report) writePoint(b *strings.Builder, p *Point) {
	summary := fmt.Sprintf("%d requests (%d forwarded, %d degraded); upstream latency", p.Requests, p.Forwarded, p.Degraded)
	if p.Forwarded > 0 {
		summary += fmt.Sprintf(" p50 %s p90 %s p99 %s max %s; errors %.1f%%", fmtDuration(p.P50), fmtDuration(p.P90), fmtDuration(p.P99),
			fmtDuration(p.Max), float64(p.Errors)*100/float64(p.Forwarded))
	} else {
		summary += " none (nothing forwarded)"
	}
	current, inConfig := rep.current[p.Name]
	if len(rep.current) > 0 && !inConfig {
		summary += "; not a point of the config"
	}
	props := p.Proposals(rep.Window)
	if props == nil {
		fmt.Fprintf(b, "  # %s: %s\n", commentText(p.Name), summary)
		fmt.Fprintf(b, "  #   %d forwarded calls are too few to propose thresholds (at least %d); nothing proposed, keep its settings.\n", p.Forwarded, MinForwarded)
		return
	}
	fmt.Fprintf(b, "  %s:\n", yamlKey(p.Name))
	fmt.Fprintf(b, "    # %s\n", summary)
	width := 0
	for _, pr := range props {
		width = max(width, len(pr.Key)+len(pr.Value)+2)
	}
	for _, pr := range props {
		why := pr.Why
		if inConfig {
			now, ok := current[pr.Key]
			if !ok {
				now = "off"
			}
			why += "; now " + commentText(now)
		}
		fmt.Fprintf(b, "    %-*s  # %s\n", width, pr.Key+": "+pr.Value, why)
	}
}

// commentText makes s safe inside a YAML comment: one line.
func commentText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// yamlKey returns name as a YAML mapping key: as it is when it is a
// valid point name (letters, digits, '.', '_', '-'), else double-quoted,
// so that a name read from a log cannot break the block.
func yamlKey(name string) string {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return strconv.Quote(name)
		}
	}
	return name
}

// forwardedWhy says where visitThreshold comes from, for a window written
// w: what the upstream served, × Headroom, and the degraded requests left
// out.
func (p *Point) forwardedWhy(w string) string {
	why := fmt.Sprintf("the most forwarded calls in one %s window (%d) × %d", w, p.PeakForwarded, Headroom)
	if p.Scaled {
		why = fmt.Sprintf("%d forwarded calls in %s, less than a %s window, scaled to one (%d) × %d", p.Forwarded, p.Span.Round(time.Millisecond), w, p.PeakForwarded, Headroom)
	}
	if p.Degraded > 0 {
		why += fmt.Sprintf(", not counting the %d degraded requests", p.Degraded)
	}
	return why
}

// peakWhy says where PeakWindow comes from, for a window written w.
func (p *Point) peakWhy(w string) string {
	if p.Scaled {
		return fmt.Sprintf("%d requests in %s, less than a %s window, scaled to one (%d)", p.Requests, p.Span.Round(time.Millisecond), w, p.PeakWindow)
	}
	return fmt.Sprintf("the most requests in one %s window (%d)", w, p.PeakWindow)
}
