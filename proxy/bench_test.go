//go:build unix

package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
	"github.com/sds-proxy/sds-proxy/route"
)

// BenchmarkProxy measures the request path side by side with a bare
// httputil.ReverseProxy in the same process, over real loopback sockets:
// client → proxy → an upstream answering 64 bytes, with keep-alive.
//
//	bare                a ReverseProxy with the same transport and rewrite
//	sds/no-points       the Handler with no routes (unprotected)
//	sds/all-strategies  one catch-all point with every strategy on, at
//	                    thresholds that never trip
//	sds/degraded        visitThreshold 0: every request answered from the
//	                    fallback, the upstream never called
//
// Requests per second are the inverse of ns/op. allocs/op and cpu-ns/op
// (the process's user+system CPU time per request, from getrusage) count
// the whole process: client, proxy and upstream. On a shared machine
// cpu-ns/op is steadier than ns/op, which other processes' load inflates.
func BenchmarkProxy(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 64)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	}))
	defer upstream.Close()
	upstreamURL := rpURL(upstream.URL)

	b.Run("bare", func(b *testing.B) {
		benchProxy(b, &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(upstreamURL)
				pr.Out.Host = pr.In.Host
				pr.SetXForwarded()
			},
			Transport: proxy.NewTransport(false),
		}, http.StatusOK)
	})
	b.Run("sds/no-points", func(b *testing.B) {
		h, _ := rpHandler(b, &proxy.Config{Upstream: upstreamURL, ForwardedHeaders: true}, proxy.Options{})
		benchProxy(b, h, http.StatusOK)
	})
	b.Run("sds/all-strategies", func(b *testing.B) {
		p := rpPoint(b, "all", allStrategies, proxy.PointOptions{})
		h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{})
		benchProxy(b, h, http.StatusOK)
		checkNeverTripped(b, p)
	})
	b.Run("sds/degraded", func(b *testing.B) {
		p := rpPoint(b, "off", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{})
		h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{})
		benchProxy(b, h, http.StatusTooManyRequests)
	})
}

// allStrategies turns every strategy on at thresholds that never trip.
func allStrategies(s *limiter.Settings) {
	const never = 1 << 40
	s.VisitThreshold = limiter.At(never)
	s.TokensPerSecond, s.TokenBucketSize = limiter.At(int64(time.Second)), limiter.At(int64(time.Second))
	s.ConcurrentThreshold = limiter.At(1 << 20)
	s.TimeoutThreshold, s.TimeoutCountThreshold = 10*time.Second, limiter.At(never)
	s.ExceptionThreshold = limiter.At(never)
	s.ExceptionRateThreshold, s.ExceptionRateStart = limiter.At(100), 0
	s.DelayTime, s.RetryInterval = 30*time.Second, time.Second
}

// checkNeverTripped fails a benchmark whose forwarding point tripped (it
// would have measured fallbacks).
func checkNeverTripped(b *testing.B, p *proxy.Point) {
	if sn := p.Limiter().Snapshot(time.Now()); sn.LastTrip.Strategy != 0 {
		b.Fatalf("the point tripped (%v): the benchmark measured fallbacks", sn.LastTrip.Strategy)
	}
}

// BenchmarkHandler is BenchmarkProxy without sockets: the same four
// handlers, called directly with a recorder and an in-memory upstream that
// answers 64 bytes, so ns/op and allocs/op are the proxy code's own cost
// (ReverseProxy's included), free of the loopback's noise.
func BenchmarkHandler(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 64)
	upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"text/plain"}},
			Body:          io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)),
			Request:       r,
		}, nil
	})
	upstreamURL := rpFakeUpstream
	b.Run("bare", func(b *testing.B) {
		benchHandler(b, &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(upstreamURL)
				pr.Out.Host = pr.In.Host
				pr.SetXForwarded()
			},
			Transport: upstream,
		}, http.StatusOK)
	})
	// bare with a BufferPool, as the Handler's ReverseProxy has: the
	// difference to the sds rows is the Handler's own cost.
	b.Run("bare-pooled", func(b *testing.B) {
		benchHandler(b, &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(upstreamURL)
				pr.Out.Host = pr.In.Host
				pr.SetXForwarded()
			},
			Transport:  upstream,
			BufferPool: &benchBufferPool{},
		}, http.StatusOK)
	})
	b.Run("sds/no-points", func(b *testing.B) {
		h, _ := rpHandler(b, &proxy.Config{Upstream: upstreamURL, ForwardedHeaders: true}, proxy.Options{Transport: upstream})
		benchHandler(b, h, http.StatusOK)
	})
	b.Run("sds/all-strategies", func(b *testing.B) {
		p := rpPoint(b, "all", allStrategies, proxy.PointOptions{})
		h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{Transport: upstream})
		benchHandler(b, h, http.StatusOK)
		checkNeverTripped(b, p)
	})
	// Every request carrying a valid W3C traceparent: the exemplar's cost
	// (at most one per point every 100ms) on top of all-strategies.
	b.Run("sds/all-strategies-traced", func(b *testing.B) {
		p := rpPoint(b, "all", allStrategies, proxy.PointOptions{})
		h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{Transport: upstream})
		benchHandler(b, h, http.StatusOK, "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	})
	b.Run("sds/degraded", func(b *testing.B) {
		p := rpPoint(b, "off", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{})
		h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{Transport: upstream})
		benchHandler(b, h, http.StatusTooManyRequests)
	})
	// all-strategies with a per-key rule of every per-key strategy, far
	// above the load: the per-key check's cost on an admitted request.
	b.Run("sds/all-strategies-per-key", func(b *testing.B) {
		rule := keyRule(b, proxy.MissingPass, perkey.Settings{VisitThreshold: limiter.At(1 << 31), TokensPerSecond: limiter.At(limiter.MaxTokensPerSecond), ConcurrentThreshold: limiter.At(1 << 20)})
		p := rpPoint(b, "all", allStrategies, proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
		h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{Transport: upstream})
		benchHandler(b, h, http.StatusOK, "X-Api-Key", "sk_live_0123456789")
		checkNeverTripped(b, p)
	})
	// all-strategies on answers saying Cache-Control: private, without
	// stale: and with it (not kept: what stale costs a request whose
	// answer is not kept); and with stale: on answers kept (max-age),
	// which copies each answer aside.
	for _, tc := range []struct {
		name, cacheControl string
		stale              bool
	}{{"private", "private", false}, {"stale-not-kept", "private", true}, {"stale-kept", "max-age=60", true}} {
		b.Run("sds/all-strategies-"+tc.name, func(b *testing.B) {
			upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
				return &http.Response{
					StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1,
					Header:        http.Header{"Content-Type": {"text/plain"}, "Cache-Control": {tc.cacheControl}},
					Body:          io.NopCloser(bytes.NewReader(body)),
					ContentLength: int64(len(body)),
					Request:       r,
				}, nil
			})
			var opts proxy.PointOptions
			if tc.stale {
				opts.StaleMaxAge = time.Minute
			}
			p := rpPoint(b, "all", allStrategies, opts)
			h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{Transport: upstream, Stale: stale.New(64 << 20)})
			benchHandler(b, h, http.StatusOK)
			checkNeverTripped(b, p)
		})
	}
	// A key over its limit: the per-key rule's degraded answer.
	b.Run("sds/per-key-degraded", func(b *testing.B) {
		rule := keyRule(b, proxy.MissingPass, perkey.Settings{VisitThreshold: limiter.At(0)})
		p := rpPoint(b, "key", nil, proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
		h, _ := rpHandler(b, rpConfig(upstreamURL, p), proxy.Options{Transport: upstream})
		benchHandler(b, h, http.StatusTooManyRequests, "X-Api-Key", "sk_live_0123456789")
	})
}

// benchBufferPool recycles 32 KiB copy buffers.
type benchBufferPool struct{ pool sync.Pool }

func (b *benchBufferPool) Get() []byte {
	if buf, ok := b.pool.Get().(*[32 << 10]byte); ok {
		return buf[:]
	}
	return make([]byte, 32<<10)
}

func (b *benchBufferPool) Put(buf []byte) { b.pool.Put((*[32 << 10]byte)(buf)) }

// benchHandler calls h.ServeHTTP from b.RunParallel with a fresh recorder
// per request, checking each answer's status; header holds request header
// pairs.
func benchHandler(b *testing.B, h http.Handler, want int, header ...string) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "http://shop.example/bench", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != want {
				b.Errorf("status: got %d, want %d", rec.Code, want)
				return
			}
		}
	})
}

// benchProxy serves h on a loopback server and sends it GET requests from
// b.RunParallel with a keep-alive client, checking each answer's status.
func benchProxy(b *testing.B, h http.Handler, want int) {
	front := httptest.NewServer(h)
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		DisableCompression:  true,
	}}
	defer client.CloseIdleConnections()
	url := front.URL + "/bench"
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				b.Errorf("status: got %d, want %d", resp.StatusCode, want)
				return
			}
		}
	})
}

// processCPU returns the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNormalizePath measures the path normaliser on a path already in
// normal form (the common case, which must not allocate) and on dirty
// spellings of it (one allocation, the result), in parallel.
func BenchmarkNormalizePath(b *testing.B) {
	for _, bc := range []struct{ name, path string }{
		{"normal", "/api/orders/7/items"},
		{"normal-escaped", "/api/a%20b/caf%C3%A9"},
		{"dot-segments", "/api/./orders/../orders/7//items"},
		{"encoded-dots", "/soak/%2e%2e/api/orders/7/items"},
		{"lower-hex", "/api/a%20b/caf%c3%a9"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := route.NormalizePath(bc.path); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
