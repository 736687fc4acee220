package main_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// queueConfig routes /api/ by host to two points on a service of 4
// workers of 50ms (sds-upstream's /api/queue): "queued" waits at its
// limit of 4 calls, critical.test and sheddable.test with their
// priorities; "immediate", host immediate.test, degrades at once, as
// before queues.
const queueConfig = `routes:
  - point: queued
    match: {host: critical.test}
    priority: critical
  - point: queued
    match: {host: sheddable.test}
    priority: sheddable
  - point: immediate
    match: {host: immediate.test}
  - point: queued
    match: {}
accessLog: true
points:
  queued:
    concurrentThreshold: 4
    queue: {maxWait: 3s}
  immediate:
    concurrentThreshold: 4
`

// startQueueEnv starts a proxy on queueConfig in front of a service of 4
// workers of 50ms.
func startQueueEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	if r := e.getURL(e.upstream + "/_control?queueCapacity=4&queueService=50ms"); r.status != http.StatusOK {
		t.Fatalf("setting the upstream's workers: %v", r)
	}
	e.config = e.dir + "/sds.yaml"
	e.write(e.config, configHeader(e.upstream, "10s", 10)+queueConfig)
	e.proxy = startProxy(t, e.config)
	return e
}

// burst sends n GETs of /api/queue with host at once and returns the
// replies; a transport error fails the test.
func (e *env) burst(host string, n int) []reply {
	e.t.Helper()
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", e.proxy.url+"/api/queue", nil)
			req.Host = host
			r, err := e.do(req)
			if err != nil {
				e.t.Errorf("GET %s/api/queue: %v", host, err)
			}
			replies[i] = r
		})
	}
	wg.Wait()
	return replies
}

// TestQueueServesBurst: a burst of 20 calls on a point of 4 slots is
// served whole when it may wait, where without a queue 16 of them are
// degraded though a slot frees 50ms later.
func TestQueueServesBurst(t *testing.T) {
	e := startQueueEnv(t)
	degraded := func(rs []reply) (n int) {
		for _, r := range rs {
			if r.degraded() != "" {
				n++
			}
		}
		return n
	}
	queued := e.burst("queue.test", 20)
	for _, r := range queued {
		if r.status != http.StatusOK {
			t.Errorf("a burst call through the queue: %v, want 200", r)
		}
	}
	if n := degraded(e.burst("immediate.test", 20)); n < 10 {
		t.Errorf("without a queue %d of 20 burst calls degraded, want most: the setup no longer overloads", n)
	}
	e.metricIs(0, "sds_degraded_requests_total", "point", "queued")
}

// TestQueueCriticalThroughFlood: while sheddable calls flood the point
// at about 5 times its capacity, every critical call is served, and the
// sheddable ones the queue gave up on are degraded after waiting.
func TestQueueCriticalThroughFlood(t *testing.T) {
	e := startQueueEnv(t)
	var wg sync.WaitGroup
	floodDone := make(chan struct{})
	var flood []reply
	var mu sync.Mutex
	wg.Go(func() {
		defer close(floodDone)
		rounds := time.NewTicker(200 * time.Millisecond)
		defer rounds.Stop()
		for i := range 6 { // 6 rounds of 70 at once, 200ms apart: ~350/s for 1.2s
			if i > 0 {
				<-rounds.C
			}
			wg.Go(func() {
				rs := e.burst("sheddable.test", 70)
				mu.Lock()
				flood = append(flood, rs...)
				mu.Unlock()
			})
		}
	})
	var critical []reply
	pace := time.NewTicker(100 * time.Millisecond)
	defer pace.Stop()
	for range 10 {
		<-pace.C
		critical = append(critical, e.burst("critical.test", 3)...)
	}
	<-floodDone
	wg.Wait()
	for _, r := range critical {
		if r.status != http.StatusOK || r.took > time.Second {
			t.Errorf("critical call during the flood: %v in %v, want 200 within 1s", r, r.took)
		}
	}
	served, waited := 0, 0
	for _, r := range flood {
		switch {
		case r.status == http.StatusOK:
			served++
		case strings.Contains(r.degraded(), "concurrent; point=queued") && strings.Contains(r.degraded(), "; waited="):
			waited++
		default:
			t.Errorf("sheddable call: %v, want 200 or degraded after waiting", r)
		}
	}
	if served == 0 || waited == 0 {
		t.Errorf("of %d sheddable calls %d served, %d degraded after waiting; want both", len(flood), served, waited)
	}
	t.Logf("critical: %d served; sheddable: %d served, %d degraded after waiting", len(critical), served, waited)
	checkQueueSeen(t, e, waited)
}

// checkQueueSeen checks, after a flood of which waited calls were
// degraded after waiting, that the metrics and /status show the queue:
// admitted waits, at least waited shed or timed out, an empty queue
// again, and the settings of queueConfig with their defaults.
func checkQueueSeen(t *testing.T, e *env, waited int) {
	t.Helper()
	count := func(outcome string) float64 {
		n, _ := e.metric("sds_queue_wait_seconds_count", "point", "queued", "outcome", outcome)
		return n
	}
	if n := count("admitted"); n <= 0 {
		t.Errorf("sds_queue_wait_seconds_count{outcome=admitted}: got %v, want > 0", n)
	}
	if n := count("shed") + count("timeout"); n < float64(waited) {
		t.Errorf("sds_queue_wait_seconds_count{outcome=shed|timeout}: got %v, want >= %d (degraded after waiting)", n, waited)
	}
	e.metricIs(0, "sds_queue_length", "point", "queued")
	if _, ok := e.metric("sds_queue_length", "point", "immediate"); ok {
		t.Error("sds_queue_length of the point without a queue: present, want absent")
	}
	q := e.point("queued").Queue
	if q == nil || q.Length != 0 || q.MaxWait != "3s" || q.Interval != "6s" || q.MaxLength != 1000 {
		t.Fatalf("/status queue of queued: got %+v, want 0 waiting, maxWait 3s, interval 6s, maxLength 1000", q)
	}
	// No target is set: it follows the upstream's 50ms calls.
	if d, err := time.ParseDuration(q.Target); err != nil || d < 5*time.Millisecond || d > 3*time.Second {
		t.Errorf("/status queue target: got %q, want a duration from 5ms to maxWait", q.Target)
	}
	if q := e.point("immediate").Queue; q != nil {
		t.Errorf("/status queue of immediate: got %+v, want none", q)
	}
}

// TestQueueClientGone: a client that gives up while its request waits
// leaves the queue at once: counted canceled, logged 499, never sent
// upstream, and the slot it would have had goes to the next request.
func TestQueueClientGone(t *testing.T) {
	e := startQueueEnv(t)
	var hold sync.WaitGroup
	for range 4 { // the 4 slots, held for 1s
		hold.Go(func() {
			req, _ := http.NewRequest("GET", e.proxy.url+"/api/held?sleep=1s", nil)
			req.Host = "queue.test"
			e.do(req)
		})
	}
	held := func() bool {
		for _, s := range e.point("queued").Strategies {
			if s.Strategy == "concurrent" {
				return s.Count == 4
			}
		}
		return false
	}
	if !eventually(wait, held) {
		t.Fatalf("the 4 slots were not taken: %+v", e.point("queued").Strategies)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.proxy.url+"/api/gone", nil)
	req.Host = "queue.test"
	if _, err := e.client.Do(req); err == nil {
		t.Fatal("the waiting request was answered within 200ms, with 4 slots held for 1s")
	}
	if !eventually(wait, func() bool {
		n, _ := e.metric("sds_requests_total", "point", "queued", "result", "canceled")
		return n == 1
	}) {
		t.Errorf("canceled requests: want 1")
	}
	line := e.proxy.waitLog(t, 0, wait, func(l logEntry) bool { return l["path"] == "/api/gone" })
	if line["status"] != float64(499) || line["degraded"] != false {
		t.Errorf("access log %v, want status 499, not degraded", line)
	}
	hold.Wait()
	e.metricIs(4, "sds_requests_total", "point", "queued", "result", "proxied")
}
