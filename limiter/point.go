package limiter

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Point is one named protection point: its settings, and the state they
// judge (window counts, calls in flight, token bucket, delay). A Point is
// safe for concurrent use. Its settings never change; Reconfigure returns a
// new Point that shares the state when the window shape allows it.
type Point struct {
	name string
	s    Settings // with defaults applied

	tokenInterval int64 // nanoseconds per token; 0: token bucket off
	tokenCapacity int64 // max(TokenBucketSize, TokensPerSecond)
	downgradeRate int   // DowngradePercent
	sheddable     int64 // SheddablePercent
	// exact: the calls in flight are counted in pointState.inflight (the
	// concurrent strategy or the adaptive limit is on).
	exact bool

	st *pointState
	ad *adaptive // the adaptive limit's state; nil when it is off
}

// pointState is what survives a Reconfigure with the same window shape.
//
// Calls in flight are counted where their Call took its slot: in
// pointState.inflight while the concurrent strategy is on (it needs one
// exact count to add to and compare), else in the shard the request was
// recorded in, so that a core only writes its own lines. Each Call
// remembers its counter, so a Reconfigure that switches the strategy on or
// off frees every slot where it was taken; the concurrent strategy counts
// both kinds.
type pointState struct {
	win *window

	tripped atomic.Bool   // a trip was reported (EventTripped) and its recovery not yet; not the State
	inDelay atomic.Bool   // mirrors delay.active for a lock-free check
	ramping atomic.Bool   // mirrors ramp.active for a lock-free check
	gen     atomic.Uint64 // incremented when the window is cleared

	mu    sync.Mutex // guards delay, ramp and last
	delay delayState
	ramp  rampState
	last  Trip

	// The two values a request writes when the token bucket or the
	// concurrent strategy is on, together on lines of their own: a core
	// that takes both pulls in one line, not two.
	_        [64]byte
	inflight atomic.Int64 // calls that took their slot while the concurrent strategy was on
	tat      atomic.Int64 // token bucket: theoretical arrival time, Unix ns (GCRA)
	_        [112]byte
}

// rampState is the recovery ramp that follows a delay (Policy.RecoveryTime).
// The share admitted at an instant is a rate in parts per million; each
// request adds it to credit, and a request is admitted when credit holds a
// whole request (rampWhole), which it takes: over any run of requests the
// admitted share follows the ramp within one request, with no draw. A
// critical request is admitted whenever credit is above zero, so it goes
// first.
type rampState struct {
	active      bool
	from, until int64 // Unix ns: the ramp runs from the delay's end for RecoveryTime
	credit      int64 // parts per million of a request
}

// rampWhole is one request in rampState.credit.
const rampWhole = 1_000_000

type delayState struct {
	active    bool
	strategy  Strategy
	until     time.Time // the delay ends at this instant
	nextProbe time.Time // no probe before this instant
	probing   bool      // a probe is in flight
}

// Verdict is Enter's judgement of one request.
type Verdict struct {
	// Allowed: forward the request to the service (and Exit the Call after).
	// When false, answer with the point's fallback.
	Allowed bool
	// Strategy names the trip: the strategy that failed, the one that
	// started the delay, or PressureTest. Zero when nothing tripped. It can
	// be set on an allowed request: in shadow mode, or when the
	// DowngradeRate draw let a tripped request through.
	Strategy Strategy
	// Count and Threshold are the figures behind the trip, as a Reading
	// has them (for example visits-degraded and VisitThreshold; for
	// TokenBucket the tokens used, the capacity less the tokens left, and
	// the capacity). Zero when nothing tripped.
	Count, Threshold int64
	// Shadow: the request would have been degraded, but the point is in
	// shadow mode so it is forwarded.
	Shadow bool
	// Delay: the point is in its delay; Strategy is the one that started it.
	Delay bool
	// Sheddable: a PrioritySheddable request failed its share of a count
	// threshold (Policy.SheddableShare) that it would have passed in full:
	// Strategy names the threshold, Count and Threshold are the count and
	// the share. Such a degradation is not a trip: it starts no delay.
	Sheddable bool
	// Probe: the delay let this request through to test the service.
	Probe bool
	// Wait: the request asked to wait (Request.Wait) and failed only a
	// limit it may wait at (Queue): Strategy, Count and Threshold (and
	// Sheddable) say which. Nothing was counted, taken or tripped: enter
	// again when a slot frees, or after RetryAfter for a token.
	Wait bool
	// RetryAfter is set on a request degraded inside the delay (Delay set,
	// Allowed not): the time from now until the point may let a request
	// through again, at its next probe (RetryInterval) or at the delay's
	// end, whichever is sooner. It is 0 when that instant has come (a probe
	// is in flight: when the next may go depends on its outcome), and on
	// every other verdict but Wait. On a Wait for the token bucket it is
	// the time from now until the bucket holds a token this request may
	// take (its share, for a sheddable one).
	RetryAfter time.Duration
	// Events are the state changes this request caused.
	Events Events
}

// Trip records the last time a point's strategies failed.
type Trip struct {
	Strategy Strategy
	At       time.Time
	// Count and Threshold are the Verdict's: the figure that failed
	// against its threshold.
	Count, Threshold int64
	// Counts is the window at that moment, the tripped request included
	// in Visits (not yet in Degraded).
	Counts Counts
	// InFlight is the calls in flight at that moment, the tripped request
	// not included.
	InFlight int64
}

// NewPoint returns a point with the given settings (see Settings for the
// defaults of zero fields). It fails only on settings beyond the limits
// that Settings.Check reports.
func NewPoint(name string, s Settings) (*Point, error) {
	p, err := newPoint(name, s)
	if err != nil {
		return nil, err
	}
	p.st = newState(p.s)
	if p.s.AdaptiveConcurrency.On {
		p.ad = newAdaptive(p.s.AdaptiveConcurrency)
	}
	return p, nil
}

func newPoint(name string, s Settings) (*Point, error) {
	s = s.withDefaults()
	if err := s.Check(); err != nil {
		return nil, err
	}
	p := &Point{name: name, s: s, downgradeRate: s.DowngradePercent(), sheddable: s.SheddablePercent(),
		exact: s.ConcurrentThreshold.on || s.AdaptiveConcurrency.On}
	if rate, on := s.TokensPerSecond.Get(); on {
		size, _ := s.TokenBucketSize.Get()
		p.tokenInterval = MaxTokensPerSecond / rate
		p.tokenCapacity = max(size, rate)
	}
	return p, nil
}

func newState(s Settings) *pointState {
	return &pointState{win: newWindow(s)}
}

// Reconfigure returns a point named like p with settings s. When the window
// shape (Window, Buckets, Shards) is unchanged, the new point shares p's
// counts, calls in flight, token bucket and delay; otherwise it starts
// afresh. p keeps its own settings, so calls entered on p exit on p.
func (p *Point) Reconfigure(s Settings) (*Point, error) {
	np, err := newPoint(p.name, s)
	if err != nil {
		return nil, err
	}
	same := p.s.sameShape(np.s)
	if same {
		np.st = p.st
	} else {
		np.st = newState(np.s)
	}
	switch {
	case !np.s.AdaptiveConcurrency.On:
	case same && p.ad != nil:
		np.ad = p.ad
	default:
		np.ad = newAdaptive(np.s.AdaptiveConcurrency)
	}
	return np, nil
}

// Name returns the point's name.
func (p *Point) Name() string { return p.name }

// Settings returns the point's settings, defaults applied.
func (p *Point) Settings() Settings { return p.s }

// TimeoutThreshold returns the call duration at which a call counts as a
// timeout, or 0 when no call does. A caller arms a timer for it and calls
// Call.Timeout when it fires.
func (p *Point) TimeoutThreshold() time.Duration {
	if p.s.TimeoutThreshold <= 0 {
		return 0
	}
	return p.s.TimeoutThreshold
}

// Request is what Enter knows of one request besides its instant. The
// zero Request is an ordinary request of PriorityDefault with no gate.
type Request struct {
	// PressureTest marks pressure-test traffic (Policy.PressureTestDowngrade).
	PressureTest bool
	// Priority is the request's priority (Policy.SheddableShare).
	Priority Priority
	// Gate, if not nil, is judged after the point's own strategies admit
	// the request (strategy ClusterTokenBucket): the fleet-wide token
	// bucket shared by every proxy. A request the point degrades takes
	// nothing from it.
	Gate Gate
	// WholeLimit lets a sheddable request use the whole of the limits in
	// flight (ConcurrentThreshold, the adaptive limit) rather than its
	// SheddableShare of them: the caller's queue has no request of a
	// higher priority waiting for a slot, so the share would keep a slot
	// idle for nobody (Queue). The other shares still apply.
	WholeLimit bool
	// Wait asks, for a point with a Queue, for a Verdict with Wait set
	// instead of a degradation when the request fails only a limit it may
	// wait at (Queue). Enforcing points only: a shadow point judges as
	// without it.
	Wait bool
}

// Gate is a judge beyond the point's own strategies, such as the token
// bucket a fleet of proxies shares (proxy/cluster's Bucket).
type Gate interface {
	// Take takes one token at now and reports whether there was one. It
	// must not wait on anything (no I/O), must not allocate, and must be
	// safe for concurrent use.
	Take(now time.Time) bool
}

// Enter judges one request at now (docs/semantics.md, Semantics and Priority
// shedding) and counts it. When the Verdict allows the request, c is
// filled and the caller must call c.Exit once the call ends (Exit is
// reported once: a second Exit does nothing, so it may be deferred beside
// Enter and also called early, as for a stream ending at its headers);
// otherwise c is left empty and its Exit does nothing. Enter does not
// allocate.
//
// A request the point's strategies admit is then put to r.Gate, unless it
// is shadow-forwarded already: when the gate has no token, the request is
// degraded as ClusterTokenBucket (forwarded as would-be degraded on a
// shadow point), and its call ended as Refused, which gives back what its
// admission took (its visit becomes a degraded one, its token and slots
// are returned, a probe's slot too).
//
// Concurrent Enters are judged against the counts each one sees; requests
// racing at the threshold may see each other's counts or not, as with any
// lock-free limiter, but every request is counted exactly once.
func (p *Point) Enter(c *Call, now time.Time, r Request) Verdict {
	v := p.judgeRequest(c, now, r)
	if r.Gate == nil || !v.Allowed || v.Shadow || r.Gate.Take(now) {
		return v
	}
	v.Strategy, v.Count, v.Threshold = ClusterTokenBucket, 0, 0
	if p.s.Shadow {
		v.Shadow = true
		return v
	}
	v.Events |= c.Refused(now)
	v.Allowed, v.Delay, v.Probe = false, false, false
	return v
}

// judgeRequest is Enter by the point's own strategies.
func (p *Point) judgeRequest(c *Call, now time.Time, r Request) Verdict {
	c.reset()
	st, pr := p.st, r.Priority
	if p.ad != nil {
		p.ad.advance(now, p)
	}
	cur := st.win.bucket(now)
	if r.PressureTest && p.s.PressureTestDowngrade {
		return p.finish(c, now, cur, judgement{v: Verdict{Strategy: PressureTest}}, true)
	}
	var ev Events
	if st.inDelay.Load() {
		v, ok := p.enterDelay(c, now, cur, pr)
		if ok {
			return v
		}
		ev = v.Events
	}
	if st.ramping.Load() && p.s.RecoveryTime > 0 {
		switch gate, n := p.enterRamp(now, cur, pr); gate {
		case rampFailed:
			j := judgement{v: Verdict{Strategy: Recovery, Count: n, Threshold: 1, Events: ev}}
			return p.trip(c, now, cur, j, pr)
		case rampGated:
			j := judgement{v: Verdict{Strategy: Recovery, Count: n, Threshold: 100, Events: ev}}
			return p.finish(c, now, cur, j, p.draw(pr))
		}
	}

	j := p.judge(now, cur, pr, r.WholeLimit)
	j.v.Events |= ev
	if j.v.Strategy == 0 {
		if st.tripped.Load() && st.tripped.CompareAndSwap(true, false) {
			j.v.Events |= EventRecovered
		}
		p.start(c, st.win.record(cur, false), now, j.held, false)
		c.took = j.took
		j.v.Allowed = true
		return j.v
	}
	if r.Wait && p.s.Queue.On && !p.s.Shadow && j.v.Strategy.Queues() {
		return p.wait(now, j, pr)
	}
	if j.v.Sheddable {
		return p.finish(c, now, cur, j, p.draw(pr))
	}
	return p.trip(c, now, cur, j, pr)
}

// wait ends a request that failed a limit it may wait at, for a caller
// that waits: it gives back the token judging took, counts nothing and
// says, for the token bucket, when a token this request may take is
// there.
func (p *Point) wait(now time.Time, j judgement, pr Priority) Verdict {
	if j.took {
		p.st.tat.Add(-p.tokenInterval)
	}
	v := j.v
	v.Wait = true
	if v.Strategy == TokenBucket {
		capacity := p.tokenCapacity
		if pr == PrioritySheddable {
			capacity = shareOf(capacity, p.sheddable)
		}
		// A token is there once tat - now is at most the tolerance
		// (takeToken); a share of 0 never gets one, and waits its
		// longest.
		n := now.UnixNano()
		v.RetryAfter = time.Duration(max(0, p.st.tat.Load()-(capacity-1)*p.tokenInterval-n))
		if capacity <= 0 {
			v.RetryAfter = time.Duration(1<<63 - 1)
		}
	}
	return v
}

// trip ends a request whose judging tripped the point: the trip is
// recorded, the delay started, and the request degraded or, by the
// DowngradeRate draw, forwarded.
func (p *Point) trip(c *Call, now time.Time, cur int64, j judgement, pr Priority) Verdict {
	st := p.st
	if !st.tripped.Load() && st.tripped.CompareAndSwap(false, true) {
		j.v.Events |= EventTripped
	}
	if !j.exact {
		j.load(st.win, cur)
	}
	trip := Trip{Strategy: j.v.Strategy, At: now, Count: j.v.Count, Threshold: j.v.Threshold, Counts: j.counts, InFlight: p.InFlight()}
	trip.Counts.Visits++ // this request
	st.mu.Lock()
	st.last = trip
	if p.s.DelayTime > 0 && !st.delay.active {
		p.startDelayLocked(now, j.v.Strategy)
		j.v.Events |= EventDelayStarted
	}
	st.mu.Unlock()
	return p.finish(c, now, cur, j, p.draw(pr))
}

// What the recovery ramp does with a request (enterRamp).
const (
	rampPass   = iota // no ramp, or the ramp admits it: judge it
	rampGated         // beyond the share the ramp admits now
	rampFailed        // a call failed during the ramp: trip
)

// enterRamp judges a request at now against the recovery ramp. It ends a
// ramp whose time has passed. For rampFailed, n is the failures
// (exceptions and timeouts) in the window, all since the ramp began (the
// window was cleared when the delay ended); for rampGated, the percent
// the ramp admits now.
func (p *Point) enterRamp(now time.Time, cur int64, pr Priority) (gate int, n int64) {
	st := p.st
	st.mu.Lock()
	defer st.mu.Unlock()
	r := &st.ramp
	if !r.active {
		return rampPass, 0
	}
	at := now.UnixNano()
	if at >= r.until {
		p.endRampLocked()
		return rampPass, 0
	}
	if exc, to := st.win.failures(cur); exc+to > 0 {
		return rampFailed, exc + to
	}
	share := rampShare(p.s.RecoveryStartPercent(), r.from, r.until, at)
	r.credit += share
	if r.credit >= rampWhole || pr == PriorityCritical && r.credit > 0 {
		r.credit -= rampWhole
		return rampPass, 0
	}
	return rampGated, share / (rampWhole / 100)
}

// rampShare returns the share of requests a ramp from from to until
// (Unix ns) admits at at, in parts per million: start percent at from,
// rising linearly to all of them at until.
func rampShare(start, from, until, at int64) int64 {
	if at >= until {
		return rampWhole
	}
	base := start * (rampWhole / 100)
	hi, lo := bits.Mul64(uint64(rampWhole-base), uint64(max(at-from, 0)))
	q, _ := bits.Div64(hi, lo, uint64(until-from))
	return base + int64(q)
}

// startRampLocked starts the recovery ramp at end, the instant a delay
// ended, if the point has one. The caller holds st.mu.
func (p *Point) startRampLocked(end time.Time) {
	if p.s.RecoveryTime <= 0 {
		return
	}
	at := end.UnixNano()
	p.st.ramp = rampState{active: true, from: at, until: at + int64(p.s.RecoveryTime), credit: rampWhole}
	p.st.ramping.Store(true)
}

// endRampLocked ends the recovery ramp. The caller holds st.mu.
func (p *Point) endRampLocked() {
	p.st.ramp = rampState{}
	p.st.ramping.Store(false)
}

// judgement is judge's result: the verdict, and what judging took.
type judgement struct {
	v      Verdict
	counts Counts // the window's exact counts before this request, if exact
	exact  bool
	took   bool // a token was taken for the request
	held   bool // a concurrency slot in pointState.inflight is held for it (only when it passed)
}

// load fills j.counts with the window's exact counts at cur.
func (j *judgement) load(w *window, cur int64) {
	j.counts, j.exact = w.sum(cur), true
}

// judge applies the strategies in order (docs/semantics.md, Semantics, step 3) to a
// request of priority pr and stops at the first that fails. A sheddable
// request is judged against its share of each count threshold; failing
// the share of one it would pass in full sets Verdict.Sheddable. It reads
// the exact window counts only when it must: see window for the bound
// that spares the visit strategy the sum.
func (p *Point) judge(now time.Time, cur int64, pr Priority, wholeLimit bool) (j judgement) {
	s := &p.s
	w := p.st.win
	shed := pr == PrioritySheddable
	if visit := s.VisitThreshold; visit.on {
		limit := visit.n
		if shed {
			limit = shareOf(visit.n, p.sheddable)
		}
		if !w.passBound(limit) {
			j.load(w, cur)
			if passed := j.counts.Visits + 1 - j.counts.Degraded; passed > limit {
				j.v.Strategy, j.v.Count, j.v.Threshold = Visit, passed, visit.n
				if passed <= visit.n {
					j.v.Threshold, j.v.Sheddable = limit, true
				}
				return j
			}
		}
	}
	if p.tokenInterval > 0 {
		capacity := p.tokenCapacity
		if shed {
			capacity = shareOf(capacity, p.sheddable)
		}
		if !p.takeToken(now, capacity) {
			j.v.Strategy, j.v.Count, j.v.Threshold = TokenBucket, p.tokenCapacity-p.tokens(now), p.tokenCapacity
			if shed && p.tokenAvailable(now) {
				j.v.Threshold, j.v.Sheddable = capacity, true
			}
			return j
		}
		j.took = true
	}
	if p.exact {
		n := p.st.inflight.Add(1) + w.inflight() // this request included
		shedSlots := shed && !wholeLimit
		if conc := s.ConcurrentThreshold; conc.on && p.overLimit(&j, Concurrent, n, conc.n, shedSlots) {
			p.st.inflight.Add(-1)
			return j
		}
		if p.ad != nil && p.overLimit(&j, Adaptive, n, p.ad.current(&s.AdaptiveConcurrency), shedSlots) {
			p.st.inflight.Add(-1)
			if !j.v.Sheddable {
				p.ad.full()
			}
			return j
		}
		j.held = true
	}
	count, exception, rate := s.TimeoutCountThreshold, s.ExceptionThreshold, s.ExceptionRateThreshold
	timeouts := s.TimeoutThreshold > 0 && count.on
	if !timeouts && !exception.on && !rate.on {
		return j
	}
	exc, to := w.failures(cur)
	switch {
	case timeouts && to >= count.n:
		j.v.Strategy, j.v.Count, j.v.Threshold = Timeout, to, count.n
	case exception.on && exc >= exception.n:
		j.v.Strategy, j.v.Count, j.v.Threshold = Exception, exc, exception.n
	case rate.on && (exc > 0 || rate.n == 0):
		// With no exceptions and a threshold above 0 the rate passes
		// whatever the visits (visits-degraded is at least 1: this request).
		if !j.exact {
			j.load(w, cur)
		}
		visits := j.counts.Visits + 1
		passed := visits - j.counts.Degraded
		if visits > s.ExceptionRateStart && exc*100 >= rate.n*passed {
			j.v.Strategy, j.v.Count, j.v.Threshold = ExceptionRate, exc*100/passed, rate.n
		}
	}
	if j.v.Strategy != 0 && j.held {
		p.st.inflight.Add(-1)
		j.held = false
	}
	return j
}

// overLimit judges n calls in flight, this request included, against a
// concurrency limit of strategy s (a sheddable request against its share
// of it), and fills j's verdict when they are above it.
func (p *Point) overLimit(j *judgement, s Strategy, n, limit int64, shed bool) bool {
	share := limit
	if shed {
		share = shareOf(limit, p.sheddable)
	}
	if n <= share {
		return false
	}
	j.v.Strategy, j.v.Count, j.v.Threshold = s, n, limit
	if n <= limit {
		j.v.Threshold, j.v.Sheddable = share, true
	}
	return true
}

// shareOf returns percent of n, rounded down, for any n >= 0 without
// overflow.
func shareOf(n, percent int64) int64 { return n/100*percent + n%100*percent/100 }

// finish ends a tripped request: degrade it (or, in shadow mode, forward it
// as would-be degraded), or forward it when degrade is false (the
// DowngradeRate draw let it through). Only a forwarded request keeps a
// token: j.took is given back when the request is degraded, and taken, if
// one is there, when judging stopped before the token bucket.
func (p *Point) finish(c *Call, now time.Time, cur int64, j judgement, degrade bool) Verdict {
	st := p.st
	v := j.v
	if !degrade {
		took := j.took
		if !took && p.tokenInterval > 0 {
			took = p.takeToken(now, p.tokenCapacity)
		}
		p.start(c, st.win.record(cur, false), now, false, false)
		c.took = took
		v.Allowed = true
		return v
	}
	if j.took {
		st.tat.Add(-p.tokenInterval)
	}
	sh := st.win.record(cur, true)
	if p.s.Shadow {
		p.start(c, sh, now, false, false)
		v.Allowed, v.Shadow = true, true
	}
	return v
}

// start fills c for a forwarded request and takes its concurrency slot,
// unless judging already holds one; sh is the shard the request was
// recorded in.
func (p *Point) start(c *Call, sh *shard, now time.Time, held, probe bool) {
	slot := &p.st.inflight
	if !held {
		if !p.exact {
			slot = sh.slot
		}
		slot.Add(1)
	}
	c.p, c.slot, c.begin, c.gen, c.probe = p, slot, now, p.st.gen.Load(), probe
	if p.ad != nil {
		c.epoch, c.load = p.ad.epoch.Load(), slot.Load()+p.st.win.inflight()
	}
}

// enterDelay judges a request while the point is in its delay. ok is false
// when the delay turned out to be over; then the request is judged by the
// strategies, and v.Events says whether this call ended the delay.
func (p *Point) enterDelay(c *Call, now time.Time, cur int64, pr Priority) (v Verdict, ok bool) {
	st := p.st
	st.mu.Lock()
	d := &st.delay
	if !d.active {
		st.mu.Unlock()
		return Verdict{}, false
	}
	if !now.Before(d.until) {
		p.endDelayLocked(d.until)
		st.mu.Unlock()
		return Verdict{Events: EventDelayEnded}, false
	}
	v = Verdict{Strategy: d.strategy, Delay: true}
	if p.s.RetryInterval > 0 && !d.probing && !now.Before(d.nextProbe) {
		d.probing = true
		st.mu.Unlock()
		took := p.tokenInterval > 0 && p.takeToken(now, p.tokenCapacity)
		p.start(c, st.win.record(cur, false), now, false, true)
		c.took = took
		v.Allowed, v.Probe = true, true
		return v, true
	}
	next := d.until
	if p.s.RetryInterval > 0 && d.nextProbe.Before(next) {
		next = d.nextProbe
	}
	st.mu.Unlock()
	v = p.finish(c, now, cur, judgement{v: v}, p.draw(pr))
	if !v.Allowed {
		v.RetryAfter = max(0, next.Sub(now))
	}
	return v, true
}

// startDelayLocked starts the delay at now. The caller holds st.mu.
func (p *Point) startDelayLocked(now time.Time, s Strategy) {
	st := p.st
	st.delay = delayState{
		active:    true,
		strategy:  s,
		until:     now.Add(p.s.DelayTime),
		nextProbe: now.Add(p.s.RetryInterval),
	}
	st.inDelay.Store(true)
	p.endRampLocked()
}

// endDelayLocked ends the delay at end and clears the window, so the point
// starts afresh, and starts the recovery ramp if the point has one. Calls
// entered before it no longer count. The caller holds st.mu.
func (p *Point) endDelayLocked(end time.Time) {
	st := p.st
	st.delay = delayState{}
	st.inDelay.Store(false)
	st.gen.Add(1)
	st.win.reset()
	st.tripped.Store(false)
	p.startRampLocked(end)
}

// takeToken takes one token from the bucket at now, if one is there and
// fewer than capacity (at most the bucket's) are used: a sheddable request
// may use only its share of the bucket. The bucket is a GCRA: tat is when
// the bucket would be full again.
func (p *Point) takeToken(now time.Time, capacity int64) bool {
	n := now.UnixNano()
	tolerance := (capacity - 1) * p.tokenInterval
	for {
		tat := p.st.tat.Load()
		t := max(tat, n)
		if t-n > tolerance {
			return false
		}
		if p.st.tat.CompareAndSwap(tat, t+p.tokenInterval) {
			return true
		}
	}
}

// tokenAvailable reports whether the bucket holds a token at now, without
// taking it.
func (p *Point) tokenAvailable(now time.Time) bool {
	n := now.UnixNano()
	return max(p.st.tat.Load(), n)-n <= (p.tokenCapacity-1)*p.tokenInterval
}

// tokens returns the tokens in the bucket at now, or -1 when it is off.
func (p *Point) tokens(now time.Time) int64 {
	if p.tokenInterval == 0 {
		return -1
	}
	n := now.UnixNano()
	used := max(p.st.tat.Load(), n) - n
	return max(0, p.tokenCapacity-(used+p.tokenInterval-1)/p.tokenInterval)
}

// draw reports whether a tripped request of priority pr is degraded
// (DowngradeRate). A DowngradeRate below 100 degrades default and
// sheddable requests only: a critical one is forwarded, with no draw.
func (p *Point) draw(pr Priority) bool {
	r := p.downgradeRate
	switch {
	case r >= 100:
		return true
	case r <= 0 || pr == PriorityCritical:
		return false
	case p.s.Percent != nil:
		return p.s.Percent() < r
	}
	return rand.IntN(100) < r
}

// Call is the ticket of one forwarded request, filled by Enter and
// consumed by Exit. Keep it with the request (it must not be copied while in
// use); Timeout, Exclude and Exit may be called from different goroutines,
// once Enter has returned.
//
// A call's duration, which Timeout and Exit compare with the point's
// TimeoutThreshold, is the time since Enter less the time Exclude removed:
//
//	Enter ──upstream──┬─client─┬──upstream──┬─client─┬─ Exit
//	                  Exclude(d1)           Exclude(d2)
//	duration = (Exit − Enter) − d1 − d2
type Call struct {
	p     *Point
	slot  *atomic.Int64 // the in-flight counter this call added itself to
	begin time.Time
	gen   uint64 // pointState.gen at Enter: counts are dropped after a clear
	epoch uint32 // the adaptive limit's epoch at Enter: its time is a sample only in the same one
	load  int64  // with the adaptive limit on, the calls in flight at Enter, this one included
	probe bool
	took  bool // the request took a token when it was admitted
	flags atomic.Uint32
	// excluded is the time, in nanoseconds, that Exclude removed from the
	// call's duration.
	excluded atomic.Int64
}

const (
	callTimedOut uint32 = 1 << iota // the timeout has been counted
	callDone                        // Exit has run
	callFailed                      // an exception has been counted
)

func (c *Call) reset() {
	c.p, c.slot, c.probe, c.took = nil, nil, false, false
	c.flags.Store(0)
	c.excluded.Store(0)
}

// Began returns the instant Enter (or Admit) filled c: when its call
// entered the point. It is the zero Time for a Call that Enter did not
// fill.
func (c *Call) Began() time.Time {
	if c.p == nil {
		return time.Time{}
	}
	return c.begin
}

// Exclude removes d from the call's duration: time the call spent waiting
// on its client (a slow upload, a slow reader), which must never count as
// the upstream's slowness. A d of 0 or less does nothing.
func (c *Call) Exclude(d time.Duration) {
	if d > 0 {
		c.excluded.Add(int64(d))
	}
}

// Duration returns the call's duration at now: the time since Enter less
// what Exclude removed. It is 0 for a Call that Enter did not fill.
func (c *Call) Duration(now time.Time) time.Duration {
	if c.p == nil {
		return 0
	}
	return now.Sub(c.begin) - time.Duration(c.excluded.Load())
}

// Timeout counts the call's timeout at now, once, if the call is still in
// flight and its Duration is the point's TimeoutThreshold or longer. It
// reports whether it counted. Exit does not count the same call again.
func (c *Call) Timeout(now time.Time) bool {
	p := c.p
	if p == nil || p.s.TimeoutThreshold <= 0 || c.Duration(now) < p.s.TimeoutThreshold {
		return false
	}
	if !c.flags.CompareAndSwap(0, callTimedOut) {
		return false
	}
	if c.gen == p.st.gen.Load() {
		p.st.win.recordFailure(p.st.win.bucket(now), 0, 1)
	}
	return true
}

// Exit records how the call ended at now and frees its concurrency slot. A
// call whose Duration is TimeoutThreshold or longer is a timeout unless Timeout
// already counted it. Exit on a Call that Enter did not fill, or a second
// Exit, does nothing. A probe's Exit ends the delay (returning
// EventDelayEnded) when the call had no exception and no timeout; after a
// failed or timed-out probe the next waits RetryInterval from now; a
// canceled probe frees the probe slot at once. The TimeoutThreshold and
// RetryInterval used are those of the Point the call entered on, even if
// it has since been reconfigured.
func (c *Call) Exit(now time.Time, o Outcome) Events {
	p := c.p
	if p == nil {
		return 0
	}
	set := callDone
	if o == Failed {
		set |= callFailed
	}
	old := c.flags.Or(set)
	if old&callDone != 0 {
		return 0
	}
	c.slot.Add(-1)
	if ad := p.ad; ad != nil {
		ad.advance(now, p)
		if o != Failed && o != Canceled {
			ad.sample(c.epoch, c.Duration(now), c.load)
		}
	}
	st := p.st
	var exc, to int64
	timedOut := old&callTimedOut != 0
	if !timedOut && p.s.TimeoutThreshold > 0 && c.Duration(now) >= p.s.TimeoutThreshold {
		to, timedOut = 1, true
	}
	if o == Failed {
		exc = 1
	}
	if exc|to != 0 && c.gen == st.gen.Load() {
		st.win.recordFailure(st.win.bucket(now), exc, to)
	}
	if !c.probe {
		return 0
	}
	return p.probeDone(c.gen, now, o, timedOut)
}

// Refused ends a call that Enter admitted and a judge after the limiter
// turned away (the fleet-wide token bucket): the request is counted as
// degraded, not passed. Its visit, in the bucket of its Enter, becomes a
// degraded one, so the visit strategy's visits-degraded and the exception
// rate's passed visits leave it out; the token its admission took is given
// back; its concurrency slot is freed, and a probe's slot too, as for a
// canceled Exit (the next request may probe). No outcome is recorded and
// no call duration is sampled. After a window clear (the Call's
// generation is gone) only the slots are freed. Refused on a Call that
// Enter did not fill, or after Exit or Refused, does nothing. It does not
// allocate.
func (c *Call) Refused(now time.Time) Events {
	p := c.p
	if p == nil || c.flags.Or(callDone)&callDone != 0 {
		return 0
	}
	c.slot.Add(-1)
	if ad := p.ad; ad != nil {
		ad.advance(now, p)
	}
	st := p.st
	if c.gen == st.gen.Load() {
		st.win.degradeOne(st.win.bucket(c.begin))
		if c.took {
			st.tat.Add(-p.tokenInterval)
		}
	}
	if !c.probe {
		return 0
	}
	return p.probeDone(c.gen, now, Canceled, false)
}

// FailAfterExit counts an exception for a call that has already exited
// without one: a stream whose call ended at its response headers but whose
// outcome came later (a gRPC status in the trailers). It counts at most once
// per call, in the bucket of now, and not at all when the window was
// cleared since the call entered. It reports whether it counted.
func (c *Call) FailAfterExit(now time.Time) bool {
	p := c.p
	if p == nil {
		return false
	}
	for {
		f := c.flags.Load()
		if f&callDone == 0 || f&callFailed != 0 {
			return false
		}
		if c.flags.CompareAndSwap(f, f|callFailed) {
			break
		}
	}
	if c.gen != p.st.gen.Load() {
		return false
	}
	p.st.win.recordFailure(p.st.win.bucket(now), 1, 0)
	return true
}

// probeDone ends the delay after a good probe, or schedules the next probe
// one RetryInterval after a failed one. A canceled probe proves nothing:
// the next request may probe at once.
func (p *Point) probeDone(gen uint64, now time.Time, o Outcome, timedOut bool) Events {
	st := p.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.delay.active || gen != st.gen.Load() {
		return 0
	}
	st.delay.probing = false
	switch {
	case timedOut || o == Failed:
		st.delay.nextProbe = now.Add(p.s.RetryInterval)
	case o == Canceled:
		st.delay.nextProbe = now
	default:
		p.endDelayLocked(now)
		return EventDelayEnded
	}
	return 0
}
