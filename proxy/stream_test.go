package proxy_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// TestSSE: server-sent events pass through event by event: the client reads
// the first event while the upstream is still writing. The stream's call
// ends at its headers, so it holds no slot while it runs.
func TestSSE(t *testing.T) {
	withAndWithoutAccessLog(t, func(t *testing.T, accessLog *zap.Logger, logs *observer.ObservedLogs) {
		next := make(chan struct{})
		release := sync.OnceFunc(func() { close(next) })
		defer release()
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			http.NewResponseController(w).Flush()
			<-next
			io.WriteString(w, "data: two\n\n")
		}))
		defer upstream.Close()
		p := rpPoint(t, "events", func(s *limiter.Settings) { s.ConcurrentThreshold = limiter.At(1) }, proxy.PointOptions{})
		h, _ := rpHandler(t, rpConfig(rpURL(upstream.URL), p), proxy.Options{AccessLog: accessLog})
		front := httptest.NewServer(h)
		defer front.Close()

		resp, err := front.Client().Get(front.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("Content-Type: got %q, want text/event-stream", ct)
		}
		br := bufio.NewReader(resp.Body)
		readEvent := func() string {
			var lines []string
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("reading an event: got %v after %q", err, lines)
				}
				if line == "\n" {
					return strings.Join(lines, "")
				}
				lines = append(lines, line)
			}
		}
		if got := readEvent(); got != "data: one\n" {
			t.Fatalf("first event: got %q, want %q", got, "data: one\n")
		}
		// The upstream is still blocked: the first event was flushed.
		if got := p.Limiter().InFlight(); got != 0 {
			t.Errorf("in flight while streaming: got %d, want 0", got)
		}
		release()
		if got := readEvent(); got != "data: two\n" {
			t.Errorf("second event: got %q, want %q", got, "data: two\n")
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Errorf("end of stream: got %q, %v, want EOF", rest, err)
		}
		rpCheckLoggedStatus(t, logs, http.StatusOK)
	})
}

// TestUpgrade: a WebSocket-style upgrade (101) passes through: both sides
// are hijacked and bytes are echoed both ways.
func TestUpgrade(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo until the client closes
	}))
	defer upstream.Close()
	withAndWithoutAccessLog(t, func(t *testing.T, accessLog *zap.Logger, logs *observer.ObservedLogs) {
		p := rpPoint(t, "ws", func(s *limiter.Settings) { s.ConcurrentThreshold = limiter.At(1) }, proxy.PointOptions{})
		h, _ := rpHandler(t, rpConfig(rpURL(upstream.URL), p), proxy.Options{AccessLog: accessLog})
		front := httptest.NewServer(h)
		defer front.Close()

		conn := rpDial(t, front)
		io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: shop.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading the upgrade answer: %v", err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "websocket" {
			t.Fatalf("answer: got %d Upgrade %q, want 101 websocket", resp.StatusCode, resp.Header.Get("Upgrade"))
		}
		for _, msg := range []string{"hello", "again", "\x00\x01\x02"} {
			io.WriteString(conn, msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil {
				t.Fatalf("echo of %q: %v", msg, err)
			}
			if string(got) != msg {
				t.Errorf("echo: got %q, want %q", got, msg)
			}
		}
		if got := p.Limiter().InFlight(); got != 0 {
			t.Errorf("in flight while upgraded: got %d, want 0", got)
		}
		conn.Close()
		rpCheckLoggedStatus(t, logs, http.StatusSwitchingProtocols)
	})
}

// TestStreamOutlivesUpstreamTimeout: a stream's call ends at its response
// headers, so the point's upstreamTimeout does not cut the stream that
// follows (TestUpstreamOutcome shows a call waiting for headers is cut).
func TestStreamOutlivesUpstreamTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const deadline = 50 * time.Millisecond
		body, stream := io.Pipe()
		transport := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
			resp := rpReply(r, 200, "", "Content-Type", "text/event-stream")
			resp.Body = body
			// As http.Transport does: a canceled call closes its body.
			go func() {
				<-r.Context().Done()
				body.CloseWithError(context.Cause(r.Context()))
			}()
			return resp, nil
		})
		p := rpPoint(t, "events", func(s *limiter.Settings) { s.ConcurrentThreshold = limiter.At(8) }, proxy.PointOptions{UpstreamTimeout: deadline})
		h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: transport})

		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/events", nil))
		}()
		io.WriteString(stream, "data: one\n\n")
		time.Sleep(4 * deadline) // fake time: well past the upstream timeout
		io.WriteString(stream, "data: two\n\n")
		stream.Close()
		<-done
		if got, want := rec.Body.String(), "data: one\n\ndata: two\n\n"; rec.Code != 200 || got != want {
			t.Errorf("stream past upstreamTimeout: got %d %q, want 200 %q", rec.Code, got, want)
		}
		if counts, _ := rpCounts(p, time.Now()); counts.Exceptions != 0 {
			t.Errorf("exceptions: got %d, want 0", counts.Exceptions)
		}
	})
}

// grpcBody is a gRPC response body as HTTP/2's transport gives it: one
// message, then io.EOF, and the stream's trailers in resp.Trailer only
// once a Read has returned io.EOF. With abandon set, the Read after the
// message waits instead for the request's end, as a stream whose client
// went away does, and fails with its context's error: the stream never
// reaches its end, though its trailers are there to read (so that the
// test fails if anything but EOF has them judged).
type grpcBody struct {
	req     *http.Request
	resp    *http.Response
	trailer http.Header
	sent    bool
	abandon chan struct{} // closed when the Read waits; nil: no waiting
}

func (b *grpcBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "\x00\x00\x00\x00\x00"), nil // an empty message
	}
	b.resp.Trailer = b.trailer
	if b.abandon != nil {
		close(b.abandon)
		<-b.req.Context().Done()
		return 0, b.req.Context().Err()
	}
	return 0, io.EOF
}

func (b *grpcBody) Close() error { return nil }

// TestGRPCTrailersJudgedAtEOF: a gRPC call's call ends at its response
// headers, and its body judges the trailers when it reaches its end: a
// grpc-status other than 0 there counts one exception and one status
// error, as one in the headers does (and never two for one call); a good
// status counts none; a stream its client abandons before the trailers
// counts none, whatever the trailers would have said.
func TestGRPCTrailersJudgedAtEOF(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		header         string // the headers' grpc-status; "" for none
		trailer        string // the trailers' grpc-status
		abandon        bool
		wantExceptions int64
	}{
		{name: "OK in the trailers", trailer: "0"},
		{name: "INTERNAL in the trailers", trailer: "13", wantExceptions: 1},
		{name: "INTERNAL in the headers and the trailers", header: "13", trailer: "13", wantExceptions: 1},
		{name: "INTERNAL in the headers, OK in the trailers", header: "13", trailer: "0", wantExceptions: 1},
		{name: "abandoned before INTERNAL in the trailers", trailer: "13", abandon: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			abandon := make(chan struct{})
			upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
				resp := rpReply(r, http.StatusOK, "", "Content-Type", "application/grpc")
				resp.Proto, resp.ProtoMajor, resp.ProtoMinor, resp.ContentLength = "HTTP/2.0", 2, 0, -1
				if tc.header != "" {
					resp.Header.Set("Grpc-Status", tc.header)
				}
				body := &grpcBody{req: r, resp: resp, trailer: http.Header{"Grpc-Status": {tc.trailer}}}
				if tc.abandon {
					body.abandon = abandon
				}
				resp.Body = body
				return resp, nil
			})
			p := rpPoint(t, "grpc", func(s *limiter.Settings) { s.ExceptionThreshold = limiter.At(100) }, proxy.PointOptions{})
			h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: upstream, Now: func() time.Time { return t0 }})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders.v1.Orders/Get", strings.NewReader(""))
			req.ProtoMajor, req.ProtoMinor = 2, 0
			req.Header.Set("Content-Type", "application/grpc")
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(httptest.NewRecorder(), req)
			}()
			if tc.abandon {
				<-abandon
				cancel()
			}
			<-done

			counts, inflight := rpCounts(p, t0)
			if counts.Exceptions != tc.wantExceptions || inflight != 0 {
				t.Errorf("exceptions, in flight: got %d, %d, want %d, 0", counts.Exceptions, inflight, tc.wantExceptions)
			}
			if got := rpMetric(t, reg, "sds_upstream_errors_total", map[string]string{"point": "grpc", "kind": "status_5xx"}); got != float64(tc.wantExceptions) {
				t.Errorf("sds_upstream_errors_total{kind=status_5xx}: got %v, want %d", got, tc.wantExceptions)
			}
		})
	}
}
