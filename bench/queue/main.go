// Command queue is a load harness that measures who gets served when a
// service of fixed capacity is overloaded: the same arrivals, offered to the
// service directly and through sds-proxy in several setups, side by side in
// one sitting.
//
//	go run ./bench/queue [-setups none,concurrent,adaptive,queue]
//	    [-rungs 0.8x-bursts,2x,6x,12x] [-duration 20s] [-warmup 5s] [-slo 1s]
//	    [-seed 1] [-max-inflight 4000] [-queue-yaml '{}'] [-o text|json]
//
// The service is the repository's sds-upstream, its /api/queue route made
// -workers workers of -service each (default 4 × 50ms, 80 requests/s). It
// builds sds-upstream and sds-proxy into a temporary directory, starts them
// on 127.0.0.1 only, and stops every process it started (SIGTERM, then a
// kill 5s later) and removes the directory before it exits, on an error or
// Ctrl-C too. README.md explains the figures.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

func main() { benchproc.Main("bench/queue", run) }

// busyLag: a client lag p99 over SLO/busyLag marks a rung whose client
// was too busy to send on time.
const busyLag = 10

// env is what every rung of a sitting shares.
type env struct {
	o             options
	dir           string // the temporary directory: binaries, configs, logs
	upstreamBin   string
	proxyBin      string // "" when it failed to build: proxyBuildErr says why
	proxyBuildErr error
	upstream      string // sds-upstream's host:port, on 127.0.0.1
	client        *http.Client
	log           io.Writer // progress lines
}

// run measures every setup at every rung and prints the report on stdout
// (progress on stderr). An interrupted sitting still prints what it
// measured, then returns ctx's error.
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

// measure runs the sitting: it starts sds-upstream, measures every setup
// at every rung, and returns once every process it started has stopped
// and its temporary directory is removed.
func measure(ctx context.Context, o options, stderr io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "sds-bench-queue-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e := &env{o: o, dir: dir, log: stderr}
	if err := e.binaries(ctx); err != nil {
		return nil, err
	}
	up, addr, err := startUpstream(ctx, e.upstreamBin, dir, o)
	if err != nil {
		return nil, err
	}
	defer up.Stop()
	e.upstream = addr
	e.client = newClient()
	defer e.client.CloseIdleConnections()

	rep := newReport(o)
	for _, s := range o.setups {
		if ctx.Err() != nil {
			break
		}
		rep.Results = append(rep.Results, runSetup(ctx, e, s)...)
	}
	rep.Interrupted = ctx.Err() != nil
	return rep, nil
}

// runSetup measures one setup at every rung, each rung with a proxy of its
// own (so that no rung inherits an adaptive limit or a queue's state). A
// proxy that does not start is one error result for the whole setup.
func runSetup(ctx context.Context, e *env, s setup) []result {
	var out []result
	for i, r := range e.o.rungs {
		if ctx.Err() != nil {
			break
		}
		res, err := runRung(ctx, e, s, i, r)
		if err != nil {
			fmt.Fprintf(e.log, "%s: error: %v\n", s.name, err)
			return append(out, result{Setup: s.name, Error: err.Error()})
		}
		out = append(out, res)
	}
	return out
}

// runRung offers rung r's arrivals to setup s and sums up what came back.
// It returns an error only when the setup's proxy cannot be started.
func runRung(ctx context.Context, e *env, s setup, idx int, r rung) (result, error) {
	res := result{Setup: s.name, Rung: r.name}
	if err := waitIdle(ctx, e.client, e.upstream); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	target := e.upstream
	var px *proxyProc
	if s.proxied() {
		var err error
		if px, err = startProxy(ctx, e, s, r); err != nil {
			return res, err
		}
		defer px.Stop()
		target = px.listen
	}
	sched := schedule(r, e.o, idx)
	fmt.Fprintf(e.log, "%-10s %-12s %d arrivals over %v + %v ...\n", s.name, r.name, len(sched), e.o.warmup, e.o.duration)
	recs := load(ctx, e.client, "http://"+target+queuePath, sched, e.o)
	if px != nil {
		lines, err := scrapeQueueMetrics(ctx, e.client, px.admin)
		if err != nil {
			res.Notes = append(res.Notes, "metrics: "+err.Error())
		}
		res.QueueMetrics = lines
	}
	e.client.CloseIdleConnections()
	if len(recs) < len(sched) {
		res.Notes = append(res.Notes, fmt.Sprintf("interrupted after %d of %d arrivals", len(recs), len(sched)))
	}
	res.Steady = summarize(sched, recs, e.o.warmup, e.o.warmup+e.o.duration, e.o)
	res.All = summarize(sched, recs, 0, e.o.warmup+e.o.duration, e.o)
	if lag := dur(res.All.LagP99Seconds); lag > e.o.slo/busyLag {
		res.Notes = append(res.Notes, fmt.Sprintf("the client sent late (lag p99 %v, over SLO/%d): "+
			"the machine was busy, and the figures understate what the setup serves; rerun", lag.Round(time.Millisecond), busyLag))
	}
	fmt.Fprintf(e.log, "%-10s %-12s goodput %.1f/s steady, %.1f/s all; client lag p99 %s\n", s.name, r.name,
		res.Steady.GoodputPerSecond, res.All.GoodputPerSecond, secs(res.All.LagP99Seconds))
	return res, nil
}
