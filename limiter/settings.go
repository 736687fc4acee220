package limiter

import (
	"errors"
	"fmt"
	"time"
)

// Off disables a count threshold, as -1 does in SDS.
const Off int64 = -1

// Default window shape and shard count.
const (
	DefaultWindow  = 10 * time.Second
	DefaultBuckets = 10
	// DefaultShards is the number of counter shards per point. Each P
	// writes the shard its hint names (see window), so as many shards as
	// cores remove contention; more buy nothing. On the 2-core benchmark
	// machine, Enter+Exit with the window strategies on, both goroutines
	// on one point (BenchmarkShards, medians of 6): 1 shard 65 ns/op,
	// 2, 4 or 8 shards 33 ns/op, against 64 ns/op on one goroutine. Four
	// leave room for 4-core hosts at about 2.9 KiB per point (8 would pass
	// the 4 KiB budget), and keep the exact sum near a visit threshold,
	// which locks every shard, cheap.
	DefaultShards = 4
)

// Settings are a point's thresholds. The zero Settings is not useful (its
// visit threshold of 0 degrades everything): start from DefaultSettings,
// in which every strategy is off, and set what you need.
type Settings struct {
	// Window is the length of the sliding window; 0 means DefaultWindow.
	Window time.Duration
	// Buckets splits Window into buckets of Window/Buckets each; 0 means
	// DefaultBuckets. Window must be a multiple of Buckets nanoseconds.
	Buckets int
	// Shards is the number of counter shards, 1 to 256; 0 means
	// DefaultShards. Each costs 256 bytes plus its ring (Buckets*16 bytes,
	// rounded up to 128) per point. More shards than cores buy nothing.
	Shards int

	// TimeoutThreshold: a call running this long or longer (>=) is a
	// timeout. 0 or negative: no call is a timeout.
	TimeoutThreshold time.Duration
	// TimeoutCountThreshold: trips while timeouts in the window >= this.
	// Negative: off.
	TimeoutCountThreshold int64
	// VisitThreshold: trips when visits - degraded in the window, this
	// request included, > this. 0 degrades every request. Negative: off.
	VisitThreshold int64
	// ConcurrentThreshold: trips when calls in flight, this one included,
	// > this. Negative: off.
	ConcurrentThreshold int64
	// ExceptionThreshold: trips while exceptions in the window >= this.
	// Negative: off.
	ExceptionThreshold int64
	// ExceptionRateThreshold, in percent: once visits in the window exceed
	// ExceptionRateStart, trips while exceptions*100/(visits-degraded) >=
	// this. Negative: off.
	ExceptionRateThreshold int64
	// ExceptionRateStart: the rate is not judged while visits <= this.
	ExceptionRateStart int64
	// TokensPerSecond fills the token bucket; 0 or negative: off.
	TokensPerSecond int64
	// TokenBucketSize is the bucket's capacity; the capacity used is
	// max(TokenBucketSize, TokensPerSecond). The bucket starts full.
	TokenBucketSize int64

	// DowngradeRate is the percentage (0-100) of tripped requests that are
	// degraded; the others are forwarded. DefaultSettings sets 100.
	DowngradeRate int
	// DelayTime keeps degrading this long after a trip; 0: no delay.
	DelayTime time.Duration
	// RetryInterval lets one probe through this often during a delay; 0:
	// no probes, the delay runs its full DelayTime.
	RetryInterval time.Duration
	// PressureTestDowngrade degrades pressure-test requests at once.
	PressureTestDowngrade bool
	// Shadow judges and counts as enforcing would, but never degrades.
	Shadow bool

	// Percent returns a uniform integer in [0, 100) for the DowngradeRate
	// draw. nil means math/rand/v2. It must be safe for concurrent use.
	Percent func() int
}

// DefaultSettings returns Settings with every strategy off, the default
// window, and a DowngradeRate of 100.
func DefaultSettings() Settings {
	return Settings{
		TimeoutCountThreshold:  Off,
		VisitThreshold:         Off,
		ConcurrentThreshold:    Off,
		ExceptionThreshold:     Off,
		ExceptionRateThreshold: Off,
		DowngradeRate:          100,
	}
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
	return s
}

// check reports settings the limiter cannot run with. Config validation
// reports the same problems with their lines; this guards other callers.
func (s Settings) check() error {
	var errs []error
	if s.Window <= 0 || s.Buckets <= 0 || s.Window%time.Duration(s.Buckets) != 0 {
		errs = append(errs, fmt.Errorf("window %v does not split evenly into %d buckets", s.Window, s.Buckets))
	}
	if s.Shards < 1 || s.Shards > 256 {
		errs = append(errs, fmt.Errorf("shards %d: want 1 to 256", s.Shards))
	}
	if s.DowngradeRate < 0 || s.DowngradeRate > 100 {
		errs = append(errs, fmt.Errorf("downgrade rate %d: want 0 to 100", s.DowngradeRate))
	}
	if s.TokensPerSecond > int64(time.Second) {
		errs = append(errs, fmt.Errorf("tokens per second %d: want at most %d", s.TokensPerSecond, int64(time.Second)))
	}
	if s.DelayTime < 0 || s.RetryInterval < 0 {
		errs = append(errs, errors.New("delay time and retry interval may not be negative"))
	}
	return errors.Join(errs...)
}

// sameShape reports whether counts kept under s can be kept under s2.
func (s Settings) sameShape(s2 Settings) bool {
	return s.Window == s2.Window && s.Buckets == s2.Buckets && s.Shards == s2.Shards
}
