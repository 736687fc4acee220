// Command perkey is a load harness for per-key rules (a point's perKey: in
// sds.yaml) under key churn: a heavy key, well-behaved keys and a stream
// of distinct keys each seen once, offered to sds-proxy with the rule and,
// for a memory baseline, without it, side by side in one sitting.
//
//	go run ./bench/perkey [-duration 40s] [-churn-rate 5000] [-heavy-rate 300]
//	    [-well-keys 20] [-well-rate 2] [-max-keys 10000] [-late 0s]
//	    [-setups perkey,none] [-max-inflight 4000] [-o text|json] [-bin DIR]
//
// It builds sds-upstream and sds-proxy (without -race) into a temporary
// directory, starts them on 127.0.0.1 only, reads the proxy's peak RSS
// from /proc, and stops every process it started (SIGTERM, then a kill 5s
// later) and removes the directory before it exits, on an error or Ctrl-C
// too. README.md explains the figures.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

func main() { benchproc.Main("bench/perkey", run) }

// run measures every setup and prints the report on stdout (progress on
// stderr). An interrupted sitting still prints what it measured, then
// returns ctx's error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// A closed stdout or stderr (| head) is then a write error, not a
	// death that skips the cleanup.
	signal.Ignore(syscall.SIGPIPE)
	rep, err := measure(ctx, o, stderr)
	if err != nil {
		return err
	}
	if err := rep.write(stdout, o.output); err != nil {
		return err
	}
	if rep.Interrupted {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return nil
}

// measure runs the sitting: it builds or finds the binaries, starts
// sds-upstream, runs every setup with a proxy of its own, and returns once
// every process it started has stopped and its temporary directory is
// removed.
func measure(ctx context.Context, o options, log io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "sds-bench-perkey-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	upBin, proxyBin, err := binaries(ctx, o.binDir, dir, log)
	if err != nil {
		return nil, err
	}
	up, addr, err := benchproc.StartUpstream(ctx, upBin, dir)
	if err != nil {
		return nil, err
	}
	defer up.Stop()
	client := newClient()
	defer client.CloseIdleConnections()

	rep := newReport(o)
	for _, s := range o.setups {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(log, "%-6s %v: churn %d/s, heavy %d/s, %d keys × %d/s ...\n", s, o.duration, o.churnRate, o.heavyRate, o.wellKeys, o.wellRate)
		res := runSetup(ctx, o, s, proxyBin, dir, addr, client)
		switch {
		case res.Error != "":
			fmt.Fprintf(log, "%-6s error: %s\n", s, res.Error)
		case res.HeavyLimit > 0:
			fmt.Fprintf(log, "%-6s peak RSS %.1f MiB; heavy key admitted %d, its limit %.1f\n", s, mib(res.Proxy.PeakRSSBytes), res.Heavy.Served, res.HeavyLimit)
		default:
			fmt.Fprintf(log, "%-6s peak RSS %.1f MiB; heavy key admitted %d (no rule)\n", s, mib(res.Proxy.PeakRSSBytes), res.Heavy.Served)
		}
		rep.Results = append(rep.Results, res)
		client.CloseIdleConnections()
	}
	rep.Interrupted = ctx.Err() != nil
	return rep, nil
}
