package limiter

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Default window shape and shard count.
const (
	DefaultWindow  = 10 * time.Second
	DefaultBuckets = 10
	// DefaultShards is the number of counter shards per point. Each P
	// writes the shard its hint names (see window), so as many shards as
	// cores remove contention; more buy nothing but memory per busy point. Four
	// leave room for 4-core hosts within a point's memory budget, and keep
	// the exact sum near a visit threshold, which locks every shard,
	// cheap. BenchmarkShards measures the choice (docs/benchmarks.md,
	// "Figures behind the code's choices").
	DefaultShards = 4
)

// Limits of the settings the limiter runs with; Check reports a field
// beyond them.
const (
	// MaxTokensPerSecond is the fastest token bucket: one token per
	// nanosecond.
	MaxTokensPerSecond = int64(time.Second)
	// MaxTokenBucketFill is the longest time an empty token bucket may take
	// to fill (its capacity times the time between two tokens), so that the
	// bucket's clock, in Unix nanoseconds, cannot overflow.
	MaxTokenBucketFill = 100 * 365 * 24 * time.Hour
	// MaxShards is the most counter shards a point may have.
	MaxShards = 256
)

// Threshold is an optional non-negative integer setting of a Policy: a
// count, a percent or a rate. The zero Threshold is off. At makes one that
// is on. A Threshold is a small value; compare Thresholds with ==.
type Threshold struct {
	n  int64
	on bool
}

// At returns the threshold n, which is on. Check rejects a negative n: the
// way to turn a threshold off is the zero Threshold.
func At(n int64) Threshold { return Threshold{n: n, on: true} }

// Get returns the threshold's value and whether it is on; n is 0 when it
// is off.
func (t Threshold) Get() (n int64, on bool) { return t.n, t.on }

// String returns the value in decimal, or "off".
func (t Threshold) String() string {
	if !t.on {
		return "off"
	}
	return strconv.FormatInt(t.n, 10)
}

// Policy is what a point judges: its strategies' thresholds, the downgrade
// rate, the delay and the mode. Each field states its unit, its zero value
// and its boundary; Check states its limits. The zero Policy is every
// strategy off: no request is ever degraded.
//
// These are the definitions of sds.yaml's point settings (the config
// package decodes the file into a Policy and reports Check's errors with
// their lines); the file spells "off" as an absent or negative threshold.
type Policy struct {
	// TimeoutThreshold: a call whose duration reaches it (>=) counts one
	// timeout. Zero or negative: off, no call is a timeout.
	TimeoutThreshold time.Duration
	// TimeoutCountThreshold trips while the window holds at least this
	// many timeouts (>=, so 5 trips at the 5th). Judged only with
	// TimeoutThreshold on.
	TimeoutCountThreshold Threshold
	// VisitThreshold trips when visits - degraded in the window, this
	// request included, is above it (>). At(0) degrades every request.
	VisitThreshold Threshold
	// ConcurrentThreshold trips when the calls in flight, this one
	// included, are above it (>).
	ConcurrentThreshold Threshold
	// ExceptionThreshold trips while the window holds at least this many
	// exceptions (>=).
	ExceptionThreshold Threshold
	// ExceptionRateThreshold, in percent from 0 to 100, trips while
	// exceptions*100/(visits-degraded) is at least it (>=), once the
	// window holds more visits than ExceptionRateStart.
	ExceptionRateThreshold Threshold
	// ExceptionRateStart: the rate is not judged while the window holds
	// this many visits or fewer, this request included (<=). Zero or
	// negative: the rate is judged from the first visit.
	ExceptionRateStart int64
	// TokensPerSecond fills the token bucket, from 1 to
	// MaxTokensPerSecond tokens per second. Off: no token bucket.
	TokensPerSecond Threshold
	// TokenBucketSize is the bucket's capacity, at least 1; the capacity
	// used is max(TokenBucketSize, TokensPerSecond), and filling it may take
	// at most MaxTokenBucketFill. Off: the capacity is TokensPerSecond. The
	// bucket starts full.
	TokenBucketSize Threshold

	// DowngradeRate is the percentage, from 0 to 100, of tripped requests
	// degraded; the others are forwarded. Off degrades every tripped
	// request, as At(100) does; At(0) judges and reports but never degrades.
	DowngradeRate Threshold
	// DelayTime keeps degrading this long after a trip. Zero: no delay.
	// Negative is rejected.
	DelayTime time.Duration
	// RetryInterval lets one probe through this often during a delay.
	// Zero: no probes, the delay runs its full DelayTime. Negative is
	// rejected.
	RetryInterval time.Duration
	// PressureTestDowngrade degrades pressure-test requests at once.
	PressureTestDowngrade bool
	// Shadow judges and counts as enforcing would, but never degrades.
	Shadow bool

	// RecoveryTime is the length of the recovery ramp that starts when a
	// delay ends (by a good probe, or by DelayTime passing): the share of
	// requests admitted rises linearly from RecoveryStart percent to 100
	// percent over RecoveryTime, the others are degraded (Recovery), and
	// a call that fails during the ramp (an exception or a timeout) trips
	// the point again at the next request. Zero: no ramp. Negative is
	// rejected. It needs DelayTime: without a delay no ramp ever starts.
	RecoveryTime time.Duration
	// RecoveryStart is the percent, 0 to 100, of requests admitted at the
	// start of the ramp. Off: DefaultRecoveryStart.
	RecoveryStart Threshold
	// SheddableShare is the percent, 0 to 100, of each count threshold
	// (VisitThreshold, the token bucket's capacity, ConcurrentThreshold,
	// the adaptive limit) that PrioritySheddable requests may use: a
	// sheddable request passes such a strategy while its count, this
	// request included, is at most threshold*SheddableShare/100 (rounded
	// down). Off: DefaultSheddableShare. It changes nothing for other
	// priorities.
	SheddableShare Threshold
	// AdaptiveConcurrency limits the calls in flight to a limit that
	// follows the upstream's latency; the zero value is off.
	AdaptiveConcurrency AdaptiveConcurrency
	// Queue lets a request wait at the point's limit instead of being
	// degraded at once; the zero value is off.
	Queue Queue
}

// Defaults of the recovery ramp and of priority shedding.
const (
	// DefaultRecoveryStart is RecoveryStart's default, in percent.
	DefaultRecoveryStart = 10
	// DefaultSheddableShare is SheddableShare's default, in percent.
	DefaultSheddableShare = 80
)

// RecoveryStartPercent returns RecoveryStart's value, or
// DefaultRecoveryStart when it is off.
func (p Policy) RecoveryStartPercent() int64 {
	if n, on := p.RecoveryStart.Get(); on {
		return n
	}
	return DefaultRecoveryStart
}

// SheddablePercent returns SheddableShare's value, or
// DefaultSheddableShare when it is off.
func (p Policy) SheddablePercent() int64 {
	if n, on := p.SheddableShare.Get(); on {
		return n
	}
	return DefaultSheddableShare
}

// AdaptiveConcurrency is the adaptive concurrency limit of a point: a
// limit that finds the upstream's capacity, the calls it serves at once,
// by Little's law, as TCP Vegas finds a path's (and Netflix's
// concurrency-limits Vegas limit): of the calls in flight, the share
// minLatency/latency is being served and the rest wait in the upstream's
// queue. Each round (Interval, or the last mean latency if longer), from
// the calls that ended well (Outcome OK) in it:
//
//	inflight  = the mean of the calls in flight when each of them entered
//	served    = inflight * min(minLatency/latency, 1)
//	allowance = max(1, served*Tolerance/100)    the queue the upstream may hold
//	queued    = inflight - served > allowance
//	target    = max(served + allowance, limit/2)
//
// During the startup the limit starts at MinLimit and doubles each round
// that fills it without a queue (TCP slow start, BBR's startup); the first
// round with a queue ends the startup at target. After it, a round with a
// queue moves the limit AdaptiveSmoothing percent of the way down to
// target; a round that fills the limit (a request found it full) without
// one raises it to target if that is higher; other rounds keep it. The
// limit is kept in thousandths of a call and held between MinLimit and
// MaxLimit; requests are judged against its whole part. It settles where
// the upstream's queue holds the allowance: near capacity + max(1,
// capacity*Tolerance/100), with the latency up to Tolerance percent above
// the minimum.
//
// minLatency is the mean upstream time of the startup's rounds with at
// most one call queued, measured again every MinLatencyInterval after the startup (BBR's
// ProbeRTT, Envoy's minRTT measurement): the limit is held at
// AdaptiveMeasureShare percent of itself (at least MinLimit), so that the
// upstream's queue drains, until MinLatencySamples calls entered since
// have ended, and their mean is the new minimum. A request that finds the
// calls in flight, itself included, above the limit is degraded
// (AdaptiveConcurrency).
//
// The zero value is off; with On set, each zero field takes its default.
type AdaptiveConcurrency struct {
	// On turns the adaptive limit on.
	On bool
	// MinLimit is the lowest limit and the first: 1 to MaxLimit. 0:
	// DefaultAdaptiveMinLimit.
	MinLimit int64
	// MaxLimit is the highest limit, MinLimit to MaxAdaptiveLimit. 0:
	// DefaultAdaptiveMaxLimit.
	MaxLimit int64
	// Interval is the shortest round: how often the limit is worked out
	// again, at least 1ms; a round lasts the last mean latency if that is
	// longer. 0: DefaultAdaptiveInterval.
	Interval time.Duration
	// Tolerance is how far above its minimum, in percent (0 to 1000), the
	// latency may rise before the limit shrinks: the queue the upstream
	// may hold, in percent of the calls it serves, and at least one call.
	// Off: DefaultAdaptiveTolerance.
	Tolerance Threshold
	// MinLatencyInterval is how often the minimum latency is measured
	// again, at least Interval. 0: DefaultAdaptiveMinLatencyInterval.
	MinLatencyInterval time.Duration
}

// Defaults and limits of AdaptiveConcurrency.
const (
	DefaultAdaptiveMinLimit           = 3
	DefaultAdaptiveMaxLimit           = 1000
	DefaultAdaptiveInterval           = 100 * time.Millisecond
	DefaultAdaptiveTolerance          = 25
	DefaultAdaptiveMinLatencyInterval = time.Minute
	// MaxAdaptiveLimit is the highest MaxLimit.
	MaxAdaptiveLimit = 1 << 20
	// MinLatencySamples is how many calls a measurement of the minimum
	// latency after the startup takes.
	MinLatencySamples = 25
	// AdaptiveSmoothing is the percent of the way down to its target the
	// limit moves in a round whose queue is above the allowance.
	AdaptiveSmoothing = 50
	// AdaptiveMeasureShare is the percent of the limit in force while the
	// minimum latency is measured again (at least MinLimit).
	AdaptiveMeasureShare = 75
)

// withDefaults fills the zero fields of an adaptive limit that is on.
func (a AdaptiveConcurrency) withDefaults() AdaptiveConcurrency {
	if !a.On {
		return a
	}
	if a.MinLimit == 0 {
		a.MinLimit = DefaultAdaptiveMinLimit
	}
	if a.MaxLimit == 0 {
		a.MaxLimit = max(DefaultAdaptiveMaxLimit, a.MinLimit)
	}
	if a.Interval == 0 {
		a.Interval = DefaultAdaptiveInterval
	}
	if !a.Tolerance.on {
		a.Tolerance = At(DefaultAdaptiveTolerance)
	}
	if a.MinLatencyInterval == 0 {
		a.MinLatencyInterval = max(DefaultAdaptiveMinLatencyInterval, a.Interval)
	}
	return a
}

// check appends the adaptive limit's problems to errs.
func (a AdaptiveConcurrency) check(errs []error) []error {
	if !a.On {
		return errs
	}
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "AdaptiveConcurrency." + field, Problem: fmt.Sprintf(format, args...)})
	}
	d := a.withDefaults()
	switch {
	case a.MinLimit < 0:
		bad("MinLimit", "%d is not a limit; write one of at least 1, such as 3", a.MinLimit)
	case a.MaxLimit < 0 || d.MaxLimit > MaxAdaptiveLimit:
		bad("MaxLimit", "%d is not a limit from 1 to %d", a.MaxLimit, MaxAdaptiveLimit)
	case d.MinLimit > d.MaxLimit:
		bad("MinLimit", "%d is above maxLimit %d", d.MinLimit, d.MaxLimit)
	}
	if a.Interval < 0 || d.Interval < time.Millisecond {
		bad("Interval", "%v is shorter than 1ms; write a duration such as 100ms", a.Interval)
	}
	if n, on := a.Tolerance.Get(); on && (n < 0 || n > 1000) {
		bad("Tolerance", "%d is not a percent from 0 to 1000", n)
	}
	if a.MinLatencyInterval < 0 || d.MinLatencyInterval < d.Interval {
		bad("MinLatencyInterval", "%v is shorter than the interval %v", a.MinLatencyInterval, d.Interval)
	}
	return errs
}

// DowngradePercent returns the percent of tripped requests degraded:
// DowngradeRate's value, or 100 when it is off.
func (p Policy) DowngradePercent() int {
	if n, on := p.DowngradeRate.Get(); on {
		return int(n)
	}
	return 100
}

// Judges reports whether the policy can degrade a request by strategy s:
// whether s is on. ClusterTokenBucket is the Request's gate, not the
// policy's, so Judges is false for it.
func (p Policy) Judges(s Strategy) bool {
	switch s {
	case PressureTest:
		return p.PressureTestDowngrade
	case Recovery:
		return p.RecoveryTime > 0
	case Visit:
		return p.VisitThreshold.on
	case TokenBucket:
		return p.TokensPerSecond.on
	case Concurrent:
		return p.ConcurrentThreshold.on
	case Adaptive:
		return p.AdaptiveConcurrency.On
	case Timeout:
		return p.TimeoutThreshold > 0 && p.TimeoutCountThreshold.on
	case Exception:
		return p.ExceptionThreshold.on
	case ExceptionRate:
		return p.ExceptionRateThreshold.on
	}
	return false
}

// Settings are a point's window shape and Policy. The zero Settings is
// every strategy off with the default window.
type Settings struct {
	// Window is the length of the sliding window; 0 means DefaultWindow.
	Window time.Duration
	// Buckets splits Window into buckets of Window/Buckets each; 0 means
	// DefaultBuckets. Window must be a multiple of Buckets nanoseconds.
	Buckets int
	// Shards is the number of counter shards, 1 to MaxShards; 0 means
	// DefaultShards. Each costs 256 bytes plus its ring (Buckets*16 bytes,
	// rounded up to 128) per point, allocated when the point sees its
	// first request. More shards than cores buy nothing.
	Shards int

	Policy

	// Percent returns a uniform integer in [0, 100) for the DowngradeRate
	// draw. nil means math/rand/v2. It must be safe for concurrent use.
	Percent func() int
}

// FieldError is a field of Settings beyond the limits the limiter runs
// with.
type FieldError struct {
	// Field is the field's name in Settings or Policy, such as
	// "TokensPerSecond".
	Field string
	// Problem says what is wrong with the value, for a person, starting
	// with the value: "2000000000 is more than ...".
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Check reports every field of p beyond its limits, each as a *FieldError
// (joined by errors.Join), or nil.
func (p Policy) Check() error { return errors.Join(p.check(nil)...) }

// check appends p's problems to errs.
func (p Policy) check(errs []error) []error {
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	for _, t := range []struct {
		field string
		v     Threshold
	}{
		{"TimeoutCountThreshold", p.TimeoutCountThreshold},
		{"VisitThreshold", p.VisitThreshold},
		{"ConcurrentThreshold", p.ConcurrentThreshold},
		{"ExceptionThreshold", p.ExceptionThreshold},
	} {
		if t.v.on && t.v.n < 0 {
			bad(t.field, "%d is negative; a threshold is 0 or more, or off", t.v.n)
		}
	}
	switch r := p.ExceptionRateThreshold; {
	case r.on && r.n < 0:
		bad("ExceptionRateThreshold", "%d is negative; a rate is a percent from 0 to 100", r.n)
	case r.on && r.n > 100:
		bad("ExceptionRateThreshold", "%d is more than 100 percent", r.n)
	}
	if r := p.DowngradeRate; r.on && (r.n < 0 || r.n > 100) {
		bad("DowngradeRate", "%d is not a percent from 0 to 100 (100 degrades every tripped request, 0 none)", r.n)
	}
	rate, size := p.TokensPerSecond, p.TokenBucketSize
	switch {
	case rate.on && rate.n <= 0:
		bad("TokensPerSecond", "%d never refills the bucket; write a rate such as 100, or turn it off", rate.n)
		rate.on = false
	case rate.on && rate.n > MaxTokensPerSecond:
		bad("TokensPerSecond", "%d is more than %d, one token per nanosecond", rate.n, MaxTokensPerSecond)
		rate.on = false
	}
	switch {
	case size.on && size.n <= 0:
		bad("TokenBucketSize", "%d holds no token; write a capacity of at least the rate, or turn it off", size.n)
	case rate.on && size.on:
		if interval := MaxTokensPerSecond / rate.n; size.n > int64(MaxTokenBucketFill)/interval {
			bad("TokenBucketSize", "%d tokens at %d per second take more than %d years to fill", size.n, rate.n, MaxTokenBucketFill/(365*24*time.Hour))
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"DelayTime", p.DelayTime}, {"RetryInterval", p.RetryInterval}, {"RecoveryTime", p.RecoveryTime}} {
		if d.v < 0 {
			bad(d.field, "%v is negative; write a duration such as 2s, or 0 to turn it off", d.v)
		}
	}
	for _, t := range []struct {
		field string
		v     Threshold
	}{{"RecoveryStart", p.RecoveryStart}, {"SheddableShare", p.SheddableShare}} {
		if t.v.on && (t.v.n < 0 || t.v.n > 100) {
			bad(t.field, "%d is not a percent from 0 to 100", t.v.n)
		}
	}
	return p.Queue.check(p.AdaptiveConcurrency.check(errs))
}

// Check reports every field of s beyond its limits (see Policy.Check), with
// the window's shape, or nil. Zero window fields are their defaults.
func (s Settings) Check() error {
	s = s.withDefaults()
	var errs []error
	if s.Window <= 0 || s.Buckets <= 0 || s.Window%time.Duration(s.Buckets) != 0 {
		errs = append(errs, &FieldError{Field: "Window", Problem: fmt.Sprintf("%v does not split evenly into %d buckets", s.Window, s.Buckets)})
	}
	if s.Shards < 1 || s.Shards > MaxShards {
		errs = append(errs, &FieldError{Field: "Shards", Problem: fmt.Sprintf("%d is not from 1 to %d", s.Shards, MaxShards)})
	}
	return errors.Join(s.Policy.check(errs)...)
}

// withDefaults fills the zero window fields.
func (s Settings) withDefaults() Settings {
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.Buckets == 0 {
		s.Buckets = DefaultBuckets
	}
	if s.Shards == 0 {
		s.Shards = DefaultShards
	}
	s.AdaptiveConcurrency = s.AdaptiveConcurrency.withDefaults()
	s.Queue = s.Queue.WithDefaults()
	return s
}

// sameShape reports whether counts kept under s can be kept under s2.
func (s Settings) sameShape(s2 Settings) bool {
	return s.Window == s2.Window && s.Buckets == s2.Buckets && s.Shards == s2.Shards
}
