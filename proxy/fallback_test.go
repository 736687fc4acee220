package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// fbT0 is the instant of the fallback tests' requests.
var fbT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fbNever is a fake upstream that fails the test: a degraded request must
// never reach the service.
func fbNever(t *testing.T) http.RoundTripper {
	return rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		t.Errorf("the upstream was called for %s %s", r.Method, r.URL.Path)
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
}

// fbServe sends the requests in order to a handler with one catch-all
// point, at fbT0, and returns the last answer. Earlier requests set the
// point up (take the last token, start the delay).
func fbServe(t *testing.T, set func(*limiter.Settings), opts proxy.PointOptions, reqs ...*http.Request) *httptest.ResponseRecorder {
	t.Helper()
	p := rpPoint(t, "orders", set, opts)
	cfg := rpConfig(rpFakeUpstream, p)
	cfg.PressureTestHeader = "X-Pressure-Test"
	h, _ := rpHandler(t, cfg, proxy.Options{Transport: rpOK, Now: func() time.Time { return fbT0 }})
	var rec *httptest.ResponseRecorder
	for _, r := range reqs {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, r)
	}
	if _, inflight := rpCounts(p, fbT0); inflight != 0 {
		t.Errorf("in flight after the answers: got %d, want 0", inflight)
	}
	return rec
}

func get() *http.Request { return httptest.NewRequest(http.MethodGet, "/api/orders", nil) }

// TestConfiguredFallback: a configured fallback is answered exactly: its
// status, its headers plus Sds-Degraded and Content-Length, its body.
func TestConfiguredFallback(t *testing.T) {
	body := `{"error":"degraded","point":"orders"}`
	tests := []struct {
		name       string
		fallback   proxy.Fallback
		wantStatus int
		wantHeader http.Header
		wantBody   string
	}{
		{
			name: "status, headers and body",
			fallback: proxy.Fallback{
				Status:  http.StatusServiceUnavailable,
				Header:  http.Header{"Content-Type": {"application/json"}, "x-custom": {"a", "b"}},
				Body:    []byte(body),
				BodySet: true,
			},
			wantStatus: 503,
			wantHeader: http.Header{
				"Content-Type":   {"application/json"},
				"X-Custom":       {"a", "b"},
				"Sds-Degraded":   {"visit; point=orders"},
				"Content-Length": {"37"},
			},
			wantBody: body,
		},
		{
			name:       "an empty body is a body",
			fallback:   proxy.Fallback{Status: http.StatusNoContent, BodySet: true},
			wantStatus: 204,
			wantHeader: http.Header{"Sds-Degraded": {"visit; point=orders"}, "Content-Length": {"0"}},
		},
		{
			name:       "configured 429 gets a Retry-After",
			fallback:   proxy.Fallback{Status: http.StatusTooManyRequests, Body: []byte("slow down"), BodySet: true},
			wantStatus: 429,
			wantHeader: http.Header{"Sds-Degraded": {"visit; point=orders"}, "Content-Length": {"9"}, "Retry-After": {"1"}},
			wantBody:   "slow down",
		},
		{
			name: "configured Retry-After is kept",
			fallback: proxy.Fallback{Status: http.StatusTooManyRequests, Body: []byte("slow down"), BodySet: true,
				Header: http.Header{"Retry-After": {"120"}}},
			wantStatus: 429,
			wantHeader: http.Header{"Sds-Degraded": {"visit; point=orders"}, "Content-Length": {"9"}, "Retry-After": {"120"}},
			wantBody:   "slow down",
		},
		{
			name:       "status only: the default body",
			fallback:   proxy.Fallback{Status: http.StatusServiceUnavailable},
			wantStatus: 503,
			wantHeader: http.Header{"Sds-Degraded": {"visit; point=orders"}, "Content-Type": {"application/json"}, "Content-Length": {"57"}},
			wantBody:   `{"error":"degraded","point":"orders","strategy":"visit"}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := fbServe(t, func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{Fallback: tt.fallback}, get())
			if rec.Code != tt.wantStatus {
				t.Errorf("status: got %d, want %d", rec.Code, tt.wantStatus)
			}
			if got := rec.Header(); !reflect.DeepEqual(got, tt.wantHeader) {
				t.Errorf("headers: got %v, want %v", got, tt.wantHeader)
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("body: got %q, want %q", got, tt.wantBody)
			}
		})
	}
}

// TestDefaultFallback: without a configured fallback, visit and
// token_bucket trips answer 429 with Retry-After, the others 503; the body
// is JSON naming the point and the strategy.
func TestDefaultFallback(t *testing.T) {
	pressure := get()
	pressure.Header.Set("X-Pressure-Test", "1")
	tests := []struct {
		strategy   string
		set        func(*limiter.Settings)
		reqs       []*http.Request // the last one is degraded
		status     int
		retryAfter string // "" means none
	}{
		{"pressure_test", func(s *limiter.Settings) { s.PressureTestDowngrade = true }, []*http.Request{pressure}, 503, ""},
		{"visit", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, []*http.Request{get()}, 429, "1"},
		{"visit", func(s *limiter.Settings) { s.VisitThreshold, s.Window, s.Buckets = limiter.At(0), time.Minute, 4 }, []*http.Request{get()}, 429, "15"},
		// One token a second, bucket of 1: the first request takes it.
		{"token_bucket", func(s *limiter.Settings) { s.TokensPerSecond, s.TokenBucketSize = limiter.At(1), limiter.At(1) }, []*http.Request{get(), get()}, 429, "1"},
		{"concurrent", func(s *limiter.Settings) { s.ConcurrentThreshold = limiter.At(0) }, []*http.Request{get()}, 503, ""},
		{"timeout", func(s *limiter.Settings) { s.TimeoutThreshold, s.TimeoutCountThreshold = time.Second, limiter.At(0) }, []*http.Request{get()}, 503, ""},
		{"exception", func(s *limiter.Settings) { s.ExceptionThreshold = limiter.At(0) }, []*http.Request{get()}, 503, ""},
		{"exception_rate", func(s *limiter.Settings) { s.ExceptionRateThreshold = limiter.At(0) }, []*http.Request{get()}, 503, ""},
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
			rec := fbServe(t, tt.set, proxy.PointOptions{}, tt.reqs...)
			if rec.Code != tt.status {
				t.Errorf("status: got %d, want %d", rec.Code, tt.status)
			}
			wantBody := `{"error":"degraded","point":"orders","strategy":"` + tt.strategy + `"}` + "\n"
			want := http.Header{
				"Sds-Degraded":   {tt.strategy + "; point=orders"},
				"Content-Type":   {"application/json"},
				"Content-Length": {strconv.Itoa(len(wantBody))},
			}
			if tt.retryAfter != "" {
				want["Retry-After"] = []string{tt.retryAfter}
			}
			if got := rec.Header(); !reflect.DeepEqual(got, want) {
				t.Errorf("headers: got %v, want %v", got, want)
			}
			if got := rec.Body.String(); got != wantBody {
				t.Errorf("body: got %q, want %q", got, wantBody)
			}
		})
	}
}

// TestDelayFallback: inside a delay, requests are degraded as the strategy
// that started it, marked "; delay", and Retry-After tells when the next
// probe (or the end of the delay) is due.
func TestDelayFallback(t *testing.T) {
	tests := []struct {
		name       string
		retry      time.Duration
		retryAfter string
	}{
		{"no probes: the delay's end", 0, "30"},
		{"probes: the next probe", 2 * time.Second, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := func(s *limiter.Settings) {
				s.VisitThreshold, s.DelayTime, s.RetryInterval = limiter.At(0), 30*time.Second, tt.retry
			}
			// The first request trips visit and starts the delay; the
			// second is degraded by the delay.
			first := fbServe(t, set, proxy.PointOptions{}, get())
			if got, want := first.Header().Get("Sds-Degraded"), "visit; point=orders"; got != want {
				t.Errorf("tripping request: Sds-Degraded: got %q, want %q", got, want)
			}
			rec := fbServe(t, set, proxy.PointOptions{}, get(), get())
			if rec.Code != 429 {
				t.Errorf("status: got %d, want 429", rec.Code)
			}
			if got, want := rec.Header().Get("Sds-Degraded"), "visit; point=orders; delay"; got != want {
				t.Errorf("Sds-Degraded: got %q, want %q", got, want)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After: got %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

// TestHeadFallback: a HEAD request gets the fallback's status and headers,
// Content-Length included, and no body.
func TestHeadFallback(t *testing.T) {
	front := httptest.NewServer(nil)
	defer front.Close()
	p := rpPoint(t, "orders", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) },
		proxy.PointOptions{Fallback: proxy.Fallback{Status: 503, Body: []byte("degraded"), BodySet: true}})
	h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: fbNever(t)})
	front.Config.Handler = h

	// Over a real socket: the server itself would reject a body on HEAD.
	resp, err := front.Client().Head(front.URL + "/api/orders")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.ContentLength != 8 || resp.Header.Get("Sds-Degraded") != "visit; point=orders" {
		t.Errorf("HEAD: got %d, Content-Length %d, Sds-Degraded %q, want 503, 8, \"visit; point=orders\"",
			resp.StatusCode, resp.ContentLength, resp.Header.Get("Sds-Degraded"))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/api/orders", nil))
	if rec.Body.Len() != 0 {
		t.Errorf("HEAD body: got %q, want none", rec.Body.String())
	}
}

// TestGRPCFallback: a gRPC call gets a trailers-only answer, grpc-status
// 14 (UNAVAILABLE) and a message naming the point and strategy unless the
// fallback sets grpcStatus or grpcMessage, whatever its HTTP status and
// body; the message is percent-encoded; the same path over HTTP/1.1 is no
// gRPC call.
func TestGRPCFallback(t *testing.T) {
	grpcReq := grpcRequest
	visit0 := func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }
	httpFallback := proxy.Fallback{Status: 503, Body: []byte("no"), BodySet: true}
	tests := []struct {
		name     string
		fallback proxy.Fallback
		set      func(*limiter.Settings)
		reqs     int // requests sent; the last one is checked
		status   string
		message  string
		degraded string
	}{
		{"default", proxy.Fallback{}, visit0, 1, "14", "degraded: visit; point=orders", "visit; point=orders"},
		{"in the delay", proxy.Fallback{}, func(s *limiter.Settings) { s.VisitThreshold, s.DelayTime = limiter.At(0), time.Minute }, 2,
			"14", "degraded: visit; point=orders; delay", "visit; point=orders; delay"},
		{"an HTTP fallback is not for gRPC", httpFallback, visit0, 1, "14", "degraded: visit; point=orders", "visit; point=orders"},
		{"grpcStatus", proxy.Fallback{GRPCStatus: 8, GRPCStatusSet: true}, visit0, 1, "8", "degraded: visit; point=orders", "visit; point=orders"},
		{"grpcStatus 0", proxy.Fallback{GRPCStatusSet: true}, visit0, 1, "0", "degraded: visit; point=orders", "visit; point=orders"},
		{"grpcMessage, percent-encoded", proxy.Fallback{GRPCMessage: "café 100%\n"}, visit0, 1, "14", "caf%C3%A9 100%25%0A", "visit; point=orders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := make([]*http.Request, tt.reqs)
			for i := range reqs {
				reqs[i] = grpcReq(2)
			}
			rec := fbServe(t, tt.set, proxy.PointOptions{Fallback: tt.fallback}, reqs...)
			want := http.Header{
				"Content-Type": {"application/grpc"},
				"Grpc-Status":  {tt.status},
				"Grpc-Message": {tt.message},
				"Sds-Degraded": {tt.degraded},
			}
			if rec.Code != 200 || !reflect.DeepEqual(rec.Header(), want) || rec.Body.Len() != 0 {
				t.Errorf("got %d %v %q, want 200 %v and no body", rec.Code, rec.Header(), rec.Body.String(), want)
			}
		})
	}
	t.Run("HTTP/1.1 is not gRPC", func(t *testing.T) {
		rec := fbServe(t, visit0, proxy.PointOptions{}, grpcReq(1))
		if rec.Code != 429 || rec.Header().Get("Grpc-Status") != "" {
			t.Errorf("got %d Grpc-Status %q, want 429 and no Grpc-Status", rec.Code, rec.Header().Get("Grpc-Status"))
		}
	})
	t.Run("over h2c", func(t *testing.T) {
		p := rpPoint(t, "orders", visit0, proxy.PointOptions{})
		h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: fbNever(t)})
		front := httptest.NewUnstartedServer(h)
		var protos http.Protocols
		protos.SetHTTP1(true)
		protos.SetUnencryptedHTTP2(true)
		front.Config.Protocols = &protos
		front.Start()
		defer front.Close()
		var clientProtos http.Protocols
		clientProtos.SetUnencryptedHTTP2(true)
		client := &http.Client{Transport: &http.Transport{Protocols: &clientProtos}}
		defer client.CloseIdleConnections()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/orders.v1.Orders/Create", strings.NewReader("\x00\x00\x00\x00\x00"))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, _ := resp.Body.Read(make([]byte, 1))
		if resp.ProtoMajor != 2 || resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "14" || n != 0 {
			t.Errorf("got HTTP/%d %d Grpc-Status %q, %d body bytes, want HTTP/2 200 Grpc-Status \"14\", no body",
				resp.ProtoMajor, resp.StatusCode, resp.Header.Get("Grpc-Status"), n)
		}
	})
}

// grpcRequest is a gRPC call (an empty unary frame) over protoMajor.
func grpcRequest(protoMajor int) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/orders.v1.Orders/Create", strings.NewReader("\x00\x00\x00\x00\x00"))
	r.Header.Set("Content-Type", "application/grpc+proto")
	r.ProtoMajor, r.ProtoMinor = protoMajor, 0
	if protoMajor == 1 {
		r.ProtoMinor = 1
	}
	return r
}

// TestEveryDegradedAnswer: a request degraded by a strategy and a failed
// upstream call on a point with fallbackOnError get their answer from the
// same fallback, so both are right for HEAD (the GET's headers, no body)
// and for gRPC (a trailers-only answer, whatever the HTTP fallback says).
func TestEveryDegradedAnswer(t *testing.T) {
	refused := rpRoundTrip(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	})
	custom := proxy.Fallback{Status: 503, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("sorry"), BodySet: true}
	ways := []struct {
		name      string
		set       func(*limiter.Settings)
		transport http.RoundTripper
		degraded  string // the Sds-Degraded value
	}{
		{"strategy", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, fbNever(t), "visit; point=orders"},
		{"fallbackOnError", nil, refused, "upstream_error; point=orders"},
	}
	for _, way := range ways {
		opts := proxy.PointOptions{FallbackOnError: true, Fallback: custom}
		t.Run(way.name+"/GET", func(t *testing.T) {
			rec := fbServeVia(t, way.transport, way.set, opts, get())
			want := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"5"}, "Sds-Degraded": {way.degraded}}
			if rec.Code != 503 || !reflect.DeepEqual(rec.Header(), want) || rec.Body.String() != "sorry" {
				t.Errorf("got %d %v %q, want 503 %v \"sorry\"", rec.Code, rec.Header(), rec.Body.String(), want)
			}
		})
		t.Run(way.name+"/HEAD", func(t *testing.T) {
			rec := fbServeVia(t, way.transport, way.set, opts, httptest.NewRequest(http.MethodHead, "/api/orders", nil))
			want := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"5"}, "Sds-Degraded": {way.degraded}}
			if rec.Code != 503 || !reflect.DeepEqual(rec.Header(), want) || rec.Body.Len() != 0 {
				t.Errorf("got %d %v %q, want 503 %v and no body", rec.Code, rec.Header(), rec.Body.String(), want)
			}
		})
		t.Run(way.name+"/gRPC", func(t *testing.T) {
			rec := fbServeVia(t, way.transport, way.set, opts, grpcRequest(2))
			want := http.Header{
				"Content-Type": {"application/grpc"},
				"Grpc-Status":  {"14"},
				"Grpc-Message": {"degraded: " + way.degraded},
				"Sds-Degraded": {way.degraded},
			}
			if rec.Code != 200 || !reflect.DeepEqual(rec.Header(), want) || rec.Body.Len() != 0 {
				t.Errorf("got %d %v %q, want 200 %v and no body", rec.Code, rec.Header(), rec.Body.String(), want)
			}
		})
	}
}

// fbServeVia is fbServe with the upstream transport given.
func fbServeVia(t *testing.T, transport http.RoundTripper, set func(*limiter.Settings), opts proxy.PointOptions, reqs ...*http.Request) *httptest.ResponseRecorder {
	t.Helper()
	p := rpPoint(t, "orders", set, opts)
	h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport, Now: func() time.Time { return fbT0 }})
	var rec *httptest.ResponseRecorder
	for _, r := range reqs {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, r)
	}
	return rec
}
