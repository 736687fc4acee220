package config

import (
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// sheddableRoute is valid with its route of priority sheddable; point p's
// settings start at line 8, column 5.
var sheddableRoute = strings.Replace(valid, "    match: {}\n", "    match: {}\n    priority: sheddable\n", 1)

func withSheddablePoint(lines string) string {
	return sheddableRoute + strings.TrimPrefix(withPoint(lines), valid)
}

// TestProtectionDecoded: the keys of the recovery ramp, adaptive
// concurrency and priority shedding reach the limiter's settings.
func TestProtectionDecoded(t *testing.T) {
	f := mustParse(t, `upstream: http://127.0.0.1:9000
routes:
  - {point: p, match: {path: /c}, priority: critical}
  - {point: p, match: {path: /s}, priority: sheddable}
  - {point: p, match: {path: /d}, priority: default}
  - {point: p, match: {}}
points:
  p:
    visitThreshold: 100
    delayTime: 5s
    recoveryTime: 10s
    recoveryStart: 20
    sheddableShare: 60
    adaptiveConcurrency: {minLimit: 2, maxLimit: 50, interval: 50ms, tolerance: 10, minLatencyInterval: 30s}
`)
	var prios []limiter.Priority
	for _, r := range f.Routes {
		prios = append(prios, r.Priority)
	}
	if want := []limiter.Priority{limiter.PriorityCritical, limiter.PrioritySheddable, limiter.PriorityDefault, 0}; !equal(prios, want) {
		t.Errorf("priorities %v, want %v", prios, want)
	}
	p := f.Points[0]
	want := limiter.AdaptiveConcurrency{On: true, MinLimit: 2, MaxLimit: 50, Interval: 50 * time.Millisecond, Tolerance: limiter.At(10), MinLatencyInterval: 30 * time.Second}
	if p.RecoveryTime != 10*time.Second || p.RecoveryStart != limiter.At(20) || p.SheddableShare != limiter.At(60) || p.AdaptiveConcurrency != want {
		t.Errorf("point %+v", p.Policy)
	}
	if _, err := limiter.NewPoint("p", f.Settings(&p)); err != nil {
		t.Error(err)
	}
	// {} turns the adaptive limit on with its defaults.
	f = mustParse(t, withPoint("adaptiveConcurrency: {}"))
	if a := f.Points[0].AdaptiveConcurrency; a != (limiter.AdaptiveConcurrency{On: true}) {
		t.Errorf("adaptiveConcurrency: {} = %+v, want on with defaults", a)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestProtectionProblems: each rule, at its key's line and column.
func TestProtectionProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"ramp", withPoint("visitThreshold: 1\ndelayTime: 5s\nrecoveryTime: 10s\nrecoveryStart: 0"), nil},
		{"ramp without delay", withPoint("visitThreshold: 1\nrecoveryTime: 10s"), []string{`8:5: recoveryTime is set but delayTime is not`}},
		{"start without ramp", withPoint("visitThreshold: 1\ndelayTime: 5s\nrecoveryStart: 5"), []string{`9:5: recoveryStart is set but recoveryTime is not`}},
		{"start above 100", withPoint("visitThreshold: 1\ndelayTime: 5s\nrecoveryTime: 1s\nrecoveryStart: 101"), []string{`10:20: recoveryStart: 101 is not a percent from 0 to 100`}},
		{"negative ramp", withPoint("visitThreshold: 1\ndelayTime: 5s\nrecoveryTime: -2s"), []string{`9:19: recoveryTime: -2s is negative`}},
		{"bad priority", strings.Replace(valid, "    match: {}\n", "    match: {}\n    priority: urgent\n", 1) + "    visitThreshold: 1\n", []string{`5:15: priority: want critical, default or sheddable, got "urgent"`}},
		{"sheddable share", withSheddablePoint("visitThreshold: 10\nsheddableShare: 50"), nil},
		{"share without a sheddable route", withPoint("visitThreshold: 10\nsheddableShare: 50"), []string{`8:5: sheddableShare is set but no route of priority sheddable names point "p"`}},
		{"share without a count", withSheddablePoint("exceptionThreshold: 10\nsheddableShare: 50"), []string{`9:5: sheddableShare is set but point "p" has no count threshold`}},
		{"share above 100", withSheddablePoint("visitThreshold: 10\nsheddableShare: 120"), []string{`9:21: sheddableShare: 120 is not a percent from 0 to 100`}},
		{"adaptive", withPoint("adaptiveConcurrency: {minLimit: 1, maxLimit: 1}"), nil},
		{"adaptive min above max", withPoint("adaptiveConcurrency: {minLimit: 10, maxLimit: 5}"), []string{`7:37: adaptiveConcurrency.minLimit: 10 is above maxLimit 5`}},
		{"adaptive limit 0", withPoint("adaptiveConcurrency: {minLimit: 0}"), []string{`7:37: adaptiveConcurrency.minLimit: write a limit of at least 1`}},
		{"adaptive interval 0", withPoint("adaptiveConcurrency: {interval: 0s}"), []string{`7:37: adaptiveConcurrency.interval: write a duration of at least 1ms`}},
		{"adaptive max too high", withPoint("adaptiveConcurrency: {maxLimit: 2000000}"), []string{`7:37: adaptiveConcurrency.maxLimit: 2000000 is not a limit from 1 to 1048576`}},
		{"adaptive tolerance", withPoint("adaptiveConcurrency: {tolerance: 2000}"), []string{`7:38: adaptiveConcurrency.tolerance: 2000 is not a percent from 0 to 1000`}},
		{"adaptive unknown key", withPoint("adaptiveConcurrency: {minLimt: 3}"), []string{`7:27: unknown key "minLimt" in the adaptiveConcurrency of point "p"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, problemsOf(t, tc.src, Options{}), tc.want)
		})
	}
}

// TestSheddableWithoutCounts: a sheddable route on a point with no count
// threshold is legal but changes nothing: a warning.
func TestSheddableWithoutCounts(t *testing.T) {
	f, err := Parse("sds.yaml", []byte(withSheddablePoint("exceptionThreshold: 5")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].Msg, "routes of priority sheddable name it, but it has no count threshold") {
		t.Errorf("warnings %v, want one about the sheddable routes", f.Warnings)
	}
	f = mustParse(t, withSheddablePoint("visitThreshold: 5"))
	if len(f.Warnings) != 0 {
		t.Errorf("warnings %v with a visit threshold, want none", f.Warnings)
	}
}
