//go:build linux

package main_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConnectionStorm: many more connections than maxConnections, against
// a point with a token bucket. At the limit the proxy makes room by
// closing idle keep-alive connections first, then connections whose
// request has not arrived (a client slow to write, or one that never
// will), never one whose request waits to be read; with none to close, a
// newcomer waits for a place instead of being refused.
//
//   - Slow writers: 16 idle and 16 silent connections fill the limit of 32,
//     then 96 clients connect and, once all have connected, each sends its
//     request. The idle ones are closed for them; every client whose
//     connection was still open when it wrote is answered: 200, or the
//     token bucket's 429 fallback.
//   - Eager writers: 96 clients at once that send their request as soon
//     as they connect: every one is answered, none refused.
func TestConnectionStorm(t *testing.T) {
	t.Parallel()
	const limit = 32
	raiseNoFile(t, 1024)
	e := setup(t, "10s", 10, fmt.Sprintf(`maxConnections: %d
routes:
  - {point: all, match: {}}
points:
  all: {tokenBucketGeneratedTokensInSecond: 20, tokenBucketSize: 20}
`, limit))
	addr := strings.TrimPrefix(e.proxy.url, "http://")

	var idle, silent []*rawConn
	defer func() {
		for _, c := range append(idle, silent...) {
			c.Close()
		}
	}()
	for range limit / 2 {
		c, err := dialRaw(addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		if status, err := c.roundTrip("/"); err != nil || status != 200 {
			t.Fatalf("an idle connection's first request: %d, %v", status, err)
		}
	}
	for range limit / 2 {
		c, err := dialRaw(addr)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	if !eventually(wait, func() bool { n, err := connectionsOpen(e.proxy.admin); return err == nil && n == limit }) {
		n, err := connectionsOpen(e.proxy.admin)
		t.Fatalf("open connections: got %v (%v), want %d", n, err, limit)
	}

	// Slow writers.
	const storm = 96
	conns := make([]*rawConn, storm)
	var dialed sync.WaitGroup
	for i := range storm {
		dialed.Go(func() {
			c, err := dialRaw(addr)
			if err != nil {
				t.Errorf("slow writer %d: %v", i, err)
				return
			}
			conns[i] = c
		})
	}
	dialed.Wait()
	var (
		mu                    sync.Mutex
		answered, closedFirst int
		statuses              = map[int]int{}
	)
	var wrote sync.WaitGroup
	for i, c := range conns {
		if c == nil {
			continue
		}
		defer c.Close()
		wrote.Go(func() {
			if c.closedByPeer(t) {
				mu.Lock()
				closedFirst++ // closed before its request was sent: it never reached the proxy
				mu.Unlock()
				return
			}
			status, err := c.roundTrip("/slow")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("slow writer %d: open when it wrote, then %v; want an answer", i, err)
				return
			}
			answered++
			statuses[status]++
		})
	}
	wrote.Wait()
	for i, c := range idle {
		if !c.closedByPeer(t) {
			t.Errorf("idle connection %d is open, want it closed for the newcomers", i)
		}
	}
	// The silent ones go once they are past their FirstRequestGrace and
	// have waited longest; a storm shorter than that grace may leave them
	// (proxy/connlimit's TestAdmit holds that order).
	reaped := 0
	for _, c := range silent {
		if c.closedByPeer(t) {
			reaped++
		}
	}
	if answered < limit || statuses[200]+statuses[429] != answered {
		t.Errorf("slow writers: %d answered (%v), %d closed before writing; want at least %d answered, each 200 or 429", answered, statuses, closedFirst, limit)
	}
	t.Logf("slow writers: %d answered %v, %d closed before they wrote; %d of %d silent connections closed", answered, statuses, closedFirst, reaped, len(silent))

	// Eager writers.
	start := time.Now()
	var eager sync.WaitGroup
	statuses = map[int]int{}
	var slowest time.Duration
	for i := range storm {
		eager.Go(func() {
			c, err := dialRaw(addr)
			if err != nil {
				t.Errorf("eager writer %d: %v", i, err)
				return
			}
			defer c.Close()
			began := time.Now()
			status, err := c.roundTrip("/eager")
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, time.Since(began))
			if err != nil {
				t.Errorf("eager writer %d: %v, want an answer", i, err)
				return
			}
			statuses[status]++
		})
	}
	eager.Wait()
	if statuses[200]+statuses[429] != storm {
		t.Errorf("eager writers: got %v, want all %d answered 200 or 429", statuses, storm)
	}
	t.Logf("eager writers: %v in %v, the slowest answer %v", statuses, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	e.metricIs(0, "sds_connections_shed_total", "reason", "refused")
}
