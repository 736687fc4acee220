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
