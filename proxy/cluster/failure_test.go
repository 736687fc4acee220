package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/internal/testclock"
	"github.com/sds-proxy/sds-proxy/proxy/cluster/clustertest"
)

// newHandClient returns a Client of opts whose loop does not run: the test
// makes each round, on clock's instants. It closes when the test ends.
func newHandClient(t *testing.T, opts Options) (*Client, *testclock.Clock) {
	t.Helper()
	clock := testclock.New(time.Now())
	opts.Logger, opts.Now = zap.NewNop(), clock.Now
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, clock
}

// takeAll takes tokens at now until one is refused, and returns how many.
func takeAll(b *Bucket, now time.Time) int {
	n := 0
	for n < 1000 && b.Take(now) {
		n++
	}
	return n
}

// TestOutageCharged: through a Redis outage and its return, a proxy
// spends no more than the budget. The share starts from the lease in
// hand, not full; what the share spends is charged when Redis answers
// again, at most the share's size, so a Redis restarted empty (every
// bucket full) grants no second burst.
func TestOutageCharged(t *testing.T) {
	t.Parallel()
	srv := clustertest.Start(t)
	// 1 token a second (the test's instants add a known few), size 100,
	// two replicas: a share of 0.5 a second holding 50.
	c, clock := newHandClient(t, Options{Addresses: []string{srv.Addr}, Replicas: 2})
	ctx := context.Background()
	b := c.Bucket("orders", 1, 100)
	c.Use([]*Bucket{b})
	b.demand = 100 // two ticks of it: a lease of 20
	c.round(ctx, true)
	if st := b.Status(clock.Now()); !st.Shared || st.Lease != 20 || st.Level != 80 {
		t.Fatalf("after the first round: %+v, want shared, lease 20, level 80", st)
	}
	for range 5 {
		b.Take(clock.Now())
	}

	// The next call is due once the lease is half its age: it fails. The
	// demand stays above the lease (averaged at the tick with the 5 taken
	// over 1.1 s: about 100), so the call gives nothing back.
	srv.Kill()
	b.demand = 200
	failed := clock.Add(LeaseTTL/2 + Tick)
	c.round(ctx, true)
	if st := c.Status(failed); st.Up || st.Buckets[0].Shared {
		t.Fatalf("after a failed round: %+v, want down, on the share", st)
	}
	// The share starts with the lease's 15 unspent tokens, not its 50.
	if got := takeAll(b, failed); got != 15 {
		t.Errorf("the share at the failure gave %d tokens, want the lease's 15 left", got)
	}
	// 200 s later the share is full again: 50 more, owed; a retry fails
	// and owes them still.
	later := clock.Add(200 * time.Second)
	if got := takeAll(b, later); got != 50 {
		t.Errorf("the share 200 s later gave %d, want its size 50", got)
	}
	c.round(ctx, true)
	if got := b.owed.Load(); got != 50 {
		t.Errorf("owed after a failed retry: %d, want the 50 the share spent beyond the lease", got)
	}

	// Restarted empty, Redis has the bucket full: 100. The return charges
	// the share's 50, at most its size, so the fleet is not granted a
	// second burst.
	srv.Restart()
	back := clock.Add(retryEvery)
	c.round(ctx, true)
	st := b.Status(back)
	if !st.Shared {
		t.Fatalf("after Redis answered again: %+v, want shared", st)
	}
	if got := st.Level + st.Lease; got != 50 {
		t.Errorf("level %d + lease %d = %d after the return, want 100 - 50 charged", st.Level, st.Lease, got)
	}
	if got := b.owed.Load(); got != 0 {
		t.Errorf("owed after the return: %d, want 0", got)
	}
}

// TestOutageChargeCapped: a proxy on its share for longer than the share
// takes to fill charges at most the share's size on its return: what it
// spent beyond was the refill the shared bucket also had, and a long
// outage is not paid for afterwards.
func TestOutageChargeCapped(t *testing.T) {
	t.Parallel()
	srv := clustertest.Start(t)
	c, clock := newHandClient(t, Options{Addresses: []string{srv.Addr}, Replicas: 4})
	ctx := context.Background()
	b := c.Bucket("orders", 100, 100) // a share of 25 a second holding 25
	c.Use([]*Bucket{b})
	c.round(ctx, true)
	srv.Kill()
	start := clock.Add(LeaseTTL/2 + Tick) // the next call is due: it fails
	c.round(ctx, true)
	spent := 0
	for i := range 101 { // 10 s at 25 a second from the lease's 1 token
		spent += takeAll(b, start.Add(time.Duration(i)*100*time.Millisecond))
	}
	if spent != 251 {
		t.Errorf("the share spent %d in 10 s, want 251 (the lease's 1 token, then 25 a second)", spent)
	}
	srv.Restart()
	clock.Add(20 * time.Second)
	c.round(ctx, true)
	st := b.Status(clock.Now())
	if !st.Shared || st.Level+st.Lease != 75 {
		t.Errorf("after the return: %+v, want shared with level + lease = 100 - 25 (the charge capped at the share's size)", st)
	}
}

// TestClusterNodeDown: on a Redis Cluster, one master down sends to their
// shares only the buckets whose keys it holds; a bucket on another node
// stays shared, and the failure is counted as refused.
func TestClusterNodeDown(t *testing.T) {
	t.Parallel()
	nodes := clustertest.StartCluster(t, 3, 0)
	reg := prometheus.NewRegistry()
	c, clock := newHandClient(t, Options{Addresses: []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}, Registerer: reg})
	ctx := context.Background()
	// Two points whose keys two different masters hold.
	var onA, onB *Bucket
	var ownerA *clustertest.Server
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		b := c.Bucket(name, 100, 100)
		switch owner := clustertest.Owner(nodes, b.key); {
		case onA == nil:
			onA, ownerA = b, owner
		case owner != ownerA:
			onB = b
		}
		if onB != nil {
			break
		}
	}
	if onB == nil {
		t.Fatal("no two points on two masters")
	}
	c.Use([]*Bucket{onA, onB})
	c.round(ctx, true)
	if !onA.Status(clock.Now()).Shared || !onB.Status(clock.Now()).Shared {
		t.Fatalf("before: %+v, want both shared", c.Status(clock.Now()))
	}
	ownerA.Kill()
	now := clock.Add(LeaseTTL/2 + Tick) // the next calls are due

	c.round(ctx, true)
	st := c.Status(now)
	if st.Up || st.Buckets[0].Shared || !st.Buckets[1].Shared {
		t.Errorf("with %s's master down: %+v, want down, %s on its share, %s still shared", onA.name, st, onA.name, onB.name)
	}
	if got := testutil.ToFloat64(c.m.errors.WithLabelValues("refused")); got != 1 {
		t.Errorf("refused errors: %v, want 1 (last error %q)", got, st.LastError)
	}
	if a, b := testutil.ToFloat64(c.m.shared.WithLabelValues(onA.name)), testutil.ToFloat64(c.m.shared.WithLabelValues(onB.name)); a != 0 || b != 1 {
		t.Errorf("sds_cluster_bucket_shared: %s %v, %s %v, want 0 and 1", onA.name, a, onB.name, b)
	}
}
