package main_test

// End-to-end tests of what streams through the proxy: server-sent events,
// WebSockets, gRPC over h2c on both sides, and a large body.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/upstream"
)

// TestH2CGRPC: with h2c on both sides, a gRPC-style call goes through over
// cleartext HTTP/2 end to end with its trailers; a grpc-status other than 0
// in the trailers counts as an exception, and a degraded gRPC call gets a
// trailers-only answer with grpc-status 14 and the fallback's grpcMessage,
// never the fallback's HTTP status and body.
func TestH2CGRPC(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	e := &env{t: t, dir: t.TempDir(), upstream: "h2c://" + startUpstream(t, "-h2c")}
	e.config = filepath.Join(e.dir, "sds.yaml")
	config := "upstream: " + e.upstream + "\nh2c: true\ndrainTimeout: 5s\n" +
		pointRoute + "    exceptionThreshold: 1\n    fallback: {status: 503, body: busy, grpcMessage: try later}\n"
	if err := os.WriteFile(e.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	e.proxy = startProxy(t, e.config)
	e.client = newClient(t) // for the admin port

	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	call := func(status string) (*http.Response, []byte) {
		t.Helper()
		resp, err := client.Do(grpcRequest(t, e.proxy.url+"/grpc?grpc-status="+status))
		if err != nil {
			t.Fatalf("gRPC call through the proxy: %v", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the gRPC answer: %v", err)
		}
		return resp, body
	}

	resp, body := call("0")
	if resp.Proto != "HTTP/2.0" || resp.Header.Get("X-Upstream-Proto") != "HTTP/2.0" {
		t.Errorf("protocols: client side %s, upstream side %q; want HTTP/2.0 on both", resp.Proto, resp.Header.Get("X-Upstream-Proto"))
	}
	if got := resp.Trailer.Get("Grpc-Status"); resp.StatusCode != 200 || got != "0" || len(body) != 5 {
		t.Errorf("good call: got %d, %d body bytes, trailer grpc-status %q; want 200, 5, 0", resp.StatusCode, len(body), got)
	}
	if got := e.point("p").Window.Exceptions; got != 0 {
		t.Errorf("exceptions after a good call: got %d, want 0", got)
	}

	resp, _ = call("14")
	if got := resp.Trailer.Get("Grpc-Status"); got != "14" {
		t.Errorf("failing call: trailer grpc-status %q, want 14 relayed", got)
	}
	if !eventually(wait, func() bool { return e.point("p").Window.Exceptions == 1 }) {
		t.Errorf("exceptions after grpc-status 14 in the trailers: got %d, want 1", e.point("p").Window.Exceptions)
	}

	resp, body = call("0")
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "14" || resp.Header.Get("Grpc-Message") != "try later" ||
		resp.Header.Get("Sds-Degraded") != "exception; point=p" || len(body) != 0 {
		t.Errorf("degraded call: got %d grpc-status %q grpc-message %q Sds-Degraded %q body %q; want a trailers-only 200 with grpc-status 14 and \"try later\"",
			resp.StatusCode, resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message"), resp.Header.Get("Sds-Degraded"), body)
	}
}

// TestValidateGRPCWarning: an HTTP fallback on a config that carries gRPC,
// with no grpcStatus or grpcMessage, is a warning: validate prints it as
// FILE:LINE:COL: warning: message, then OK, and exits 0.
func TestValidateGRPCWarning(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	path := filepath.Join(t.TempDir(), "sds.yaml")
	config := "upstream: h2c://127.0.0.1:9\n" + pointRoute + "    visitThreshold: 5\n    fallback: {status: 503, body: busy}\n"
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := command("sds-proxy", "validate", "-config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("validate: %v, output %q; want exit 0", err, out)
	}
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:\d+:\d+: warning: point "p": gRPC clients \(the h2c:// upstream\) never get this fallback's HTTP status and body.*\nOK\n$`)
	if !want.Match(out) {
		t.Errorf("validate: got %q, want one warning line and OK", out)
	}
}

// TestStreams checks that server-sent events arrive as they are sent and
// that a WebSocket passes through, and that neither holds its point's
// timeout or concurrency past the response headers.
func TestStreams(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, `routes:
  - point: sse
    match: {path: /sse}
  - point: ws
    match: {path: /ws}
points:
  sse:
    timeoutThreshold: 100ms
    timeoutCountThreshold: 1
  ws:
    concurrentThreshold: 1
`)
	t.Run("SSE", func(t *testing.T) {
		start := time.Now()
		resp, err := e.client.Get(e.proxy.url + "/sse?events=5&interval=300ms")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("got %d %q, want 200 text/event-stream", resp.StatusCode, ct)
		}
		arrived := readEvents(t, resp.Body, 5, start)
		t.Logf("SSE events arrived at %v", arrived)
		// The events are sent 300ms apart: they arrive as sent, spread over
		// the stream's 1.2s, not together at its end (a load that delays
		// the reader by 600ms would be needed to make them look so).
		if spread := arrived[4] - arrived[0]; spread < 600*time.Millisecond {
			t.Errorf("events arrived within %v of each other, want them spread over the stream's 1.2s", spread)
		}
		if arrived[4] < 1100*time.Millisecond {
			t.Errorf("last event arrived after %v, want about 1.2s", arrived[4])
		}
		// The stream's call ended at its headers: no timeout was counted
		// though it lasted 1.2s against a 100ms threshold.
		e.metricIs(0, "sds_timeouts_total", "point", "sse")
		if r := e.get("/sse?events=1"); r.degraded() != "" || r.body != "data: 1\n\n" {
			t.Errorf("second stream: got %v, want it passed", r)
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		br, err := upstream.Handshake(conn, "chat.example", "/ws")
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range []string{"hello through the proxy", strings.Repeat("0123456789", 50)} {
			if err := upstream.WriteClientFrame(conn, 0x1, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			op, payload, err := upstream.ReadServerFrame(br)
			if err != nil || op != 0x1 || string(payload) != msg {
				t.Errorf("echo: got opcode %#x %.40q (%v), want text %.40q", op, payload, err, msg)
			}
		}
		// An upgraded connection holds no concurrency slot: with
		// concurrentThreshold 1, a second WebSocket still opens.
		if v, _ := e.metric("sds_inflight", "point", "ws"); v != 0 {
			t.Errorf("sds_inflight of an open WebSocket: got %v, want 0", v)
		}
		if err := upstream.WriteClientFrame(conn, 0x8, []byte{0x03, 0xe8}); err != nil {
			t.Fatal(err)
		}
		if op, payload, err := upstream.ReadServerFrame(br); err != nil || op != 0x8 || !bytes.Equal(payload, []byte{0x03, 0xe8}) {
			t.Errorf("close: got opcode %#x % x (%v), want a close 1000", op, payload, err)
		}
	})
}

// readEvents reads a stream of exactly n server-sent events, "data: 1"
// to "data: n", and returns when each arrived, as time since start.
func readEvents(t *testing.T, body io.Reader, n int, start time.Time) []time.Duration {
	t.Helper()
	br := bufio.NewReader(body)
	var arrived []time.Duration
	for i := 1; i <= n; i++ {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: got %q, %v", i, line, err)
		}
		arrived = append(arrived, time.Since(start))
		if blank, _ := br.ReadString('\n'); blank != "\n" {
			t.Fatalf("event %d: got %q after it, want a blank line", i, blank)
		}
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("after the last event: got %q, want the end", rest)
	}
	return arrived
}

// TestLargeBody checks that a large response passes through intact.
func TestLargeBody(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    timeoutThreshold: 5s\n    timeoutCountThreshold: 5\n")
	const n = 8 << 20
	r := e.get("/big?body=" + strconv.Itoa(n))
	if r.status != 200 || len(r.body) != n || strings.Trim(r.body, "x") != "" {
		t.Errorf("body=%d: got status %d and %d bytes, want 200 and %d x's", n, r.status, len(r.body), n)
	}
}
