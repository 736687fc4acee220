package limiter

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The tests state instants as offsets from t0, the start of a bucket. Unless
// a test says otherwise its window is 1s in 10 buckets of 100ms.

func at(d time.Duration) time.Time { return t0.Add(d) }

const ms = time.Millisecond

// settings returns Settings with every strategy off and a 1s window,
// changed by f.
func settings(f func(*Settings)) Settings {
	var s Settings
	s.Window, s.Buckets = time.Second, 10
	f(&s)
	return s
}

// enter is Enter with a fresh Call.
func enter(p *Point, now time.Time) (Verdict, *Call) {
	c := new(Call)
	return p.Enter(c, now, Request{}), c
}

// pass enters n requests at now that must be allowed, and exits them at now
// with o.
func pass(t *testing.T, p *Point, n int, now time.Time, o Outcome) {
	t.Helper()
	for i := range n {
		v, c := enter(p, now)
		if !v.Allowed || v.Strategy != 0 {
			t.Fatalf("request %d of %d at %v: got %+v, want allowed with no trip", i+1, n, now.Sub(t0), v)
		}
		c.Exit(now, o)
	}
}

// want checks a verdict's trip fields.
func want(t *testing.T, what string, v Verdict, allowed bool, s Strategy, count, threshold int64) {
	t.Helper()
	if v.Allowed != allowed || v.Strategy != s || v.Count != count || v.Threshold != threshold {
		t.Errorf("%s: got allowed=%v %v %d/%d, want allowed=%v %v %d/%d",
			what, v.Allowed, v.Strategy, v.Count, v.Threshold, allowed, s, count, threshold)
	}
}

func counts(p *Point, now time.Time) Counts { return p.Snapshot(now).Counts }

func TestVisit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold int64
		shards    int
	}{
		{"1", 1, 0},
		{"5", 5, 0},
		{"5 one shard", 5, 1},
		// Above the bound's slack: the first requests pass by the bound,
		// the last ones by the exact sum.
		{"300", 300, 0},
		{"300 eight shards", 300, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPoint(t, settings(func(s *Settings) { s.VisitThreshold, s.Shards = At(tc.threshold), tc.shards }))
			pass(t, p, int(tc.threshold), at(0), OK) // threshold-1 passes, and the threshold-th
			v, c := enter(p, at(0))
			want(t, "threshold+1", v, false, Visit, tc.threshold+1, tc.threshold)
			if c.Exit(at(0), OK) != 0 || p.InFlight() != 0 {
				t.Errorf("Exit on a degraded call changed something")
			}
			// Degraded requests are subtracted: the count stays at threshold+1.
			for range 3 {
				v, _ = enter(p, at(50*ms))
				want(t, "degraded again", v, false, Visit, tc.threshold+1, tc.threshold)
			}
			if got, w := counts(p, at(50*ms)), (Counts{Visits: tc.threshold + 4, Degraded: 4}); got != w {
				t.Errorf("counts = %+v, want %+v", got, w)
			}
			// The passes of bucket 0 are in until the bucket started 1s ago.
			v, _ = enter(p, at(999*ms))
			want(t, "at 999ms", v, false, Visit, tc.threshold+1, tc.threshold)
			pass(t, p, 1, at(time.Second), OK)
		})
	}
	t.Run("0 degrades everything", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) { s.VisitThreshold = At(0) }))
		for i := range 3 {
			v, _ := enter(p, at(time.Duration(i)*time.Hour))
			want(t, "visit 0", v, false, Visit, 1, 0)
		}
	})
	t.Run("the zero Threshold is off", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) { s.VisitThreshold = Threshold{} }))
		pass(t, p, 1000, at(0), OK)
	})
}

func TestTokenBucket(t *testing.T) {
	for _, tc := range []struct {
		name             string
		perSecond        int64
		size             Threshold
		capacity         int64
		interval         time.Duration
		wantPerSecondCap bool
	}{
		{"size above rate", 10, At(20), 20, 100 * ms, false},
		{"rate above size", 20, At(5), 20, 50 * ms, true},
		{"no size", 10, Threshold{}, 10, 100 * ms, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPoint(t, settings(func(s *Settings) { s.TokensPerSecond, s.TokenBucketSize = At(tc.perSecond), tc.size }))
			if got := p.Snapshot(at(0)).Tokens; got != tc.capacity {
				t.Errorf("tokens at start = %d, want %d (full)", got, tc.capacity)
			}
			pass(t, p, int(tc.capacity), at(0), OK)
			// A trip counts the tokens used: all of them.
			v, _ := enter(p, at(tc.interval-1))
			want(t, "empty bucket", v, false, TokenBucket, tc.capacity, tc.capacity)
			pass(t, p, 1, at(tc.interval), OK) // one token refilled
			v, _ = enter(p, at(tc.interval))
			want(t, "empty again", v, false, TokenBucket, tc.capacity, tc.capacity)
			// A long idle time refills up to the capacity only.
			pass(t, p, int(tc.capacity), at(time.Hour), OK)
			v, _ = enter(p, at(time.Hour))
			want(t, "after an hour", v, false, TokenBucket, tc.capacity, tc.capacity)
		})
	}
	t.Run("only forwarded requests take tokens", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    func(*Settings)
		}{
			{"degraded by visit", func(s *Settings) { s.VisitThreshold = At(0) }},
			{"degraded by a later strategy", func(s *Settings) { s.ExceptionThreshold = At(0) }},
			{"degraded by pressure test", func(s *Settings) { s.PressureTestDowngrade = true }},
			{"shadow would-be degraded", func(s *Settings) { s.ExceptionThreshold, s.Shadow = At(0), true }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := mustPoint(t, settings(func(s *Settings) {
					s.TokensPerSecond, s.TokenBucketSize = At(1), At(3)
					tc.f(s)
				}))
				for range 10 {
					p.Enter(new(Call), at(0), Request{PressureTest: true})
				}
				if got := p.Snapshot(at(0)).Tokens; got != 3 {
					t.Errorf("tokens = %d, want 3", got)
				}
			})
		}
	})
	t.Run("a request the draw forwards takes a token", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) {
			s.TokensPerSecond, s.TokenBucketSize = At(1), At(3)
			s.VisitThreshold, s.DowngradeRate = At(0), At(0)
		}))
		v, _ := enter(p, at(0))
		want(t, "forwarded trip", v, true, Visit, 1, 0)
		if got := p.Snapshot(at(0)).Tokens; got != 2 {
			t.Errorf("tokens = %d, want 2", got)
		}
	})
}

func TestConcurrent(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.ConcurrentThreshold = At(2) }))
	_, c1 := enter(p, at(0))
	v, c2 := enter(p, at(0))
	want(t, "second", v, true, 0, 0, 0)
	v, c3 := enter(p, at(0))
	want(t, "third", v, false, Concurrent, 3, 2)
	if got := p.InFlight(); got != 2 {
		t.Errorf("in flight = %d, want 2 (a degraded request holds no slot)", got)
	}
	c3.Exit(at(0), OK)
	c1.Exit(at(ms), Canceled) // a client that goes away frees its slot
	v, _ = enter(p, at(ms))
	want(t, "after an exit", v, true, 0, 0, 0)
	c2.Exit(at(ms), OK)

	p0 := mustPoint(t, settings(func(s *Settings) { s.ConcurrentThreshold = At(0) }))
	v, _ = enter(p0, at(0))
	want(t, "threshold 0", v, false, Concurrent, 1, 0)
}

// timeoutAt is the duration threshold of the timeout tests.
const timeoutAt = 100 * ms

// timeoutPoint has a timeoutAt duration threshold and the given count
// threshold.
func timeoutPoint(t *testing.T, count Threshold) *Point {
	return mustPoint(t, settings(func(s *Settings) { s.TimeoutThreshold, s.TimeoutCountThreshold = timeoutAt, count }))
}

// timeoutExclusions remove time from a call of 2*timeoutAt: a call is a
// timeout while what is left is at least the threshold.
var timeoutExclusions = []struct {
	name     string
	excluded time.Duration
	timeout  bool
}{
	{"nothing excluded", 0, true},
	{"duration threshold exactly", timeoutAt, true},
	{"duration threshold-1ns", timeoutAt + 1, false},
	{"all but nothing", 2 * timeoutAt, false},
	{"a negative exclusion is ignored", -timeoutAt, true},
}

func TestTimeout(t *testing.T) {
	const tt = timeoutAt
	t.Run("a call of exactly the threshold is a timeout", func(t *testing.T) {
		p := timeoutPoint(t, Threshold{})
		_, c := enter(p, at(0))
		c.Exit(at(tt-1), OK)
		if got := counts(p, at(tt)).Timeouts; got != 0 {
			t.Errorf("timeouts after a call of threshold-1ns = %d, want 0", got)
		}
		_, c = enter(p, at(0))
		c.Exit(at(tt), OK)
		if got := counts(p, at(tt)).Timeouts; got != 1 {
			t.Errorf("timeouts after a call of the threshold = %d, want 1", got)
		}
		if got := p.TimeoutThreshold(); got != tt {
			t.Errorf("TimeoutThreshold() = %v, want %v", got, tt)
		}
	})
	t.Run("Timeout counts once while in flight", func(t *testing.T) {
		p := timeoutPoint(t, Threshold{})
		_, c := enter(p, at(0))
		if c.Timeout(at(tt - 1)) {
			t.Errorf("Timeout before the threshold = true, want false")
		}
		if !c.Timeout(at(tt)) {
			t.Errorf("Timeout at the threshold = false, want true")
		}
		if c.Timeout(at(2 * tt)) {
			t.Errorf("second Timeout = true, want false")
		}
		if got := counts(p, at(tt)).Timeouts; got != 1 {
			t.Errorf("timeouts in flight = %d, want 1", got)
		}
		c.Exit(at(3*tt), Failed)
		if got, w := counts(p, at(3*tt)), (Counts{Visits: 1, Timeouts: 1, Exceptions: 1}); got != w {
			t.Errorf("counts after Exit = %+v, want %+v (the timeout not counted again)", got, w)
		}
		if c.Timeout(at(4 * tt)) {
			t.Errorf("Timeout after Exit = true, want false")
		}
	})
	t.Run("time excluded as the client's is not the call's", func(t *testing.T) {
		for _, tc := range timeoutExclusions {
			p := timeoutPoint(t, Threshold{})
			_, c := enter(p, at(0))
			c.Exclude(tc.excluded)
			if got := c.Timeout(at(2 * tt)); got != tc.timeout {
				t.Errorf("%s: Timeout = %v, want %v (Duration %v)", tc.name, got, tc.timeout, c.Duration(at(2*tt)))
			}
			p = timeoutPoint(t, Threshold{})
			_, c = enter(p, at(0))
			c.Exclude(tc.excluded)
			c.Exit(at(2*tt), OK)
			if got, want := counts(p, at(2*tt)).Timeouts, map[bool]int64{true: 1}[tc.timeout]; got != want {
				t.Errorf("%s: timeouts after Exit = %d, want %d", tc.name, got, want)
			}
		}
		var zero Call
		zero.Exclude(tt)
		if got := zero.Duration(at(tt)); got != 0 {
			t.Errorf("Duration of an empty Call = %v, want 0", got)
		}
	})
}

func TestTimeoutCount(t *testing.T) {
	const tt = timeoutAt
	t.Run("timeouts >= count threshold trip", func(t *testing.T) {
		p := timeoutPoint(t, At(2))
		_, c := enter(p, at(0))
		c.Timeout(at(tt))
		pass(t, p, 1, at(tt), OK) // 1 timeout: passes
		_, c = enter(p, at(tt))
		c.Timeout(at(2 * tt))
		v, _ := enter(p, at(2*tt))
		want(t, "2 timeouts", v, false, Timeout, 2, 2)
		c.Exit(at(2*tt), OK)
	})
	t.Run("count threshold 0 trips at once", func(t *testing.T) {
		v, _ := enter(timeoutPoint(t, At(0)), at(0))
		want(t, "0", v, false, Timeout, 0, 0)
	})
	t.Run("no timeout threshold: nothing counts, nothing trips", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) { s.TimeoutCountThreshold = At(0) }))
		_, c := enter(p, at(0))
		if c.Timeout(at(time.Hour)) {
			t.Errorf("Timeout with no threshold = true")
		}
		c.Exit(at(time.Hour), OK)
		pass(t, p, 1, at(time.Hour), OK)
		if got := p.TimeoutThreshold(); got != 0 {
			t.Errorf("TimeoutThreshold() = %v, want 0", got)
		}
	})
}

func TestException(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.ExceptionThreshold = At(3) }))
	pass(t, p, 2, at(0), Failed)
	pass(t, p, 5, at(0), Canceled) // not exceptions
	pass(t, p, 1, at(0), Failed)   // the 3rd exception, on a passing request
	v, _ := enter(p, at(0))
	want(t, "3 exceptions", v, false, Exception, 3, 3)
	pass(t, p, 1, at(time.Second), OK) // they left the window

	v, _ = enter(mustPoint(t, settings(func(s *Settings) { s.ExceptionThreshold = At(0) })), at(0))
	want(t, "threshold 0", v, false, Exception, 0, 0)
}

func TestExceptionRate(t *testing.T) {
	t.Run("rate and minus degraded", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) { s.ExceptionRateThreshold = At(50) }))
		pass(t, p, 1, at(0), OK)
		pass(t, p, 1, at(0), Failed)
		pass(t, p, 1, at(0), Failed) // 1 exception in 3 visits: 33% < 50
		v, _ := enter(p, at(0))      // 2 in 4: 50% trips
		want(t, "2 of 4", v, false, ExceptionRate, 50, 50)
		// 2 exceptions in 5 visits of which 1 degraded: 2/4 still trips;
		// without subtracting it would be 40%.
		v, _ = enter(p, at(0))
		want(t, "2 of 5-1", v, false, ExceptionRate, 50, 50)
	})
	t.Run("not judged until visits exceed the start", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) { s.ExceptionRateThreshold, s.ExceptionRateStart = At(50), 4 }))
		pass(t, p, 4, at(0), Failed) // visits 1..4 <= 4: not judged
		v, _ := enter(p, at(0))      // visits 5 > 4: 4*100/5 = 80%
		want(t, "5th", v, false, ExceptionRate, 80, 50)
	})
	t.Run("threshold 0 trips past the start without exceptions", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) { s.ExceptionRateThreshold, s.ExceptionRateStart = At(0), 2 }))
		pass(t, p, 2, at(0), OK)
		v, _ := enter(p, at(0))
		want(t, "3rd", v, false, ExceptionRate, 0, 0)
	})
	t.Run("threshold 100 trips only when every passed call failed", func(t *testing.T) {
		p := mustPoint(t, settings(func(s *Settings) { s.ExceptionRateThreshold = At(100) }))
		pass(t, p, 1, at(0), Failed)
		pass(t, p, 1, at(0), OK) // 1 of 2: passes
		pass(t, p, 1, at(0), Failed)
		v, _ := enter(p, at(0)) // 2 of 4
		want(t, "2 of 4", v, true, 0, 0, 0)
	})
}

func TestWindowExpiry(t *testing.T) {
	p := mustPoint(t, Settings{}) // 10s in 10 buckets of 1s
	pass(t, p, 1, at(0), Failed)
	if got, w := counts(p, at(950*ms-1)), (Counts{Visits: 1, Exceptions: 1}); got != w {
		t.Errorf("counts at 950ms-1 = %+v, want %+v", got, w)
	}
	pass(t, p, 2, at(950*ms), OK)
	pass(t, p, 3, at(1500*ms), OK)
	for _, tc := range []struct {
		now  time.Duration
		want Counts
	}{
		{10*time.Second - 1, Counts{Visits: 6, Exceptions: 1}},
		{10 * time.Second, Counts{Visits: 3}}, // bucket 0 started exactly 10s ago: gone
		{11*time.Second - 1, Counts{Visits: 3}},
		{11 * time.Second, Counts{}},
		{3 * time.Hour, Counts{}},
	} {
		if got := counts(p, at(tc.now)); got != tc.want {
			t.Errorf("counts at %v = %+v, want %+v", tc.now, got, tc.want)
		}
	}
	// Across a gap of hours the ring starts afresh; across a gap shorter
	// than the window it keeps the buckets still in.
	pass(t, p, 1, at(3*time.Hour), OK)
	pass(t, p, 1, at(3*time.Hour+4*time.Second), Failed)
	pass(t, p, 1, at(3*time.Hour+12*time.Second), OK)
	if got, w := counts(p, at(3*time.Hour+12*time.Second)), (Counts{Visits: 2, Exceptions: 1}); got != w {
		t.Errorf("counts after the gaps = %+v, want %+v", got, w)
	}
	sn := p.Snapshot(at(3*time.Hour + 12*time.Second))
	if len(sn.Series) != 10 || sn.BucketWidth != time.Second {
		t.Fatalf("series of %d buckets of %v, want 10 of 1s", len(sn.Series), sn.BucketWidth)
	}
	if w := (Counts{Visits: 1, Exceptions: 1}); sn.Series[1] != w { // +4s; series[0] is +3s
		t.Errorf("series[1] = %+v, want %+v", sn.Series[1], w)
	}
	if w := (Counts{Visits: 1}); sn.Series[9] != w {
		t.Errorf("series[9] (newest) = %+v, want %+v", sn.Series[9], w)
	}
}

func TestDowngradeRate(t *testing.T) {
	for _, rate := range []int{0, 50, 100, -1} { // -1: off, which degrades as 100 does
		seq := rand.New(rand.NewPCG(7, 7))
		draws := 0
		s := settings(func(s *Settings) {
			s.VisitThreshold, s.DowngradeRate = At(0), At(int64(rate))
			if rate < 0 {
				s.DowngradeRate = Threshold{}
			}
			s.Percent = func() int { draws++; return seq.IntN(100) }
		})
		p := mustPoint(t, s)
		ref := rand.New(rand.NewPCG(7, 7))
		degraded := 0
		for i := range 1000 {
			v, c := enter(p, at(0))
			wantDegraded := rate == 100 || rate < 0 || (rate == 50 && ref.IntN(100) < 50)
			if v.Allowed == wantDegraded || v.Strategy != Visit {
				t.Fatalf("rate %d, request %d: got %+v, want degraded=%v by visit", rate, i, v, wantDegraded)
			}
			if !v.Allowed {
				degraded++
			}
			c.Exit(at(0), OK)
		}
		if wantDraws := map[int]int{0: 0, 50: 1000, 100: 0, -1: 0}[rate]; draws != wantDraws {
			t.Errorf("rate %d: Percent called %d times, want %d", rate, draws, wantDraws)
		}
		t.Logf("rate %d: %d of 1000 degraded", rate, degraded)
		if rate == 50 && (degraded < 430 || degraded > 570) {
			t.Errorf("rate 50: %d of 1000 degraded, want about 500", degraded)
		}
	}
}

func TestShadow(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) {
		s.VisitThreshold, s.Shadow = At(2), true
		s.DelayTime, s.RetryInterval = 5*time.Second, time.Second
	}))
	pass(t, p, 2, at(0), OK)
	v, c := enter(p, at(0))
	if !v.Allowed || !v.Shadow || v.Strategy != Visit || v.Count != 3 || !v.Events.Has(EventTripped|EventDelayStarted) {
		t.Errorf("shadow trip: got %+v, want allowed, shadow, visit 3/2, tripped and delay started", v)
	}
	c.Exit(at(0), Failed) // its outcome still counts
	v, c = enter(p, at(500*ms))
	if !v.Allowed || !v.Shadow || !v.Delay || v.Probe {
		t.Errorf("shadow in delay: got %+v, want allowed, shadow, delay", v)
	}
	c.Exit(at(500*ms), OK)
	if got, w := counts(p, at(500*ms)), (Counts{Visits: 4, Degraded: 2, Exceptions: 1}); got != w {
		t.Errorf("counts = %+v, want %+v", got, w)
	}
	if st := p.Snapshot(at(500 * ms)).Status; st.State != Shadow || !st.InDelay || st.DelayStrategy != Visit {
		t.Errorf("state = %v (in delay %v, %v), want shadow in a delay (visit)", st.State, st.InDelay, st.DelayStrategy)
	}
	v, c = enter(p, at(time.Second))
	if !v.Allowed || v.Shadow || !v.Probe {
		t.Errorf("shadow probe: got %+v, want an allowed probe", v)
	}
	if ev := c.Exit(at(time.Second), OK); ev != EventDelayEnded {
		t.Errorf("good probe: events %v, want delay ended", ev)
	}
}

func TestPressureTest(t *testing.T) {
	noDraw := func() int { t.Fatal("Percent called for pressure-test traffic"); return 0 }
	p := mustPoint(t, settings(func(s *Settings) { s.PressureTestDowngrade, s.DowngradeRate, s.Percent = true, At(50), noDraw }))
	v := p.Enter(new(Call), at(0), Request{PressureTest: true})
	want(t, "pressure test", v, false, PressureTest, 0, 0)
	if v.Events != 0 || p.State(at(0)) != Closed {
		t.Errorf("pressure test tripped the point: events %v", v.Events)
	}
	pass(t, p, 1, at(0), OK) // ordinary traffic is judged
	if got, w := counts(p, at(0)), (Counts{Visits: 2, Degraded: 1}); got != w {
		t.Errorf("counts = %+v, want %+v", got, w)
	}
	// Without PressureTestDowngrade it is ordinary traffic.
	p = mustPoint(t, settings(func(s *Settings) { s.VisitThreshold = At(1) }))
	if v := p.Enter(new(Call), at(0), Request{PressureTest: true}); !v.Allowed {
		t.Errorf("pressure test without PressureTestDowngrade: got %+v, want allowed", v)
	}
	want(t, "then", p.Enter(new(Call), at(0), Request{PressureTest: true}), false, Visit, 2, 1)
	// In shadow mode it is forwarded.
	p = mustPoint(t, settings(func(s *Settings) { s.PressureTestDowngrade, s.Shadow = true, true }))
	if v := p.Enter(new(Call), at(0), Request{PressureTest: true}); !v.Allowed || !v.Shadow || v.Strategy != PressureTest {
		t.Errorf("shadow pressure test: got %+v, want allowed, shadow", v)
	}
}

// The delay tests' point trips on its second visit, then degrades for
// delayTime with a probe every delayRetry; a call of 300ms is a timeout.
const delayRetry, delayTime = time.Second, 10 * time.Second

// delayPoint is the delay tests' point, changed by f if f is not nil.
func delayPoint(t *testing.T, f func(*Settings)) *Point {
	return mustPoint(t, settings(func(s *Settings) {
		s.VisitThreshold, s.DelayTime, s.RetryInterval, s.TimeoutThreshold = At(1), delayTime, delayRetry, 300*ms
		if f != nil {
			f(s)
		}
	}))
}

// tripDelay passes one request and trips the point at 0.
func tripDelay(t *testing.T, p *Point) {
	t.Helper()
	pass(t, p, 1, at(0), OK)
	v, _ := enter(p, at(0))
	if v.Allowed || v.Strategy != Visit || v.Delay || v.Events != EventTripped|EventDelayStarted {
		t.Fatalf("trip: got %+v, want degraded by visit, tripped, delay started", v)
	}
}

// degradedAt requires a request at d to be degraded in the delay.
func degradedAt(t *testing.T, p *Point, d time.Duration) {
	t.Helper()
	v, _ := enter(p, at(d))
	if v.Allowed || !v.Delay || v.Strategy != Visit || v.Probe || v.Events != 0 {
		t.Fatalf("at %v: got %+v, want degraded in the delay, as visit", d, v)
	}
}

// probeAt requires a request at d to be a probe, and returns its call.
func probeAt(t *testing.T, p *Point, d time.Duration) *Call {
	t.Helper()
	v, c := enter(p, at(d))
	if !v.Allowed || !v.Delay || !v.Probe || v.Strategy != Visit {
		t.Fatalf("at %v: got %+v, want a probe", d, v)
	}
	return c
}

func TestDelayAndProbes(t *testing.T) {
	const retry, delay = delayRetry, delayTime
	t.Run("probes", func(t *testing.T) {
		p := delayPoint(t, nil)
		tripDelay(t, p)
		if st := p.Snapshot(at(0)).Status; st.State != Delay || st.DelayUntil != at(delay) || st.NextProbe != at(retry) || p.State(at(0)) != Delay {
			t.Errorf("state %v until %v, next probe %v; want delay until %v, next probe %v", st.State, st.DelayUntil.Sub(t0), st.NextProbe.Sub(t0), delay, retry)
		}
		degradedAt(t, p, retry-1)
		c := probeAt(t, p, retry)
		degradedAt(t, p, retry) // one probe at a time
		if ev := c.Exit(at(retry+100*ms), Failed); ev != 0 {
			t.Errorf("failed probe: events %v, want none", ev)
		}
		degradedAt(t, p, 2*retry+100*ms-1) // another interval from the failed probe's exit
		c = probeAt(t, p, 2*retry+100*ms)
		c.Exit(at(2*retry+400*ms), OK) // a timeout (300ms) is a failed probe
		degradedAt(t, p, 3*retry+400*ms-1)
		c = probeAt(t, p, 3*retry+400*ms)
		c.Exit(at(3*retry+400*ms), Canceled) // frees the probe slot at once
		c = probeAt(t, p, 3*retry+400*ms)
		inflight, _ := enter(p, at(3*retry+400*ms)) // not a probe: degraded
		if inflight.Allowed {
			t.Fatalf("second request during a probe allowed")
		}
		if ev := c.Exit(at(3*retry+500*ms), OK); ev != EventDelayEnded {
			t.Errorf("good probe: events %v, want delay ended", ev)
		}
		if sn := p.Snapshot(at(3*retry + 500*ms)); sn.Status.State != Closed || sn.Counts != (Counts{}) || p.State(at(3*retry+500*ms)) != Closed {
			t.Errorf("after a good probe: state %v, counts %+v; want closed with the window cleared", sn.Status.State, sn.Counts)
		}
		pass(t, p, 1, at(3*retry+500*ms), OK)
	})
	t.Run("Timeout in flight fails a probe", func(t *testing.T) {
		p := delayPoint(t, nil)
		tripDelay(t, p)
		c := probeAt(t, p, retry)
		c.Timeout(at(retry + 300*ms))
		if ev := c.Exit(at(retry+350*ms), OK); ev != 0 {
			t.Errorf("timed-out probe: events %v, want none", ev)
		}
		degradedAt(t, p, 2*retry+350*ms-1)
	})
}

// TestDelayEnds: what a delay's end clears, and the draw within a delay.
func TestDelayEnds(t *testing.T) {
	const retry, delay = delayRetry, delayTime
	t.Run("ends by time", func(t *testing.T) {
		p := delayPoint(t, func(s *Settings) { s.RetryInterval = 0 }) // no probes
		tripDelay(t, p)
		degradedAt(t, p, delay-1)
		// The next request would end the delay and find the window
		// cleared: the point reads closed before any request does so.
		if sn := p.Snapshot(at(delay)); sn.Status.State != Closed || sn.Status.InDelay || sn.Counts == (Counts{}) {
			t.Errorf("at the delay's end before a request: state %v (in delay %v), counts %+v; want closed, the counts still held", sn.Status.State, sn.Status.InDelay, sn.Counts)
		}
		v, _ := enter(p, at(delay))
		if !v.Allowed || v.Strategy != 0 || v.Events != EventDelayEnded {
			t.Errorf("at the delay's end: got %+v, want allowed, delay ended", v)
		}
		// visitThreshold 1: the new visit is the one the window allows.
		if sn := p.Snapshot(at(delay)); sn.Status.State != Open || sn.Counts != (Counts{Visits: 1}) {
			t.Errorf("after the delay: state %v counts %+v, want open, only the new visit", sn.Status.State, sn.Counts)
		}
	})
	t.Run("calls begun before a clear do not count after it", func(t *testing.T) {
		p := delayPoint(t, func(s *Settings) { s.VisitThreshold = At(2) })
		_, old := enter(p, at(0))
		pass(t, p, 1, at(0), OK)
		enter(p, at(0)) // trips
		c := probeAt(t, p, retry)
		c.Exit(at(retry), OK) // ends the delay, clears the window
		if !old.Timeout(at(retry)) {
			t.Errorf("Timeout of the old call = false, want true (it is still a timeout)")
		}
		old.Exit(at(retry), Failed)
		if got, w := counts(p, at(retry)), (Counts{}); got != w {
			t.Errorf("counts = %+v, want %+v", got, w)
		}
		if p.InFlight() != 0 {
			t.Errorf("in flight = %d, want 0", p.InFlight())
		}
	})
	t.Run("the draw applies in the delay", func(t *testing.T) {
		p := delayPoint(t, func(s *Settings) { s.DowngradeRate, s.RetryInterval = At(0), 0 })
		pass(t, p, 1, at(0), OK)
		v, _ := enter(p, at(0))
		if !v.Allowed || !v.Events.Has(EventDelayStarted) {
			t.Fatalf("trip with rate 0: got %+v, want allowed and the delay started", v)
		}
		if v, _ := enter(p, at(ms)); !v.Allowed || !v.Delay || v.Probe {
			t.Errorf("in the delay with rate 0: got %+v, want allowed, delay", v)
		}
	})
}

func TestEventsOnce(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.VisitThreshold = At(1) }))
	if v, _ := enter(p, at(0)); v.Events != 0 {
		t.Errorf("pass: events %v", v.Events)
	}
	if v, _ := enter(p, at(0)); v.Events != EventTripped {
		t.Errorf("first trip: events %v, want tripped", v.Events)
	}
	if v, _ := enter(p, at(0)); v.Events != 0 {
		t.Errorf("second trip: events %v, want none", v.Events)
	}
	if sn := p.Snapshot(at(0)); sn.Status.State != Open || sn.Status.Reason != (Reading{Visit, 1, 1, true}) || sn.LastTrip.Count != 2 || sn.LastTrip.Threshold != 1 ||
		sn.LastTrip.Counts != (Counts{Visits: 3, Degraded: 1}) || !sn.LastTrip.At.Equal(at(0)) {
		t.Errorf("snapshot: state %v (%+v), last trip %+v; want open (visit 1/1), 2/1 with 3 visits, 1 degraded", sn.Status.State, sn.Status.Reason, sn.LastTrip)
	}
	if v, _ := enter(p, at(time.Second)); v.Events != EventRecovered || !v.Allowed {
		t.Errorf("recovery: got %+v, want allowed, recovered", v)
	}
	if v, _ := enter(p, at(2*time.Second)); v.Events != 0 {
		t.Errorf("after recovery: events %v, want none", v.Events)
	}
	if st := p.Snapshot(at(2 * time.Second)).Status; st.State != Open || st.Reason != (Reading{Visit, 1, 1, true}) {
		t.Errorf("state after a request passed = %v (%+v), want open: the window (1s) holds the one request allowed", st.State, st.Reason)
	}
	// With no traffic after it, the state decays as the window slides,
	// with no request and no Settle.
	if st := p.Snapshot(at(3 * time.Second)).Status; st.State != Closed || st.Reason != (Reading{}) {
		t.Errorf("state a window after the last request = %v (%+v), want closed", st.State, st.Reason)
	}
}

func TestCallExit(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.ExceptionThreshold = At(10) }))
	var zero Call
	if zero.Exit(at(0), Failed) != 0 || zero.Timeout(at(0)) {
		t.Errorf("zero Call did something")
	}
	_, c := enter(p, at(0))
	c.Exit(at(0), Failed)
	c.Exit(at(0), Failed)
	if got, w := counts(p, at(0)), (Counts{Visits: 1, Exceptions: 1}); got != w || p.InFlight() != 0 {
		t.Errorf("after Exit twice: counts %+v in flight %d, want %+v and 0", got, p.InFlight(), w)
	}
}

// TestFailAfterExit: a stream's late failure (gRPC trailers) counts once,
// only after an Exit without an exception, and not across a window clear.
func TestFailAfterExit(t *testing.T) {
	p := mustPoint(t, settings(func(s *Settings) { s.ExceptionThreshold = At(2) }))
	var zero Call
	if zero.FailAfterExit(at(0)) {
		t.Errorf("zero Call: FailAfterExit counted")
	}
	_, c := enter(p, at(0))
	if c.FailAfterExit(at(0)) {
		t.Errorf("before Exit: FailAfterExit counted")
	}
	c.Exit(at(0), OK)
	if !c.FailAfterExit(at(10*ms)) || c.FailAfterExit(at(10*ms)) {
		t.Errorf("after an OK Exit: want FailAfterExit to count once")
	}
	_, failed := enter(p, at(0))
	failed.Exit(at(0), Failed)
	if failed.FailAfterExit(at(0)) {
		t.Errorf("after a Failed Exit: FailAfterExit counted a second exception")
	}
	if got, w := counts(p, at(10*ms)), (Counts{Visits: 2, Exceptions: 2}); got != w {
		t.Errorf("counts: got %+v, want %+v", got, w)
	}
	v, _ := enter(p, at(10*ms))
	want(t, "after the late failure", v, false, Exception, 2, 2)

	// A delay ending clears the window: a call from before it no longer counts.
	d := mustPoint(t, settings(func(s *Settings) { s.ExceptionThreshold, s.DelayTime = At(1), 100*ms }))
	_, old := enter(d, at(0))
	old.Exit(at(0), OK)
	_, trip := enter(d, at(0))
	trip.Exit(at(0), Failed)
	enter(d, at(0))      // trips, starts the delay
	enter(d, at(200*ms)) // the delay is over: the window is cleared
	if old.FailAfterExit(at(200 * ms)) {
		t.Errorf("a call from before the window was cleared: FailAfterExit counted")
	}
}

func TestReconfigure(t *testing.T) {
	base := settings(func(s *Settings) {
		s.VisitThreshold, s.DelayTime, s.TimeoutThreshold = At(2), 10*time.Second, 100*ms
	})
	t.Run("same shape keeps counts, calls and delay", func(t *testing.T) {
		p := mustPoint(t, base)
		pass(t, p, 2, at(0), Failed)
		enter(p, at(0)) // trips, starts the delay
		s := base
		s.VisitThreshold, s.ConcurrentThreshold = At(100), At(5)
		np, err := p.Reconfigure(s)
		if err != nil {
			t.Fatal(err)
		}
		sn := np.Snapshot(at(ms))
		if sn.Counts != (Counts{Visits: 3, Degraded: 1, Exceptions: 2}) || sn.Status.State != Delay || np.Name() != "p" || np.Settings().VisitThreshold != At(100) {
			t.Errorf("after Reconfigure: %+v", sn)
		}
	})
	t.Run("an idle point's window is kept before its first request", func(t *testing.T) {
		p := mustPoint(t, base)
		np, err := p.Reconfigure(base)
		if err != nil {
			t.Fatal(err)
		}
		_, c := enter(np, at(0)) // allocates the shared window's counters
		if got := p.Snapshot(at(0)); got.Counts.Visits != 1 || got.InFlight != 1 {
			t.Errorf("old point after a request on the new one: visits %d, in flight %d; want 1 and 1", got.Counts.Visits, got.InFlight)
		}
		c.Exit(at(0), Failed)
		if got := np.Snapshot(at(0)).Counts; got.Exceptions != 1 || got.Visits != 1 {
			t.Errorf("new point: %+v, want 1 visit and 1 exception", got)
		}
	})
	t.Run("calls entered before it exit on the old settings and free their slot", func(t *testing.T) {
		p := mustPoint(t, base) // concurrent strategy off: slots in shards
		_, c := enter(p, at(0))
		s := base
		s.ConcurrentThreshold, s.TimeoutThreshold = At(1), time.Hour
		np, _ := p.Reconfigure(s)
		if v, _ := enter(np, at(0)); v.Allowed || v.Strategy != Concurrent || v.Count != 2 {
			t.Errorf("concurrent strategy after Reconfigure: got %+v, want it to count the older call", v)
		}
		c.Exit(at(100*ms), OK) // a timeout under the old settings
		if got := np.Snapshot(at(100 * ms)); got.InFlight != 0 || got.Counts.Timeouts != 1 {
			t.Errorf("after the old call's exit: in flight %d, timeouts %d; want 0 and 1", got.InFlight, got.Counts.Timeouts)
		}
		// And back: the new point's calls free their slot on the old point too.
		_, c = enter(np, at(time.Second))
		back, _ := np.Reconfigure(base)
		c.Exit(at(time.Second), OK)
		if back.InFlight() != 0 {
			t.Errorf("in flight = %d, want 0", back.InFlight())
		}
	})
	t.Run("another shape starts afresh", func(t *testing.T) {
		p := mustPoint(t, base)
		pass(t, p, 2, at(0), OK)
		enter(p, at(0))
		enter(p, at(ms)) // in the delay
		s := base
		s.Buckets = 5
		np, err := p.Reconfigure(s)
		if err != nil {
			t.Fatal(err)
		}
		if sn := np.Snapshot(at(ms)); sn.Counts != (Counts{}) || sn.Status.State != Closed || len(sn.Series) != 5 {
			t.Errorf("after a shape change: %+v", sn)
		}
	})
	t.Run("bad settings", func(t *testing.T) {
		p := mustPoint(t, base)
		s := base
		s.Buckets = 3 // 1s does not split into 3
		if _, err := p.Reconfigure(s); err == nil {
			t.Errorf("Reconfigure with 1s in 3 buckets: no error")
		}
	})
}

func TestNewPointErrors(t *testing.T) {
	for _, f := range []func(*Settings){
		func(s *Settings) { s.Buckets = 3 },
		func(s *Settings) { s.Shards = 257 },
		func(s *Settings) { s.DowngradeRate = At(101) },
		func(s *Settings) { s.DowngradeRate = At(-1) },
		func(s *Settings) { s.DelayTime = -1 },
		func(s *Settings) { s.RetryInterval = -1 },
		func(s *Settings) { s.VisitThreshold = At(-5) },
		func(s *Settings) { s.ExceptionRateThreshold = At(101) },
		func(s *Settings) { s.TokensPerSecond = At(MaxTokensPerSecond + 1) },
		func(s *Settings) { s.TokensPerSecond = At(0) },
		func(s *Settings) { s.TokensPerSecond, s.TokenBucketSize = At(1), At(0) },
		// A bucket whose fill time overflows its clock.
		func(s *Settings) { s.TokensPerSecond, s.TokenBucketSize = At(1), At(1<<62) },
	} {
		if _, err := NewPoint("p", settings(f)); err == nil {
			t.Errorf("NewPoint(%+v): no error", settings(f))
		}
	}
}

func TestNames(t *testing.T) {
	for s, want := range map[Strategy]string{0: "", Visit: "visit", ExceptionRate: "exception_rate", 99: ""} {
		if s.String() != want {
			t.Errorf("Strategy(%d) = %q, want %q", s, s.String(), want)
		}
	}
	for s, want := range map[State]string{0: "", Closed: "closed", Open: "open", Delay: "delay", Shadow: "shadow", 9: ""} {
		if s.String() != want {
			t.Errorf("State(%d) = %q, want %q", s, s.String(), want)
		}
	}
}
