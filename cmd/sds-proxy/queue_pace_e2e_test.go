package main_test

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestQueuePacesTokenBucket: with a queue, a token bucket paces a burst
// instead of refusing it: 15 calls at once on 10 tokens a second (the
// bucket holds 10) are all served, the last 5 a token's time apart;
// without the queue the 5 past the bucket are degraded.
func TestQueuePacesTokenBucket(t *testing.T) {
	e := setup(t, "10s", 10, `routes:
  - point: paced
    match: {host: paced.test}
  - point: refused
    match: {}
points:
  paced:
    tokenBucketGeneratedTokensInSecond: 10
    queue: {maxWait: 2s}
  refused:
    tokenBucketGeneratedTokensInSecond: 10
`)
	replies := e.burst("paced.test", 15)
	var took []time.Duration
	for _, r := range replies {
		if r.status != http.StatusOK {
			t.Errorf("paced call: %v, want 200", r)
		}
		took = append(took, r.took)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	// 10 tokens at start, then one every 100ms: the 15th is served
	// about 500ms after the first.
	if last := took[14]; last < 400*time.Millisecond || last > 1500*time.Millisecond {
		t.Errorf("the last paced call took %v, want about 500ms: one token every 100ms (all: %v)", last, took)
	}
	degraded := 0
	for _, r := range e.burst("refused.test", 15) {
		if strings.HasPrefix(r.degraded(), "token_bucket") {
			degraded++
		}
	}
	if degraded < 4 {
		t.Errorf("without a queue %d of 15 calls degraded, want 5: the setup no longer empties the bucket", degraded)
	}
}

// TestQueueKeptAcrossReload: requests waiting when the config is
// reloaded keep their places in the queue, and are served when the
// calls holding the slots end.
func TestQueueKeptAcrossReload(t *testing.T) {
	e := newEnv(t)
	e.config = e.dir + "/sds.yaml"
	body := func(maxWait string) string {
		return configHeader(e.upstream, "10s", 10) + pointRoute + "    concurrentThreshold: 2\n    queue: {maxWait: " + maxWait + "}\n"
	}
	e.write(e.config, body("5s"))
	e.proxy = startProxy(t, e.config)
	var wg sync.WaitGroup
	replies := make([]reply, 6)
	for i := range replies {
		wg.Go(func() { replies[i] = e.get("/api/held?sleep=600ms") })
	}
	if !eventually(wait, func() bool { v, _ := e.metric("sds_queue_length", "point", "p"); return v == 4 }) {
		t.Fatal("4 requests did not come to wait behind the 2 slots")
	}
	from := e.proxy.stdout.mark()
	e.write(e.config, body("4s"))
	e.proxy.waitLog(t, from, wait, msgIs("config reloaded"))
	wg.Wait()
	for _, r := range replies {
		if r.status != http.StatusOK {
			t.Errorf("a call waiting across the reload: %v, want 200", r)
		}
	}
}
