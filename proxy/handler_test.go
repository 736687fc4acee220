package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
)

func TestForwardedHeaders(t *testing.T) {
	type seen struct {
		Host          string
		XFF, XFP, XFH []string
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(seen{
			Host: r.Host,
			XFF:  r.Header.Values("X-Forwarded-For"),
			XFP:  r.Header.Values("X-Forwarded-Proto"),
			XFH:  r.Header.Values("X-Forwarded-Host"),
		})
	}))
	defer upstream.Close()
	forwarded := seen{Host: "shop.example:8080", XFF: []string{"127.0.0.1"}, XFP: []string{"http"}, XFH: []string{"shop.example:8080"}}
	tests := []struct {
		name      string
		path      string
		forwarded bool
		want      seen
	}{
		{"point/forwarded", "/api/x", true, forwarded},
		{"point/not forwarded", "/api/x", false, seen{Host: "shop.example:8080"}},
		{"unmatched/forwarded", "/other", true, forwarded},
		{"unmatched/not forwarded", "/other", false, seen{Host: "shop.example:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rpPoint(t, "api", nil, proxy.PointOptions{})
			cfg := &proxy.Config{
				Upstream:         rpURL(upstream.URL),
				ForwardedHeaders: tt.forwarded,
				Routes:           []proxy.Route{{Point: p, Rule: route.Rule{PathPrefix: "/api"}}},
				Points:           []*proxy.Point{p},
			}
			h, _ := rpHandler(t, cfg, proxy.Options{})
			front := httptest.NewServer(h)
			defer front.Close()

			req, _ := http.NewRequest(http.MethodGet, front.URL+tt.path, nil)
			req.Host = "shop.example:8080"
			// Spoofing attempts: none of these may reach the upstream.
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("X-Forwarded-Proto", "https")
			req.Header.Set("X-Forwarded-Host", "evil.example")
			resp, err := front.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got seen
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("decoding the upstream's echo: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("upstream saw %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestShadowMode(t *testing.T) {
	calls := 0
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		calls++
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	p := rpPoint(t, "p", func(s *limiter.Settings) { s.VisitThreshold, s.Shadow = limiter.At(0), true }, proxy.PointOptions{})
	h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})
	for i := range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		if rec.Code != http.StatusOK || rec.Body.String() != "upstream" {
			t.Errorf("request %d: got %d %q, want 200 \"upstream\"", i, rec.Code, rec.Body.String())
		}
		if got, want := rec.Header().Get("Sds-Shadow-Degraded"), "visit; point=p"; got != want {
			t.Errorf("request %d: Sds-Shadow-Degraded: got %q, want %q", i, got, want)
		}
		if got := rec.Header().Get("Sds-Degraded"); got != "" {
			t.Errorf("request %d: Sds-Degraded: got %q, want none", i, got)
		}
	}
	if calls != 2 {
		t.Errorf("upstream calls: got %d, want 2", calls)
	}
	counts, inflight := rpCounts(p, time.Now())
	if counts.Visits != 2 || counts.Degraded != 2 || inflight != 0 {
		t.Errorf("counts: got visits %d degraded %d in flight %d, want 2 2 0", counts.Visits, counts.Degraded, inflight)
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sds_requests_total", map[string]string{"point": "p", "result": "shadow_degraded"}, 2},
		{"sds_requests_total", map[string]string{"point": "p", "result": "proxied"}, 0},
		{"sds_requests_total", map[string]string{"point": "p", "result": "degraded"}, 0},
		{"sds_shadow_degraded_total", map[string]string{"point": "p", "strategy": "visit"}, 2},
		{"sds_degraded_total", map[string]string{"point": "p", "strategy": "visit"}, 0},
	} {
		if got := rpMetric(t, reg, m.name, m.labels); got != m.want {
			t.Errorf("%s%v: got %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

// TestUpstreamOutcome checks what the client gets and what the point counts
// for each way an upstream call ends.
// upstreamOutcome is what the client and the point see of one upstream
// answer.
type upstreamOutcome struct {
	status     int
	body       string
	header     http.Header // checked headers
	exceptions int64
	errorKind  string // the sds_upstream_errors_total series counted once
}

// checkOutcome compares the answer rec got, and what p and reg counted,
// with want.
func checkOutcome(t *testing.T, rec *httptest.ResponseRecorder, p *proxy.Point, reg *prometheus.Registry, want upstreamOutcome) {
	t.Helper()
	if rec.Code != want.status {
		t.Errorf("status: got %d, want %d", rec.Code, want.status)
	}
	if want.body != "" && rec.Body.String() != want.body {
		t.Errorf("body: got %q, want %q", rec.Body.String(), want.body)
	}
	for k, v := range want.header {
		if got := rec.Header().Values(k); !reflect.DeepEqual(got, v) {
			t.Errorf("header %s: got %q, want %q", k, got, v)
		}
	}
	counts, inflight := rpCounts(p, time.Now())
	if counts.Exceptions != want.exceptions || inflight != 0 {
		t.Errorf("exceptions, in flight: got %d, %d, want %d, 0", counts.Exceptions, inflight, want.exceptions)
	}
	checkUpstreamErrors(t, reg, want.errorKind, "transport", "upstream_timeout", "status_5xx")
}

// checkUpstreamErrors requires point p's sds_upstream_errors_total to be 1
// for the kind counted and 0 for each other kind.
func checkUpstreamErrors(t *testing.T, reg *prometheus.Registry, counted string, kinds ...string) {
	t.Helper()
	for _, kind := range kinds {
		want := 0.0
		if kind == counted {
			want = 1
		}
		if got := rpMetric(t, reg, "sds_upstream_errors_total", map[string]string{"point": "p", "kind": kind}); got != want {
			t.Errorf("sds_upstream_errors_total{kind=%q}: got %v, want %v", kind, got, want)
		}
	}
}

func TestUpstreamOutcome(t *testing.T) {
	errRefused := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	fallback := proxy.Fallback{Status: 503, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("sorry"), BodySet: true}
	upstream5xx := func(r *http.Request) (*http.Response, error) {
		return rpReply(r, http.StatusServiceUnavailable, "busy", "X-Up", "1"), nil
	}
	refused := func(*http.Request) (*http.Response, error) { return nil, errRefused }
	hang := func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	type want = upstreamOutcome
	tests := []struct {
		name            string
		upstream        rpRoundTrip
		fallbackOnError bool
		want            want
	}{
		{"200", func(r *http.Request) (*http.Response, error) { return rpReply(r, 200, "fine"), nil }, false,
			want{status: 200, body: "fine"}},
		{"404 is no exception", func(r *http.Request) (*http.Response, error) { return rpReply(r, 404, "nope"), nil }, false,
			want{status: 404, body: "nope"}},
		{"5xx relayed", upstream5xx, false,
			want{503, "busy", http.Header{"X-Up": {"1"}, "Sds-Degraded": nil}, 1, "status_5xx"}},
		{"5xx relayed despite fallbackOnError", upstream5xx, true,
			want{503, "busy", http.Header{"X-Up": {"1"}, "Sds-Degraded": nil}, 1, "status_5xx"}},
		{"grpc error status", func(r *http.Request) (*http.Response, error) {
			return rpReply(r, 200, "", "Content-Type", "application/grpc", "Grpc-Status", "14"), nil
		}, false, want{status: 200, exceptions: 1, errorKind: "status_5xx"}},
		{"grpc error status in trailers", func(r *http.Request) (*http.Response, error) {
			resp := rpReply(r, 200, "frame", "Content-Type", "application/grpc")
			resp.Trailer = http.Header{"Grpc-Status": {"13"}}
			return resp, nil
		}, false, want{status: 200, body: "frame", exceptions: 1, errorKind: "status_5xx"}},
		{"grpc ok status in trailers", func(r *http.Request) (*http.Response, error) {
			resp := rpReply(r, 200, "frame", "Content-Type", "application/grpc")
			resp.Trailer = http.Header{"Grpc-Status": {"0"}}
			return resp, nil
		}, false, want{status: 200, body: "frame"}},
		{"transport error", refused, false,
			want{status: 502, exceptions: 1, errorKind: "transport"}},
		{"transport error, fallbackOnError", refused, true,
			want{503, "sorry", http.Header{"Sds-Degraded": {"upstream_error; point=p"}, "Content-Type": {"text/plain"}}, 1, "transport"}},
		{"upstreamTimeout", hang, false,
			want{status: 504, exceptions: 1, errorKind: "upstream_timeout"}},
		{"upstreamTimeout, fallbackOnError", hang, true,
			want{503, "sorry", http.Header{"Sds-Degraded": {"upstream_error; point=p"}}, 1, "upstream_timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := rpPoint(t, "p", nil, proxy.PointOptions{
					UpstreamTimeout: 2 * time.Second, FallbackOnError: tt.fallbackOnError, Fallback: fallback,
				})
				h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: tt.upstream})
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
				checkOutcome(t, rec, p, reg, tt.want)
			})
		})
	}
}

// TestClientCancel: a client that goes away mid-call is no exception, frees
// its slot and is logged as 499; a call that had already passed
// timeoutThreshold still counts as a timeout.
func TestClientCancel(t *testing.T) {
	tests := []struct {
		name     string
		after    time.Duration // the client gives up after this long
		timeouts int64
	}{
		{"before timeoutThreshold", 999 * time.Millisecond, 0},
		{"after timeoutThreshold", 1500 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hang := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
					<-r.Context().Done()
					return nil, r.Context().Err()
				})
				p := rpPoint(t, "p", func(s *limiter.Settings) {
					s.TimeoutThreshold, s.TimeoutCountThreshold = time.Second, limiter.At(5)
				}, proxy.PointOptions{FallbackOnError: true})
				accessLog, logs := rpAccessLog()
				h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: hang, AccessLog: accessLog})
				ctx, cancel := context.WithCancel(context.Background())
				rec := httptest.NewRecorder()
				done := make(chan struct{})
				go func() {
					defer close(done)
					h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx))
				}()
				synctest.Wait()
				if _, inflight := rpCounts(p, time.Now()); inflight != 1 {
					t.Fatalf("in flight during the call: got %d, want 1", inflight)
				}
				time.Sleep(tt.after) // fake time: the bubble's clock moves on
				cancel()
				<-done
				counts, inflight := rpCounts(p, time.Now())
				if counts.Exceptions != 0 || counts.Timeouts != tt.timeouts || inflight != 0 {
					t.Errorf("exceptions, timeouts, in flight: got %d, %d, %d, want 0, %d, 0",
						counts.Exceptions, counts.Timeouts, inflight, tt.timeouts)
				}
				if got := rpLoggedStatus(t, logs); got != proxy.StatusClientClosedRequest {
					t.Errorf("logged status: got %d, want %d", got, proxy.StatusClientClosedRequest)
				}
				if rec.Body.Len() != 0 || rec.Header().Get("Sds-Degraded") != "" {
					t.Errorf("wrote %q with headers %v to a client that went away, want nothing", rec.Body.String(), rec.Header())
				}
				if got := rpMetric(t, reg, "sds_timeouts_total", map[string]string{"point": "p"}); got != float64(tt.timeouts) {
					t.Errorf("sds_timeouts_total: got %v, want %d", got, tt.timeouts)
				}
			})
		})
	}
}

// TestClientGoesAway is TestClientCancel over real sockets: the client
// drops its connection while the upstream is still working.
func TestClientGoesAway(t *testing.T) {
	arrived := make(chan struct{}, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done() // the proxy cancels its call when the client goes
	}))
	defer upstream.Close()
	p := rpPoint(t, "p", nil, proxy.PointOptions{})
	h, _ := rpHandler(t, rpConfig(rpURL(upstream.URL), p), proxy.Options{})
	front := httptest.NewServer(h)
	defer front.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/slow", nil)
		resp, err := front.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: got %v, want context.Canceled", err)
	}
	rpEventually(t, "slot freed", func() bool { return p.Limiter().InFlight() == 0 })
	if counts, _ := rpCounts(p, time.Now()); counts.Exceptions != 0 {
		t.Errorf("exceptions: got %d, want 0", counts.Exceptions)
	}
}

// failingBody yields some bytes, then fails like a broken chunked body.
type failingBody struct{ n int }

func (b *failingBody) Read(p []byte) (int, error) {
	if b.n >= 3 {
		return 0, errors.New("invalid byte in chunk length")
	}
	b.n++
	p[0] = 'x'
	return 1, nil
}

func (b *failingBody) Close() error { return nil }

// TestMalformedClientBody: a client body that fails to read is the
// client's fault: 400, no exception, slot freed, even with fallbackOnError.
func TestMalformedClientBody(t *testing.T) {
	readAll := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return nil, err // as http.Transport does when the body fails
		}
		return rpReply(r, 200, "read it"), nil
	})
	for _, fallbackOnError := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallbackOnError=%v", fallbackOnError), func(t *testing.T) {
			p := rpPoint(t, "p", func(s *limiter.Settings) { s.ExceptionThreshold = limiter.At(1) }, proxy.PointOptions{FallbackOnError: fallbackOnError})
			accessLog, logs := rpAccessLog()
			h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: readAll, AccessLog: accessLog})
			req := httptest.NewRequest(http.MethodPost, "/x", &failingBody{})
			req.ContentLength = 10
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("status: got %d, want 400", rec.Code)
			}
			if got := rpLoggedStatus(t, logs); got != http.StatusBadRequest {
				t.Errorf("logged status: got %d, want 400", got)
			}
			counts, inflight := rpCounts(p, time.Now())
			if counts.Exceptions != 0 || inflight != 0 {
				t.Errorf("exceptions, in flight: got %d, %d, want 0, 0", counts.Exceptions, inflight)
			}
			if got := rpMetric(t, reg, "sds_upstream_errors_total", map[string]string{"point": "p", "kind": "transport"}); got != 0 {
				t.Errorf("sds_upstream_errors_total{kind=transport}: got %v, want 0", got)
			}
			// With exceptionThreshold 1, one counted exception would
			// degrade the next, well-formed request.
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("fine")))
			if rec.Code != http.StatusOK {
				t.Errorf("next request: got %d, want 200", rec.Code)
			}
		})
	}
}

// TestShortClientBody: over real sockets, a client that half-closes after
// fewer bytes than its Content-Length gets a 400 and counts nothing.
func TestShortClientBody(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		io.WriteString(w, "read it")
	}))
	defer upstream.Close()
	p := rpPoint(t, "p", nil, proxy.PointOptions{})
	h, _ := rpHandler(t, rpConfig(rpURL(upstream.URL), p), proxy.Options{})
	front := httptest.NewServer(h)
	defer front.Close()

	conn := rpDial(t, front)
	io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 100\r\n\r\nonly 15 bytes..")
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status: got %d, want 400", resp.StatusCode)
	}
	rpEventually(t, "slot freed", func() bool { return p.Limiter().InFlight() == 0 })
	if counts, _ := rpCounts(p, time.Now()); counts.Exceptions != 0 || counts.Visits != 1 {
		t.Errorf("visits, exceptions: got %d, %d, want 1, 0", counts.Visits, counts.Exceptions)
	}
}

// TestTimeoutCountedInFlight: a hung call counts as a timeout the moment it
// passes timeoutThreshold, so the point trips while the call still hangs;
// the call's end does not count it again.
func TestTimeoutCountedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const threshold = 100 * time.Millisecond
		release := make(chan struct{})
		calls := 0
		transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
			calls++
			select {
			case <-release:
				return rpReply(r, 200, "late"), nil
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		})
		p := rpPoint(t, "p", func(s *limiter.Settings) {
			s.TimeoutThreshold, s.TimeoutCountThreshold = threshold, limiter.At(1)
		}, proxy.PointOptions{})
		h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})
		timeoutsMetric := func() float64 { return rpMetric(t, reg, "sds_timeouts_total", map[string]string{"point": "p"}) }

		done := make(chan int)
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/hung", nil))
			done <- rec.Code
		}()
		synctest.Wait()

		time.Sleep(threshold - time.Millisecond) // fake time
		synctest.Wait()
		if counts, _ := rpCounts(p, time.Now()); counts.Timeouts != 0 {
			t.Fatalf("timeouts at threshold-1ms: got %d, want 0", counts.Timeouts)
		}
		time.Sleep(time.Millisecond) // fake time: now exactly at the threshold
		synctest.Wait()
		counts, inflight := rpCounts(p, time.Now())
		if counts.Timeouts != 1 || inflight != 1 {
			t.Fatalf("at the threshold, call in flight: got timeouts %d, in flight %d, want 1, 1", counts.Timeouts, inflight)
		}
		if got := timeoutsMetric(); got != 1 {
			t.Errorf("sds_timeouts_total in flight: got %v, want 1", got)
		}

		// The point has tripped while the first call still hangs.
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/next", nil))
		if got, want := rec.Header().Get("Sds-Degraded"), "timeout; point=p"; rec.Code != 503 || got != want {
			t.Errorf("next request: got %d %q, want 503 %q", rec.Code, got, want)
		}
		if calls != 1 {
			t.Errorf("upstream calls: got %d, want 1", calls)
		}

		close(release)
		if code := <-done; code != 200 {
			t.Errorf("hung call: got %d, want 200", code)
		}
		counts, inflight = rpCounts(p, time.Now())
		if counts.Timeouts != 1 || counts.Exceptions != 0 || inflight != 0 {
			t.Errorf("after the call: got timeouts %d, exceptions %d, in flight %d, want 1, 0, 0",
				counts.Timeouts, counts.Exceptions, inflight)
		}
		if got := timeoutsMetric(); got != 1 {
			t.Errorf("sds_timeouts_total after the call: got %v, want 1", got)
		}
	})
}

// TestAbortMidBody: an upstream that promises more body than it sends makes
// ReverseProxy panic with http.ErrAbortHandler mid-copy; the slot is still
// freed and the call is an exception.
func TestAbortMidBody(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		// Enough of the body that the proxy flushes its headers to the
		// client before the copy fails.
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
		brw.Write(make([]byte, 20000))
		brw.Flush()
		conn.Close()
	}))
	defer upstream.Close()
	withAndWithoutAccessLog(t, func(t *testing.T, accessLog *zap.Logger, logs *observer.ObservedLogs) {
		p := rpPoint(t, "p", nil, proxy.PointOptions{})
		h, _ := rpHandler(t, rpConfig(rpURL(upstream.URL), p), proxy.Options{AccessLog: accessLog})
		front := httptest.NewServer(h)
		defer front.Close()

		resp, err := front.Client().Get(front.URL + "/download")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("reading the body: got %v, want io.ErrUnexpectedEOF", err)
		}
		rpEventually(t, "slot freed", func() bool { return p.Limiter().InFlight() == 0 })
		if counts, _ := rpCounts(p, time.Now()); counts.Exceptions != 1 {
			t.Errorf("exceptions: got %d, want 1", counts.Exceptions)
		}
		rpCheckLoggedStatus(t, logs, http.StatusOK)
	})
}

// TestSwapDuringTraffic: requests served while the config is swapped back
// and forth never fail and each sees one config whole. Config A degrades
// /x on point a; config B forwards /x on point b to another upstream with
// forwarded headers on.
func TestSwapDuringTraffic(t *testing.T) {
	transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		return rpReply(r, 200, r.URL.Host+" xff="+strconv.FormatBool(r.Header.Get("X-Forwarded-For") != "")), nil
	})
	a := rpPoint(t, "a", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{})
	b := rpPoint(t, "b", nil, proxy.PointOptions{})
	cfgA := &proxy.Config{Upstream: rpURL("http://a.test"), Routes: []proxy.Route{{Point: a, Rule: route.Rule{Path: "/x"}}}, Points: []*proxy.Point{a}}
	cfgB := &proxy.Config{Upstream: rpURL("http://b.test"), ForwardedHeaders: true, Routes: []proxy.Route{{Point: b, Rule: route.Rule{Path: "/x"}}}, Points: []*proxy.Point{b}}
	h, _ := rpHandler(t, cfgA, proxy.Options{Transport: transport})

	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				swapped <- n
				return
			default:
			}
			if n%2 == 0 {
				h.Swap(cfgB)
			} else {
				h.Swap(cfgA)
			}
			n++
			runtime.Gosched()
		}
	}()

	// Each worker sends at least perWorker requests, and goes on until
	// answers by both configs have been seen, so the swaps overlap traffic.
	const workers, perWorker = 4, 500
	deadline := time.Now().Add(10 * time.Second)
	var seenA, seenB, sent atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := 0; i < perWorker || seenA.Load() == 0 || seenB.Load() == 0; i++ {
				if time.Now().After(deadline) {
					t.Errorf("after 10s: %d answers by config A, %d by config B, want some of each", seenA.Load(), seenB.Load())
					return
				}
				sent.Add(1)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
				degraded := rec.Header().Get("Sds-Degraded")
				switch {
				case rec.Code == 429 && degraded == "visit; point=a":
					seenA.Add(1)
				case rec.Code == 200 && degraded == "" && rec.Body.String() == "b.test xff=true":
					seenB.Add(1)
				default:
					t.Errorf("mixed or failed answer: %d, Sds-Degraded %q, body %q", rec.Code, degraded, rec.Body.String())
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	swaps := <-swapped
	if seenA.Load()+seenB.Load() != sent.Load() {
		t.Errorf("consistent answers: got %d + %d, want %d", seenA.Load(), seenB.Load(), sent.Load())
	}
	t.Logf("%d swaps; answers by config A: %d, by config B: %d", swaps, seenA.Load(), seenB.Load())
	if _, inflight := rpCounts(b, time.Now()); inflight != 0 {
		t.Errorf("point b in flight: got %d, want 0", inflight)
	}
}

func TestPressureTest(t *testing.T) {
	tests := []struct {
		name      string
		downgrade bool
		value     string // of X-Pressure-Test; "" sends none
		degraded  bool
	}{
		{"1", true, "1", true},
		{"true", true, "true", true},
		{"TRUE", true, "TRUE", true},
		{"0", true, "0", false},
		{"yes is not true", true, "yes", false},
		{"absent", true, "", false},
		{"point does not degrade pressure tests", false, "1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rpPoint(t, "p", func(s *limiter.Settings) { s.PressureTestDowngrade = tt.downgrade }, proxy.PointOptions{})
			cfg := rpConfig(rpFakeUpstream, p)
			cfg.PressureTestHeader = "X-Pressure-Test"
			h, reg := rpHandler(t, cfg, proxy.Options{Transport: rpOK})
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			if tt.value != "" {
				req.Header.Set("X-Pressure-Test", tt.value)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			wantStatus, wantHeader, wantCount := 200, "", 0.0
			if !tt.downgrade {
				wantCount = -1 // no series for a strategy the point does not have
			}
			if tt.degraded {
				wantStatus, wantHeader, wantCount = 503, "pressure_test; point=p", 1
			}
			if got := rec.Header().Get("Sds-Degraded"); rec.Code != wantStatus || got != wantHeader {
				t.Errorf("got %d %q, want %d %q", rec.Code, got, wantStatus, wantHeader)
			}
			if got := rpMetric(t, reg, "sds_degraded_total", map[string]string{"point": "p", "strategy": "pressure_test"}); got != wantCount {
				t.Errorf("sds_degraded_total{strategy=pressure_test}: got %v, want %v", got, wantCount)
			}
		})
	}
}

// TestAccessLogPath: the access log names the escaped, normalised path the
// request was routed by, not the spelling the client sent.
func TestAccessLogPath(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{"/plain", "/plain"},
		{"/a/../b//c", "/b/c"},
		{"/x/%2e/y", "/x/y"},
		{"/a%20b", "/a%20b"},
	} {
		accessLog, logs := rpAccessLog()
		p := rpPoint(t, "p", nil, proxy.PointOptions{})
		h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: rpOK, AccessLog: accessLog})
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tc.target, nil))
		lines := logs.All()
		if len(lines) != 1 {
			t.Fatalf("%s: got %d access log lines, want 1", tc.target, len(lines))
		}
		if got := lines[0].ContextMap()["path"]; got != tc.want {
			t.Errorf("%s: access log path got %q, want %q", tc.target, got, tc.want)
		}
	}
}
