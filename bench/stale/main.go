// Command stale is a harness that measures what a point's stale: costs
// (issue 22), with the real binaries side by side in one sitting:
//
//   - the proxy's CPU per request on a point with stale: against the same
//     point without it, for answers that are not kept (Cache-Control:
//     private) and for answers that are (max-age), cycling over -urls
//     distinct URLs;
//
//   - a flood of -flood distinct URLs, each answer one a shared cache may
//     keep, into a cache of -max-bytes: the proxy's peak RSS (VmHWM) and
//     the cache's bytes at the end, beside the same flood through the
//     point without stale:.
//
//     go run ./bench/stale [-rounds 5] [-requests 60000] [-conns 16]
//     [-body 1024] [-urls 1000] [-flood 100000] [-flood-body 4096]
//     [-max-bytes 64MiB] [-bin DIR] [-o text|json]
//
// It builds sds-upstream and sds-proxy without -race (as the Dockerfile
// builds the image's binary) into a temporary directory, starts them on
// 127.0.0.1 only, and stops every process it started (SIGTERM, then a kill
// 5s later) and removes the directory before it exits, on an error or
// Ctrl-C too. CPU is read from /proc/PID/stat, peak RSS from
// /proc/PID/status: Linux only. README.md explains the figures.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

func main() { benchproc.Main("bench/stale", run) }

// run measures the sitting and prints the report on stdout (progress on
// stderr). An interrupted sitting prints what it measured, then returns
// ctx's error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	signal.Ignore(syscall.SIGPIPE) // a closed stdout is a write error, not a death that skips the cleanup
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

// env is what every part of a sitting shares.
type env struct {
	o           options
	dir         string // the temporary directory: binaries, configs, logs
	upstreamBin string
	proxyBin    string
	upstream    string // sds-upstream's host:port, on 127.0.0.1
	client      *http.Client
	log         io.Writer // progress lines
}

// measure runs the sitting and returns once every process it started has
// stopped and its temporary directory is removed.
func measure(ctx context.Context, o options, stderr io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "sds-bench-stale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e := &env{o: o, dir: dir, log: stderr}
	if err := e.binaries(ctx); err != nil {
		return nil, err
	}
	up, addr, err := benchproc.StartUpstream(ctx, e.upstreamBin, dir)
	if err != nil {
		return nil, err
	}
	defer up.Stop()
	e.upstream = addr
	e.client = newClient(o.conns)
	defer e.client.CloseIdleConnections()

	rep := &report{Options: o.summary()}
	rep.Machine = machine()
	rep.CPU, err = e.cpuCells(ctx)
	if err == nil && o.flood > 0 && ctx.Err() == nil {
		rep.Flood, err = e.floods(ctx)
	}
	rep.Interrupted = ctx.Err() != nil
	if err != nil && !rep.Interrupted {
		return nil, err
	}
	return rep, nil
}
