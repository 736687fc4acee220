package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
)

// FuzzValidRuns takes YAML text through Parse to running limiter points:
// no config that validates may then fail to build or panic, on a first
// load or on a reload from any other valid point. What validate accepts,
// the limiter runs.
func FuzzValidRuns(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	seeds = append(seeds, "../sds.yaml")
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	const head = "upstream: http://127.0.0.1:9000\nwindow: 2s\nbuckets: 4\nroutes: [{point: p, match: {}}]\npoints:\n  p:\n"
	for _, point := range []string{
		"visitThreshold: 0\ndelayTime: 1s\nretryInterval: 100ms",
		"tokenBucketGeneratedTokensInSecond: 1000000000\ntokenBucketSize: 3153600000",
		"tokenBucketGeneratedTokensInSecond: 2000000000",
		"tokenBucketGeneratedTokensInSecond: 1\ntokenBucketSize: 9000000000000000000",
		"timeoutThreshold: 1ms\ntimeoutCountThreshold: 1\nexceptionRateThreshold: 100\nexceptionRateStart: -3",
		"concurrentThreshold: 1\nexceptionThreshold: 1\ndowngradeRate: 50\nmode: shadow",
		"exceptionRateThreshold: 101\ndowngradeRate: -1\ndelayTime: -1",
	} {
		f.Add([]byte(head + "    " + strings.ReplaceAll(point, "\n", "\n    ") + "\n"))
	}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := config.Parse("sds.yaml", data, config.Options{})
		if err != nil {
			return
		}
		points := make([]*limiter.Point, len(file.Points))
		for i := range file.Points {
			cp := &file.Points[i]
			p, err := limiter.NewPoint(cp.Name, file.Settings(cp))
			if err != nil {
				t.Fatalf("point %s validates but the limiter refuses it: %v", cp.Name, err)
			}
			points[i] = p
			run(p, t0)
		}
		// A reload may give any point any other point's settings.
		for i, p := range points {
			other := &file.Points[(i+1)%len(points)]
			np, err := p.Reconfigure(file.Settings(other))
			if err != nil {
				t.Fatalf("point %s: reconfigure with %s's settings: %v", p.Name(), other.Name, err)
			}
			run(np, t0.Add(time.Minute))
		}
	})
}

// run sends a few requests through p around start: some fail, some time
// out, one is pressure-test traffic, and the clock crosses the window.
func run(p *limiter.Point, start time.Time) {
	var calls [4]limiter.Call
	now := start
	for i := range 24 {
		c := &calls[i%len(calls)]
		v := p.Enter(c, now, limiter.Request{PressureTest: i%7 == 3})
		if v.Allowed {
			if d := p.TimeoutThreshold(); d > 0 && i%3 == 0 {
				c.Timeout(now.Add(d))
			}
			outcome := []limiter.Outcome{limiter.OK, limiter.Failed, limiter.Canceled}[i%3]
			c.Exit(now.Add(time.Duration(i)*time.Millisecond), outcome)
		}
		now = now.Add(time.Duration(i*i) * 10 * time.Millisecond)
	}
	p.Snapshot(now)
	p.State(now)
}
