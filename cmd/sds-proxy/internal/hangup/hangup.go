// Package hangup catches SIGHUP from the earliest moment a Go program
// can: its own package initialisation, long before package main's.
//
// Until a program calls signal.Notify for SIGHUP, the Go runtime's
// handler takes the default action, and the process dies (exit status
// 129). The proxy handles SIGHUP (a reload), so a SIGHUP that arrives
// while the binary starts must not kill it. Go initialises a package as
// soon as every package it imports is initialised, taking the first by
// import path among those ready. This one imports only os/signal and its
// dependencies (and sync/atomic, which has no init; strings would delay
// it by a hundred packages), so its init is about the 25th of sds-proxy's
// some 150, right after os/signal's, and comes before go-redis, net/http,
// Prometheus, certmagic and package main, whose initialisation takes most
// of the start (measured from exec: docs/benchmarks.md, "Figures behind
// the code's choices"). A
// SIGHUP before this init (the runtime's own start and the first standard
// packages) still kills the process: nothing of a Go program runs earlier.
//
// The package-level channel and the init are deliberate, and the only
// ones of their kind in this module: no other code can run at that point.
package hangup

import (
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// early is the channel init subscribed to SIGHUP, until Take takes it;
// nil when the command line does not run the proxy.
var early atomic.Pointer[chan os.Signal]

func init() {
	if !RunsProxy(os.Args[1:]) {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	early.Store(&ch)
}

// Take returns the channel on which SIGHUP has been delivered since the
// package's init, with a buffer of one: SIGHUPs that arrive while one
// waits are merged into it. The caller owns it from then on: it reads it,
// and ends the subscription (signal.Stop, signal.Ignore or signal.Reset).
// Take returns nil when the command line does not run the proxy, and on
// every call after the first; the caller then subscribes itself. It is
// safe for concurrent use.
func Take() chan os.Signal {
	if ch := early.Swap(nil); ch != nil {
		return *ch
	}
	return nil
}

// RunsProxy reports whether sds-proxy's command line args (without the
// program name) may run the proxy, and so handle SIGHUP: no arguments, a
// flag first (sds-proxy -config F is sds-proxy run -config F), or the
// commands run and demo. The other commands keep SIGHUP's default action,
// as any command-line tool does. A flag first may also be -h or
// -version, which exit at once; a SIGHUP in that moment is dropped.
func RunsProxy(args []string) bool {
	// Not strings.HasPrefix: see the package comment.
	return len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-' || args[0] == "run" || args[0] == "demo"
}
