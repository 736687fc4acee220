package limiter

import (
	"math/big"
	"slices"
	"time"
)

// model is a reference implementation of the README's Semantics for one
// point, written to be obviously correct rather than fast: one goroutine, a
// plain list of timestamped counts, window sums recomputed by filtering the
// list, a token bucket kept as nanoseconds of credit. TestModel
// (model_run_test.go) drives it and a Point with the same steps and
// requires the same answers.
type model struct {
	s     Settings // defaults applied
	width int64    // bucket width, ns

	events   []modelEvent
	inflight int64
	gen      int // incremented when the window is cleared

	credit, creditAt int64 // token bucket: ns of credit at creditAt; a token costs interval

	tripped bool
	delay   struct {
		active           bool
		strategy         Strategy
		until, nextProbe int64
		probing          bool
	}
	// ramp is the recovery ramp: from the delay's end for RecoveryTime;
	// credit is in millionths of a request.
	ramp struct {
		active      bool
		from, until int64
		credit      int64
	}
	ad   *modelAdaptive // nil while the adaptive limit is off
	last Trip
}

// modelAdaptive is the adaptive limit of AdaptiveConcurrency's doc
// comment, with each round's samples kept in a list.
type modelAdaptive struct {
	next        int64 // the round ends; 0: not started
	epoch       uint32
	limit       int64 // thousandths of a call
	startup     bool
	measuring   bool
	hit         bool          // a request found the limit full this round
	samples     []modelSample // this round's
	measured    []modelSample // the measurement's so far; in startup, the rounds without a queue
	minLatency  int64
	latency     int64
	nextMeasure int64
}

// modelSample is a call's upstream time and the calls in flight at its
// Enter, itself included.
type modelSample struct{ d, load int64 }

func mean(xs []modelSample) (d, load int64) {
	for _, x := range xs {
		d += x.d
		load += x.load * 1000
	}
	return d / int64(len(xs)), load / int64(len(xs))
}

// current is the limit in force under a.
func (ad *modelAdaptive) current(a AdaptiveConcurrency) int64 {
	limit := ad.limit / 1000
	if ad.measuring {
		limit = limit * 3 / 4
	}
	return min(max(limit, a.MinLimit), a.MaxLimit)
}

// advance ends the round at now under settings a.
func (ad *modelAdaptive) advance(now int64, a AdaptiveConcurrency) {
	if ad.next != 0 && now < ad.next {
		return
	}
	if ad.next == 0 {
		ad.next = now + int64(a.Interval)
		return
	}
	samples, hit := ad.samples, ad.hit
	ad.samples, ad.hit = nil, false
	defer func() { ad.next = now + max(int64(a.Interval), ad.latency) }()
	if ad.measuring {
		ad.measured = append(ad.measured, samples...)
		if len(ad.measured) >= MinLatencySamples {
			d, _ := mean(ad.measured)
			ad.minLatency = max(1, d)
			ad.measuring = false
			ad.epoch++
			ad.nextMeasure = now + int64(a.MinLatencyInterval)
		}
		return
	}
	if len(samples) > 0 {
		d, inflight := mean(samples)
		ad.latency = max(1, d)
		if ad.minLatency == 0 {
			ad.minLatency = ad.latency
		}
		// The limit before, as new settings clamp it.
		if limit := min(max(ad.limit/1000, a.MinLimit), a.MaxLimit); ad.limit/1000 != limit {
			ad.limit = limit * 1000
		}
		tolerance, _ := a.Tolerance.Get()
		gradient := min(ad.minLatency*1000/ad.latency, 1000)
		served := inflight * gradient / 1000
		allowance := max(1000, served*tolerance/100)
		queued := inflight-served > allowance
		target := max(served+allowance, ad.limit/2)
		next := ad.limit
		switch {
		case ad.startup && !queued:
			if inflight-served <= 1000 {
				ad.measured = append(ad.measured, samples...)
				d, _ := mean(ad.measured)
				ad.minLatency = max(1, d)
			}
			if hit {
				next = 2 * ad.limit
			}
		case ad.startup:
			ad.startup = false
			ad.nextMeasure = now + int64(a.MinLatencyInterval)
			next = target
		case queued && target < ad.limit:
			next = ad.limit + (target-ad.limit)/2
		case !queued && hit && target > ad.limit:
			next = target
		}
		ad.limit = min(max(next, a.MinLimit*1000), a.MaxLimit*1000)
	}
	if !ad.startup && now >= ad.nextMeasure {
		ad.measuring = true
		ad.measured = nil
		ad.epoch++
	}
}

type modelEvent struct {
	bucket int64
	c      Counts
}

type modelCall struct {
	m        *model
	tt, ri   time.Duration // TimeoutThreshold and RetryInterval of the settings it entered under
	rt       time.Duration // and RecoveryTime
	begin    int64
	gen      int
	ad       *modelAdaptive      // the adaptive limit it entered under, or nil
	as       AdaptiveConcurrency // and its settings
	epoch    uint32
	load     int64 // calls in flight when it entered, itself included
	probe    bool
	timedOut bool
	done     bool
	// took is the token interval of the token the request took when it
	// was admitted, 0 for none.
	took int64
}

func newModel(s Settings) *model {
	s = s.withDefaults()
	m := &model{s: s, width: int64(s.Window) / int64(s.Buckets)}
	m.credit = m.capacity() * m.interval()
	if s.AdaptiveConcurrency.On {
		m.ad = newModelAdaptive(s.AdaptiveConcurrency)
	}
	return m
}

func newModelAdaptive(a AdaptiveConcurrency) *modelAdaptive {
	return &modelAdaptive{limit: a.MinLimit * 1000, startup: true}
}

func (m *model) interval() int64 {
	if sds(m.s.TokensPerSecond) <= 0 {
		return 0
	}
	return int64(time.Second) / sds(m.s.TokensPerSecond)
}

func (m *model) capacity() int64 { return max(sds(m.s.TokenBucketSize), sds(m.s.TokensPerSecond)) }

// sds returns t in SDS's notation, in which the model states its rules:
// -1 when off.
func sds(t Threshold) int64 {
	if n, on := t.Get(); on {
		return n
	}
	return -1
}

// reconfigure switches to s, keeping every count (same window shape).
func (m *model) reconfigure(s Settings) {
	old := m.s
	m.s = s.withDefaults()
	switch {
	case !m.s.AdaptiveConcurrency.On:
		m.ad = nil
	case m.ad == nil:
		m.ad = newModelAdaptive(m.s.AdaptiveConcurrency)
	}
	if m.interval() != 0 && (old.TokensPerSecond != m.s.TokensPerSecond || old.TokenBucketSize != m.s.TokenBucketSize) {
		// Converting the credit between bucket settings is not worth
		// modelling: the model test keeps the bucket settings fixed.
		panic("model: token bucket settings changed")
	}
}

// counts sums the window at now: a count is in it while its bucket started
// less than Window ago.
func (m *model) counts(now int64) Counts {
	cur := now / m.width
	m.events = slices.DeleteFunc(m.events, func(e modelEvent) bool { return e.bucket <= cur-int64(m.s.Buckets) })
	var c Counts
	for _, e := range m.events {
		c.add(e.c)
	}
	return c
}

func (m *model) count(now int64, c Counts) { m.events = append(m.events, modelEvent{now / m.width, c}) }

func (m *model) clear() {
	m.events = nil
	m.gen++
}

// tokenAvailable refills the bucket up to its capacity and reports whether
// it holds a whole token.
func (m *model) tokenAvailable(now int64) bool {
	m.credit = min(m.capacity()*m.interval(), m.credit+now-m.creditAt)
	m.creditAt = now
	return m.credit >= m.interval()
}

// takeToken takes a token if one is there and reports whether it did.
func (m *model) takeToken(now int64) bool {
	if m.interval() != 0 && m.tokenAvailable(now) {
		m.credit -= m.interval()
		return true
	}
	return false
}

// draw is the DowngradeRate draw: Percent is called only when the rate is
// strictly between 0 and 100, once per tripped request that is not
// critical; a critical one is degraded only at 100.
func (m *model) draw(pr Priority) bool {
	r := int(sds(m.s.DowngradeRate))
	if r < 0 {
		r = 100
	}
	switch {
	case r >= 100:
		return true
	case r <= 0 || pr == PriorityCritical:
		return false
	default:
		return m.s.Percent() < r
	}
}

// call returns a call entered at now.
func (m *model) call(now int64, probe bool) *modelCall {
	c := &modelCall{m: m, tt: m.s.TimeoutThreshold, ri: m.s.RetryInterval, rt: m.s.RecoveryTime, begin: now, gen: m.gen, probe: probe}
	if m.ad != nil {
		c.ad, c.as, c.epoch, c.load = m.ad, m.s.AdaptiveConcurrency, m.ad.epoch, m.inflight
	}
	return c
}

// forward counts a forwarded request and returns its call.
func (m *model) forward(now int64, probe bool) *modelCall {
	m.count(now, Counts{Visits: 1})
	m.inflight++
	return m.call(now, probe)
}

// forwardTook is forward for a request that took a token (took) or not.
func (m *model) forwardTook(now int64, probe, took bool) *modelCall {
	c := m.forward(now, probe)
	if took {
		c.took = m.interval()
	}
	return c
}

// degrade counts a degraded request; in shadow mode it is forwarded anyway.
func (m *model) degrade(now int64, v Verdict) (Verdict, *modelCall) {
	m.count(now, Counts{Visits: 1, Degraded: 1})
	if m.s.Shadow {
		m.inflight++
		v.Allowed, v.Shadow = true, true
		c := m.call(now, false)
		c.ri = 0
		return v, c
	}
	return v, nil
}

// drawn degrades v's request, or forwards it when the draw says so.
func (m *model) drawn(now int64, v Verdict, pr Priority) (Verdict, *modelCall) {
	if !m.draw(pr) {
		took := m.takeToken(now)
		v.Allowed = true
		return v, m.forwardTook(now, false, took)
	}
	return m.degrade(now, v)
}

// endDelay ends the delay that ended at end: the window is cleared and a
// recovery ramp of rt starts.
func (m *model) endDelay(end int64, rt time.Duration) {
	m.delay.active, m.delay.probing = false, false
	m.tripped = false
	m.clear()
	if rt > 0 {
		m.ramp.active, m.ramp.from, m.ramp.until, m.ramp.credit = true, end, end+int64(rt), 1_000_000
	}
}

// rampShare is the share the ramp admits at now, in millionths:
// start% + (100% - start%) * elapsed / RecoveryTime, rounded down.
func (m *model) rampShare(now int64) int64 {
	if now >= m.ramp.until {
		return 1_000_000
	}
	base := m.s.RecoveryStartPercent() * 10_000
	x := new(big.Int).Mul(big.NewInt(1_000_000-base), big.NewInt(max(0, now-m.ramp.from)))
	x.Quo(x, big.NewInt(m.ramp.until-m.ramp.from))
	return base + x.Int64()
}

// recovering reports whether the ramp runs at now, as the next request
// would find it (a delay whose time has passed has ended and started one).
func (m *model) recovering(now int64) bool {
	if m.s.RecoveryTime <= 0 {
		return false
	}
	if m.delay.active {
		return now >= m.delay.until && now < m.delay.until+int64(m.s.RecoveryTime)
	}
	return m.ramp.active && now < m.ramp.until
}

func (m *model) enter(now int64, pressureTest bool, pr Priority) (Verdict, *modelCall) {
	s := &m.s
	if m.ad != nil {
		m.ad.advance(now, s.AdaptiveConcurrency)
	}
	// 1. pressure-test traffic.
	if pressureTest && s.PressureTestDowngrade {
		return m.degrade(now, Verdict{Strategy: PressureTest})
	}
	// 2. the delay.
	var ev Events
	if m.delay.active {
		if now >= m.delay.until {
			m.endDelay(m.delay.until, s.RecoveryTime)
			ev = EventDelayEnded
		} else {
			v := Verdict{Strategy: m.delay.strategy, Delay: true}
			if s.RetryInterval > 0 && !m.delay.probing && now >= m.delay.nextProbe {
				m.delay.probing = true
				took := m.takeToken(now)
				v.Allowed, v.Probe = true, true
				return v, m.forwardTook(now, true, took)
			}
			next := m.delay.until
			if s.RetryInterval > 0 {
				next = min(next, m.delay.nextProbe)
			}
			v, c := m.drawn(now, v, pr)
			if !v.Allowed {
				v.RetryAfter = time.Duration(max(0, next-now))
			}
			return v, c
		}
	}
	// 2b. the recovery ramp.
	if m.ramp.active && s.RecoveryTime > 0 {
		if now >= m.ramp.until {
			m.ramp.active = false
		} else {
			c := m.counts(now)
			if f := c.Exceptions + c.Timeouts; f > 0 {
				return m.trip(now, c, Verdict{Strategy: Recovery, Count: f, Threshold: 1, Events: ev}, pr)
			}
			share := m.rampShare(now)
			m.ramp.credit += share
			if m.ramp.credit >= 1_000_000 || pr == PriorityCritical && m.ramp.credit > 0 {
				m.ramp.credit -= 1_000_000
			} else {
				return m.drawn(now, Verdict{Strategy: Recovery, Count: share / 10_000, Threshold: 100, Events: ev}, pr)
			}
		}
	}
	// 3. the strategies, in order.
	c := m.counts(now)
	v := m.judge(now, c, pr)
	v.Events = ev
	if m.ad != nil && v.Strategy == Adaptive && !v.Sheddable {
		m.ad.hit = true
	}
	if v.Strategy == 0 {
		if m.tripped {
			m.tripped = false
			v.Events |= EventRecovered
		}
		took := m.takeToken(now)
		v.Allowed = true
		return v, m.forwardTook(now, false, took)
	}
	if v.Sheddable {
		return m.drawn(now, v, pr)
	}
	return m.trip(now, c, v, pr)
}

// trip records a trip of v on window counts c, starts the delay, and
// degrades the request or forwards it by the draw.
func (m *model) trip(now int64, c Counts, v Verdict, pr Priority) (Verdict, *modelCall) {
	s := &m.s
	if !m.tripped {
		m.tripped = true
		v.Events |= EventTripped
	}
	tc := c
	tc.Visits++
	m.last = Trip{Strategy: v.Strategy, At: time.Unix(0, now).UTC(), Count: v.Count, Threshold: v.Threshold, Counts: tc, InFlight: m.inflight}
	if s.DelayTime > 0 && !m.delay.active {
		m.delay.active, m.delay.strategy, m.delay.probing = true, v.Strategy, false
		m.delay.until = now + int64(s.DelayTime)
		m.delay.nextProbe = now + int64(s.RetryInterval)
		v.Events |= EventDelayStarted
		m.ramp.active = false
	}
	return m.drawn(now, v, pr)
}

// share is percent of n, rounded down.
func share(n, percent int64) int64 {
	return new(big.Int).Quo(new(big.Int).Mul(big.NewInt(n), big.NewInt(percent)), big.NewInt(100)).Int64()
}

// judge applies the strategies in order to a request of priority pr at now
// on window counts c; the zero Verdict when they all pass. A sheddable
// request fails a count strategy above its share of the threshold. It has
// no effect on the model (tokenAvailable only brings the bucket's credit up
// to now).
func (m *model) judge(now int64, c Counts, pr Priority) Verdict {
	s := &m.s
	visits := c.Visits + 1
	passed := visits - c.Degraded
	var v Verdict
	visit, conc, count := sds(s.VisitThreshold), sds(s.ConcurrentThreshold), sds(s.TimeoutCountThreshold)
	exc, rate := sds(s.ExceptionThreshold), sds(s.ExceptionRateThreshold)
	pct := int64(100)
	if pr == PrioritySheddable {
		pct = s.SheddablePercent()
	}
	// over fills v when count is above the share of limit.
	over := func(st Strategy, count, limit int64) bool {
		if count <= share(limit, pct) {
			return false
		}
		v.Strategy, v.Count, v.Threshold = st, count, limit
		if count <= limit {
			v.Threshold, v.Sheddable = share(limit, pct), true
		}
		return true
	}
	switch {
	case visit >= 0 && over(Visit, passed, visit):
	case m.interval() != 0 && !m.tokensFor(now, share(m.capacity(), pct)):
		v.Strategy, v.Count, v.Threshold = TokenBucket, m.capacity()-m.credit/m.interval(), m.capacity()
		if pct < 100 && m.tokenAvailable(now) {
			v.Threshold, v.Sheddable = share(m.capacity(), pct), true
		}
	case conc >= 0 && over(Concurrent, m.inflight+1, conc):
	case m.ad != nil && over(Adaptive, m.inflight+1, m.ad.current(s.AdaptiveConcurrency)):
	case s.TimeoutThreshold > 0 && count >= 0 && c.Timeouts >= count:
		v.Strategy, v.Count, v.Threshold = Timeout, c.Timeouts, count
	case exc >= 0 && c.Exceptions >= exc:
		v.Strategy, v.Count, v.Threshold = Exception, c.Exceptions, exc
	case rate >= 0 && visits > s.ExceptionRateStart && c.Exceptions*100 >= rate*passed:
		v.Strategy, v.Count, v.Threshold = ExceptionRate, c.Exceptions*100/passed, rate
	}
	return v
}

// tokensFor reports whether a request that may use usable of the bucket's
// tokens finds one: taking it leaves at least capacity-usable.
func (m *model) tokensFor(now, usable int64) bool {
	m.tokenAvailable(now)
	return m.credit >= (m.capacity()-usable+1)*m.interval()
}

func (c *modelCall) timeout(now int64) bool {
	if c == nil || c.tt <= 0 || now-c.begin < int64(c.tt) || c.timedOut || c.done {
		return false
	}
	c.timedOut = true
	if c.gen == c.m.gen {
		c.m.count(now, Counts{Timeouts: 1})
	}
	return true
}

// end ends the call at now: it frees its slot and moves the adaptive
// limit on. It reports false when the call had already ended.
func (c *modelCall) end(now int64) bool {
	if c == nil || c.done {
		return false
	}
	c.done = true
	c.m.inflight--
	if c.ad != nil {
		c.ad.advance(now, c.as)
	}
	return true
}

func (c *modelCall) exit(now int64, o Outcome) Events {
	if !c.end(now) {
		return 0
	}
	m := c.m
	if c.ad != nil && o != Failed && o != Canceled && c.epoch == c.ad.epoch {
		c.ad.samples = append(c.ad.samples, modelSample{now - c.begin, c.load})
	}
	var d Counts
	if !c.timedOut && c.tt > 0 && now-c.begin >= int64(c.tt) {
		d.Timeouts, c.timedOut = 1, true
	}
	if o == Failed {
		d.Exceptions = 1
	}
	if d != (Counts{}) && c.gen == m.gen {
		m.count(now, d)
	}
	if !c.probe || !m.delay.active || c.gen != m.gen {
		return 0
	}
	m.delay.probing = false
	switch {
	case c.timedOut || o == Failed:
		m.delay.nextProbe = now + int64(c.ri)
	case o == Canceled:
		m.delay.nextProbe = now
	default:
		m.endDelay(now, c.rt)
		return EventDelayEnded
	}
	return 0
}

// refused is Call.Refused: the admitted request counts as degraded in the
// bucket of its Enter, gives its token back and frees its slots.
func (c *modelCall) refused(now int64) Events {
	if !c.end(now) {
		return 0
	}
	m := c.m
	if c.gen == m.gen {
		m.count(c.begin, Counts{Degraded: 1})
		m.tokenAvailable(now)
		m.credit += c.took
	}
	if !c.probe || !m.delay.active || c.gen != m.gen {
		return 0
	}
	m.delay.probing = false
	m.delay.nextProbe = now
	return 0
}

// settle ends a delay whose time has passed and recovers a trip that the
// window has left behind (Point.Settle).
func (m *model) settle(now int64) Events {
	var ev Events
	if m.delay.active && now >= m.delay.until {
		m.endDelay(m.delay.until, m.s.RecoveryTime)
		ev |= EventDelayEnded
	}
	if m.tripped && !m.delay.active && !m.wouldTrip(now, m.counts(now)) {
		m.tripped = false
		ev |= EventRecovered
	}
	return ev
}

// state is what the next plain request would get at now (docs/semantics.md, State
// model): a delay whose time has passed is over, and the next request would
// find its window cleared.
func (m *model) state(now int64) State {
	inDelay := m.delay.active && now < m.delay.until
	c := m.counts(now)
	if m.delay.active && !inDelay {
		c = Counts{}
	}
	trips := m.wouldTrip(now, c)
	switch {
	case m.s.Shadow && (inDelay || trips):
		return Shadow
	case inDelay:
		return Delay
	case trips:
		return Open
	case m.recovering(now) && !m.s.Shadow:
		return Recovering
	}
	return Closed
}

// wouldTrip reports whether the next plain request at now, on window
// counts c, would trip: a failure during the recovery ramp, or a strategy.
func (m *model) wouldTrip(now int64, c Counts) bool {
	if m.recovering(now) && c.Exceptions+c.Timeouts > 0 {
		return true
	}
	return m.judge(now, c, PriorityDefault).Strategy != 0
}
