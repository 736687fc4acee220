package limiter

import "time"

// Snapshot is a read-only view of a point for the admin port.
type Snapshot struct {
	Name     string
	Settings Settings
	Counts   Counts // the window at the snapshot's instant
	InFlight int64
	// Tokens left in the token bucket, or -1 when the bucket is off.
	Tokens int64
	// Status is the point's state at the snapshot's instant.
	Status Status
	// LastTrip is the last time the strategies failed; zero if never.
	LastTrip Trip
	// Series holds each bucket's counts, oldest first.
	Series []Counts
	// BucketWidth is the span of one bucket of Series.
	BucketWidth time.Duration
	// Adaptive is the adaptive concurrency limit's state; zero when it
	// is off.
	Adaptive AdaptiveStatus
}

// Status is a point's state as the next plain request (not pressure-test
// traffic) would find it at one instant: the README's state model.
type Status struct {
	State State
	// Reason is the first strategy that would degrade the next plain request,
	// with its figures, when State is Open (or Shadow outside a delay); zero
	// otherwise.
	Reason Reading
	// InDelay: the point is inside its delay (State Delay, or Shadow for a
	// shadow point). DelayStrategy started it; DelayUntil is its end;
	// NextProbe is the earliest instant of the next probe, zero when
	// RetryInterval is off; Probing: a probe is in flight.
	InDelay       bool
	DelayStrategy Strategy
	DelayUntil    time.Time
	NextProbe     time.Time
	Probing       bool
	// Recovering: the point is in its recovery ramp (Policy.RecoveryTime),
	// which admits RecoveryShare parts per million of the requests now,
	// until RecoveryUntil. A ramp whose delay has ended, although no
	// request has seen it end, counts.
	Recovering    bool
	RecoveryShare int64
	RecoveryUntil time.Time
	// Readings holds every enabled strategy's figure against its threshold,
	// in judging order (Recovery to ExceptionRate).
	Readings []Reading
}

// RecoveryShareWhole is RecoveryShare when every request is admitted.
const RecoveryShareWhole = rampWhole

// Reading is one strategy's figure against its threshold at one instant.
//
//	Recovery       Count: failures (exceptions+timeouts) in the window during the ramp, against 1
//	Visit          Count: visits-degraded in the window
//	TokenBucket    Count: tokens used (Threshold, the capacity, less the tokens left)
//	Concurrent     Count: calls in flight
//	Adaptive       Count: calls in flight, against the adaptive limit
//	Timeout        Count: timeouts in the window, against TimeoutCountThreshold
//	Exception      Count: exceptions in the window
//	ExceptionRate  Count: exceptions*100/(visits-degraded), 0 with no passed visit
//
// Trips reports whether the next plain request would fail the strategy. For
// the count strategies that is Count >= Threshold; for ExceptionRate it is the
// README's rule, in which the next request counts as a visit.
type Reading struct {
	Strategy         Strategy
	Count, Threshold int64
	Trips            bool
}

// Snapshot returns the point's state at now. It allocates and takes the
// point's locks briefly; it is meant for status pages, not the hot path.
// It has no effect on the point: reading it never changes what a request
// gets.
func (p *Point) Snapshot(now time.Time) Snapshot {
	st := p.st
	cur := st.win.bucket(now)
	sn := Snapshot{
		Name:        p.name,
		Settings:    p.s,
		Counts:      st.win.sum(cur),
		InFlight:    p.InFlight(),
		Tokens:      p.tokens(now),
		Series:      st.win.series(cur),
		BucketWidth: time.Duration(st.win.width),
	}
	if p.ad != nil {
		sn.Adaptive = p.ad.status(&p.s.AdaptiveConcurrency)
	}
	st.mu.Lock()
	sn.LastTrip = st.last
	st.mu.Unlock()
	sn.Status = p.status(now, sn.Counts, sn.InFlight, sn.Tokens, true)
	return sn
}

// State returns the point's State at now, as Snapshot's Status.State, with
// no effect on the point. It does not allocate (the sds_point_state gauges).
func (p *Point) State(now time.Time) State {
	st := p.st
	return p.status(now, st.win.sum(st.win.bucket(now)), p.InFlight(), p.tokens(now), false).State
}

// status evaluates the point's state at now from the window's counts, the
// calls in flight and the tokens left, all read at now. A delay whose time
// has passed is over, although the point ends it only at its next request
// (or Settle): the next request would find a cleared window, so the
// strategies are judged on an empty one. readings asks for every strategy's
// figure; without it status stops at the first that trips.
func (p *Point) status(now time.Time, c Counts, inflight, tokens int64, readings bool) Status {
	var s Status
	st := p.st
	st.mu.Lock()
	if d := st.delay; d.active {
		if now.Before(d.until) {
			s.InDelay, s.DelayStrategy, s.DelayUntil, s.Probing = true, d.strategy, d.until, d.probing
			if p.s.RetryInterval > 0 {
				s.NextProbe = d.nextProbe
			}
		} else {
			c = Counts{}
		}
	}
	ramp, recovering := p.rampLocked(now)
	st.mu.Unlock()
	if recovering {
		s.Recovering = true
		s.RecoveryShare = rampShare(p.s.RecoveryStartPercent(), ramp.from, ramp.until, now.UnixNano())
		s.RecoveryUntil = time.Unix(0, ramp.until)
	}
	p.readings(c, inflight, tokens, s.Recovering, func(r Reading) bool {
		if r.Trips && s.Reason.Strategy == 0 {
			s.Reason = r
		}
		if readings {
			s.Readings = append(s.Readings, r)
		}
		return readings || s.Reason.Strategy == 0
	})
	switch {
	case p.s.Shadow && (s.InDelay || s.Reason.Strategy != 0):
		s.State = Shadow
	case s.InDelay:
		s.State = Delay
	case s.Reason.Strategy != 0:
		s.State = Open
	case s.Recovering && !p.s.Shadow:
		s.State = Recovering
	default:
		s.State = Closed
	}
	if s.InDelay {
		s.Reason = Reading{}
	}
	return s
}

// rampLocked returns the recovery ramp as the next request would find it
// at now, and whether it runs: a delay whose time has passed has ended and
// started one. The caller holds st.mu.
func (p *Point) rampLocked(now time.Time) (rampState, bool) {
	if p.s.RecoveryTime <= 0 {
		return rampState{}, false
	}
	ramp := p.st.ramp
	if d := p.st.delay; d.active {
		if now.Before(d.until) {
			return rampState{}, false
		}
		from := d.until.UnixNano()
		ramp = rampState{active: true, from: from, until: from + int64(p.s.RecoveryTime)}
	}
	return ramp, ramp.active && now.UnixNano() < ramp.until
}

// RecoveryShare returns the share of requests the recovery ramp admits at
// now, in parts per million (RecoveryShareWhole while no ramp runs), and
// false when the point has no ramp (RecoveryTime off). It has no effect on
// the point and does not allocate (the sds_recovery_admitted_ratio gauge).
func (p *Point) RecoveryShare(now time.Time) (int64, bool) {
	if p.s.RecoveryTime <= 0 {
		return 0, false
	}
	p.st.mu.Lock()
	ramp, recovering := p.rampLocked(now)
	p.st.mu.Unlock()
	if !recovering {
		return RecoveryShareWhole, true
	}
	return rampShare(p.s.RecoveryStartPercent(), ramp.from, ramp.until, now.UnixNano()), true
}

// AdaptiveLimit returns the adaptive concurrency limit in force, and false
// when the point has none. It does not allocate (the
// sds_adaptive_concurrency_limit gauge).
func (p *Point) AdaptiveLimit() (int64, bool) {
	if p.ad == nil {
		return 0, false
	}
	return p.ad.current(&p.s.AdaptiveConcurrency), true
}

// readings calls yield with each enabled strategy's Reading, in judging
// order, from the window's counts c, the calls in flight, the tokens left
// (-1: bucket off) and whether the recovery ramp runs, until yield returns
// false.
func (p *Point) readings(c Counts, inflight, tokens int64, recovering bool, yield func(Reading) bool) {
	s := &p.s
	passed := c.Visits - c.Degraded
	if failures := c.Exceptions + c.Timeouts; recovering && !yield(Reading{Recovery, failures, 1, failures >= 1}) {
		return
	}
	if n, on := s.VisitThreshold.Get(); on && !yield(Reading{Visit, passed, n, passed >= n}) {
		return
	}
	if tokens >= 0 && !yield(Reading{TokenBucket, p.tokenCapacity - tokens, p.tokenCapacity, tokens < 1}) {
		return
	}
	if n, on := s.ConcurrentThreshold.Get(); on && !yield(Reading{Concurrent, inflight, n, inflight >= n}) {
		return
	}
	if p.ad != nil {
		if n := p.ad.current(&s.AdaptiveConcurrency); !yield(Reading{Adaptive, inflight, n, inflight >= n}) {
			return
		}
	}
	if n, on := s.TimeoutCountThreshold.Get(); on && s.TimeoutThreshold > 0 && !yield(Reading{Timeout, c.Timeouts, n, c.Timeouts >= n}) {
		return
	}
	if n, on := s.ExceptionThreshold.Get(); on && !yield(Reading{Exception, c.Exceptions, n, c.Exceptions >= n}) {
		return
	}
	if n, on := s.ExceptionRateThreshold.Get(); on {
		var rate int64
		if passed > 0 {
			rate = c.Exceptions * 100 / passed
		}
		// As Enter judges it: the next request is one more visit.
		trips := c.Visits+1 > s.ExceptionRateStart && c.Exceptions*100 >= n*(passed+1)
		yield(Reading{ExceptionRate, rate, n, trips})
	}
}

// Settle brings the point's own state up to now when no request has: a delay
// whose time has passed ends (its window is cleared, as the next request
// would clear it), and a trip that the sliding window has left behind
// recovers. It returns the events, for the caller to log once each; a
// request that already reported them leaves nothing to report. Call it
// about once a second; it does not change what any request gets.
func (p *Point) Settle(now time.Time) Events {
	st := p.st
	var ev Events
	if st.inDelay.Load() {
		st.mu.Lock()
		if st.delay.active && !now.Before(st.delay.until) {
			p.endDelayLocked(st.delay.until)
			ev |= EventDelayEnded
		}
		st.mu.Unlock()
	}
	if st.tripped.Load() && !st.inDelay.Load() && !p.wouldTrip(now) && st.tripped.CompareAndSwap(true, false) {
		ev |= EventRecovered
	}
	return ev
}

// wouldTrip reports whether a strategy would degrade the next plain request
// at now (a shadow point's would-be degradation), delays aside.
func (p *Point) wouldTrip(now time.Time) bool {
	st := p.st
	st.mu.Lock()
	_, recovering := p.rampLocked(now)
	st.mu.Unlock()
	trips := false
	p.readings(st.win.sum(st.win.bucket(now)), p.InFlight(), p.tokens(now), recovering, func(r Reading) bool {
		trips = r.Trips
		return !trips
	})
	return trips
}

// InFlight returns the number of forwarded calls not yet exited. It sums
// the shards' counts (see pointState), so concurrent calls may or may not
// be included.
func (p *Point) InFlight() int64 { return p.st.inflight.Load() + p.st.win.inflight() }
