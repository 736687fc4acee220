// Package cluster shares a point's token bucket among every proxy that uses
// the same Redis (README, "Fleet-wide budgets"), without putting Redis on
// any request's path.
//
// Each proxy takes tokens from the shared bucket in leases: a background
// loop (Client.Run) asks Redis, in one Lua script per bucket (leaseScript),
// for as many tokens as the proxy's recent demand needs until its next
// call, and requests spend them locally (Bucket.Take: a few atomic
// operations, never a wait). Redis therefore sees at most one call per
// Tick per proxy, whatever the request rate, plus an early one when a
// lease runs dry while the shared bucket still holds tokens.
//
// When Redis fails (down, slow past Timeout, wrong password, a failover in
// progress), every bucket falls back to its share, TokensPerSecond ÷
// Replicas, counted locally; the loop keeps trying Redis and the buckets go
// back to the shared one at its first answer.
package cluster
