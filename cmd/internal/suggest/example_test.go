package suggest_test

import (
	"os"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/suggest"
)

// Example reads 60 access lines of one point, a call a second at 10ms
// with one at 30ms, and prints the proposed block.
func Example() {
	var log strings.Builder
	for i := range 60 {
		latency := 10 * time.Millisecond
		if i == 30 {
			latency = 30 * time.Millisecond
		}
		log.WriteString(accessLine("orders.read", t0.Add(time.Duration(i)*time.Second), 200, false, latency) + "\n")
	}
	rep, err := suggest.Read(strings.NewReader(log.String()), suggest.Options{Window: 10 * time.Second, Buckets: 10})
	if err != nil {
		panic(err)
	}
	rep.WriteYAML(os.Stdout, "proxy.log")
	// Output:
	// # sds-proxy suggest, from proxy.log: 60 requests from 2026-12-01T08:00:00Z to 2026-12-01T08:00:59Z (59s), for a 10s window in 10 buckets.
	// # Lines read: 60; malformed: 0; other log lines skipped: 0.
	// # Not proposed, as no history decides them: delayTime, retryInterval, downgradeRate, the token bucket, fallbacks.
	// # Review each value before applying it; a quiet period proposes thresholds a busy one trips.
	// points:
	//   orders.read:
	//     # 60 requests (60 forwarded, 0 degraded); upstream latency p50 10ms p90 10ms p99 30ms max 30ms; errors 0.0%
	//     timeoutThreshold: 90ms      # p99 30ms × 3
	//     timeoutCountThreshold: 5    # 2 × the most calls over 90ms in one 10s window (0), at least 5
	//     visitThreshold: 20          # the most forwarded calls in one 10s window (10) × 2
	//     concurrentThreshold: 4      # the most calls in flight at once (1) × 2, at least 4
	//     exceptionRateThreshold: 10  # 3 × the worst 10s window's error rate (0.0%), at least 10%
	//     exceptionRateStart: 10      # a tenth of the most requests in one window (10), at least 10
}
