package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/proxy/cluster/clustertest"
)

// TestMain turns go-redis's own logger off, as sds-proxy's main does: it
// is a global of go-redis, the program's to set, and here the test binary
// is the program. Left on, a failing test's output would be buried under a
// line per failed dial.
func TestMain(m *testing.M) {
	redis.SetLogger(discardRedis{})
	os.Exit(m.Run())
}

type discardRedis struct{}

func (discardRedis) Printf(context.Context, string, ...any) {}

// newClient returns a Client of opts with a test logger, and runs it until
// the test ends.
func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; c.Close() })
	return c
}

// newStoppedClient returns a Client of the Redis at addr whose loop does
// not run: the test makes each call (round, or the script), and closes it
// when the test ends.
func newStoppedClient(t *testing.T, addr string) *Client {
	t.Helper()
	c, err := New(Options{Addresses: []string{addr}, Logger: zap.NewNop(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFor fails the test unless cond holds within d (clustertest.Eventually
// polls it).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !clustertest.Eventually(d, cond) {
		t.Fatalf("%s: not within %v", what, d)
	}
}

// TestLeaseScript runs the script's arithmetic against a real Redis: a
// grant never exceeds the level, credit spent is owed below 0, unused
// tokens come back up to size.
func TestLeaseScript(t *testing.T) {
	t.Parallel()
	c := newStoppedClient(t, clustertest.Start(t).Addr)
	ctx := context.Background()
	// 1 token per second: the few milliseconds between calls add less than
	// one token, which the level (rounded down) does not show. One
	// replica: its share is the whole rate, and its allowance never binds.
	for _, step := range []struct {
		name                        string
		want, settle                int64
		wantGranted, wantLevelAtMax int64
	}{
		{"a full bucket grants what is asked", 4, 0, 4, 6},
		{"a grant stops at the level", 10, 0, 6, 0},
		{"credit spent is owed below 0", 5, -3, 0, -3},
		{"unused tokens come back", 0, 20, 0, 10},
	} {
		res, err := leaseScript.Eval(ctx, c.rdb, []string{"sds:test"}, 1, 10, step.want, step.settle, "a", 5).Int64Slice()
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if res[0] != step.wantGranted || res[1] != step.wantLevelAtMax || res[3] != 1 || res[4] != 1000 {
			t.Errorf("%s: got %v, want granted %d, level %d, 1 replica, share 1000 (a token a second in thousandths)", step.name, res, step.wantGranted, step.wantLevelAtMax)
		}
	}
	if ttl, err := c.rdb.PTTL(ctx, "sds:test").Result(); err != nil || ttl <= 0 || ttl > 4*time.Second {
		t.Errorf("a full bucket's key expires in %v (%v), want within 4s (the replica forgotten after 3s, and 1s)", ttl, err)
	}
}

// TestLeaseScriptShares: the script divides the rate max-min fairly over
// the replicas' demands, and a replica is granted at most its allowance,
// so the first to call after a refill no longer takes the whole bucket.
// A replica not heard from for 3 s is forgotten.
func TestLeaseScriptShares(t *testing.T) {
	t.Parallel()
	c := newStoppedClient(t, clustertest.Start(t).Addr)
	ctx := context.Background()
	call := func(key, replica string, want, demand int64) []int64 {
		t.Helper()
		res, err := leaseScript.Eval(ctx, c.rdb, []string{key}, 120, 120, want, 0, replica, demand).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// {granted, level, available, replicas, share in thousandths}.
	// Equal demand: 60 each, and the allowance of a newcomer is its share
	// of size, full.
	if got := call("sds:equal", "a", 120, 100); got[0] != 120 || got[3] != 1 {
		t.Fatalf("alone: %v, want the whole bucket (120) and 1 replica", got)
	}
	call("sds:equal", "a", 0, 100) // the level is 0 until it refills
	if got := call("sds:equal", "b", 0, 100); got[3] != 2 || got[4] != 60_000 {
		t.Errorf("b beside a, equal demand: %v, want 2 replicas, share 60,000", got)
	}
	// Unequal demand: 10 asks less than an equal share and gets it, with
	// 5% and 1 a second of headroom (11.5); 300 gets the rest (108.5).
	call("sds:unequal", "big", 0, 300)
	if got := call("sds:unequal", "small", 0, 10); got[4] != 11_500 {
		t.Errorf("small (10/s) beside big (300/s): share %d, want 11,500", got[4])
	}
	if got := call("sds:unequal", "big", 0, 300); got[4] != 108_500 {
		t.Errorf("big (300/s) beside small (10/s): share %d, want 108,500", got[4])
	}
	// The first to call takes its allowance, not the bucket: a full bucket
	// of 120 shared 60/60 grants a, asking 120, its 60; b then finds its 60.
	call("sds:first", "a", 0, 100)
	call("sds:first", "b", 0, 100) // both heard from; the bucket is still full
	if got := call("sds:first", "a", 120, 100); got[0] != 60 || got[2] != 0 {
		t.Errorf("a asks 120 of a full bucket shared with b: %v, want 60 granted and 0 more available", got)
	}
	if got := call("sds:first", "b", 120, 100); got[0] != 60 {
		t.Errorf("b asks 120 after a took its share: %v, want 60 granted", got)
	}
	// A replica last heard from 4 s ago (by Redis's clock) is forgotten.
	tm, err := c.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	old := tm.Add(-4 * time.Second).UnixMicro()
	if err := c.rdb.HSet(ctx, "sds:gone", "r:gone", fmt.Sprintf("100 0 %d", old)).Err(); err != nil {
		t.Fatal(err)
	}
	if got := call("sds:gone", "here", 0, 100); got[3] != 1 || got[4] != 120_000 {
		t.Errorf("beside a replica silent for 4s: %v, want 1 replica with the whole share (120,000)", got)
	}
	if n, err := c.rdb.HExists(ctx, "sds:gone", "r:gone").Result(); err != nil || n {
		t.Errorf("the silent replica's field is still there (%v, %v)", n, err)
	}
}

// TestSharedBudget: three clients of one Redis, each taking tokens as fast
// as it can for a bounded time from the moment its bucket is in use (so
// before its first lease, as when a fleet starts or a reload adds a point),
// together admit about size + rate×elapsed, not three times that.
func TestSharedBudget(t *testing.T) {
	t.Parallel()
	srv := clustertest.Start(t)
	const rate, size = 50, 50
	// The bucket's key is absent until the first call, a full bucket: it
	// refills from the first call on, so the budget counts from before it.
	begin := time.Now()
	var clients []*Client
	for range 3 {
		c := newClient(t, Options{Addresses: []string{srv.Addr}, Replicas: 3, Timeout: time.Second})
		clients = append(clients, c)
	}
	for _, c := range clients {
		waitFor(t, 5*time.Second, "redis answers", func() bool { return c.Status(time.Now()).Up })
	}
	const span = 2 * time.Second
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		b := c.Bucket("orders", rate, size)
		c.Use([]*Bucket{b})
		wg.Go(func() {
			n := 0
			for j := 0; j < 2_000_000 && time.Since(start) < span; j++ {
				if b.Take(time.Now()) {
					n++
				}
				if j%(i+1) == 0 { // uneven demand
					time.Sleep(100 * time.Microsecond) // pacing the load, not waiting for time
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(begin).Seconds()
	want := size + rate*elapsed
	t.Logf("3 clients admitted %d in %.2fs (%.2fs since the first call): size + rate×elapsed = %.0f",
		admitted, time.Since(start).Seconds(), elapsed, want)
	// Over: credit outstanding at the end, about 0 under overload. Under:
	// at most a Tick or two of refill not yet leased.
	if float64(admitted) > want*1.1 || float64(admitted) < want*0.8 {
		t.Errorf("admitted %d, want within [-20%%, +10%%] of %.0f", admitted, want)
	}
}

// TestShareChargedBeforeFirstLease: tokens a bucket takes on its local
// share before its first lease, with Redis answering, are charged to the
// shared bucket at its first call, so a proxy that starts (or a reload that
// adds a point) spends no more of the fleet's budget than its lease would.
func TestShareChargedBeforeFirstLease(t *testing.T) {
	t.Parallel()
	srv := clustertest.Start(t)
	c := newClient(t, Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	waitFor(t, 5*time.Second, "redis answers", func() bool { return c.Status(time.Now()).Up })
	// 1 token a second: the test's few seconds add at most a few.
	const rate, size, taken = 1, 100, 30
	begin := time.Now()
	b := c.Bucket("orders", rate, size)
	c.Use([]*Bucket{b})
	for i := range taken {
		if !b.Take(time.Now()) {
			t.Fatalf("take %d refused: the share of a full bucket holds %d", i, size)
		}
	}
	// The lease held plus the level left is what the fleet may still
	// spend: size - taken, plus the refill since the first call.
	left := func() int64 { st := b.Status(time.Now()); return st.Level + st.Lease }
	waitFor(t, 5*time.Second, "the share charged", func() bool { return b.Status(time.Now()).Shared && left() <= size-taken+1 })
	if got, most := left(), int64(size-taken)+int64(time.Since(begin).Seconds()*rate)+1; got < size-taken-1 || got > most {
		t.Errorf("level + lease = %d after %d tokens taken before the first lease, want %d to %d", got, taken, size-taken-1, most)
	}
}

// TestReplacedBucketSettles: a reload that changes a point's bucket
// retires the old one, and the next round settles its lease: what it
// spent on credit is charged to the shared bucket, so changing a rate
// never lets the credit spent go free. The loop's rounds are run by hand,
// so each call is one the test makes.
func TestReplacedBucketSettles(t *testing.T) {
	t.Parallel()
	c := newStoppedClient(t, clustertest.Start(t).Addr)
	ctx := context.Background()
	// 1 token a second: the test's milliseconds add none (the level is
	// rounded down).
	old := c.Bucket("orders", 1, 100)
	c.Use([]*Bucket{old})
	c.round(ctx, true) // the first lease: 1 token, credit 99 (the level)
	if st := old.Status(time.Now()); !st.Shared || st.Lease != 1 || st.Level != 99 {
		t.Fatalf("after the first round: %+v, want shared, lease 1, level 99", st)
	}
	const taken = 50
	for i := range taken {
		if !old.Take(time.Now()) {
			t.Fatalf("take %d refused with credit in hand", i)
		}
	}
	// The reload: the same point at another rate is another bucket, on the
	// same key.
	replaced := c.Bucket("orders", 2, 100)
	if replaced == old {
		t.Fatal("a new rate returned the bucket in use")
	}
	c.Use([]*Bucket{replaced})
	c.round(ctx, true) // settles the old lease and leases the new bucket
	st := replaced.Status(time.Now())
	if got := st.Level + st.Lease; got != 100-taken {
		t.Errorf("level %d + lease %d = %d after %d tokens taken, want %d", st.Level, st.Lease, got, taken, 100-taken)
	}
	if !old.Take(time.Now()) || old.Status(time.Now()).Shared {
		t.Error("the retired bucket does not count on its share")
	}
}

// TestDownCountsOnShare: with Redis gone, a bucket counts on
// tokensPerSecond/replicas locally, and goes back to the shared bucket when
// Redis answers again; each change is logged once.
func TestDownCountsOnShare(t *testing.T) {
	t.Parallel()
	srv := clustertest.Start(t)
	reg := prometheus.NewRegistry()
	c := newClient(t, Options{Addresses: []string{srv.Addr}, Replicas: 4, Timeout: 200 * time.Millisecond, Registerer: reg})
	b := c.Bucket("orders", 100, 100)
	c.Use([]*Bucket{b})
	waitFor(t, 5*time.Second, "shared", func() bool { return b.Status(time.Now()).Shared })
	if got := testutil.ToFloat64(c.m.up); got != 1 {
		t.Errorf("sds_cluster_up = %v, want 1", got)
	}
	srv.Kill()
	waitFor(t, 5*time.Second, "local share once redis is gone", func() bool { return !c.Status(time.Now()).Up })
	if got := testutil.ToFloat64(c.m.up); got != 0 {
		t.Errorf("sds_cluster_up = %v, want 0", got)
	}
	// The share: 100/4 = 25 tokens a second, 25 at most at once.
	now := time.Now().Add(time.Hour) // an instant the local bucket is full at
	taken := 0
	for range 100 {
		if b.Take(now) {
			taken++
		}
	}
	if taken != 25 {
		t.Errorf("the local share admitted %d at one instant, want 25 (size 100 / 4 replicas)", taken)
	}
	if !b.Take(now.Add(40*time.Millisecond)) || b.Take(now.Add(40*time.Millisecond)) {
		t.Error("the local share refills one token per 40ms (25 a second)")
	}
	srv.Restart()
	waitFor(t, 10*time.Second, "shared again once redis is back", func() bool { return b.Status(time.Now()).Shared })
}

// TestSilentRedis: a Redis that accepts and never answers fails each call
// within the timeout; buckets count on their share and Take never waits.
func TestSilentRedis(t *testing.T) {
	t.Parallel()
	addr := clustertest.Silent(t)
	const timeout = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	c := newClient(t, Options{Addresses: []string{addr}, Replicas: 2, Timeout: timeout, Registerer: reg})
	b := c.Bucket("orders", 10, 10)
	c.Use([]*Bucket{b})
	waitFor(t, 5*time.Second, "down", func() bool { return c.Status(time.Now()).LastError != "" })
	if got := testutil.ToFloat64(c.m.errors.WithLabelValues("timeout")); got < 1 {
		t.Errorf("sds_cluster_errors_total{kind=timeout} = %v, want at least 1", got)
	}
	start := time.Now()
	for range 1000 {
		b.Take(time.Now())
	}
	if took := time.Since(start); took > timeout {
		t.Errorf("1000 Takes took %v against a silent redis, more than one timeout (%v)", took, timeout)
	}
	// Every round trip is cut at the timeout: the histogram's largest
	// observation is about one timeout, never the dial or read defaults.
	var m = &struct{ sum, count float64 }{}
	mf, _ := reg.Gather()
	for _, f := range mf {
		if f.GetName() == "sds_cluster_call_duration_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			m.sum, m.count = h.GetSampleSum(), float64(h.GetSampleCount())
		}
	}
	if m.count == 0 || m.sum/m.count > 4*timeout.Seconds() {
		t.Errorf("calls took %.3fs on average over %v calls, want about the timeout %v", m.sum/m.count, m.count, timeout)
	}
}

// TestPasswordFile: a wrong password is an auth error and the share; the
// password file is read again for new connections, so fixing it (a
// rotated Secret) brings the shared bucket back without a restart.
func TestPasswordFile(t *testing.T) {
	t.Parallel()
	srv := clustertest.Start(t, "--requirepass", "s3cret")
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := newClient(t, Options{Addresses: []string{srv.Addr}, PasswordFile: pw, Timeout: time.Second, Registerer: reg})
	b := c.Bucket("orders", 10, 10)
	c.Use([]*Bucket{b})
	waitFor(t, 5*time.Second, "an auth error", func() bool { return testutil.ToFloat64(c.m.errors.WithLabelValues("auth")) >= 1 })
	if c.Status(time.Now()).Up {
		t.Error("up with a wrong password")
	}
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "shared once the password file is right", func() bool { return b.Status(time.Now()).Shared })
}

// TestBucketKeptAcrossReload: Bucket returns the bucket in use when its
// name, rate and size are unchanged (its lease survives a reload), and a
// new one when they change.
func TestBucketKeptAcrossReload(t *testing.T) {
	t.Parallel()
	c, err := New(Options{Addresses: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := c.Bucket("a", 100, 100)
	c.Use([]*Bucket{a})
	for _, tc := range []struct {
		name       string
		rate, size int64
		same       bool
	}{
		{"a", 100, 100, true},
		{"a", 200, 100, false},
		{"a", 100, 50, false},
		{"b", 100, 100, false},
	} {
		if got := c.Bucket(tc.name, tc.rate, tc.size) == a; got != tc.same {
			t.Errorf("Bucket(%s, %d, %d) is the bucket in use: got %v, want %v", tc.name, tc.rate, tc.size, got, tc.same)
		}
	}
}

// TestTakeDoesNotAllocate guards the request path's cost.
func TestTakeDoesNotAllocate(t *testing.T) {
	c, err := New(Options{Addresses: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := c.Bucket("a", 100, 100)
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() { b.Take(now) }); n != 0 {
		t.Errorf("Take allocates %v times, want 0", n)
	}
}

// BenchmarkTake measures a request's cost of the shared bucket with a
// lease in hand.
func BenchmarkTake(b *testing.B) {
	c, err := New(Options{Addresses: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	bk := c.Bucket("a", 1e9, 1e9)
	now := time.Now()
	bk.granted(now, answer{granted: 1 << 62})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bk.Take(now)
		}
	})
}

// TestScriptFlushed: calls send the script's hash once Redis holds the
// script; a Redis that lost it (SCRIPT FLUSH, as a restart or a failover
// does) answers NOSCRIPT, and the calls are sent again with the script in
// the same round: no error, no fallback.
func TestScriptFlushed(t *testing.T) {
	t.Parallel()
	srv := clustertest.Start(t)
	reg := prometheus.NewRegistry()
	c := newClient(t, Options{Addresses: []string{srv.Addr}, Timeout: time.Second, Registerer: reg})
	b := c.Bucket("orders", 100, 100)
	c.Use([]*Bucket{b})
	waitFor(t, 5*time.Second, "shared", func() bool { return b.Status(time.Now()).Shared })
	for round := range 3 {
		if line, err := clustertest.Do(srv.Addr, "", "SCRIPT", "FLUSH"); err != nil || line != "+OK" {
			t.Fatalf("SCRIPT FLUSH: %q %v", line, err)
		}
		flushed := time.Now()
		// Demand makes the next tick call for this bucket.
		for range 50 {
			b.Take(time.Now())
		}
		waitFor(t, 5*time.Second, "an answer after the flush", func() bool { return b.Status(time.Now()).LevelAt.After(flushed) })
		if got := testutil.ToFloat64(c.m.calls.WithLabelValues("error")); got != 0 {
			t.Fatalf("round %d: %v failed calls after SCRIPT FLUSH, want 0", round, got)
		}
	}
	if !c.Status(time.Now()).Up {
		t.Error("down after SCRIPT FLUSH")
	}
	// The calls went by hash, and the server answered NOSCRIPT to some.
	stats, err := clustertest.Info(srv.Addr, "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	var evalsha string
	for line := range strings.SplitSeq(stats, "\r\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") {
			evalsha = line
		}
	}
	if !strings.HasPrefix(evalsha, "cmdstat_evalsha:calls=") || strings.HasSuffix(evalsha, "failed_calls=0") {
		t.Errorf("commandstats: %q, want EVALSHA calls, some of them failed (NOSCRIPT)", evalsha)
	}
}
