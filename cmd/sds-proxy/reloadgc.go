package main

import "runtime/debug"

// reloadGCPercent is Go's GC percent while a reload parses the config file
// and builds the request path's new config (instance.watch) beside
// the config in force. The heap's goal is then the live heap plus a tenth,
// not twice it: with live L and a second config T held for the reload,
// the goal is 1.1(L+T) where it was 2(L+T), which stays under the serving
// proxy's own 2L while T is under 0.8L, as it is for the configs
// measured. So a reload stays within the peak of the proxy serving and
// scraped, where without a memory limit it raised that peak; the reload
// collects more often for it, and nothing else does (the figures:
// docs/benchmarks.md, "Figures behind the code's choices").
const reloadGCPercent = 10

// lowGCDuring runs build with Go's GC percent at reloadGCPercent, or
// lower if it is lower already (GOGC=off stays off), and puts it back
// after. Only the config watcher's goroutine calls it.
func lowGCDuring(build func()) {
	old := debug.SetGCPercent(reloadGCPercent)
	if old < reloadGCPercent { // lower already, or off (-1)
		debug.SetGCPercent(old)
	}
	defer debug.SetGCPercent(old)
	build()
}
