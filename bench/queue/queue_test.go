package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func testOptions(t *testing.T, args ...string) options {
	t.Helper()
	o, err := parseFlags(args, nil)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return o
}

func TestParseRungs(t *testing.T) {
	for _, tc := range []struct {
		in       string
		multiple float64
		bursts   bool
		ok       bool
	}{
		{"2x", 2, false, true},
		{"0.8x-bursts", 0.8, true, true},
		{"0.6x-bursts", 0.6, true, true}, // all of the mean in the bursts
		{"0.5x-bursts", 0, false, false}, // less than the bursts alone
		{"3x-bursts", 3, true, true},
		{"3.1x-bursts", 0, false, false},
		{"50x", 50, false, true},
		{"51x", 0, false, false},
		{"0x", 0, false, false},
		{"2", 0, false, false},
		{"x", 0, false, false},
		{"2y", 0, false, false},
	} {
		rs, err := parseRungs(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("parseRungs(%q): error %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && (rs[0].multiple != tc.multiple || rs[0].bursts != tc.bursts) {
			t.Errorf("parseRungs(%q) = %+v, want multiple %v bursts %v", tc.in, rs[0], tc.multiple, tc.bursts)
		}
	}
}

// TestScheduleRates checks the mean rate, the bursts' share and the class
// mix of long schedules (about 100,000 arrivals each, so within 2%).
func TestScheduleRates(t *testing.T) {
	o := testOptions(t, "-duration", "10m", "-warmup", "0s")
	for _, tc := range []struct {
		rung      string
		inBursts  float64 // of the arrivals, due in the first 200ms of a second
		tolerance float64
	}{
		{"2x", 0.2, 0.02},
		{"0.8x-bursts", 3 * 0.2 / 0.8, 0.02},
	} {
		rs, _ := parseRungs(tc.rung)
		sched := schedule(rs[0], o, 0)
		want := rs[0].multiple * o.capacity() * o.duration.Seconds()
		if got := float64(len(sched)); math.Abs(got/want-1) > tc.tolerance {
			t.Errorf("%s: %v arrivals, want %v", tc.rung, got, want)
		}
		var burst int
		var byClass [len(classes) + 1]int
		for i, a := range sched {
			if i > 0 && a.at < sched[i-1].at {
				t.Fatalf("%s: arrival %d at %v before %v", tc.rung, i, a.at, sched[i-1].at)
			}
			if a.at%burstPeriod < burstLength {
				burst++
			}
			byClass[a.class]++
		}
		if got := float64(burst) / float64(len(sched)); math.Abs(got-tc.inBursts) > tc.tolerance {
			t.Errorf("%s: %.3f of the arrivals in the bursts' time, want %.3f", tc.rung, got, tc.inBursts)
		}
		for _, c := range classes {
			if got := float64(byClass[c]) / float64(len(sched)) * 100; math.Abs(got-c.percent()) > 1 {
				t.Errorf("%s: %.1f%% %s, want %v%%", tc.rung, got, c.name(), c.percent())
			}
		}
	}
}

func TestScheduleSameForEverySetup(t *testing.T) {
	o := testOptions(t, "-duration", "5s", "-warmup", "1s")
	a, b := schedule(o.rungs[1], o, 1), schedule(o.rungs[1], o, 1)
	if len(a) != len(b) || a[len(a)/2] != b[len(b)/2] {
		t.Errorf("two schedules of one rung differ")
	}
	if c := schedule(o.rungs[1], o, 2); len(c) == len(a) && c[len(c)/2] == a[len(a)/2] {
		t.Errorf("two rungs' schedules are the same")
	}
}

func TestSummarize(t *testing.T) {
	o := testOptions(t, "-duration", "2s", "-warmup", "1s", "-slo", "1s")
	ms := time.Millisecond
	sched := []arrival{
		{500 * ms, critical},   // in the warmup: good
		{1000 * ms, critical},  // good, at the SLO
		{1100 * ms, critical},  // late
		{1200 * ms, normal},    // degraded, though 200
		{1300 * ms, normal},    // failed: no answer
		{1400 * ms, sheddable}, // failed: 500
		{1500 * ms, sheddable}, // client-dropped
	}
	recs := []record{
		{status: 200, latency: 40 * ms},
		{status: 200, latency: 1000 * ms},
		{status: 200, latency: 1001 * ms},
		{status: 200, degraded: true, latency: ms},
		{latency: 2000 * ms},
		{status: 500, latency: 60 * ms},
		{dropped: true},
	}
	w := summarize(sched, recs, o.warmup, o.warmup+o.duration, o)
	want := tally{Offered: 6, ClientDropped: 1, Sent: 5, Good: 1, ServedPercent: 20, Degraded: 1, Late: 1, Failed: 2, P50Seconds: 1, P99Seconds: 1}
	if w.Total != want {
		t.Errorf("steady total = %+v, want %+v", w.Total, want)
	}
	if got := w.Classes["critical"]; got.Good != 1 || got.Late != 1 || got.Sent != 2 {
		t.Errorf("steady critical = %+v, want 1 good, 1 late of 2", got)
	}
	if w.GoodputPerSecond != 0.5 || w.CapacityPercent != 0.5/80*100 {
		t.Errorf("goodput %v/s, %v%% of capacity; want 0.5/s, %v%%", w.GoodputPerSecond, w.CapacityPercent, 0.5/80*100)
	}
	if all := summarize(sched, recs, 0, o.warmup+o.duration, o); all.Total.Good != 2 || all.Total.P50Seconds != 0.04 {
		t.Errorf("all: %d good, p50 %vs; want 2, 0.04s", all.Total.Good, all.Total.P50Seconds)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.01, 1}, {0.2, 1}, {0.21, 2}, {0.5, 3}, {0.99, 5}, {1, 5}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of none = %v, want 0", got)
	}
}

func TestProxyConfig(t *testing.T) {
	o := testOptions(t, "-queue-yaml", "{maxWait: 500ms}")
	want := map[string]string{
		"none":       "",
		"concurrent": "    concurrentThreshold: 4\n",
		"adaptive":   "    adaptiveConcurrency: {}\n",
		"queue":      "    concurrentThreshold: 4\n    queue: {maxWait: 500ms}\n",
	}
	for _, s := range o.setups {
		got := string(proxyConfig(s, "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"))
		if !strings.HasSuffix(got, "points:\n  api:\n"+want[s.name]) {
			t.Errorf("%s: config ends\n%s\nwant the point\n%s", s.name, got, want[s.name])
		}
		if strings.Contains(got, "sheddableShare") {
			t.Errorf("%s: config sets sheddableShare", s.name)
		}
	}
	if _, err := parseFlags([]string{"-queue-yaml", "{}\nlisten: 0.0.0.0:80"}, nil); err == nil {
		t.Errorf("a -queue-yaml of two lines: no error")
	}
}
