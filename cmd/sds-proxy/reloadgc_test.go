package main

import (
	"runtime/debug"
	"testing"
)

// TestLowGCDuring: a reload's build runs with the GC's percent at
// reloadGCPercent, or at the user's GOGC when that is lower or off, and
// the percent is back to what it was after.
func TestLowGCDuring(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct{ gogc, during int }{
		{100, reloadGCPercent},
		{400, reloadGCPercent},
		{reloadGCPercent / 2, reloadGCPercent / 2},
		{-1, -1},
	} {
		debug.SetGCPercent(tc.gogc)
		var during int
		lowGCDuring(func() {
			during = debug.SetGCPercent(0)
			debug.SetGCPercent(during)
		})
		if after := debug.SetGCPercent(tc.gogc); during != tc.during || after != tc.gogc {
			t.Errorf("GOGC=%d: %d during the build and %d after, want %d and %d", tc.gogc, during, after, tc.during, tc.gogc)
		}
	}
}
