package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
)

// The helpers of the request-path tests (route, fallback, handler, bench).
// Their names start with "rp" so that they do not collide with helpers of
// other test files of package proxy_test.

// rpFakeUpstream is the base URL of configs whose calls go to a fake
// RoundTripper; nothing listens there.
var rpFakeUpstream = rpURL("http://upstream.test")

func rpURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// rpPoint returns a point named name whose settings are the zero Settings
// (every strategy off) changed by set.
func rpPoint(tb testing.TB, name string, set func(*limiter.Settings), opts proxy.PointOptions) *proxy.Point {
	tb.Helper()
	var s limiter.Settings
	if set != nil {
		set(&s)
	}
	lim, err := limiter.NewPoint(name, s)
	if err != nil {
		tb.Fatalf("limiter.NewPoint(%q): %v", name, err)
	}
	return proxy.NewPoint(lim, opts)
}

// rpConfig returns a config on upstream with forwarded headers on, one
// catch-all route per point (in order) and the points.
func rpConfig(upstream *url.URL, points ...*proxy.Point) *proxy.Config {
	cfg := &proxy.Config{Upstream: upstream, ForwardedHeaders: true, Points: points}
	for _, p := range points {
		cfg.Routes = append(cfg.Routes, proxy.Route{Point: p})
	}
	return cfg
}

// rpHandler builds a Handler for cfg on its own registry, the way cmd does.
// A nil o.Logger means zap.NewNop. With o.AccessLog set, it turns the
// config's access log on.
func rpHandler(tb testing.TB, cfg *proxy.Config, o proxy.Options) (*proxy.Handler, *prometheus.Registry) {
	tb.Helper()
	if o.AccessLog != nil {
		cfg.AccessLog = true
	}
	reg := prometheus.NewRegistry()
	var h *proxy.Handler
	o.Metrics = metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	h = proxy.New(cfg, o)
	// Run fires the calls' alarms (a timeout counted in flight, an
	// upstreamTimeout); it stops with the test.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	return h, reg
}

// rpRoundTrip is a fake upstream transport.
type rpRoundTrip func(*http.Request) (*http.Response, error)

func (f rpRoundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// rpReply is a complete upstream response to r; kv are header pairs.
func rpReply(r *http.Request, status int, body string, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}

// rpOK is a fake upstream that answers 200 "upstream" to everything.
var rpOK = rpRoundTrip(func(r *http.Request) (*http.Response, error) {
	return rpReply(r, http.StatusOK, "upstream", "Content-Type", "text/plain"), nil
})

// rpCounts returns p's window counts and calls in flight at now.
func rpCounts(p *proxy.Point, now time.Time) (limiter.Counts, int64) {
	sn := p.Limiter().Snapshot(now)
	return sn.Counts, sn.InFlight
}

// rpMetric returns the value of the counter or gauge name whose labels
// include labels, or -1 when there is no such series.
func rpMetric(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	tb.Helper()
	families, err := reg.Gather()
	if err != nil {
		tb.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := make(map[string]string)
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

// rpDial opens a raw connection to front, with a 10s deadline, closed when
// the test ends.
func rpDial(tb testing.TB, front *httptest.Server) net.Conn {
	tb.Helper()
	conn, err := net.Dial("tcp", front.Listener.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// rpEventually polls cond until it holds or 5 s pass.
func rpEventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: still false after 5s", what)
		}
		<-time.After(time.Millisecond)
	}
}

// rpAccessLog returns an access logger that keeps its lines for the test.
func rpAccessLog() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	return zap.New(core), logs
}

// rpLoggedStatus returns the status of the only access log line.
func rpLoggedStatus(tb testing.TB, logs *observer.ObservedLogs) int64 {
	tb.Helper()
	lines := logs.All()
	if len(lines) != 1 {
		tb.Fatalf("access log: got %d lines, want 1", len(lines))
	}
	status, _ := lines[0].ContextMap()["status"].(int64)
	return status
}

// withAndWithoutAccessLog runs f twice: without an access log (logs is
// nil), and with one, which wraps the ResponseWriter (the wrapper must not
// hide Flush and Hijack).
func withAndWithoutAccessLog(t *testing.T, f func(t *testing.T, accessLog *zap.Logger, logs *observer.ObservedLogs)) {
	t.Run("plain", func(t *testing.T) { f(t, nil, nil) })
	t.Run("accesslog", func(t *testing.T) {
		accessLog, logs := rpAccessLog()
		f(t, accessLog, logs)
	})
}

// rpCheckLoggedStatus waits for the access log line of a request whose
// handler may still be finishing, and checks its status. Nothing is
// checked without an access log.
func rpCheckLoggedStatus(t *testing.T, logs *observer.ObservedLogs, want int64) {
	t.Helper()
	if logs == nil {
		return
	}
	rpEventually(t, "access log line", func() bool { return logs.Len() > 0 })
	if got := rpLoggedStatus(t, logs); got != want {
		t.Errorf("logged status: got %d, want %d", got, want)
	}
}
