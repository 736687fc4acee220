package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"
)

// Defaults of Options.
const (
	// DefaultTimeout bounds each call to Redis: a few round trips inside
	// a data centre, far below any client's patience.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultKeyPrefix starts every key the proxies write.
	DefaultKeyPrefix = "sds:"
)

// The lease loop's clock.
const (
	// Tick is how often the loop looks at every bucket, and the shortest
	// time between two calls for one bucket but for the early call of a
	// lease run dry. A lease is sized to cover two Ticks of demand.
	Tick = 100 * time.Millisecond
	// LeaseTTL is how long a lease, and the credit it grants, may be
	// spent without a new answer from Redis. A bucket whose lease is older
	// counts on its local share. The loop renews a lease in use every
	// Tick, and an idle one once it is half spent.
	LeaseTTL = 2 * time.Second
	// retryEvery is how often the loop calls Redis while it is down.
	retryEvery = 500 * time.Millisecond
	// earlyGap is the shortest time between two calls for one bucket.
	earlyGap = 10 * time.Millisecond
)

// Options are a Client's connection and sharing settings. Addresses is
// required; the zero value of every other field is its default.
type Options struct {
	// Addresses are Redis's host:port addresses: one for a single
	// server, several for Redis Cluster, or Sentinel's with MasterName.
	Addresses []string
	// Username is the ACL user; "" for the default user.
	Username string
	// PasswordFile holds the password (trailing newline trimmed), read
	// again for every new connection so that a rotated Secret applies
	// without a restart; "" for none. It is the Redis servers' password:
	// sentinels are asked without one.
	PasswordFile string
	// TLS, when not nil, speaks TLS to Redis.
	TLS *tls.Config
	// DB is the database number; Redis Cluster has only 0.
	DB int
	// MasterName names the Sentinel master set; Addresses are then the
	// sentinels'.
	MasterName string
	// KeyPrefix starts every key; "" means DefaultKeyPrefix. A bucket's
	// key is KeyPrefix + "bucket:" + the point's name.
	KeyPrefix string
	// Timeout bounds every call to Redis (dial, write, read); 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Replicas is how many proxies share the buckets: while Redis fails,
	// each counts on TokensPerSecond/Replicas locally. 0 means 1. While
	// Redis answers, the budget is divided among the proxies it hears
	// from, whatever their number.
	Replicas int
	// Identity names this proxy among those sharing a bucket: its fair
	// share is kept under it in the bucket's hash. "" means the host
	// name (a pod's name) and a random suffix, new for every process; a
	// restarted proxy is a new replica, and the old one's share is freed
	// 3 s after its last call.
	Identity string
	// Logger receives one line when Redis stops answering and one when it
	// answers again. Required. go-redis's own logger, a global of that
	// package, is the program's to set (redis.SetLogger): left as it is,
	// it writes a line to stderr for every failed dial.
	Logger *zap.Logger
	// Registerer receives the sds_cluster_* metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the loop's clock; nil means time.Now. Requests pass their own
	// instant to Bucket.Take.
	Now func() time.Time
}

// Client is one proxy's side of the shared buckets: the Redis connection,
// the buckets in use and the loop that leases their tokens. Its methods are
// safe for concurrent use.
type Client struct {
	rdb redis.UniversalClient
	// reloadSlots, for a Redis Cluster, asks for the slot map again (in
	// the background); nil otherwise.
	reloadSlots func()
	timeout     time.Duration
	prefix      string
	identity    string
	replicas    int64
	log         *zap.Logger
	now         func() time.Time
	m           *metrics

	// state is stateUnknown until the first answer or failure, then
	// stateUp while every bucket in use had its last call answered (or,
	// with none in use, the last PING), stateDown while one did not. Each
	// bucket has its own (Bucket.state), which Take reads: one Redis
	// Cluster node down sends only the buckets whose keys it holds to
	// their shares.
	state atomic.Int32
	// wake asks the loop for an early call (a lease ran dry).
	wake chan struct{}
	// scriptLoaded: Redis answered a call with the script, so later calls
	// send its hash. Only the loop reads and writes it.
	scriptLoaded bool
	// lastPing is when the loop last pinged Redis for want of a bucket.
	lastPing time.Time

	mu        sync.Mutex // guards buckets, retired, since and lastError
	buckets   []*Bucket  // in use (Use)
	retired   []*Bucket  // replaced by Use, to settle at the next round
	since     time.Time  // when state last changed
	lastError string     // the last failed call's error
}

// Connection states.
const (
	stateUnknown int32 = iota
	stateUp
	stateDown
)

// New returns a Client for opts. It does not connect: Run does, and until
// its first answer every bucket counts on its local share.
func New(opts Options) (*Client, error) {
	if len(opts.Addresses) == 0 {
		return nil, errors.New("cluster: no Redis address")
	}
	c := &Client{
		timeout:  opts.Timeout,
		prefix:   opts.KeyPrefix,
		identity: opts.Identity,
		replicas: int64(max(1, opts.Replicas)),
		log:      opts.Logger,
		now:      opts.Now,
		wake:     make(chan struct{}, 1),
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.prefix == "" {
		c.prefix = DefaultKeyPrefix
	}
	if c.identity == "" {
		c.identity = newIdentity()
	}
	if c.now == nil {
		c.now = time.Now
	}
	uo := &redis.UniversalOptions{
		Addrs:      opts.Addresses,
		Username:   opts.Username,
		DB:         opts.DB,
		MasterName: opts.MasterName,
		TLSConfig:  opts.TLS,
		// Every wait is bounded by Timeout, and nothing is retried: the
		// next Tick is the retry.
		DialTimeout:           c.timeout,
		ReadTimeout:           c.timeout,
		WriteTimeout:          c.timeout,
		PoolTimeout:           c.timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		PoolSize:              4,
		DisableIdentity:       true,
		// Maintenance notifications need RESP3 push messages and a
		// handshake of their own; the lease loop has no use for them.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if opts.PasswordFile != "" {
		path, user := opts.PasswordFile, opts.Username
		uo.CredentialsProviderContext = func(context.Context) (string, string, error) {
			pw, err := readPassword(path)
			return user, pw, err
		}
	}
	if opts.MasterName == "" && len(opts.Addresses) > 1 {
		cc := redis.NewClusterClient(clusterOptions(uo))
		c.rdb, c.reloadSlots = cc, func() { cc.ReloadState(context.Background()) }
	} else {
		c.rdb = redis.NewUniversalClient(uo)
	}
	c.m = newMetrics(opts.Registerer)
	return c, nil
}

// clusterOptions are a Redis Cluster client's options: uo's, without a
// second attempt in the same call. go-redis retries a command whose node
// failed (or that answered MOVED) after a back-off, and when the back-off
// outlives the call's deadline it marks every command of the pipeline
// failed, the healthy nodes' answers included: one node down would send
// every bucket to its share, and a refused connection would read as a
// timeout. The next Tick is the retry; the loop reloads the slot map after
// every failed call instead (Client.reloadSlots), which is how a promoted
// replica is found within a retry of the cluster knowing it, where
// go-redis alone rereads the map only on MOVED or once a minute.
func clusterOptions(uo *redis.UniversalOptions) *redis.ClusterOptions {
	co := uo.Cluster()
	co.MaxRedirects = -1
	return co
}

// newIdentity returns the host name and 8 random hex digits.
func newIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "sds-proxy"
	}
	return fmt.Sprintf("%s-%08x", host, rand.Uint32())
}

// readPassword reads a password file, trailing line breaks trimmed.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster: password file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Close closes the connections to Redis. Run must have returned.
func (c *Client) Close() error { return c.rdb.Close() }

// Bucket returns the bucket of point name, filled at tokensPerSecond
// (at least 1) and holding at most size tokens (at least 1). A bucket in
// use with the same name, rate and size is returned as it is, its lease
// kept: a reload that leaves a point's bucket unchanged keeps its state.
// The bucket is leased for once Use lists it.
func (c *Client) Bucket(name string, tokensPerSecond, size int64) *Bucket {
	tokensPerSecond, size = max(1, tokensPerSecond), max(1, size)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.buckets {
		if b.name == name && b.rate == tokensPerSecond && b.size == size {
			return b
		}
	}
	return newBucket(c, name, tokensPerSecond, size)
}

// Use makes buckets the ones the loop leases for, replacing the previous
// set; call it once the config holding them is in force. A bucket of the
// previous set that buckets does not hold is settled at the next round:
// its lease's unspent tokens go back to the shared bucket, and what it
// spent on credit or on its share is charged.
func (c *Client) Use(buckets []*Bucket) {
	keep := make(map[*Bucket]bool, len(buckets))
	for _, b := range buckets {
		keep[b] = true
	}
	c.mu.Lock()
	old := c.buckets
	c.buckets = append([]*Bucket(nil), buckets...)
	for _, b := range old {
		if !keep[b] {
			c.retired = append(c.retired, b)
		}
	}
	c.mu.Unlock()
	for _, b := range buckets {
		c.m.use(b.name)
		c.m.bucketShared(b.name, b.state.Load() == stateUp)
	}
	for _, b := range old {
		if !keep[b] && !c.inUse(b.name) {
			c.m.forget(b.name)
		}
	}
}

// takeRetired returns the buckets Use replaced since the last call, and
// forgets them.
func (c *Client) takeRetired() []*Bucket {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.retired
	c.retired = nil
	return r
}

// inUse reports whether a bucket in use is named name.
func (c *Client) inUse(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.buckets {
		if b.name == name {
			return true
		}
	}
	return false
}

// live returns the buckets in use.
func (c *Client) live() []*Bucket {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buckets
}

// poke asks the loop for an early call, without waiting.
func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run leases tokens for the buckets in use until ctx is done: every Tick,
// and early when a lease runs dry. A bucket whose last call failed is
// tried again every retryEvery. It returns when ctx is done.
func (c *Client) Run(ctx context.Context) {
	ticker := time.NewTicker(Tick)
	defer ticker.Stop()
	c.round(ctx, true)
	for {
		tick := false
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			tick = true
		case <-c.wake:
		}
		c.round(ctx, tick)
	}
}

// leaseCall is one bucket's part of a round: want tokens, and settle
// tokens given back (> 0) or owed (< 0: spent on credit, on the share, or
// while Redis failed). A retired bucket's call only settles.
type leaseCall struct {
	b       *Bucket
	want    int64
	settle  int64
	retired bool
	// fromLease is the part of settle taken from the lease in hand
	// (Bucket.held), and owed what was taken from Bucket.owed: a failed
	// call gives the debts back to the bucket.
	fromLease, owed int64
	cmd             *redis.Cmd
	err             error
}

// round makes one call to Redis for the buckets that need one: on a tick,
// every bucket whose lease is short of its demand, owes tokens, holds too
// many or is half expired, and every bucket whose last call failed
// retryEvery ago; otherwise only the buckets whose lease ran dry while the
// shared bucket still held tokens, or that have no lease yet. Buckets a
// reload retired settle their lease in the same call. The buckets' calls
// go in one pipeline: one round trip however many points share buckets
// (one per node of a Redis Cluster), each call answered or failed on its
// own.
func (c *Client) round(ctx context.Context, tick bool) {
	now := c.now()
	if tick && c.reloadSlots != nil && c.state.Load() == stateDown {
		// A bucket's node failed: the slot map is read again every Tick
		// (go-redis runs one reload at a time, 200 ms apart), so the
		// bucket's next retry finds a promoted replica.
		c.reloadSlots()
	}
	var calls []leaseCall
	for _, b := range c.takeRetired() {
		// A bucket on its share has nothing Redis would take back.
		if settle := b.retire(); b.state.Load() == stateUp && settle != 0 {
			calls = append(calls, leaseCall{b: b, settle: settle, retired: true})
		}
	}
	live := c.live()
	for _, b := range live {
		if tick {
			b.measure(now)
		}
		if want, settle, due := b.plan(now, tick); due {
			calls = append(calls, leaseCall{b: b, want: want, settle: settle})
		}
	}
	if len(calls) == 0 {
		// No bucket in use: a PING keeps the state true for /status.
		if tick && len(live) == 0 && c.state.Load() != stateUp && now.Sub(c.lastPing) >= retryEvery {
			c.ping(ctx, now)
		}
		return
	}
	for i := range calls {
		if lc := &calls[i]; !lc.retired {
			lc.b.lastCall = now
			lc.fromLease = lc.settle
			lc.b.held.Add(-lc.settle)
			lc.owed = lc.b.owed.Swap(0)
			lc.settle -= lc.b.charge(lc.owed)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	c.exec(cctx, calls)
	took := time.Since(start)
	if ctx.Err() != nil {
		return // shutting down: not Redis's failure
	}
	c.settleRound(now, c.now(), took, calls)
}

// settleRound applies a round's answers: each answered call's grant, and
// each failed call's bucket sent to its share. A bucket's change either
// way is logged once, the points in one line.
func (c *Client) settleRound(sent, answered time.Time, took time.Duration, calls []leaseCall) {
	var failed error
	var wentDown, cameBack []string
	for i := range calls {
		lc := &calls[i]
		a, err := lc.answer()
		if err != nil {
			failed = err
			c.m.failed(err)
			if !lc.retired && lc.b.fail(sent, lc) {
				wentDown = append(wentDown, lc.b.name)
			}
			continue
		}
		if !lc.retired && lc.b.granted(answered, a) == stateDown {
			cameBack = append(cameBack, lc.b.name)
		}
	}
	c.m.round(took, failed == nil)
	if failed != nil && c.reloadSlots != nil {
		c.reloadSlots()
	}
	if len(wentDown) > 0 {
		c.log.Warn("redis does not answer: these points count on this proxy's share of their shared bucket",
			zap.Strings("points", wentDown), zap.Error(failed), zap.Int64("replicas", c.replicas), zap.Duration("timeout", c.timeout))
	}
	if len(cameBack) > 0 {
		c.log.Info("redis answers again: these points share their bucket again", zap.Strings("points", cameBack))
	}
	up := true
	for _, b := range c.live() {
		up = up && b.state.Load() == stateUp
	}
	c.setState(up, answered, failed)
}

// answer is the call's answer, or why there is none.
func (lc *leaseCall) answer() (answer, error) {
	if lc.err != nil {
		return answer{}, lc.err
	}
	vals, _ := lc.cmd.Int64Slice()
	if len(vals) != 5 {
		return answer{}, fmt.Errorf("cluster: the lease script answered %v", lc.cmd.Val())
	}
	return answer{granted: vals[0], level: vals[1], available: vals[2], heard: vals[3], shareMilli: vals[4]}, nil
}

// exec runs the calls in one pipeline, and sets each call's answer or
// error: by the script's hash once Redis is known to hold it, so that a
// call carries a few dozen bytes, not the script. A server that does not
// hold it (restarted, failed over, a new Cluster node) answers NOSCRIPT
// without running anything; those calls are sent again with the script in
// a second pipeline, within the same deadline, which also loads it for
// the next rounds.
func (c *Client) exec(ctx context.Context, calls []leaseCall) {
	run := func(calls []*leaseCall, bySHA bool) {
		pipe := c.rdb.Pipeline()
		for _, lc := range calls {
			args := []any{lc.b.rate, lc.b.size, lc.want, lc.settle, c.identity, lc.b.demand}
			if bySHA {
				lc.cmd = leaseScript.EvalSha(ctx, pipe, []string{lc.b.key}, args...)
			} else {
				lc.cmd = leaseScript.Eval(ctx, pipe, []string{lc.b.key}, args...)
			}
		}
		// Each command holds its own answer or error, but for a failure
		// before any was sent (a refused handshake: AUTH), which only
		// Exec returns.
		_, err := pipe.Exec(ctx)
		for _, lc := range calls {
			if lc.err = lc.cmd.Err(); lc.err == nil && lc.cmd.Val() == nil {
				lc.err = cmp.Or(err, errors.New("cluster: no answer"))
			}
		}
	}
	all := make([]*leaseCall, len(calls))
	for i := range calls {
		all[i] = &calls[i]
	}
	bySHA := c.scriptLoaded
	run(all, bySHA)
	var again []*leaseCall
	for _, lc := range all {
		if bySHA && redis.HasErrorPrefix(lc.err, "NOSCRIPT") {
			again = append(again, lc)
		}
	}
	if len(again) > 0 {
		run(again, false)
	}
	for _, lc := range all {
		if lc.err == nil {
			c.scriptLoaded = true
		}
	}
}

// ping checks Redis while no bucket is in use.
func (c *Client) ping(ctx context.Context, now time.Time) {
	c.lastPing = now
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	err := c.rdb.Ping(cctx).Err()
	if ctx.Err() != nil {
		return
	}
	c.m.round(time.Since(start), err == nil)
	switch prev := c.state.Load(); {
	case err != nil && prev != stateDown:
		c.log.Warn("redis does not answer", zap.Error(err), zap.Duration("timeout", c.timeout))
	case err == nil && prev == stateDown:
		c.log.Info("redis answers again")
	}
	if err != nil {
		c.m.failed(err)
	}
	c.setState(err == nil, c.now(), err)
}

// setState records the connection's state after a round at now: up when
// every bucket in use (or, with none, the PING) was answered; err is the
// round's failure, if any. The first answer is logged.
func (c *Client) setState(up bool, now time.Time, err error) {
	state := stateDown
	if up {
		state = stateUp
	}
	// The gauge first: whoever sees the state finds it set.
	if up {
		c.m.up.Set(1)
	} else {
		c.m.up.Set(0)
	}
	c.mu.Lock()
	if err != nil {
		c.lastError = err.Error()
	}
	prev := c.state.Swap(state)
	if prev != state {
		c.since = now
	}
	c.mu.Unlock()
	if up && prev == stateUnknown {
		c.log.Info("redis answers: the buckets are shared")
	}
}

// Status is the connection as /status shows it.
type Status struct {
	// Up: the last call to Redis was answered; false before the first.
	Up bool
	// Since is when Up last changed; zero before the first call.
	Since time.Time
	// LastError is the last failed call's error; "" when none failed.
	LastError string
	// Replicas is Options.Replicas, the share's divisor.
	Replicas int64
	// Timeout is the bound of each call.
	Timeout time.Duration
	// Buckets are the buckets in use, in Use's order.
	Buckets []BucketStatus
}

// Status returns the connection's state and every bucket's as this proxy
// sees them at now.
func (c *Client) Status(now time.Time) Status {
	c.mu.Lock()
	st := Status{Up: c.state.Load() == stateUp, Since: c.since, LastError: c.lastError,
		Replicas: c.replicas, Timeout: c.timeout}
	buckets := c.buckets
	c.mu.Unlock()
	for _, b := range buckets {
		st.Buckets = append(st.Buckets, b.Status(now))
	}
	return st
}

// errorKind names a failed call's cause for sds_cluster_errors_total:
// timeout, refused, auth or other.
func errorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH") ||
		strings.Contains(err.Error(), "NOPERM") || strings.Contains(err.Error(), "password file"):
		return "auth"
	}
	return "other"
}
