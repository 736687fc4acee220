package limiter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The model's runs (model_test.go has the model): random settings that
// make every strategy trip and recover often, and TestModel, which drives
// a Point and the model through the same random steps.

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
	if r.IntN(2) == 0 {
		s.RecoveryTime = time.Duration(1+r.IntN(2000)) * time.Millisecond
		s.RecoveryStart = []Threshold{{}, At(0), At(10), At(50), At(100)}[r.IntN(5)]
	}
	s.SheddableShare = []Threshold{{}, At(0), At(30), At(80), At(100)}[r.IntN(5)]
	if r.IntN(2) == 0 {
		s.AdaptiveConcurrency = randomAdaptive(r)
	}
	return s
}

// randomAdaptive is an adaptive limit that moves within a model run: short
// intervals, low limits.
func randomAdaptive(r *rand.Rand) AdaptiveConcurrency {
	a := AdaptiveConcurrency{On: true, MinLimit: 1 + r.Int64N(3)}
	a.MaxLimit = a.MinLimit + r.Int64N(8)
	a.Interval = time.Duration(1+r.IntN(60)) * time.Millisecond
	a.Tolerance = []Threshold{{}, At(0), At(50)}[r.IntN(3)]
	a.MinLatencyInterval = a.Interval * time.Duration(1+r.IntN(40))
	return a
}

// keepShape returns fresh random thresholds with the shape and token
// bucket of s, for a Reconfigure that keeps the state.
func keepShape(r *rand.Rand, s Settings) Settings {
	n := randomSettings(r)
	n.Window, n.Buckets, n.Shards = s.Window, s.Buckets, s.Shards
	n.TokensPerSecond, n.TokenBucketSize = s.TokensPerSecond, s.TokenBucketSize
	if s.AdaptiveConcurrency.On && r.IntN(8) != 0 {
		n.AdaptiveConcurrency = randomAdaptive(r) // kept on: its state carries over
	}
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
// sequences of Enter, Timeout, Exit, Refused, Reconfigure and Snapshot at random,
// non-decreasing instants, and requires identical verdicts, events and
// counts at every step.
func TestModel(t *testing.T) {
	cases := []modelCase{
		{"random", 4000, randomSettings},
		{"all on", 6000, allOn},
		{"shadow", 3000, func(r *rand.Rand) Settings { s := allOn(r); s.Shadow = true; return s }},
		{"adaptive and priorities", 6000, func(r *rand.Rand) Settings {
			var s Settings
			s.Window, s.Buckets, s.Shards = time.Second, 10, 1+r.IntN(4)
			s.AdaptiveConcurrency = randomAdaptive(r)
			s.SheddableShare = []Threshold{{}, At(0), At(50)}[r.IntN(3)]
			s.DowngradeRate = []Threshold{{}, At(50)}[r.IntN(2)]
			s.TimeoutThreshold, s.TimeoutCountThreshold = 100*time.Millisecond, At(3+r.Int64N(5))
			s.DelayTime, s.RetryInterval = 300*time.Millisecond, 50*time.Millisecond
			s.RecoveryTime, s.RecoveryStart = time.Duration(100+r.IntN(900))*time.Millisecond, At(r.Int64N(60))
			return s
		}},
		{"tokens and refusals", 4000, func(r *rand.Rand) Settings {
			// A small bucket, often empty, so that a token Refused gives
			// back decides a later request.
			var s Settings
			s.Window, s.Buckets, s.Shards = time.Second, 10, 1+r.IntN(4)
			s.TokensPerSecond, s.TokenBucketSize = At(5+r.Int64N(20)), bucketSize(r.Int64N(5))
			s.VisitThreshold = []Threshold{{}, At(5 + r.Int64N(30))}[r.IntN(2)]
			return s
		}},
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

// modelPair is one call as the Point and the model each hold it.
type modelPair struct {
	c Call
	m *modelCall
}

// modelRun is one run in progress: the Point and the model side by side,
// the calls they hold, the current instant and the last steps taken.
type modelRun struct {
	t        *testing.T
	r        *rand.Rand
	p        *Point
	m        *model
	settings func(Settings) (impl, mod Settings)
	calls    []*modelPair
	now      int64
	step     int
	trace    []string // the last steps, shown when a step fails
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
	run := &modelRun{t: t, r: r, p: mustPoint(t, is), m: newModel(ms), settings: settings}
	run.now = t0.UnixNano() + r.Int64N(int64(time.Second)) // any phase of a bucket
	defer func() {
		if t.Failed() {
			t.Logf("last steps:\n%s", strings.Join(run.trace, "\n"))
		}
	}()
	for step := range tc.steps {
		run.step = step
		run.advance()
		run.act()
		run.compare()
	}
}

func (run *modelRun) logf(format string, args ...any) {
	if len(run.trace) == 40 {
		run.trace = run.trace[1:]
	}
	run.trace = append(run.trace, fmt.Sprintf("+%v: ", time.Duration(run.now-t0.UnixNano()))+fmt.Sprintf(format, args...))
}

// where names the step in a failure message.
func (run *modelRun) where() string {
	return fmt.Sprintf("step %d at +%v (settings %+v)", run.step, time.Duration(run.now-t0.UnixNano()), run.m.s)
}

// advance moves time on: mostly a little, sometimes across buckets,
// sometimes past the window, rarely by hours.
func (run *modelRun) advance() {
	r := run.r
	switch x := r.IntN(100); {
	case x < 40:
	case x < 85:
		run.now += r.Int64N(int64(30 * time.Millisecond))
	case x < 97:
		run.now += r.Int64N(int64(400 * time.Millisecond))
	case x < 99:
		run.now += r.Int64N(int64(12 * time.Second))
	default:
		run.now += r.Int64N(int64(3 * time.Hour))
	}
}

// act takes one random step on both sides and compares what each returns.
func (run *modelRun) act() {
	t, r, now, at := run.t, run.r, run.now, time.Unix(0, run.now)
	switch x := r.IntN(100); {
	case x < 50 || len(run.calls) == 0:
		run.enter()
	case x < 53: // Settle, as the handler's loop does once a second
		run.logf("Settle")
		if got, want := run.p.Settle(at), run.m.settle(now); got != want {
			t.Fatalf("%s: Settle = %v, want %v", run.where(), got, want)
		}
	case x < 62: // Timeout
		c := run.calls[r.IntN(len(run.calls))]
		run.logf("call %p: Timeout", c)
		if got, want := c.c.Timeout(at), c.m.timeout(now); got != want {
			t.Fatalf("%s: Timeout = %v, want %v", run.where(), got, want)
		}
	case x < 65: // Refused: a judge after the limiter turns the call away
		c := run.calls[r.IntN(len(run.calls))]
		run.logf("call %p: Refused", c)
		if got, want := c.c.Refused(at), c.m.refused(now); got != want {
			t.Fatalf("%s: Refused = %v, want %v", run.where(), got, want)
		}
	case x < 97:
		run.exit()
	default: // Reconfigure, keeping the shape
		is, ms := run.settings(keepShape(r, run.m.s))
		run.logf("Reconfigure(%+v)", ms)
		np, err := run.p.Reconfigure(is)
		if err != nil {
			t.Fatal(err)
		}
		run.p = np
		run.m.reconfigure(ms)
	}
}

func (run *modelRun) enter() {
	r := run.r
	pt := r.IntN(8) == 0
	pr := Priority(r.IntN(4)) // the zero Priority included
	steerShard(r)
	c := &modelPair{}
	got := run.p.Enter(&c.c, time.Unix(0, run.now), Request{PressureTest: pt, Priority: pr})
	want, mc := run.m.enter(run.now, pt, pr)
	c.m = mc
	run.logf("call %p: Enter(pt=%v, %v) = %+v", c, pt, pr, got)
	if got != want {
		run.t.Fatalf("%s: Enter(pressureTest=%v, %v) = %+v, want %+v", run.where(), pt, pr, got, want)
	}
	run.calls = append(run.calls, c) // degraded ones too: their Exit must do nothing
}

// exit ends a random call, and sometimes leaves it held to be ended twice.
func (run *modelRun) exit() {
	r := run.r
	i := r.IntN(len(run.calls))
	c := run.calls[i]
	o := []Outcome{OK, OK, OK, Failed, Failed, Canceled, 0}[r.IntN(7)]
	run.logf("call %p: Exit(%d)", c, o)
	if got, want := c.c.Exit(time.Unix(0, run.now), o), c.m.exit(run.now, o); got != want {
		run.t.Fatalf("%s: Exit(%d) = %v, want %v", run.where(), o, got, want)
	}
	if r.IntN(10) != 0 {
		run.calls = slices.Delete(run.calls, i, i+1)
	}
}

// compare requires the Point's Snapshot to match the model after a step.
func (run *modelRun) compare() {
	t, p, m, now, at := run.t, run.p, run.m, run.now, time.Unix(0, run.now)
	where := run.where
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
	var wantLimit int64
	if m.ad != nil {
		wantLimit = m.ad.current(m.s.AdaptiveConcurrency)
	}
	if sn.Adaptive.Limit != wantLimit {
		t.Fatalf("%s: adaptive limit = %d, want %d", where(), sn.Adaptive.Limit, wantLimit)
	}
	if rec := m.recovering(now); sn.Status.Recovering != rec {
		t.Fatalf("%s: Recovering = %v, want %v", where(), sn.Status.Recovering, rec)
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
