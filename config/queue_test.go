package config

import (
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

func TestQueueProblems(t *testing.T) {
	checkProblemCases(t, []problemCase{
		{"queue with defaults", withPoint("concurrentThreshold: 4\nqueue: {}"), nil},
		{"queue at the adaptive limit", withPoint("adaptiveConcurrency: {}\nqueue: {maxWait: 2s}"), nil},
		{"queue pacing a token bucket", withPoint("tokenBucketGeneratedTokensInSecond: 10\nqueue: {}"), nil},
		{"queue with no limit", withPoint("visitThreshold: 10\nqueue: {}"), []string{`8:5: queue is set but point "p" has no limit to wait at (concurrentThreshold, adaptiveConcurrency or tokenBucketGeneratedTokensInSecond)`}},
		{"maxWait past a minute", withPoint("concurrentThreshold: 4\nqueue: {maxWait: 2m}"), []string{"8:22: queue.maxWait: 2m0s is not from 1ms to 1m0s"}},
		{"target past maxWait", withPoint("concurrentThreshold: 4\nqueue: {maxWait: 100ms, target: 200ms}"), []string{"8:37: queue.target: 200ms is not from 1ms to maxWait 100ms"}},
		{"interval below target", withPoint("concurrentThreshold: 4\nqueue: {target: 200ms, interval: 50ms}"), []string{"8:38: queue.interval: 50ms is shorter than the target 200ms"}},
		{"zeros", withPoint("concurrentThreshold: 4\nqueue: {maxWait: 0, target: 0, interval: 0, maxLength: 0}"), []string{
			"8:22: queue.maxWait: write a wait of at least 1ms, such as 500ms instead of 0",
			"8:33: queue.target: write a duration of at least 1ms",
			"8:46: queue.interval: write a duration of at least the target",
			"8:60: queue.maxLength: write a length of at least 1",
		}},
		{"unknown key", withPoint("concurrentThreshold: 4\nqueue: {maxwait: 1s}"), []string{`8:13: unknown key "maxwait" in the queue of point "p"; did you mean "maxWait"?`}},
	})
}

func TestQueueDecodes(t *testing.T) {
	f, err := Parse("sds.yaml", []byte(withPoint("concurrentThreshold: 4\nqueue: {maxWait: 300ms, target: 20ms, interval: 1s, maxLength: 50}")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := limiter.Queue{On: true, MaxWait: 300 * time.Millisecond, Target: 20 * time.Millisecond, Interval: time.Second, MaxLength: 50}
	if got := f.Points[0].Queue; got != want {
		t.Errorf("queue %+v, want %+v", got, want)
	}
	f, err = Parse("sds.yaml", []byte(withPoint("concurrentThreshold: 4\nqueue: {}")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Points[0].Queue; got != (limiter.Queue{On: true}) {
		t.Errorf("queue: {} decodes to %+v, want on with its defaults left to the limiter", got)
	}
}
