package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// loadTimeout bounds one run of drive, whatever its count: a proxy that
// stops answering ends the sitting rather than hang it.
const loadTimeout = 5 * time.Minute

// newClient is the harness's one client: keep-alive, a connection per
// concurrent client, no environment proxy, no compression asked.
func newClient(conns int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: conns + 4, DisableCompression: true, IdleConnTimeout: time.Minute},
		Timeout:   30 * time.Second,
	}
}

// loadResult is what drive got back.
type loadResult struct {
	ok, failed int
	took       time.Duration
}

// drive sends GET url(i) for i in [from, from+n), from conns goroutines in
// a closed loop (each sends its next request once its last answer has
// been read to the end). An answer is ok when it is a 200 read whole. It
// stops early, counting what it sent, when ctx ends or loadTimeout
// passes.
func drive(ctx context.Context, c *http.Client, url func(i int) string, from, n, conns int) loadResult {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	var next, ok, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && ctx.Err() == nil; i = next.Add(1) - 1 {
				if get1(ctx, c, url(from+int(i))) {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return loadResult{ok: int(ok.Load()), failed: int(failed.Load()), took: time.Since(start)}
}

// get1 sends one GET and reads its answer to the end; it reports whether
// it was a 200 read whole.
func get1(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}
