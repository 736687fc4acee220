package perkey

import (
	"errors"
	"fmt"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Defaults and limits of Settings.
const (
	// DefaultMaxKeys is MaxKeys's default: keys tracked exactly per table.
	DefaultMaxKeys = 10_000
	// MaxMaxKeys is the highest MaxKeys: it bounds a table's memory (see
	// the package doc for the formula).
	MaxMaxKeys = 1_000_000
	// MaxBuckets is the most buckets a window may have: every key tracked
	// exactly, and every sketch cell, holds one count per bucket.
	MaxBuckets = 1000
	// MaxVisitThreshold is the highest VisitThreshold: a count per bucket
	// is 32 bits, and neither an exact key's count nor a sketch cell's
	// ever passes the threshold.
	MaxVisitThreshold = 1<<32 - 1
	// MaxConcurrentThreshold is the highest ConcurrentThreshold: calls in
	// flight are counted in 32 bits.
	MaxConcurrentThreshold = 1<<31 - 1
)

// Settings are one per-key rule of a point: the window shape, which is
// the point's, and the thresholds each key is held to. The zero Settings
// is every strategy off (no request is ever degraded) with the default
// window and DefaultMaxKeys.
type Settings struct {
	// Window is the length of the sliding window; 0 means
	// limiter.DefaultWindow.
	Window time.Duration
	// Buckets splits Window into buckets of Window/Buckets each, 1 to
	// MaxBuckets; 0 means limiter.DefaultBuckets. Window must be a
	// multiple of Buckets nanoseconds. A key's visits leave the window
	// with their bucket.
	Buckets int
	// VisitThreshold: a request is degraded when the key's admitted
	// visits in the window, this request included, are above it (>).
	// At(0) degrades every request. Off: no visit limit.
	VisitThreshold limiter.Threshold
	// TokensPerSecond fills each key's token bucket (a GCRA), from 1 to
	// limiter.MaxTokensPerSecond tokens per second. Off: no token bucket.
	TokensPerSecond limiter.Threshold
	// TokenBucketSize is each key's bucket capacity, at least 1; the
	// capacity used is max(TokenBucketSize, TokensPerSecond). Off: the
	// capacity is TokensPerSecond. A key's bucket starts full.
	TokenBucketSize limiter.Threshold
	// ConcurrentThreshold: a request is degraded when the key's calls in
	// flight, this one included, are above it (>). Off: not counted.
	ConcurrentThreshold limiter.Threshold
	// MaxKeys is the number of keys tracked exactly, 1 to MaxMaxKeys; 0
	// means DefaultMaxKeys. Keys beyond it share a fixed-size sketch that
	// never under-counts (see the package doc).
	MaxKeys int
}

// policy returns the limiter settings that define s's thresholds, so that
// a threshold's limits are limiter's, checked by limiter.
func (s Settings) policy() limiter.Settings {
	var ls limiter.Settings
	ls.Window, ls.Buckets = s.Window, s.Buckets
	ls.VisitThreshold = s.VisitThreshold
	ls.TokensPerSecond, ls.TokenBucketSize = s.TokensPerSecond, s.TokenBucketSize
	ls.ConcurrentThreshold = s.ConcurrentThreshold
	return ls
}

// Defaults returns s with its zero fields filled with their defaults:
// the settings a Table made of s reports (Table.Settings), so that a
// caller can tell whether a table has the settings it would make.
func Defaults(s Settings) Settings { return s.withDefaults() }

// withDefaults fills the zero fields.
func (s Settings) withDefaults() Settings {
	if s.Window == 0 {
		s.Window = limiter.DefaultWindow
	}
	if s.Buckets == 0 {
		s.Buckets = limiter.DefaultBuckets
	}
	if s.MaxKeys == 0 {
		s.MaxKeys = DefaultMaxKeys
	}
	return s
}

// Check reports every field of s beyond its limits, each as a
// *limiter.FieldError (joined by errors.Join), or nil. The thresholds and
// the window have limiter's limits, and the few more this package states.
func (s Settings) Check() error {
	var errs []error
	if err := s.policy().Check(); err != nil {
		errs = append(errs, err)
	}
	bad := func(field, format string, args ...any) {
		errs = append(errs, &limiter.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	d := s.withDefaults()
	if d.Buckets < 0 || d.Buckets > MaxBuckets {
		bad("Buckets", "%d is not from 1 to %d", s.Buckets, MaxBuckets)
	}
	if d.MaxKeys < 0 || d.MaxKeys > MaxMaxKeys {
		bad("MaxKeys", "%d is not from 1 to %d", s.MaxKeys, MaxMaxKeys)
	}
	if n, on := s.VisitThreshold.Get(); on && n > MaxVisitThreshold {
		bad("VisitThreshold", "%d is more than %d", n, int64(MaxVisitThreshold))
	}
	if n, on := s.ConcurrentThreshold.Get(); on && n > MaxConcurrentThreshold {
		bad("ConcurrentThreshold", "%d is more than %d", n, MaxConcurrentThreshold)
	}
	return errors.Join(errs...)
}

// The strategies of a per-key rule, in the order Enter judges them:
// limiter's own, so that a Verdict's Strategy is what the proxy reports.
const (
	// Visit: the key's admitted visits in the window (key_visit).
	Visit = limiter.KeyVisit
	// TokenBucket: the key's token bucket is empty (key_token_bucket).
	TokenBucket = limiter.KeyTokenBucket
	// Concurrent: the key's calls in flight (key_concurrent).
	Concurrent = limiter.KeyConcurrent
)

// Verdict is Enter's judgement of one request.
type Verdict struct {
	// Allowed: the key is within every limit; the request was counted
	// (a visit, a token, a call in flight until Exit).
	Allowed bool
	// Strategy is the limit that degraded the request: Visit,
	// TokenBucket or Concurrent; zero when Allowed.
	Strategy limiter.Strategy
	// Count and Threshold are the figures behind the degradation: for
	// Visit the admitted visits in the window this one included, and
	// VisitThreshold; for TokenBucket the tokens used (the capacity less
	// the tokens left) and the capacity; for Concurrent the calls in
	// flight this one included, and ConcurrentThreshold. For a key in the
	// sketch the count is its estimate, never below the true count. Zero
	// when Allowed.
	Count, Threshold int64
}
