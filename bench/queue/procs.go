package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// Bounds of the processes' lifecycle.
const (
	pollEvery   = benchproc.PollEvery // idleness polls
	idleTimeout = 10 * time.Second    // for the upstream to empty between rungs
	maxBody     = 4 << 20             // bytes read of an admin or control answer
	queuePath   = "/api/queue"
)

// binaries builds sds-upstream and sds-proxy into e.dir, or finds them in
// -bin. A proxy that does not build leaves e.proxyBuildErr for the proxied
// setups to report; an upstream that does not build is an error.
func (e *env) binaries(ctx context.Context) error {
	if e.o.binDir != "" {
		e.upstreamBin = filepath.Join(e.o.binDir, "sds-upstream")
		e.proxyBin = filepath.Join(e.o.binDir, "sds-proxy")
		return nil
	}
	var err error
	fmt.Fprintln(e.log, "building sds-upstream and sds-proxy ...")
	if e.upstreamBin, err = benchproc.Build(ctx, e.dir, "sds-upstream"); err != nil {
		return err
	}
	e.proxyBin, e.proxyBuildErr = benchproc.Build(ctx, e.dir, "sds-proxy")
	return nil
}

// startUpstream starts sds-upstream on 127.0.0.1 port 0 and makes its
// /api/queue o.workers workers of o.service each. It returns the process
// and its address.
func startUpstream(ctx context.Context, bin, dir string, o options) (*benchproc.Proc, string, error) {
	p, addr, err := benchproc.StartUpstream(ctx, bin, dir)
	if err != nil {
		return nil, "", err
	}
	if err := setCapacity(ctx, addr, o); err != nil {
		p.Stop()
		return nil, "", err
	}
	return p, addr, nil
}

// upstreamStats is the part of sds-upstream's /_control answer read here.
type upstreamStats struct {
	InFlight int64 `json:"inFlight"`
	Queue    struct {
		Capacity int    `json:"capacity"`
		Service  string `json:"service"`
		Busy     int    `json:"busy"`
		Waiting  int    `json:"waiting"`
	} `json:"queue"`
}

// control asks sds-upstream's /_control with query q.
func control(ctx context.Context, c *http.Client, addr string, q url.Values) (upstreamStats, error) {
	var st upstreamStats
	b, err := benchproc.Get(ctx, c, "http://"+addr+"/_control?"+q.Encode())
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st, err
}

// setCapacity sets /api/queue's workers and service time, and checks them.
func setCapacity(ctx context.Context, addr string, o options) error {
	q := url.Values{"queueCapacity": {strconv.Itoa(o.workers)}, "queueService": {o.service.String()}}
	st, err := control(ctx, http.DefaultClient, addr, q)
	if err != nil {
		return fmt.Errorf("sds-upstream /_control: %w", err)
	}
	if st.Queue.Capacity != o.workers || st.Queue.Service != o.service.String() {
		return fmt.Errorf("sds-upstream /_control: capacity %d × %s, want %d × %v", st.Queue.Capacity, st.Queue.Service, o.workers, o.service)
	}
	return nil
}

// waitIdle waits up to idleTimeout for the upstream to have nothing in
// flight, so that a rung does not start with the last one's leftovers.
func waitIdle(ctx context.Context, c *http.Client, addr string) error {
	deadline := time.Now().Add(idleTimeout)
	for {
		st, err := control(ctx, c, addr, nil)
		if err == nil && st.InFlight == 0 && st.Queue.Busy == 0 && st.Queue.Waiting == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("upstream not idle before the rung: %+v (%v)", st, err)
		}
		benchproc.Sleep(ctx, pollEvery)
	}
}
