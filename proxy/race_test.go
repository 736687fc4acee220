//go:build race

package proxy_test

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so
// allocation counts differ under it.
const raceEnabled = true
