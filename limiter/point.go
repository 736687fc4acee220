package limiter

import (
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

	windowed      bool  // some strategy reads the window counts
	tokenInterval int64 // nanoseconds per token; 0: token bucket off
	tokenCapacity int64 // max(TokenBucketSize, TokensPerSecond)

	st *pointState
}

// pointState is what survives a Reconfigure with the same window shape.
type pointState struct {
	win *window

	inflight atomic.Int64 // calls forwarded and not yet exited
	_        [120]byte
	tat      atomic.Int64 // token bucket: theoretical arrival time, Unix ns (GCRA)
	_        [120]byte

	tripped atomic.Bool   // the strategies failed at the last judged request
	inDelay atomic.Bool   // mirrors delay.active for a lock-free check
	gen     atomic.Uint64 // incremented when the window is cleared

	mu    sync.Mutex // guards delay and last
	delay delayState
	last  Trip
}

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
	// Count and Threshold are the figures behind the trip (for example
	// visits-degraded and VisitThreshold). Zero when nothing tripped.
	Count, Threshold int64
	// Shadow: the request would have been degraded, but the point is in
	// shadow mode so it is forwarded.
	Shadow bool
	// Delay: the point is in its delay; Strategy is the one that started it.
	Delay bool
	// Probe: the delay let this request through to test the service.
	Probe bool
	// Events are the state changes this request caused.
	Events Events
}

// Degraded reports whether the request is answered with the fallback.
func (v Verdict) Degraded() bool { return !v.Allowed }

// Trip records the last time a point's strategies failed.
type Trip struct {
	Strategy         Strategy
	At               time.Time
	Count, Threshold int64
	Counts           Counts // the window at that moment, the tripped request included
	InFlight         int64
}

// NewPoint returns a point with the given settings (see Settings for the
// defaults of zero fields). It fails only on settings the limiter cannot
// run with, such as a window that does not split into its buckets.
func NewPoint(name string, s Settings) (*Point, error) {
	p, err := newPoint(name, s)
	if err != nil {
		return nil, err
	}
	p.st = newState(p.s)
	return p, nil
}

func newPoint(name string, s Settings) (*Point, error) {
	s = s.withDefaults()
	if err := s.check(); err != nil {
		return nil, err
	}
	p := &Point{name: name, s: s}
	p.windowed = s.VisitThreshold >= 0 ||
		(s.TimeoutThreshold > 0 && s.TimeoutCountThreshold >= 0) ||
		s.ExceptionThreshold >= 0 || s.ExceptionRateThreshold >= 0
	if s.TokensPerSecond > 0 {
		p.tokenInterval = int64(time.Second) / s.TokensPerSecond
		p.tokenCapacity = max(s.TokenBucketSize, s.TokensPerSecond)
	}
	return p, nil
}

func newState(s Settings) *pointState {
	st := &pointState{win: newWindow(s)}
	st.tripped.Store(false)
	return st
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
	if p.s.sameShape(np.s) {
		np.st = p.st
	} else {
		np.st = newState(np.s)
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

// Enter judges one request at now (SPEC §4) and counts it. pressureTest
// marks pressure-test traffic. When the Verdict allows the request, c is
// filled and the caller must call c.Exit once the call ends; otherwise c is
// left empty and its Exit does nothing. Enter does not allocate.
func (p *Point) Enter(c *Call, now time.Time, pressureTest bool) Verdict {
	c.reset()
	st := p.st
	if pressureTest && p.s.PressureTestDowngrade {
		return p.trip(c, now, Verdict{Strategy: PressureTest}, false, false, true)
	}
	var ev Events
	if st.inDelay.Load() {
		v, ok := p.enterDelay(c, now)
		if ok {
			return v
		}
		ev = v.Events
	}

	var counts Counts
	if p.windowed {
		counts = st.win.sum(now)
	}
	visits := counts.Visits + 1 // this request included
	passed := visits - counts.Degraded
	v := Verdict{Events: ev}
	s := &p.s
	if s.VisitThreshold >= 0 && passed > s.VisitThreshold {
		v.Strategy, v.Count, v.Threshold = Visit, passed, s.VisitThreshold
	}
	took := false
	if p.tokenInterval > 0 {
		took = p.takeToken(now)
		if !took && v.Strategy == 0 {
			v.Strategy, v.Count, v.Threshold = TokenBucket, 0, p.tokenCapacity
		}
	}
	inflight := st.inflight.Add(1)
	if v.Strategy == 0 {
		switch {
		case s.ConcurrentThreshold >= 0 && inflight > s.ConcurrentThreshold:
			v.Strategy, v.Count, v.Threshold = Concurrent, inflight, s.ConcurrentThreshold
		case s.TimeoutThreshold > 0 && s.TimeoutCountThreshold >= 0 && counts.Timeouts >= s.TimeoutCountThreshold:
			v.Strategy, v.Count, v.Threshold = Timeout, counts.Timeouts, s.TimeoutCountThreshold
		case s.ExceptionThreshold >= 0 && counts.Exceptions >= s.ExceptionThreshold:
			v.Strategy, v.Count, v.Threshold = Exception, counts.Exceptions, s.ExceptionThreshold
		case s.ExceptionRateThreshold >= 0 && visits > s.ExceptionRateStart &&
			counts.Exceptions*100 >= s.ExceptionRateThreshold*passed:
			v.Strategy, v.Count, v.Threshold = ExceptionRate, counts.Exceptions*100/passed, s.ExceptionRateThreshold
		}
	}

	if v.Strategy == 0 {
		if st.tripped.Load() && st.tripped.CompareAndSwap(true, false) {
			v.Events |= EventRecovered
		}
		st.win.record(now, Counts{Visits: 1})
		c.start(p, now, false)
		v.Allowed = true
		return v
	}

	if !st.tripped.Load() && st.tripped.CompareAndSwap(false, true) {
		v.Events |= EventTripped
	}
	st.mu.Lock()
	st.last = Trip{Strategy: v.Strategy, At: now, Count: v.Count, Threshold: v.Threshold, Counts: counts, InFlight: inflight}
	st.last.Counts.Visits = visits
	if s.DelayTime > 0 && !st.delay.active {
		p.startDelayLocked(now, v.Strategy)
		v.Events |= EventDelayStarted
	}
	st.mu.Unlock()
	return p.trip(c, now, v, took, true, p.draw())
}

// trip finishes a tripped request: degrade it (or, in shadow mode, forward
// it as would-be degraded), or forward it when degrade is false (the
// DowngradeRate draw let it through). held and took say whether Enter
// already holds a concurrency slot and a token for it.
func (p *Point) trip(c *Call, now time.Time, v Verdict, took, held, degrade bool) Verdict {
	st := p.st
	if !degrade {
		if !held {
			st.inflight.Add(1)
			if p.tokenInterval > 0 {
				p.takeToken(now)
			}
		}
		st.win.record(now, Counts{Visits: 1})
		c.start(p, now, false)
		v.Allowed = true
		return v
	}
	if took {
		st.tat.Add(-p.tokenInterval)
	}
	st.win.record(now, Counts{Visits: 1, Degraded: 1})
	if p.s.Shadow {
		if !held {
			st.inflight.Add(1)
		}
		c.start(p, now, false)
		v.Allowed, v.Shadow = true, true
		return v
	}
	if held {
		st.inflight.Add(-1)
	}
	return v
}

// enterDelay judges a request while the point is in its delay. ok is false
// when the delay turned out to be over; then the request is judged by the
// strategies, and v.Events says whether this call ended the delay.
func (p *Point) enterDelay(c *Call, now time.Time) (v Verdict, ok bool) {
	st := p.st
	st.mu.Lock()
	d := &st.delay
	if !d.active {
		st.mu.Unlock()
		return Verdict{}, false
	}
	if !now.Before(d.until) {
		p.endDelayLocked()
		st.mu.Unlock()
		return Verdict{Events: EventDelayEnded}, false
	}
	v = Verdict{Strategy: d.strategy, Delay: true}
	if p.s.RetryInterval > 0 && !d.probing && !now.Before(d.nextProbe) {
		d.probing = true
		st.mu.Unlock()
		st.inflight.Add(1)
		if p.tokenInterval > 0 {
			p.takeToken(now)
		}
		st.win.record(now, Counts{Visits: 1})
		c.start(p, now, true)
		v.Allowed, v.Probe = true, true
		return v, true
	}
	st.mu.Unlock()
	return p.trip(c, now, v, false, false, p.draw()), true
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
}

// endDelayLocked ends the delay and clears the window, so the point starts
// afresh. Calls entered before it no longer count. The caller holds st.mu.
func (p *Point) endDelayLocked() {
	st := p.st
	st.delay = delayState{}
	st.inDelay.Store(false)
	st.gen.Add(1)
	st.win.reset()
	st.tripped.Store(false)
}

// takeToken takes one token from the bucket at now, if one is there.
// The bucket is a GCRA: tat is when the bucket would be full again.
func (p *Point) takeToken(now time.Time) bool {
	n := now.UnixNano()
	tolerance := (p.tokenCapacity - 1) * p.tokenInterval
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

// tokens returns the tokens in the bucket at now, or -1 when it is off.
func (p *Point) tokens(now time.Time) int64 {
	if p.tokenInterval == 0 {
		return -1
	}
	n := now.UnixNano()
	used := max(p.st.tat.Load(), n) - n
	return max(0, p.tokenCapacity-(used+p.tokenInterval-1)/p.tokenInterval)
}

// draw reports whether a tripped request is degraded (DowngradeRate).
func (p *Point) draw() bool {
	r := p.s.DowngradeRate
	switch {
	case r >= 100:
		return true
	case r <= 0:
		return false
	case p.s.Percent != nil:
		return p.s.Percent() < r
	}
	return rand.IntN(100) < r
}

// Call is the ticket of one forwarded request, filled by Enter and
// consumed by Exit. Keep it with the request (it must not be copied while in
// use); Timeout and Exit may be called from different goroutines.
type Call struct {
	p     *Point
	begin time.Time
	gen   uint64
	probe bool
	flags atomic.Uint32
}

const (
	callTimedOut uint32 = 1 << iota // the timeout has been counted
	callDone                        // Exit has run
)

func (c *Call) reset() {
	c.p = nil
	c.probe = false
	c.flags.Store(0)
}

func (c *Call) start(p *Point, now time.Time, probe bool) {
	c.p, c.begin, c.gen, c.probe = p, now, p.st.gen.Load(), probe
}

// Timeout counts the call's timeout at now, once, if the call is still in
// flight and has run for the point's TimeoutThreshold or longer. It reports
// whether it counted. Exit does not count the same call again.
func (c *Call) Timeout(now time.Time) bool {
	p := c.p
	if p == nil || p.s.TimeoutThreshold <= 0 || now.Sub(c.begin) < p.s.TimeoutThreshold {
		return false
	}
	if !c.flags.CompareAndSwap(0, callTimedOut) {
		return false
	}
	if c.gen == p.st.gen.Load() {
		p.st.win.record(now, Counts{Timeouts: 1})
	}
	return true
}

// Exit records how the call ended at now and frees its concurrency slot. A
// call that ran TimeoutThreshold or longer is a timeout unless Timeout
// already counted it. Exit on a Call that Enter did not fill, or a second
// Exit, does nothing.
func (c *Call) Exit(now time.Time, o Outcome) Events {
	p := c.p
	if p == nil {
		return 0
	}
	old := c.flags.Or(callDone)
	if old&callDone != 0 {
		return 0
	}
	st := p.st
	st.inflight.Add(-1)
	var d Counts
	timedOut := old&callTimedOut != 0
	if !timedOut && p.s.TimeoutThreshold > 0 && now.Sub(c.begin) >= p.s.TimeoutThreshold {
		d.Timeouts, timedOut = 1, true
	}
	if o == Failed {
		d.Exceptions = 1
	}
	if d != (Counts{}) && c.gen == st.gen.Load() {
		st.win.record(now, d)
	}
	if !c.probe {
		return 0
	}
	return p.probeDone(c.gen, now, o, timedOut)
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
		p.endDelayLocked()
		return EventDelayEnded
	}
	return 0
}
