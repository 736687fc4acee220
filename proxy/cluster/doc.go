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
// progress, on a Redis Cluster the node holding a bucket's key), each
// bucket whose call failed falls back to its share, TokensPerSecond ÷
// Replicas, counted locally, starting from its lease's unspent tokens; the
// loop tries it again every retryEvery, and it goes back to the shared
// bucket at the first answer, which is charged what the share spent (at
// most the share's size), so a failure and its return grant the fleet no
// second bucket.
package cluster
