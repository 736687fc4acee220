package limiter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// model is a reference implementation of the README's Semantics for one
// point, written to
// be obviously correct rather than fast: one goroutine, a plain list of
// timestamped counts, window sums recomputed by filtering the list, a token
// bucket kept as nanoseconds of credit. TestModel drives it and a Point
// with the same steps and requires the same answers.
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
	last Trip
}

type modelEvent struct {
	bucket int64
	c      Counts
}

type modelCall struct {
	m        *model
	tt, ri   time.Duration // TimeoutThreshold and RetryInterval of the settings it entered under
	begin    int64
	gen      int
	probe    bool
	timedOut bool
	done     bool
}

func newModel(s Settings) *model {
	s = s.withDefaults()
	m := &model{s: s, width: int64(s.Window) / int64(s.Buckets)}
	m.credit = m.capacity() * m.interval()
	return m
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

// takeToken takes a token if one is there.
func (m *model) takeToken(now int64) {
	if m.interval() != 0 && m.tokenAvailable(now) {
		m.credit -= m.interval()
	}
}

// draw is the DowngradeRate draw: Percent is called only when the rate is
// strictly between 0 and 100, once per tripped request.
func (m *model) draw() bool {
	r := int(sds(m.s.DowngradeRate))
	if r < 0 {
		r = 100
	}
	switch {
	case r >= 100:
		return true
	case r <= 0:
		return false
	default:
		return m.s.Percent() < r
	}
}

// forward counts a forwarded request and returns its call.
func (m *model) forward(now int64, probe bool) *modelCall {
	m.count(now, Counts{Visits: 1})
	m.inflight++
	return &modelCall{m: m, tt: m.s.TimeoutThreshold, ri: m.s.RetryInterval, begin: now, gen: m.gen, probe: probe}
}

// degrade counts a degraded request; in shadow mode it is forwarded anyway.
func (m *model) degrade(now int64, v Verdict) (Verdict, *modelCall) {
	m.count(now, Counts{Visits: 1, Degraded: 1})
	if m.s.Shadow {
		m.inflight++
		v.Allowed, v.Shadow = true, true
		return v, &modelCall{m: m, tt: m.s.TimeoutThreshold, begin: now, gen: m.gen}
	}
	return v, nil
}

func (m *model) endDelay() {
	m.delay.active, m.delay.probing = false, false
	m.tripped = false
	m.clear()
}

func (m *model) enter(now int64, pressureTest bool) (Verdict, *modelCall) {
	s := &m.s
	// 1. pressure-test traffic.
	if pressureTest && s.PressureTestDowngrade {
		return m.degrade(now, Verdict{Strategy: PressureTest})
	}
	// 2. the delay.
	var ev Events
	if m.delay.active {
		if now >= m.delay.until {
			m.endDelay()
			ev = EventDelayEnded
		} else {
			v := Verdict{Strategy: m.delay.strategy, Delay: true}
			if s.RetryInterval > 0 && !m.delay.probing && now >= m.delay.nextProbe {
				m.delay.probing = true
				m.takeToken(now)
				v.Allowed, v.Probe = true, true
				return v, m.forward(now, true)
			}
			if !m.draw() {
				m.takeToken(now)
				v.Allowed = true
				return v, m.forward(now, false)
			}
			return m.degrade(now, v)
		}
	}
	// 3. the strategies, in order.
	c := m.counts(now)
	v := m.judge(now, c)
	v.Events = ev
	if v.Strategy == 0 {
		if m.tripped {
			m.tripped = false
			v.Events |= EventRecovered
		}
		m.takeToken(now)
		v.Allowed = true
		return v, m.forward(now, false)
	}
	// 4. a trip.
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
	}
	if !m.draw() {
		m.takeToken(now)
		v.Allowed = true
		return v, m.forward(now, false)
	}
	return m.degrade(now, v)
}

// judge applies the strategies in order to a request at now on window
// counts c; the zero Verdict when they all pass. It has no effect on the
// model (tokenAvailable only brings the bucket's credit up to now).
func (m *model) judge(now int64, c Counts) Verdict {
	s := &m.s
	visits := c.Visits + 1
	passed := visits - c.Degraded
	var v Verdict
	visit, conc, count := sds(s.VisitThreshold), sds(s.ConcurrentThreshold), sds(s.TimeoutCountThreshold)
	exc, rate := sds(s.ExceptionThreshold), sds(s.ExceptionRateThreshold)
	switch {
	case visit >= 0 && passed > visit:
		v.Strategy, v.Count, v.Threshold = Visit, passed, visit
	case m.interval() != 0 && !m.tokenAvailable(now):
		v.Strategy, v.Count, v.Threshold = TokenBucket, 0, m.capacity()
	case conc >= 0 && m.inflight+1 > conc:
		v.Strategy, v.Count, v.Threshold = Concurrent, m.inflight+1, conc
	case s.TimeoutThreshold > 0 && count >= 0 && c.Timeouts >= count:
		v.Strategy, v.Count, v.Threshold = Timeout, c.Timeouts, count
	case exc >= 0 && c.Exceptions >= exc:
		v.Strategy, v.Count, v.Threshold = Exception, c.Exceptions, exc
	case rate >= 0 && visits > s.ExceptionRateStart && c.Exceptions*100 >= rate*passed:
		v.Strategy, v.Count, v.Threshold = ExceptionRate, c.Exceptions*100/passed, rate
	}
	return v
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

func (c *modelCall) exit(now int64, o Outcome) Events {
	if c == nil || c.done {
		return 0
	}
	c.done = true
	m := c.m
	m.inflight--
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
		m.endDelay()
		return EventDelayEnded
	}
	return 0
}

// settle ends a delay whose time has passed and recovers a trip that the
// window has left behind (Point.Settle).
func (m *model) settle(now int64) Events {
	var ev Events
	if m.delay.active && now >= m.delay.until {
		m.endDelay()
		ev |= EventDelayEnded
	}
	if m.tripped && !m.delay.active && m.judge(now, m.counts(now)).Strategy == 0 {
		m.tripped = false
		ev |= EventRecovered
	}
	return ev
}

// state is what the next plain request would get at now (README, State
// model): a delay whose time has passed is over, and the next request would
// find its window cleared.
func (m *model) state(now int64) State {
	inDelay := m.delay.active && now < m.delay.until
	c := m.counts(now)
	if m.delay.active && !inDelay {
		c = Counts{}
	}
	trips := m.judge(now, c).Strategy != 0
	switch {
	case m.s.Shadow && (inDelay || trips):
		return Shadow
	case inDelay:
		return Delay
	case trips:
		return Open
	}
	return Closed
}

// modelCase is one random run's settings generator.
type modelCase struct {
	name  string
	steps int
	// settings returns the run's settings; percent is the run's shared
	// Percent sequence (each side gets its own copy of it).
	settings func(r *rand.Rand) Settings
}

// randomThreshold is off a quarter of the time, else a small threshold
// (0 included) so that every strategy trips and recovers often.
func randomThreshold(r *rand.Rand, hi int64) Threshold {
	if r.IntN(4) == 0 {
		return Threshold{}
	}
	if r.IntN(20) == 0 {
		return At(0)
	}
	return At(1 + r.Int64N(hi))
}

// bucketSize is a token bucket's size, where 0 stands for not given.
func bucketSize(n int64) Threshold {
	if n == 0 {
		return Threshold{}
	}
	return At(n)
}

func randomSettings(r *rand.Rand) Settings {
	var s Settings
	s.Window, s.Buckets = time.Second, 10
	if r.IntN(3) == 0 {
		s.Window, s.Buckets = DefaultWindow, DefaultBuckets
	}
	s.Shards = 1 + r.IntN(4)
	s.VisitThreshold = randomThreshold(r, 40)
	if r.IntN(4) != 0 {
		s.TimeoutThreshold = time.Duration(1+r.IntN(300)) * time.Millisecond
	}
	s.TimeoutCountThreshold = randomThreshold(r, 8)
	s.ConcurrentThreshold = randomThreshold(r, 6)
	s.ExceptionThreshold = randomThreshold(r, 10)
	s.ExceptionRateThreshold = randomThreshold(r, 100)
	s.ExceptionRateStart = r.Int64N(10)
	if r.IntN(3) == 0 {
		s.TokensPerSecond, s.TokenBucketSize = At(1+r.Int64N(50)), bucketSize(r.Int64N(20))
	}
	s.DowngradeRate = []Threshold{At(0), At(30), At(50), At(100), {}}[r.IntN(5)]
	if r.IntN(2) == 0 {
		s.DelayTime = time.Duration(1+r.IntN(3000)) * time.Millisecond
		if r.IntN(3) != 0 {
			s.RetryInterval = time.Duration(1+r.IntN(500)) * time.Millisecond
		}
	}
	s.PressureTestDowngrade = r.IntN(3) == 0
	s.Shadow = r.IntN(5) == 0
	return s
}

// keepShape returns fresh random thresholds with the shape and token
// bucket of s, for a Reconfigure that keeps the state.
func keepShape(r *rand.Rand, s Settings) Settings {
	n := randomSettings(r)
	n.Window, n.Buckets, n.Shards = s.Window, s.Buckets, s.Shards
	n.TokensPerSecond, n.TokenBucketSize = s.TokensPerSecond, s.TokenBucketSize
	return n
}

// allOn turns every strategy on with a delay and probes.
func allOn(r *rand.Rand) Settings {
	s := randomSettings(r)
	s.VisitThreshold = At(10 + r.Int64N(30))
	s.TimeoutThreshold, s.TimeoutCountThreshold = time.Duration(50+r.IntN(200))*time.Millisecond, At(2+r.Int64N(6))
	s.ConcurrentThreshold = At(2 + r.Int64N(6))
	s.ExceptionThreshold = At(3 + r.Int64N(10))
	s.ExceptionRateThreshold, s.ExceptionRateStart = At(10+r.Int64N(80)), r.Int64N(10)
	s.TokensPerSecond, s.TokenBucketSize = At(5+r.Int64N(50)), bucketSize(r.Int64N(30))
	s.DowngradeRate = At(50)
	s.DelayTime, s.RetryInterval = time.Duration(200+r.IntN(2000))*time.Millisecond, time.Duration(50+r.IntN(400))*time.Millisecond
	return s
}

// steerShard makes the next Enter on this goroutine's P (most likely) write
// a random shard, as requests on many cores would: the hint pool hands back
// the hint its P put last.
func steerShard(r *rand.Rand) { steerTo(r.IntN(8)) }

func steerTo(i int) {
	hints.Get()
	hints.Put(&hint{n: uint32(i)})
}

// TestModel drives a Point and the model with the same long random
// sequences of Enter, Timeout, Exit, Reconfigure and Snapshot at random,
// non-decreasing instants, and requires identical verdicts, events and
// counts at every step.
func TestModel(t *testing.T) {
	cases := []modelCase{
		{"random", 4000, randomSettings},
		{"all on", 6000, allOn},
		{"shadow", 3000, func(r *rand.Rand) Settings { s := allOn(r); s.Shadow = true; return s }},
		{"visit only", 3000, func(r *rand.Rand) Settings {
			var s Settings
			s.Shards, s.VisitThreshold = 1+r.IntN(4), At(1+r.Int64N(300)) // around and above the bound's slack
			s.Window, s.Buckets = time.Second, 10
			return s
		}},
	}
	for _, tc := range cases {
		for seed := range uint64(12) {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				runModel(t, tc, seed)
			})
		}
	}
}

func runModel(t *testing.T, tc modelCase, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5d5))
	percentFor := func() func() int {
		pr := rand.New(rand.NewPCG(seed, 0xd1ce))
		return func() int { return pr.IntN(100) }
	}
	implPercent, modelPercent := percentFor(), percentFor()
	settings := func(s Settings) (impl, mod Settings) {
		impl, mod = s, s
		impl.Percent, mod.Percent = implPercent, modelPercent
		return impl, mod
	}

	is, ms := settings(tc.settings(r))
	p := mustPoint(t, is)
	m := newModel(ms)
	type pair struct {
		c Call
		m *modelCall
	}
	var calls []*pair
	now := t0.UnixNano() + r.Int64N(int64(time.Second)) // any phase of a bucket
	// The last steps, shown when a step fails.
	var trace []string
	logf := func(format string, args ...any) {
		if len(trace) == 40 {
			trace = trace[1:]
		}
		trace = append(trace, fmt.Sprintf("+%v: ", time.Duration(now-t0.UnixNano()))+fmt.Sprintf(format, args...))
	}
	defer func() {
		if t.Failed() {
			t.Logf("last steps:\n%s", strings.Join(trace, "\n"))
		}
	}()

	for step := range tc.steps {
		// Time moves on: mostly a little, sometimes across buckets,
		// sometimes past the window, rarely by hours.
		switch x := r.IntN(100); {
		case x < 40:
		case x < 85:
			now += r.Int64N(int64(30 * time.Millisecond))
		case x < 97:
			now += r.Int64N(int64(400 * time.Millisecond))
		case x < 99:
			now += r.Int64N(int64(12 * time.Second))
		default:
			now += r.Int64N(int64(3 * time.Hour))
		}
		at := time.Unix(0, now)
		where := func() string {
			return fmt.Sprintf("step %d at +%v (settings %+v)", step, time.Duration(now-t0.UnixNano()), m.s)
		}

		switch x := r.IntN(100); {
		case x < 50 || len(calls) == 0: // Enter
			pt := r.IntN(8) == 0
			steerShard(r)
			c := &pair{}
			got := p.Enter(&c.c, at, pt)
			want, mc := m.enter(now, pt)
			c.m = mc
			logf("call %p: Enter(pt=%v) = %+v", c, pt, got)
			if got != want {
				t.Fatalf("%s: Enter(pressureTest=%v) = %+v, want %+v", where(), pt, got, want)
			}
			calls = append(calls, c) // degraded ones too: their Exit must do nothing
		case x < 53: // Settle, as the handler's loop does once a second
			logf("Settle")
			if got, want := p.Settle(at), m.settle(now); got != want {
				t.Fatalf("%s: Settle = %v, want %v", where(), got, want)
			}
		case x < 62: // Timeout
			c := calls[r.IntN(len(calls))]
			logf("call %p: Timeout", c)
			if got, want := c.c.Timeout(at), c.m.timeout(now); got != want {
				t.Fatalf("%s: Timeout = %v, want %v", where(), got, want)
			}
		case x < 97: // Exit, sometimes twice
			i := r.IntN(len(calls))
			c := calls[i]
			o := []Outcome{OK, OK, OK, Failed, Failed, Canceled, 0}[r.IntN(7)]
			logf("call %p: Exit(%d)", c, o)
			if got, want := c.c.Exit(at, o), c.m.exit(now, o); got != want {
				t.Fatalf("%s: Exit(%d) = %v, want %v", where(), o, got, want)
			}
			if r.IntN(10) != 0 {
				calls = slices.Delete(calls, i, i+1)
			}
		default: // Reconfigure, keeping the shape
			is, ms := settings(keepShape(r, m.s))
			logf("Reconfigure(%+v)", ms)
			np, err := p.Reconfigure(is)
			if err != nil {
				t.Fatal(err)
			}
			p = np
			m.reconfigure(ms)
		}

		sn := p.Snapshot(at)
		if want := m.counts(now); sn.Counts != want {
			t.Fatalf("%s: Snapshot counts = %+v, want %+v", where(), sn.Counts, want)
		}
		if sn.InFlight != m.inflight {
			t.Fatalf("%s: InFlight = %d, want %d", where(), sn.InFlight, m.inflight)
		}
		if want := m.state(now); sn.Status.State != want || p.State(at) != want {
			t.Fatalf("%s: State = %v (State() %v), want %v", where(), sn.Status.State, p.State(at), want)
		}
		got := sn.LastTrip
		got.At = got.At.UTC()
		if got != m.last {
			t.Fatalf("%s: LastTrip = %+v, want %+v", where(), got, m.last)
		}
		var sum Counts
		for _, b := range sn.Series {
			sum.add(b)
		}
		if sum != sn.Counts {
			t.Fatalf("%s: Series sums to %+v, want %+v", where(), sum, sn.Counts)
		}
	}
}
