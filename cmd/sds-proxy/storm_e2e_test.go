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

	idle, silent := fillIdleAndSilent(t, addr, limit)
	if !eventually(wait, func() bool { n, err := connectionsOpen(e.proxy.admin); return err == nil && n == limit }) {
		n, err := connectionsOpen(e.proxy.admin)
		t.Fatalf("open connections: got %v (%v), want %d", n, err, limit)
	}

	// Slow writers.
	const storm = 96
	answered, closedFirst, statuses := slowWriters(t, addr, storm)
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
	statuses, slowest := eagerWriters(t, addr, storm)
	if statuses[200]+statuses[429] != storm {
		t.Errorf("eager writers: got %v, want all %d answered 200 or 429", statuses, storm)
	}
	t.Logf("eager writers: %v in %v, the slowest answer %v", statuses, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	e.metricIs(0, "sds_connections_shed_total", "reason", "refused")
}

// fillIdleAndSilent opens limit connections to addr: the first half each
// send a request and stay idle, the second half send nothing. They are
// closed when the test ends.
func fillIdleAndSilent(t *testing.T, addr string, limit int) (idle, silent []*rawConn) {
	t.Helper()
	t.Cleanup(func() {
		for _, c := range append(idle, silent...) {
			c.Close()
		}
	})
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
	return idle, silent
}

// slowWriters connects storm clients to addr and, once all have connected,
// has each send GET /slow. It counts the answers by status, and the
// connections the proxy closed before their request was sent; any other
// failure fails the test. The connections are closed when the test ends.
func slowWriters(t *testing.T, addr string, storm int) (answered, closedFirst int, statuses map[int]int) {
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
	var mu sync.Mutex
	statuses = map[int]int{}
	var wrote sync.WaitGroup
	for i, c := range conns {
		if c == nil {
			continue
		}
		t.Cleanup(func() { c.Close() })
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
	return answered, closedFirst, statuses
}

// eagerWriters has storm clients at once connect to addr and send GET
// /eager as soon as they are connected, and counts the answers by status;
// a client with no answer fails the test. It returns the longest a client
// waited for its answer too.
func eagerWriters(t *testing.T, addr string, storm int) (statuses map[int]int, slowest time.Duration) {
	var mu sync.Mutex
	var eager sync.WaitGroup
	statuses = map[int]int{}
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
	return statuses, slowest
}
