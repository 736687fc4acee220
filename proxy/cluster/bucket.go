package cluster

import (
	"math"
	"sync/atomic"
	"time"
)

// Bucket is one point's shared token bucket as this proxy sees it: the
// tokens of its current lease, the credit the last answer allows, and the
// local share it counts on while Redis fails. Take is safe for concurrent
// use and never waits; the rest of its state belongs to the Client's loop.
//
// The error bound (docs/fleet.md, "Error bound"): every token a proxy
// spends was granted by Redis, or spent on credit or on the local share
// and charged at its next answered call (a share spent while Redis failed
// is charged at most its size: fail, charge), so over any span T
// the proxies together admit at most
// size + TokensPerSecond×T + the credit outstanding, and the credit each
// proxy may spend is at most the shared level its last answer showed,
// divided by Replicas (so at most size across Replicas proxies; 0 while the
// bucket is empty, the case of sustained overload), and at most what that
// answer said it could still be granted (its fair share's allowance, or
// the spare: script.go). Tokens leased but not
// spent are given back at the next call; they are missing from the
// others' view for at most a Tick, and for LeaseTTL when their proxy dies.
type Bucket struct {
	c          *Client
	name, key  string
	rate, size int64

	// held is the tokens of the lease in hand, below 0 by what was spent
	// on credit; credit is how far below 0 it may go. expiry (Unix ns)
	// is when the lease and its credit end. asked counts Take calls.
	held   atomic.Int64
	credit atomic.Int64
	expiry atomic.Int64
	asked  atomic.Int64
	// poked: Take asked the loop for an early call since the last one.
	poked atomic.Bool
	// state is stateUnknown until the bucket's first call is answered or
	// fails, then stateUp while its last call was answered and stateDown
	// after a failed one. Take reads it.
	state atomic.Int32
	// owed counts the tokens taken on the local share (before the
	// bucket's first lease, past its expiry, or while Redis failed), less
	// the unspent lease a failure turned into the share's first tokens:
	// the next answered call charges it to the shared bucket, at most the
	// share's size (charge).
	owed atomic.Int64

	// The local share while Redis fails: a GCRA of TokensPerSecond ÷
	// Replicas tokens per second holding max(1, size ÷ Replicas). tat is
	// the theoretical arrival time in Unix ns.
	localInterval  int64
	localTolerance int64
	tat            atomic.Int64

	// level is the shared bucket's level at the last answer, after its
	// grant; levelAt is when (Unix ns, 0 before the first answer).
	level   atomic.Int64
	levelAt atomic.Int64
	// available is what the last answer said this proxy could still be
	// granted: the level, or less when its allowance is lower. share is
	// its fair share then, in thousandths of a token a second, and heard
	// the proxies Redis had heard from lately, this one included (not
	// Options.Replicas, the configured divisor of the local share).
	available atomic.Int64
	share     atomic.Int64
	heard     atomic.Int64

	// The loop's own: the demand estimate (tokens per second), the asked
	// count at the last tick, and when it last called for this bucket.
	demand    float64
	lastAsked int64
	lastTick  time.Time
	lastCall  time.Time
}

func newBucket(c *Client, name string, rate, size int64) *Bucket {
	b := &Bucket{c: c, name: name, key: c.prefix + "bucket:" + name, rate: rate, size: size}
	share := float64(rate) / float64(c.replicas)
	b.localInterval = max(1, int64(float64(time.Second)/share))
	b.localTolerance = (max(1, size/c.replicas) - 1) * b.localInterval
	return b
}

// Name is the point's name.
func (b *Bucket) Name() string { return b.name }

// Take takes one token at now and reports whether there was one. While
// Redis answers it spends the lease, then the credit; otherwise, or when
// the lease is older than LeaseTTL, it counts on the local share. A token
// of the share is owed to the shared bucket, charged when Redis answers
// again; while Redis is not known to be down (the proxy has just started,
// or a reload added the bucket), the loop is asked for a lease at once. It
// never waits and does not allocate.
func (b *Bucket) Take(now time.Time) bool {
	b.asked.Add(1)
	state := b.state.Load()
	if state != stateUp || now.UnixNano() >= b.expiry.Load() {
		if !b.takeLocal(now.UnixNano()) {
			return false
		}
		b.owed.Add(1)
		if state != stateDown {
			b.pokeLoop()
		}
		return true
	}
	n := b.held.Add(-1)
	if n >= 0 {
		return true
	}
	b.pokeLoop()
	if n >= -b.credit.Load() {
		return true
	}
	b.held.Add(1)
	return false
}

// pokeLoop asks the loop for an early call, once until that call.
func (b *Bucket) pokeLoop() {
	if !b.poked.Load() && b.poked.CompareAndSwap(false, true) {
		b.c.poke()
	}
}

// takeLocal takes a token of the local share at now (Unix ns).
func (b *Bucket) takeLocal(now int64) bool {
	for {
		tat := b.tat.Load()
		t := max(tat, now)
		if t-now > b.localTolerance {
			return false
		}
		if b.tat.CompareAndSwap(tat, t+b.localInterval) {
			return true
		}
	}
}

// measure updates the demand estimate at a tick: the Take calls per
// second since the last tick, averaged with the estimate before.
func (b *Bucket) measure(now time.Time) {
	asked := b.asked.Load()
	if !b.lastTick.IsZero() {
		if span := now.Sub(b.lastTick).Seconds(); span > 0 {
			b.demand = (b.demand + float64(asked-b.lastAsked)/span) / 2
		}
	}
	b.lastAsked, b.lastTick = asked, now
}

// plan decides a bucket's call at now: want tokens, settle tokens given
// back (> 0) or owed (< 0), and whether the call is due. The lease's
// target is two Ticks of demand, at least 1 token and at most size.
func (b *Bucket) plan(now time.Time, tick bool) (want, settle int64, due bool) {
	target := int64(math.Ceil(b.demand * 2 * Tick.Seconds()))
	target = min(max(target, 1), b.size)
	h := b.held.Load()
	kept := min(max(h, 0), target)
	settle = h - kept
	want = target - kept
	poked := b.poked.Load()
	switch state := b.state.Load(); {
	case state == stateDown:
		due = tick && now.Sub(b.lastCall) >= retryEvery
	case state == stateUnknown:
		due = tick || poked && now.Sub(b.lastCall) >= earlyGap
	case tick:
		due = want > 0 || settle != 0 || b.owed.Load() != 0 || time.Duration(b.expiry.Load()-now.UnixNano()) < LeaseTTL/2
	default:
		// Early: the lease ran dry while the shared bucket held tokens
		// this proxy may be granted, or the bucket has none yet and
		// spends its share meanwhile.
		due = poked && (b.levelAt.Load() == 0 || b.available.Load() >= 1) && now.Sub(b.lastCall) >= earlyGap
	}
	if due {
		b.poked.Store(false)
	}
	return want, settle, due
}

// answer is the lease script's answer for one bucket (script.go).
type answer struct {
	// granted tokens; level, the shared bucket's level left; available,
	// what this proxy could still be granted (at most level).
	granted, level, available int64
	// heard: the proxies Redis heard from lately, this one included;
	// shareMilli: this proxy's fair share in thousandths of a token a
	// second.
	heard, shareMilli int64
}

// granted applies an answer at now: granted tokens join the lease, whose
// credit is what this proxy could still be granted, at most the level
// divided by Replicas, until now + LeaseTTL. It returns the bucket's state
// before.
func (b *Bucket) granted(now time.Time, a answer) (was int32) {
	b.held.Add(a.granted)
	b.credit.Store(max(0, min(a.available, a.level/b.c.replicas)))
	b.level.Store(a.level)
	b.available.Store(a.available)
	b.share.Store(a.shareMilli)
	b.heard.Store(a.heard)
	b.levelAt.Store(now.UnixNano())
	b.expiry.Store(now.Add(LeaseTTL).UnixNano())
	b.c.m.lease(b.name, a)
	b.c.m.bucketShared(b.name, true)
	return b.state.Swap(stateUp)
}

// fail records lc, the bucket's call sent at now, as failed: what the
// call would have charged is owed again (tokens it gave back are lost:
// Redis may have taken them), and the bucket counts on its local share
// until an answer. A bucket that held a lease starts its share from the
// lease's unspent tokens (at most the share's size), not full, and those
// tokens are not charged again: so a failure adds no burst to what the
// fleet was granted. It reports whether the bucket was not down before.
func (b *Bucket) fail(now time.Time, lc *leaseCall) bool {
	b.owed.Add(lc.owed - min(0, lc.fromLease))
	b.c.m.bucketShared(b.name, false)
	if b.state.Load() == stateUp {
		b.expiry.Store(0)
		b.credit.Store(0)
		left := b.held.Swap(0)
		b.owed.Add(-left)
		size := b.localSize()
		start := min(max(left, 0), size)
		tat := now.UnixNano() + (size-start)*b.localInterval
		for {
			old := b.tat.Load()
			if old >= tat || b.tat.CompareAndSwap(old, tat) {
				break
			}
		}
	}
	return b.state.Swap(stateDown) != stateDown
}

// localSize is the local share's capacity: size ÷ Replicas, at least 1.
func (b *Bucket) localSize() int64 { return b.localTolerance/b.localInterval + 1 }

// charge is what a call charges of owed tokens: owed, but at most the
// local share's size. Tokens the share spent beyond it were the share's
// refill, which the shared bucket's refill over the same span matches: a
// proxy on its share for longer than size ÷ tokensPerSecond seconds of
// overload charges size ÷ Replicas, so the fleet's return finds the shared
// bucket as drained as its shares left the budget, and a long outage is
// not paid for after it (docs/fleet.md, "When Redis fails").
func (b *Bucket) charge(owed int64) int64 { return min(owed, b.localSize()) }

// retire ends the lease of a bucket a reload replaced, and returns what
// it owes the shared bucket: its lease's unspent tokens (> 0), given back,
// less what it spent on credit or on its share (< 0 in all, the share's
// part at most its size: charge), charged. A request still holding the
// old config then counts on the share.
func (b *Bucket) retire() int64 {
	b.expiry.Store(0)
	b.credit.Store(0)
	return b.held.Swap(0) - b.charge(b.owed.Swap(0))
}

// BucketStatus is a bucket as /status shows it.
type BucketStatus struct {
	Name string
	// TokensPerSecond and Size are the shared bucket's figures.
	TokensPerSecond, Size int64
	// Shared: requests spend the shared bucket's lease; false while they
	// count on the local share.
	Shared bool
	// Level is the shared bucket's level at the last answer (below 0 by
	// tokens spent on credit and not yet refilled); LevelAt is when, zero
	// before the first answer.
	Level   int64
	LevelAt time.Time
	// Lease is the tokens in hand (below 0 by what was spent on credit);
	// Credit is how far below 0 it may go.
	Lease, Credit int64
	// Share is this proxy's fair share of TokensPerSecond at the last
	// answer, in tokens a second, and ReplicasHeard the proxies Redis had
	// heard from in the 3 s before it, this one included (both 0 before
	// the first answer).
	Share         float64
	ReplicasHeard int64
	// LocalTokens is the local share's tokens, and LocalSize its
	// capacity: TokensPerSecond ÷ Replicas per second.
	LocalTokens, LocalSize int64
}

// Status returns the bucket's state at now, without side effects.
func (b *Bucket) Status(now time.Time) BucketStatus {
	n := now.UnixNano()
	localSize := b.localSize()
	used := max(b.tat.Load(), n) - n
	st := BucketStatus{
		Name: b.name, TokensPerSecond: b.rate, Size: b.size,
		Shared:        b.state.Load() == stateUp && n < b.expiry.Load(),
		Level:         b.level.Load(),
		Lease:         b.held.Load(),
		Credit:        b.credit.Load(),
		Share:         float64(b.share.Load()) / 1000,
		ReplicasHeard: b.heard.Load(),
		LocalTokens:   max(0, localSize-(used+b.localInterval-1)/b.localInterval),
		LocalSize:     localSize,
	}
	if at := b.levelAt.Load(); at != 0 {
		st.LevelAt = time.Unix(0, at)
	}
	return st
}
