//go:build race

package limiter

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so
// the hot path allocates under it.
const raceEnabled = true
