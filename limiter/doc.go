// Package limiter decides, for each request on a named point, whether the
// service may be called or the request must be degraded, in the manner of
// Didi's SDS. It keeps per-point sliding-window counts, the in-flight count,
// a token bucket and the delay state, and judges the strategies of
// the README's Semantics section in order: visit, token_bucket, concurrent, timeout, exception,
// exception_rate. Three protections of the README's "Recovery ramp, adaptive
// concurrency, priority shedding" section come on when configured: a
// recovery ramp after each delay (Policy.RecoveryTime), a concurrency limit
// that finds the upstream's capacity from its latency (AdaptiveConcurrency,
// after TCP Vegas and BBR), and shares of each count threshold for sheddable
// requests (Priority, Policy.SheddableShare).
//
// The package does no I/O and has no clock: every method takes the instant
// it acts at, so tests state instants instead of sleeping. It starts no
// goroutines; buckets rotate lazily when a later instant is seen.
//
// The window of a point with window W split into B buckets of width W/B:
//
//	bucket index = now.UnixNano() / (W/B)     (buckets start at multiples of W/B since the epoch)
//
//	 ... | b-9 | b-8 | ... | b-1 |  b  |      the window at now = buckets b-9 .. b
//	       ^ oldest still counted   ^ the bucket now falls in
//
// A count leaves the window once its bucket started W or more ago.
//
// The hot counters (visits, degraded, and calls in flight while the
// concurrent strategy is off) are sharded: each of N shards has its own
// ring of buckets and running totals on lines of their own, and each P
// (roughly: each core) writes the same shard, so that a core's writes stay
// in its cache. Exceptions and timeouts, written only on failures, are kept
// in one ring whose totals every request reads from one read-mostly line.
// The visit strategy is judged from an upper bound on the same line, and
// sums the shards only near its threshold; so in the healthy steady state an
// Enter reads no line another core writes. The verdicts are exactly those
// of summing every count at every request. See window for the details.
//
// Use: Enter before calling the service, with a Call kept by the caller;
// if the Verdict allows it, call the service and defer Call.Exit. A timer may
// call Call.Timeout when the call passes the point's timeout threshold, so a
// hung service is counted while it hangs; Exit then does not count it again.
package limiter
