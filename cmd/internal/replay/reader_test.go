package replay

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// t0 is the instant the test logs start at.
var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// logLine is an access line as cmd/sds-proxy's logger writes it (the
// fields in proxy.Handler.access's order, left-out ones omitted): point p,
// path path, arrived at arrived and written at written (ts, truncated to
// the millisecond), with extra (`,"key":value...`) before its end.
func logLine(p, path string, arrived, written time.Time, extra string) string {
	return fmt.Sprintf(`{"level":"info","ts":"%s","logger":"access","msg":"request","point":%q,"arrived":"%s","host":"shop.example","method":"GET","path":%q,"priority":"default","status":200,"strategy":"","degraded":false,"shadow":false,"upstream_latency":"1.5ms"%s}`,
		written.UTC().Format(tsLayout), p, arrived.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), path, extra)
}

// at is the access line of a request on point "p" that arrived at
// t0+arrived and was written at t0+written, with path path.
func at(path string, arrived, written time.Duration) string {
	return logLine("p", path, t0.Add(arrived), t0.Add(written), "")
}

// readAll reads every entry of log.
func readAll(t *testing.T, log string, opts ReaderOptions) ([]Entry, ReaderStats) {
	t.Helper()
	rd := NewReader(strings.NewReader(log), opts)
	var got []Entry
	for {
		e, ok := rd.Next()
		if !ok {
			break
		}
		got = append(got, e)
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil", err)
	}
	st := rd.Stats()
	if sum := st.Access + st.Other + st.Malformed + st.Older + st.Truncated + st.Long; sum != st.Lines {
		t.Errorf("access+other+malformed+older+truncated+long = %d, want lines %d (%+v)", sum, st.Lines, st)
	}
	if st.Access != len(got) {
		t.Errorf("Access = %d, want the %d entries returned", st.Access, len(got))
	}
	return got, st
}

func paths(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Path
	}
	return out
}

func TestReaderLines(t *testing.T) {
	longPath := "/" + strings.Repeat("x", 2000)
	long := logLine("p", longPath, t0, t0, "")
	cri := func(stream, tag, content string) string {
		return "2026-12-05T10:00:00.123456789Z " + stream + " " + tag + " " + content
	}
	split := at("/split", 0, time.Millisecond)
	for _, tc := range []struct {
		name  string
		log   string
		opts  ReaderOptions
		paths []string // of the entries returned, in order
		want  ReaderStats
	}{{
		name: "empty input",
		log:  "",
		want: ReaderStats{},
	}, {
		name: "blank lines and CRLF ends",
		log:  "\n" + at("/a", 0, 0) + "\r\n\r\n  \n" + at("/b", 1, 1) + "\n",
		// Blank lines are not counted, but they are numbered.
		paths: []string{"/a", "/b"},
		want:  ReaderStats{Lines: 2, Access: 2},
	}, {
		name:  "truncated last line",
		log:   at("/a", 0, 0) + "\n" + at("/b", 0, 0)[:80],
		paths: []string{"/a"},
		want:  ReaderStats{Lines: 2, Access: 1, Truncated: 1, Problems: []Problem{{2, "cut before its end (the log's last line, without a line end)"}}},
	}, {
		name:  "a whole last line without its end is read",
		log:   at("/a", 0, 0) + "\n" + at("/b", 0, 0),
		paths: []string{"/a", "/b"},
		want:  ReaderStats{Lines: 2, Access: 2},
	}, {
		name: "a line cut in the middle of the log is malformed, not truncated",
		log:  at("/a", 0, 0)[:80] + "\n" + at("/b", 0, 0) + "\n",
		// (a line without an end is truncated only at the log's end)
		paths: []string{"/b"},
		want:  ReaderStats{Lines: 2, Access: 1, Malformed: 1, Problems: []Problem{{1, "not a JSON log line"}}},
	}, {
		name: "lines from an older proxy (no arrived)",
		log: `{"level":"info","ts":"2026-12-05T10:00:00.001Z","logger":"access","msg":"request","point":"p","method":"GET","path":"/old","status":200,"strategy":"","degraded":false,"shadow":false,"upstream_latency":"1ms"}` + "\n" +
			`{"level":"info","ts":"2026-12-05T10:00:00.002Z","logger":"access","msg":"request","point":"p","method":"GET","path":"/old","status":200,"strategy":"","degraded":false,"shadow":false,"upstream_latency":"1ms"}` + "\n" +
			at("/new", 0, 3*time.Millisecond) + "\n",
		paths: []string{"/new"},
		want:  ReaderStats{Lines: 3, Access: 1, Older: 2, Problems: []Problem{{1, "an access line without arrived, from a proxy older than replay (this and every other such line skipped)"}}},
	}, {
		name: "the proxy's other lines are skipped",
		log: `{"level":"info","ts":"2026-12-05T10:00:00.000Z","msg":"serving","addr":":8080"}` + "\n" +
			at("/a", 0, 0) + "\n" +
			`{"level":"warn","ts":"2026-12-05T10:00:00.001Z","msg":"point tripped","point":"p","strategy":"visit","count":11,"threshold":10}` + "\n" +
			`{"level":"info","ts":"2026-12-05T10:00:00.001Z","logger":"access.x","msg":"request","point":"p"}` + "\n" +
			at("/b", 0, 0) + "\n",
		paths: []string{"/a", "/b"},
		want:  ReaderStats{Lines: 5, Access: 2, Other: 3},
	}, {
		name: "malformed lines",
		log: "not json at all\n" +
			"panic: runtime error: index out of range [3] with length 3\n" +
			`{"logger":"access","msg":"request","point":"p","arrived":"2026-12-05T10:00:00.000000Z",` + "\n" +
			`{"logger":"access","msg":"request","arrived":"2026-12-05T10:00:00.000000Z","method":"GET"}` + "\n" +
			`{"logger":"access","msg":"request","point":"p","arrived":"yesterday","method":"GET","path":"/","status":200}` + "\n" +
			`{"logger":"access","msg":"request","point":"p","arrived":"2026-12-05T10:00:00.000000Z","method":"GET","path":"/","status":"200"}` + "\n" +
			`{"logger":"access","msg":"request","point":"p","arrived":"2026-12-05T10:00:00.000000Z","method":"GET","path":"/","status":200,"upstream_latency":"fast"}` + "\n" +
			`{"logger":"access","msg":"request","point":"p","arrived":"2026-12-05T10:00:00.000000Z","method":"GET","path":"/","status":200,"waited":"-1s"}` + "\n" +
			`[1,2]` + "\n" +
			at("/ok", 0, 0) + "\n",
		paths: []string{"/ok"},
		want: ReaderStats{Lines: 10, Access: 1, Malformed: 9, Problems: []Problem{
			{1, "not a JSON log line"},
			{2, "not a JSON log line"},
			{3, "not a JSON log line"},
			{4, "an access line without point, path, status"},
			{5, "arrived is not an instant from 1970 to 2261"},
		}},
	}, {
		name: "a field of the wrong type",
		log:  `{"logger":"access","msg":"request","point":"p","arrived":"2026-12-05T10:00:00.000000Z","method":"GET","path":"/","status":"200"}` + "\n",
		want: ReaderStats{Lines: 1, Malformed: 1, Problems: []Problem{{1, "status is not an integer"}}},
	}, {
		name: "an instant out of range",
		log:  logLine("p", "/", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), t0, "") + "\n",
		want: ReaderStats{Lines: 1, Malformed: 1, Problems: []Problem{{1, "arrived is not an instant from 1970 to 2261"}}},
	}, {
		name: "kubectl logs --timestamps and CRI prefixes",
		log: "2026-12-05T10:00:00.123456789Z " + at("/kubectl", 0, 0) + "\n" +
			cri("stderr", "F", at("/cri", 1, 1)) + "\n" +
			cri("stdout", "F", "") + "\n" +
			cri("stderr", "P", split[:100]) + "\n" +
			cri("stderr", "P", split[100:200]) + "\n" +
			cri("stdout", "F", `{"level":"info","msg":"serving"}`) + "\n" +
			cri("stderr", "F", split[200:]) + "\n",
		paths: []string{"/kubectl", "/cri", "/split"},
		want:  ReaderStats{Lines: 4, Access: 3, Other: 1},
	}, {
		name:  "a CRI line cut in its partial records",
		log:   cri("stderr", "F", at("/a", 0, 0)) + "\n" + cri("stderr", "P", split[:100]) + "\n",
		paths: []string{"/a"},
		want:  ReaderStats{Lines: 2, Access: 1, Truncated: 1, Problems: []Problem{{2, "cut before its end (a CRI partial record without its last)"}}},
	}, {
		name: "a CRI line joined from its records is bounded",
		log: cri("stderr", "P", long[:1000]) + "\n" + cri("stderr", "P", long[1000:1900]) + "\n" + cri("stderr", "F", long[1900:]) + "\n" +
			cri("stderr", "F", at("/a", 0, 0)) + "\n",
		opts:  ReaderOptions{MaxLine: 1200},
		paths: []string{"/a"},
		want:  ReaderStats{Lines: 2, Access: 1, Long: 1, Problems: []Problem{{1, "longer than 1200 bytes"}}},
	}, {
		name:  "a very long line is skipped",
		log:   at("/a", 0, 0) + "\n" + long + "\n" + at("/b", 0, 0) + "\n" + long,
		opts:  ReaderOptions{MaxLine: 1000},
		paths: []string{"/a", "/b"},
		want:  ReaderStats{Lines: 4, Access: 2, Long: 2, Problems: []Problem{{2, "longer than 1000 bytes"}, {4, "longer than 1000 bytes"}}},
	}, {
		name:  "a line of exactly MaxLine bytes is read",
		log:   long + "\n" + long,
		opts:  ReaderOptions{MaxLine: len(long)},
		paths: []string{longPath, longPath},
		want:  ReaderStats{Lines: 2, Access: 2},
	}, {
		name: "a line longer than the read buffer",
		log:  logLine("p", "/"+strings.Repeat("y", 100<<10), t0, t0, "") + "\n" + at("/b", 0, 0) + "\n",
		opts: ReaderOptions{MaxLine: 200 << 10},
		// bufio's 64 KiB buffer: the line is read in pieces.
		paths: []string{"/" + strings.Repeat("y", 100<<10), "/b"},
		want:  ReaderStats{Lines: 2, Access: 2},
	}, {
		name: "lines out of arrival order within the horizon come out sorted",
		log: at("/fast", 2*time.Second, 2*time.Second+time.Millisecond) + "\n" +
			at("/slow", 0, 3*time.Second) + "\n" +
			at("/middle", time.Second, 4*time.Second) + "\n" +
			at("/later", 10*time.Second, 10*time.Second) + "\n",
		opts:  ReaderOptions{Horizon: 5 * time.Second},
		paths: []string{"/slow", "/middle", "/fast", "/later"},
		want:  ReaderStats{Lines: 4, Access: 4},
	}, {
		name: "ties in arrival keep input order",
		log: at("/1", time.Second, 3*time.Second) + "\n" + at("/2", time.Second, 3*time.Second) + "\n" +
			at("/0", 0, 4*time.Second) + "\n" + at("/3", time.Second, 4*time.Second) + "\n",
		paths: []string{"/0", "/1", "/2", "/3"},
		want:  ReaderStats{Lines: 4, Access: 4},
	}, {
		name: "a line past the horizon is returned late, and counted",
		log: at("/a", 2*time.Second, 2*time.Second) + "\n" +
			at("/b", 10*time.Second, 10*time.Second) + "\n" + // releases /a
			at("/slow", time.Second, 11*time.Second) + "\n" + // lasted 10s > horizon, arrived before /a: late
			at("/c", 11*time.Second, 11*time.Second) + "\n",
		opts:  ReaderOptions{Horizon: 5 * time.Second},
		paths: []string{"/a", "/slow", "/b", "/c"},
		want:  ReaderStats{Lines: 4, Access: 4, Late: 1},
	}, {
		name: "a line after a late one, before what was returned, is late too",
		log: at("/a", 2*time.Second, 2*time.Second) + "\n" +
			at("/b", 10*time.Second, 10*time.Second) + "\n" + // releases /a
			at("/late", 0, 11*time.Second) + "\n" + // returned next
			at("/later", time.Second, 11*time.Second) + "\n" + // after /late, but before /a
			at("/c", 11*time.Second, 11*time.Second) + "\n",
		opts:  ReaderOptions{Horizon: 5 * time.Second},
		paths: []string{"/a", "/late", "/later", "/b", "/c"},
		want:  ReaderStats{Lines: 5, Access: 5, Late: 2},
	}, {
		name: "MaxPending bounds the entries held; what it releases early makes later lines late",
		log: at("/1", time.Second, time.Second) + "\n" + at("/2", 2*time.Second, 2*time.Second) + "\n" +
			at("/3", 3*time.Second, 3*time.Second) + "\n" + at("/0", 0, 3*time.Second) + "\n",
		opts:  ReaderOptions{MaxPending: 2},
		paths: []string{"/1", "/0", "/2", "/3"},
		want:  ReaderStats{Lines: 4, Access: 4, Late: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := readAll(t, tc.log, tc.opts)
			if p := paths(got); !slices.Equal(p, tc.paths) {
				t.Errorf("paths = %q, want %q", p, tc.paths)
			}
			if !statsEqual(st, tc.want) || !slices.Equal(st.Problems, tc.want.Problems) {
				t.Errorf("stats = %+v, want %+v", st, tc.want)
			}
		})
	}
}

func statsEqual(a, b ReaderStats) bool {
	a.Problems, b.Problems = nil, nil
	return reflect.DeepEqual(a, b)
}

// An entry is held while the newest line's instant minus the horizon is at
// or before its arrival, and released once it is past it.
func TestReaderHorizonBoundary(t *testing.T) {
	log := at("/a", 0, 0) + "\n" +
		at("/b", 5*time.Second, 5*time.Second) + "\n" + // newest-horizon = /a's arrival: held
		at("/c", 5*time.Second+time.Millisecond, 5*time.Second+time.Millisecond) + "\n" + // past it: released
		at("/d", 6*time.Second, 6*time.Second) + "\n"
	rd := NewReader(strings.NewReader(log), ReaderOptions{Horizon: 5 * time.Second})
	e, ok := rd.Next()
	if !ok || e.Path != "/a" || rd.Stats().Lines != 3 {
		t.Errorf("first entry %q (%v) after %d lines, want /a after 3", e.Path, ok, rd.Stats().Lines)
	}
}

// The problems stop at five; the counts do not.
func TestReaderProblemsBounded(t *testing.T) {
	_, st := readAll(t, strings.Repeat("garbage\n", 20), ReaderOptions{})
	if st.Malformed != 20 || len(st.Problems) != 5 || st.Problems[4].Line != 5 {
		t.Errorf("malformed %d, problems %v; want 20 and lines 1 to 5", st.Malformed, st.Problems)
	}
}

// Entry.Line is the line's number in its input, blank lines counted.
func TestReaderLineNumbers(t *testing.T) {
	got, _ := readAll(t, "\n"+at("/a", 0, 0)+"\n\n"+at("/b", 0, 0)+"\n", ReaderOptions{})
	if len(got) != 2 || got[0].Line != 2 || got[1].Line != 4 {
		t.Errorf("entries %+v, want lines 2 and 4", got)
	}
}

// fixedClock is a zapcore.Clock stopped at an instant.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                         { return c.t }
func (c fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// newLogger is cmd/sds-proxy's newLogger (package main cannot be
// imported; keep the two alike): the production encoder, ISO 8601 times,
// string durations, never sampled; stopped at now.
func newLogger(w io.Writer, now time.Time) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeDuration = zapcore.StringDurationEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zap.InfoLevel)
	return zap.New(core, zap.WithClock(fixedClock{now}))
}

// Each field is read exactly from lines written as the proxy writes them:
// the fields of proxy.Handler.access, in its order, through a logger
// configured as cmd/sds-proxy's, named "access" as its access log is.
func TestReaderFields(t *testing.T) {
	const layout = "2006-01-02T15:04:05.000000Z07:00" // proxy's startLayout
	arrived := time.Date(2026, 12, 5, 10, 0, 0, 123456000, time.UTC)
	start := arrived.Add(250 * time.Microsecond)
	ended := start.Add(1500 * time.Microsecond)
	written := ended.Add(300 * time.Microsecond) // ts: 10:00:00.125 to the millisecond
	var log strings.Builder
	newLogger(&log, written).Info("serving", zap.String("addr", ":8080"))
	access := newLogger(&log, written).Named("access")
	skip := zap.Skip()
	access.Info("request", // forwarded, waited, per-key rules, failed
		zap.String("point", "api"),
		zap.String("arrived", arrived.Format(layout)),
		zap.String("host", "shop.example"),
		zap.String("method", "POST"),
		zap.String("path", "/orders/%2F42"),
		zap.String("priority", "critical"),
		zap.Int("status", 502),
		zap.String("strategy", ""),
		zap.Bool("degraded", false),
		zap.Bool("shadow", false),
		zap.Duration("upstream_latency", 1500*time.Microsecond),
		zap.String("start", start.Format(layout)),
		skip, // forced
		zap.Duration("waited", 250*time.Microsecond),
		skip, // key
		zap.Strings("keys", []string{"", "c2f1a9"}),
		skip, // pressure_test
		zap.String("outcome", "failed"),
		zap.String("error", "transport"),
		zap.String("ended", ended.Format(layout)),
		skip, // stale
	)
	newLogger(&log, written.Add(time.Second)).Named("access").Info("request", // degraded, forced, a pressure test, a kept answer
		zap.String("point", "api"),
		zap.String("arrived", arrived.Add(time.Second).Format(layout)),
		zap.String("host", "shop.example"),
		zap.String("method", "GET"),
		zap.String("path", "/"),
		zap.String("priority", "sheddable"),
		zap.Int("status", 429),
		zap.String("strategy", "pressure_test"),
		zap.Bool("degraded", true),
		zap.Bool("shadow", false),
		zap.Duration("upstream_latency", 0),
		skip, // start
		zap.String("forced", "open"),
		skip, // waited
		zap.String("key", "c2f1a9"),
		zap.Strings("keys", []string{"c2f1a9"}),
		zap.Bool("pressure_test", true),
		skip, skip, skip, // outcome, error, ended
		zap.Bool("stale", true),
	)
	newLogger(&log, written.Add(time.Second)).Info("point tripped", zap.String("point", "api"), zap.String("strategy", "visit"), zap.Int("count", 11), zap.Int("threshold", 10))

	got, st := readAll(t, log.String(), ReaderOptions{})
	if want := (ReaderStats{Lines: 4, Access: 2, Other: 2}); !statsEqual(st, want) || len(st.Problems) != 0 {
		t.Errorf("stats = %+v, want %+v", st, want)
	}
	want := []Entry{{
		Line:            2,
		Point:           "api",
		Arrived:         arrived,
		Written:         time.Date(2026, 12, 5, 10, 0, 0, 125000000, time.UTC),
		Host:            "shop.example",
		Method:          "POST",
		Path:            "/orders/%2F42",
		Priority:        "critical",
		Status:          502,
		Keys:            []string{"", "c2f1a9"},
		Start:           start,
		Ended:           ended,
		UpstreamLatency: 1500 * time.Microsecond,
		Outcome:         "failed",
		Error:           "transport",
		Waited:          250 * time.Microsecond,
	}, {
		Line:         3,
		Point:        "api",
		Arrived:      arrived.Add(time.Second),
		Written:      time.Date(2026, 12, 5, 10, 0, 1, 125000000, time.UTC),
		Host:         "shop.example",
		Method:       "GET",
		Path:         "/",
		Priority:     "sheddable",
		Status:       429,
		Strategy:     "pressure_test",
		Degraded:     true,
		Stale:        true,
		Forced:       "open",
		PressureTest: true,
		Keys:         []string{"c2f1a9"},
	}}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d:\n%s", len(got), len(want), log.String())
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("entry %d:\n got %+v\nwant %+v\nfrom %s", i, got[i], want[i], log.String())
		}
	}
	if !got[0].Forwarded() || got[1].Forwarded() {
		t.Errorf("Forwarded() = %v, %v; want true, false", got[0].Forwarded(), got[1].Forwarded())
	}
}

// Durations and instants in zap's other encodings: seconds, epoch seconds,
// ts with an offset.
func TestReaderEncodings(t *testing.T) {
	for _, tc := range []struct {
		name, fields    string
		written         time.Time
		latency, waited time.Duration
		arrived         time.Time
	}{
		{"seconds", `"ts":1796464800.5,"upstream_latency":0.0015,"waited":2`, time.Date(2026, 12, 5, 10, 0, 0, 500000000, time.UTC), 1500 * time.Microsecond, 2 * time.Second, t0},
		{"ISO 8601 with an offset", `"ts":"2026-12-05T11:00:00.250+0100","upstream_latency":"1m2.5s"`, time.Date(2026, 12, 5, 10, 0, 0, 250000000, time.UTC), 62500 * time.Millisecond, 0, t0},
		{"RFC 3339 with an offset", `"ts":"2026-12-05T11:00:00.25+01:00","arrived":"2026-12-05T10:59:59.999999+01:00"`, time.Date(2026, 12, 5, 10, 0, 0, 250000000, time.UTC), 0, 0, t0.Add(-time.Microsecond)},
		{"escaped strings", `"ts":"2026-12-05T10:00:00.250\u005a","upstream_latency":"1\u006ds"`, time.Date(2026, 12, 5, 10, 0, 0, 250000000, time.UTC), time.Millisecond, 0, t0},
		{"null and empty values are not logged", `"ts":null,"upstream_latency":null,"start":"","keys":null`, time.Time{}, 0, 0, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := `{"logger":"access","msg":"request","point":"p","arrived":"2026-12-05T10:00:00.000000Z","method":"GET","path":"/","status":200,` + tc.fields + "}\n"
			got, st := readAll(t, line, ReaderOptions{})
			if len(got) != 1 {
				t.Fatalf("%d entries (%+v), want 1", len(got), st)
			}
			e := got[0]
			if !e.Written.Equal(tc.written) || e.UpstreamLatency != tc.latency || e.Waited != tc.waited || !e.Arrived.Equal(tc.arrived) || !e.Start.IsZero() || e.Keys != nil {
				t.Errorf("got written %v, latency %v, waited %v, arrived %v, start %v, keys %#v; want %v, %v, %v, %v, zero, nil",
					e.Written, e.UpstreamLatency, e.Waited, e.Arrived, e.Start, e.Keys, tc.written, tc.latency, tc.waited, tc.arrived)
			}
			if e.Arrived.Location() != time.UTC || (!e.Written.IsZero() && e.Written.Location() != time.UTC) {
				t.Errorf("instants in %v and %v, want UTC", e.Arrived.Location(), e.Written.Location())
			}
		})
	}
}

// Memory is bounded by the lines within the horizon: a long log whose
// requests last less than it never holds more than those.
func TestReaderHoldsOnlyTheHorizon(t *testing.T) {
	var log strings.Builder
	for i := range 10000 {
		end := time.Duration(i) * 100 * time.Millisecond // 10 lines a second
		log.WriteString(at(fmt.Sprint("/", i), end-time.Duration(i%30)*time.Second, end) + "\n")
	}
	rd := NewReader(strings.NewReader(log.String()), ReaderOptions{Horizon: time.Minute})
	most, n := 0, 0
	var last time.Time
	for {
		e, ok := rd.Next()
		if !ok {
			break
		}
		n++
		if e.Arrived.Before(last) {
			t.Fatalf("line %d arrived at %v, before %v", e.Line, e.Arrived, last)
		}
		last = e.Arrived
		most = max(most, rd.held.len())
	}
	// A minute and a half of lines: the horizon, and up to 30s of latency.
	if n != 10000 || most > 900 || rd.Stats().Late != 0 {
		t.Errorf("%d entries, at most %d held, %d late; want 10000, at most 900, 0", n, most, rd.Stats().Late)
	}
}

// errReader fails after its content.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

// A read error ends the log: the entries read are returned, then Err says
// why.
func TestReaderReadError(t *testing.T) {
	boom := errors.New("disk gone")
	rd := NewReader(&errReader{strings.NewReader(at("/a", 0, 0) + "\n" + at("/b", 0, 0)[:50]), boom}, ReaderOptions{})
	var got []Entry
	for e, ok := rd.Next(); ok; e, ok = rd.Next() {
		got = append(got, e)
	}
	if len(got) != 1 || !errors.Is(rd.Err(), boom) {
		t.Errorf("%d entries, Err() = %v; want 1, %v", len(got), rd.Err(), boom)
	}
	if _, ok := rd.Next(); ok {
		t.Error("Next after the end returned an entry")
	}
}

// The strings shared among entries are bounded: a log of ever new hosts
// does not grow the reader's table past maxInterned, and every entry
// keeps its own.
func TestReaderInternedBounded(t *testing.T) {
	var log strings.Builder
	for i := range 2 * maxInterned {
		log.WriteString(strings.Replace(at("/", 0, 0), `"shop.example"`, fmt.Sprintf(`"h%d.example"`, i), 1) + "\n")
	}
	rd := NewReader(strings.NewReader(log.String()), ReaderOptions{})
	for i := 0; ; i++ {
		e, ok := rd.Next()
		if !ok {
			break
		}
		if want := fmt.Sprintf("h%d.example", i); e.Host != want {
			t.Fatalf("entry %d: host %q, want %q", i, e.Host, want)
		}
	}
	if len(rd.interned) > maxInterned {
		t.Errorf("%d strings interned, want at most %d", len(rd.interned), maxInterned)
	}
}
