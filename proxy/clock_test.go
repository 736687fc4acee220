package proxy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// The upstream clock: a call's time is the upstream's only. Every test runs
// in a synctest bubble, where time.Sleep moves a fake clock: the sleeps
// below are the pace of a slow client or upstream, not waits.

// slowClientBody is a request body that a client sends one byte per gap.
type slowClientBody struct {
	left int
	gap  time.Duration
}

func (b *slowClientBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap) // fake time: the client's pace
	b.left--
	p[0] = 'x'
	return 1, nil
}

// slowReader is a ResponseWriter whose client takes gap to read each write.
type slowReader struct {
	header http.Header
	code   int
	body   strings.Builder
	gap    time.Duration
}

func (w *slowReader) Header() http.Header { return w.header }
func (w *slowReader) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *slowReader) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	time.Sleep(w.gap) // fake time: the client's pace
	return w.body.Write(p)
}

// chunkedBody is an upstream response body that gives chunk bytes per
// read, taking gap before each; after failAfter reads (0: never) it fails.
type chunkedBody struct {
	left, chunk, reads, failAfter int
	gap                           time.Duration
}

var errBrokeOff = errors.New("connection reset by peer")

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.failAfter > 0 && b.reads == b.failAfter {
		return 0, errBrokeOff
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap) // fake time: the upstream's pace
	b.reads++
	n := min(b.chunk, b.left, len(p))
	for i := range n {
		p[i] = 'y'
	}
	b.left -= n
	return n, nil
}

func (b *chunkedBody) Close() error { return nil }

// clockPoint is a point that counts a timeout at threshold, trips on the
// first, and cuts calls at deadline (0: never).
func clockPoint(t *testing.T, threshold, deadline time.Duration) *proxy.Point {
	return rpPoint(t, "p", func(s *limiter.Settings) {
		s.TimeoutThreshold, s.TimeoutCountThreshold = threshold, limiter.At(1)
	}, proxy.PointOptions{UpstreamTimeout: deadline})
}

// upstreamSeconds returns the sum of sds_upstream_duration_seconds of
// point p.
func upstreamSeconds(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "sds_upstream_duration_seconds" {
			for _, m := range f.GetMetric() {
				return m.GetHistogram().GetSampleSum()
			}
		}
	}
	return -1
}

// TestSlowUploadIsNotUpstreamTime: a client that takes 1s to send a 10-byte
// body to an upstream that answers at once does not make a timeout, even
// with a 300ms threshold and deadline, and the upstream time recorded is
// the upstream's 5ms.
func TestSlowUploadIsNotUpstreamTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const threshold = 300 * time.Millisecond
		transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
			if _, err := io.ReadAll(r.Body); err != nil {
				return nil, err
			}
			time.Sleep(5 * time.Millisecond) // fake time: the upstream's work
			return rpReply(r, 200, "stored"), nil
		})
		p := clockPoint(t, threshold, threshold)
		h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})
		for i := range 3 {
			req := httptest.NewRequest(http.MethodPost, "/upload", &slowClientBody{left: 10, gap: 100 * time.Millisecond})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 || rec.Body.String() != "stored" {
				t.Fatalf("slow upload %d: got %d %q, want 200 \"stored\"", i, rec.Code, rec.Body)
			}
		}
		if counts, _ := rpCounts(p, time.Now()); counts.Timeouts != 0 || counts.Exceptions != 0 {
			t.Errorf("after 3 slow uploads: got %d timeouts, %d exceptions, want 0, 0", counts.Timeouts, counts.Exceptions)
		}
		if got, want := upstreamSeconds(t, reg), 3*0.005; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("upstream seconds of 3 calls: got %v, want %v", got, want)
		}
	})
}

// TestSlowReaderIsNotUpstreamTime: a client that reads a large answer
// slowly neither makes a timeout nor passes the upstream deadline, so it
// gets the whole body.
func TestSlowReaderIsNotUpstreamTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const threshold = 300 * time.Millisecond
		const size = 1 << 20
		transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
			resp := rpReply(r, 200, "")
			resp.Body = &chunkedBody{left: size, chunk: 64 << 10}
			resp.ContentLength = size
			return resp, nil
		})
		p := clockPoint(t, threshold, threshold)
		h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})
		w := &slowReader{header: make(http.Header), gap: 200 * time.Millisecond}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/large", nil))
		if w.code != 200 || w.body.Len() != size {
			t.Fatalf("slow reader: got %d and %d bytes, want 200 and %d", w.code, w.body.Len(), size)
		}
		if counts, _ := rpCounts(p, time.Now()); counts.Timeouts != 0 || counts.Exceptions != 0 {
			t.Errorf("slow reader: got %d timeouts, %d exceptions, want 0, 0", counts.Timeouts, counts.Exceptions)
		}
		if got := upstreamSeconds(t, reg); got != 0 {
			t.Errorf("upstream seconds: got %v, want 0 (the upstream answered at once)", got)
		}
	})
}

// TestUpstreamTimeAddsUp: the upstream's time before the headers and its
// time reading the body add up, with the client's time between them left
// out, and the timeout is counted in flight exactly when the sum reaches
// the threshold: 100ms to the headers, then body reads of 40ms each with
// a slow reader taking 500ms per write between them.
func TestUpstreamTimeAddsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const threshold = 200 * time.Millisecond
		transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
			time.Sleep(100 * time.Millisecond) // fake time: to the headers
			resp := rpReply(r, 200, "")
			resp.Body = &chunkedBody{left: 5, chunk: 1, gap: 40 * time.Millisecond}
			resp.ContentLength = 5
			return resp, nil
		})
		p := clockPoint(t, threshold, 0)
		h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})
		start := time.Now()
		w := &slowReader{header: make(http.Header), gap: 500 * time.Millisecond}
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/paced", nil))
		}()
		// Upstream time at the end of read k is 100+40k ms; the reader
		// takes 500ms after each read. 200ms is reached at the end of the
		// third read: 100 + 3*40 = 220 > 200 at 100+3*40+2*500 = 1220ms of
		// wall time, and it passes 200ms 20ms before that, mid-read.
		time.Sleep(1200*time.Millisecond - time.Nanosecond) // fake time
		synctest.Wait()
		if counts, _ := rpCounts(p, time.Now()); counts.Timeouts != 0 {
			t.Fatalf("timeouts just before 200ms of upstream time: got %d, want 0", counts.Timeouts)
		}
		time.Sleep(time.Nanosecond) // fake time: exactly 200ms of upstream time
		synctest.Wait()
		if counts, inflight := rpCounts(p, time.Now()); counts.Timeouts != 1 || inflight != 1 {
			t.Fatalf("at 200ms of upstream time, in flight: got %d timeouts, %d in flight, want 1, 1", counts.Timeouts, inflight)
		}
		<-done
		if got := time.Since(start); got != 100*time.Millisecond+5*40*time.Millisecond+5*500*time.Millisecond {
			t.Errorf("wall time: got %v, want 2.8s", got)
		}
		if got, want := upstreamSeconds(t, reg), 0.3; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("upstream seconds: got %v, want %v", got, want)
		}
	})
}

// TestBodyBreaksOff: an upstream body that breaks off mid-copy is an
// exception of kind "body"; one cut by the upstream deadline mid-body is
// of kind "upstream_timeout", measured on the upstream clock.
func TestBodyBreaksOff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     *chunkedBody
		deadline time.Duration
		kind     string
	}{
		{"reset mid-body", &chunkedBody{left: 1 << 20, chunk: 64 << 10, failAfter: 2}, 0, "body"},
		{"hung mid-body past the deadline", &chunkedBody{left: 1 << 20, chunk: 64 << 10, gap: 100 * time.Millisecond}, 250 * time.Millisecond, "upstream_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
					resp := rpReply(r, 200, "")
					body := tc.body
					resp.Body = body
					resp.ContentLength = int64(body.left)
					if tc.deadline > 0 {
						// As http.Transport does: a canceled call fails
						// its body's next read.
						resp.Body = cancelableBody{body, r}
					}
					return resp, nil
				})
				p := clockPoint(t, time.Hour, tc.deadline)
				h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})
				w := &slowReader{header: make(http.Header), gap: time.Second}
				func() {
					defer func() {
						if v := recover(); v != http.ErrAbortHandler {
							t.Errorf("ServeHTTP: got panic %v, want http.ErrAbortHandler", v)
						}
					}()
					// In a server's context, as ReverseProxy panics only there.
					req := httptest.NewRequest(http.MethodGet, "/download", nil)
					req = req.WithContext(context.WithValue(req.Context(), http.ServerContextKey, &http.Server{}))
					h.ServeHTTP(w, req)
				}()
				if counts, inflight := rpCounts(p, time.Now()); counts.Exceptions != 1 || inflight != 0 {
					t.Errorf("got %d exceptions, %d in flight, want 1, 0", counts.Exceptions, inflight)
				}
				checkUpstreamErrors(t, reg, tc.kind, "body", "upstream_timeout", "transport")
			})
		})
	}
}

// cancelableBody fails reads once its request's context is done.
type cancelableBody struct {
	io.ReadCloser
	r *http.Request
}

func (b cancelableBody) Read(p []byte) (int, error) {
	if err := b.r.Context().Err(); err != nil {
		return 0, err
	}
	return b.ReadCloser.Read(p)
}
