package main_test

// End-to-end tests of an h2c:// upstream with what HTTP/2 cannot carry
// (a WebSocket), and of gRPC sent to an upstream that cannot take it.

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/upstream"
)

// TestWebSocketToH2CUpstream: behind an h2c:// upstream (gRPC beside a
// WebSocket endpoint in one service), a WebSocket still opens: an upgrade
// has no HTTP/2 form, so the proxy sends it to the same host over
// HTTP/1.1 (it answered 502 when it tried HTTP/2).
func TestWebSocketToH2CUpstream(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	e := &env{t: t, dir: t.TempDir(), upstream: "h2c://" + startUpstream(t, "-h2c"), client: newClient(t)}
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, "upstream: "+e.upstream+"\nh2c: true\ndrainTimeout: 5s\n"+
		"routes:\n  - point: ws\n    match: {path: /ws, host: chat.example}\npoints:\n  ws:\n    concurrentThreshold: 10\n")
	e.proxy = startProxy(t, e.config)

	// chat.example is routed to the point; other.example is not.
	for _, host := range []string{"chat.example", "other.example"} {
		t.Run(host, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(wait))
			br, err := upstream.Handshake(conn, host, "/ws")
			if err != nil {
				t.Fatalf("WebSocket handshake through an h2c:// upstream: %v", err)
			}
			msg := "over HTTP/1.1 to an h2c upstream"
			if err := upstream.WriteClientFrame(conn, 0x1, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			if op, payload, err := upstream.ReadServerFrame(br); err != nil || op != 0x1 || string(payload) != msg {
				t.Errorf("echo: got opcode %#x %q (%v), want text %q", op, payload, err, msg)
			}
		})
	}
}

// TestGRPCToHTTP1UpstreamLogged: with h2c: true and an http:// upstream
// that speaks only HTTP/2 (as a gRPC server does), every gRPC call fails;
// the proxy says why in its log, naming h2c://, once per second at most
// (it logged nothing).
func TestGRPCToHTTP1UpstreamLogged(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	up := startUpstream(t, "-h2c-only")
	e := &env{t: t, dir: t.TempDir(), upstream: "http://" + up, client: newClient(t)}
	e.config = filepath.Join(e.dir, "sds.yaml")
	if err := os.WriteFile(e.config, []byte("upstream: "+e.upstream+"\nh2c: true\ndrainTimeout: 5s\n"+pointRoute+"    visitThreshold: 100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.proxy = startProxy(t, e.config)

	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: wait}
	from := e.proxy.stderr.mark()
	const calls = 20
	for range calls {
		resp, err := client.Do(grpcRequest(t, e.proxy.url+"/grpc"))
		if err != nil {
			t.Fatalf("gRPC call: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("gRPC call to an upstream that takes no HTTP/1.1: got %d, want 502", resp.StatusCode)
		}
	}
	line := e.proxy.waitLog(t, from, wait, msgIs("gRPC call not forwarded"))
	if hint, _ := line["hint"].(string); line["point"] != "p" || !strings.Contains(hint, "h2c://"+up) || line["why"] == nil {
		t.Errorf("log line: got %v, want point p, why, and a hint naming h2c://%s", line, up)
	}
	// Throttled: the calls within a second share a line (and a later one
	// carries their number as repeats), never one line each.
	if n := e.proxy.countLog(from, msgIs("gRPC call not forwarded")); n >= calls {
		t.Errorf("log lines for %d failed calls: got %d, want them throttled", calls, n)
	}
}

// grpcRequest is a unary gRPC call to url: one empty message, as a gRPC
// client sends it.
func grpcRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte{0, 0, 0, 0, 0}))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	return req
}
