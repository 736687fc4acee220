// Package perkey holds the per-key state of one per-key rule of one point:
// each key's admitted visits in the point's sliding window, its token
// bucket and its calls in flight, judged against the rule's per-key
// thresholds (strategies key_visit, key_token_bucket, key_concurrent).
// Like package limiter it does no I/O, has no clock (every method takes the
// instant it acts at) and starts no goroutines.
//
// Keys arrive as 64-bit hashes: the caller hashes the raw key with a seed
// of its own process, so raw keys never reach this package, and a client
// cannot choose keys that collide here without knowing the seed.
//
// # Bounded memory that no client escapes
//
// A Table tracks at most MaxKeys keys exactly; every other key is judged
// in a fixed-size sketch. Neither ever under-counts a key, so a heavy key
// stays limited however many other keys churn:
//
//	exact    per key: visits per bucket, GCRA time, calls in flight
//	         (found in an open-addressing index, no allocation)
//	sketch   4 rows × W cells, W = max(8·shards, MaxKeys/2 rounded up to a
//	         power of two); a key has one cell per row, chosen by
//	         independent hashes; each cell holds visits per bucket (a
//	         count-min sketch with conservative update per bucket), a GCRA
//	         time, and a count of calls in flight
//
// Each cell holds at least the state of every key hashed to it: its count
// in a bucket is at least any such key's admitted visits there (a key's
// admission raises its cells to its estimate plus one, conservative
// update); its GCRA time is at least any such key's (an admission needs all
// the key's cells to admit, i.e. their least, and raises every cell to at
// least the key's new time); its calls in flight are the sum of those keys'
// (added on admission, subtracted on Exit). A key's estimate is the least
// of its cells (for visits, the sum over buckets of the least per bucket),
// so it is never below its true figure.
//
// An exact key is dropped, to make room, only when it holds nothing that
// matters: no visit left in the window, a full bucket, no call in flight;
// it would start again from zero, which is its true state. A key that
// moves from the sketch into the exact table starts from the sketch's
// estimate, never from zero; calls it took in the sketch exit there, and
// are added to its exact count while the sketch shows any. So whatever the
// order of keys, a key's count is never under-estimated
// (TestNeverUnderCountRandom, TestHeavyKeyUnderChurn, TestCollidingKeys).
//
// What the sketch may over-count: a key in the sketch whose every cell is
// shared with heavier keys is judged on the least of those cells, and may
// be degraded below its own limit. A cell holds the keys hashed to it, so
// this stays rare while the visits the sketch sees in a window, divided by
// W, are well below the visit threshold (and likewise for the token rate
// and calls in flight); TestInnocentKeys measures it (its -v output has
// the figures). Exact keys are never over-counted,
// but for one that came from the sketch, which starts from its estimate.
//
// # Memory
//
// New allocates everything, and no traffic adds to it (TestMemory). With
// B buckets, a table holds (Table.Bytes):
//
//	exact    MaxKeys × (40 + 4·B + at most 16) bytes
//	         (an entry, its ring, its share of the index at load ≤ 1/2)
//	sketch   4 × W × (4·(B+1) + 8 + 4) bytes
//	         (visits per bucket and a head, GCRA time, calls in flight;
//	         each part only when its strategy is on)
//
// plus the table and its shards, under 5 KiB.
//
// # Concurrency
//
// A Table is safe for concurrent use: keys are split over up to 16
// shards by their top bits, each under its own lock. A request costs one
// lock, an index look-up, and, for a key in the sketch, four hashes and
// four cells.
package perkey
