// Package limiter decides, for each request on a named point, whether the
// service may be called or the request must be degraded, in the manner of
// Didi's SDS. It keeps per-point sliding-window counts, the in-flight count,
// a token bucket and the delay state, and judges the strategies of
// SPEC §4 in order: visit, token_bucket, concurrent, timeout, exception,
// exception_rate.
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
// The counters are sharded: each of N shards has its own ring of buckets and
// its own cache line of running totals; a write goes to one shard chosen at
// random, a read sums the shards' totals.
//
// Use: Enter before calling the service, with a Call kept by the caller;
// if the Verdict allows it, call the service and defer Call.Exit. A timer may
// call Call.Timeout when the call passes the point's timeout threshold, so a
// hung service is counted while it hangs; Exit then does not count it again.
package limiter
