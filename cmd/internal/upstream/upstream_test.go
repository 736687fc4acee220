package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// serve runs one request through h in memory and returns the recorder.
func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestRoutes(t *testing.T) {
	h := New(Options{})
	defer h.Close()
	tests := []struct {
		method, target string
		status         int
		contentType    string
		bodyHas        string
	}{
		{"GET", "/api/orders", 200, "application/json", `"item":"book"`},
		{"POST", "/api/orders", 201, "application/json", `"status":"created"`},
		{"DELETE", "/api/orders", 405, "text/plain; charset=utf-8", "method not allowed"},
		{"GET", "/some/where", 200, "text/plain; charset=utf-8", "GET /some/where"},
		{"GET", "/x?status=503", 503, "text/plain; charset=utf-8", "503"},
		{"GET", "/x?status=201&body=0", 201, "application/octet-stream", ""},
		{"GET", "/x?status=99", 400, "text/plain; charset=utf-8", "status"},
		{"GET", "/x?status=abc", 400, "text/plain; charset=utf-8", "status"},
		{"GET", "/x?body=-1", 400, "text/plain; charset=utf-8", "body"},
		{"GET", "/x?body=999999999", 400, "text/plain; charset=utf-8", "body"},
		{"GET", "/x?body=10&cut=10", 400, "text/plain; charset=utf-8", "cut"},
		{"GET", "/x?cut=1", 400, "text/plain; charset=utf-8", "cut"},
		{"GET", "/x?sleep=-1s", 400, "text/plain; charset=utf-8", "sleep"},
		{"GET", "/x?sleep=1h", 400, "text/plain; charset=utf-8", "sleep"},
		{"GET", "/sse?events=-1", 400, "text/plain; charset=utf-8", "events"},
		{"GET", "/sse?interval=xyz", 400, "text/plain; charset=utf-8", "interval"},
		{"GET", "/ws", 426, "text/plain; charset=utf-8", "upgrade"},
	}
	for _, tt := range tests {
		rec := serve(h, tt.method, tt.target)
		if rec.Code != tt.status {
			t.Errorf("%s %s: status got %d, want %d", tt.method, tt.target, rec.Code, tt.status)
		}
		if got := rec.Header().Get("Content-Type"); got != tt.contentType {
			t.Errorf("%s %s: Content-Type got %q, want %q", tt.method, tt.target, got, tt.contentType)
		}
		if !strings.Contains(rec.Body.String(), tt.bodyHas) {
			t.Errorf("%s %s: body got %q, want it to contain %q", tt.method, tt.target, rec.Body.String(), tt.bodyHas)
		}
	}
}

func TestOrdersJSON(t *testing.T) {
	h := New(Options{})
	var orders []Order
	if err := json.Unmarshal(serve(h, "GET", "/api/orders").Body.Bytes(), &orders); err != nil {
		t.Fatal(err)
	}
	if len(orders) != 3 {
		t.Errorf("orders: got %d, want 3", len(orders))
	}
	var created1, created2 struct{ ID int64 }
	json.Unmarshal(serve(h, "POST", "/api/orders").Body.Bytes(), &created1)
	json.Unmarshal(serve(h, "POST", "/api/orders").Body.Bytes(), &created2)
	if created2.ID != created1.ID+1 {
		t.Errorf("created ids: got %d then %d, want consecutive", created1.ID, created2.ID)
	}
}

func TestBody(t *testing.T) {
	h := New(Options{})
	for _, n := range []int{0, 1, 100, 32 << 10, 100_000} {
		rec := serve(h, "GET", "/x?body="+strconv.Itoa(n))
		if rec.Code != 200 || rec.Body.Len() != n {
			t.Errorf("body=%d: got status %d and %d bytes, want 200 and %d", n, rec.Code, rec.Body.Len(), n)
		}
		if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(n) {
			t.Errorf("body=%d: Content-Length got %q", n, got)
		}
	}
}

func TestFlakyErrorRate(t *testing.T) {
	for _, tt := range []struct {
		opts     Options
		set      int // -1: keep
		requests int
		failures int
	}{
		{Options{}, -1, 10, 5},
		{Options{}, -1, 100, 50},
		{Options{ErrorRate: -1}, -1, 100, 0},
		{Options{ErrorRate: 100}, -1, 7, 7},
		{Options{}, 20, 100, 20},
		{Options{}, 33, 100, 33},
		{Options{}, 0, 50, 0},
	} {
		h := New(tt.opts)
		if tt.set >= 0 {
			h.SetErrorRate(tt.set)
		}
		failures := 0
		for range tt.requests {
			if serve(h, "GET", "/api/flaky").Code == 500 {
				failures++
			}
		}
		if failures != tt.failures {
			t.Errorf("%+v set %d: %d requests: got %d failures, want %d", tt.opts, tt.set, tt.requests, failures, tt.failures)
		}
	}
}

func TestControl(t *testing.T) {
	h := New(Options{})
	var st Stats
	decode := func(rec *httptest.ResponseRecorder) Stats {
		t.Helper()
		var s Stats
		if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
			t.Fatalf("status %d, body %q: %v", rec.Code, rec.Body, err)
		}
		return s
	}
	st = decode(serve(h, "GET", "/_control"))
	queue := QueueStats{Capacity: DefaultQueueCapacity, Service: DefaultQueueService.String()}
	if want := (Stats{Latency: "0s", SlowLatency: "500ms", ErrorRate: 50, Queue: queue}); st != want {
		t.Errorf("defaults: got %+v, want %+v", st, want)
	}
	st = decode(serve(h, "GET", "/_control?latency=300ms&errorRate=20&slowLatency=1s"))
	if want := (Stats{Latency: "300ms", SlowLatency: "1s", ErrorRate: 20, Queue: queue}); st != want {
		t.Errorf("after GET with values: got %+v, want %+v", st, want)
	}
	req := httptest.NewRequest("POST", "/_control", strings.NewReader("latency=0s&errorRate=5%25"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if st = decode(rec); st.Latency != "0s" || st.ErrorRate != 5 {
		t.Errorf("after POST form: got %+v, want latency 0s and errorRate 5", st)
	}
	for _, bad := range []string{"latency=abc", "latency=-1s", "latency=2h", "errorRate=101", "errorRate=x", "slowLatency=1s&errorRate=-3"} {
		if rec := serve(h, "POST", "/_control?"+bad); rec.Code != 400 {
			t.Errorf("%s: got status %d, want 400", bad, rec.Code)
		}
	}
	if st = decode(serve(h, "GET", "/_control")); st.SlowLatency != "1s" || st.ErrorRate != 5 {
		t.Errorf("a rejected change changed something: got %+v", st)
	}
	if rec := serve(h, "PUT", "/_control"); rec.Code != 405 {
		t.Errorf("PUT /_control: got %d, want 405", rec.Code)
	}
	serve(h, "GET", "/a")
	serve(h, "GET", "/b")
	if st = decode(serve(h, "GET", "/_control")); st.Requests != 2 || st.InFlight != 0 {
		t.Errorf("counters: got requests %d inFlight %d, want 2 and 0", st.Requests, st.InFlight)
	}
}

func TestWaits(t *testing.T) {
	tests := []struct {
		name   string
		target string
		setup  func(*Handler)
		want   time.Duration
	}{
		{"sleep", "/x?sleep=950ms", nil, 950 * time.Millisecond},
		{"base latency", "/x", func(h *Handler) { h.SetLatency(300 * time.Millisecond) }, 300 * time.Millisecond},
		{"latency plus sleep", "/x?sleep=50ms", func(h *Handler) { h.SetLatency(100 * time.Millisecond) }, 150 * time.Millisecond},
		{"slow route", "/api/slow", nil, DefaultSlowLatency},
		{"slow route changed", "/api/slow", func(h *Handler) { h.SetSlowLatency(800 * time.Millisecond) }, 800 * time.Millisecond},
		{"latency clamped", "/x", func(h *Handler) { h.SetLatency(time.Hour) }, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := New(Options{MaxWait: time.Second})
				if tt.setup != nil {
					tt.setup(h)
				}
				start := time.Now()
				rec := serve(h, "GET", tt.target)
				if got := time.Since(start); got != tt.want {
					t.Errorf("took %v, want %v", got, tt.want)
				}
				if rec.Code != 200 {
					t.Errorf("status got %d, want 200", rec.Code)
				}
			})
		})
	}
}

// TestInterrupted checks that every wait ends when the client goes away or
// the Handler closes.
func TestInterrupted(t *testing.T) {
	for _, target := range []string{"/x?hang=1", "/x?sleep=20s", "/api/slow", "/sse?events=3&interval=20s"} {
		for _, by := range []string{"client", "close"} {
			t.Run(target+" by "+by, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := New(Options{})
					ctx, cancel := context.WithCancel(t.Context())
					rec := httptest.NewRecorder()
					done := make(chan struct{})
					start := time.Now()
					go func() {
						defer close(done)
						h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil).WithContext(ctx))
					}()
					synctest.Wait()
					if got := h.Stats().InFlight; got != 1 {
						t.Errorf("in flight while blocked: got %d, want 1", got)
					}
					if by == "client" {
						cancel()
					} else {
						h.Close()
					}
					<-done
					cancel()
					if got := time.Since(start); got != 0 {
						t.Errorf("returned after %v, want at once", got)
					}
					if got := h.Stats().InFlight; got != 0 {
						t.Errorf("in flight after: got %d, want 0", got)
					}
					if by == "close" && !strings.HasPrefix(target, "/sse") && rec.Code != 503 {
						t.Errorf("status after Close: got %d, want 503", rec.Code)
					}
				})
			})
		}
	}
}

func TestCloseTwiceAndAfter(t *testing.T) {
	h := New(Options{})
	h.Close()
	h.Close()
	if rec := serve(h, "GET", "/x?hang=1"); rec.Code != 503 {
		t.Errorf("hang after Close: got %d, want 503 at once", rec.Code)
	}
}

func TestCloseConnection(t *testing.T) {
	h := New(Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	resp, err := srv.Client().Get(srv.URL + "/x?close=1")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("close=1: got status %d, want a transport error", resp.StatusCode)
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Errorf("close=1: got %v, want an EOF or reset", err)
	}
}

func TestCutBody(t *testing.T) {
	h := New(Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	resp, err := srv.Client().Get(srv.URL + "/x?body=100000&cut=40000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.ContentLength != 100000 || n != 40000 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("body=100000&cut=40000: got Content-Length %d, %d bytes and %v, want 100000, 40000 and %v",
			resp.ContentLength, n, err, io.ErrUnexpectedEOF)
	}
}

func TestSSE(t *testing.T) {
	h := New(Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()

	resp, err := srv.Client().Get(srv.URL + "/sse?events=5&interval=1ms")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type: got %q, want text/event-stream", got)
	}
	if want := "data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: 5\n\n"; string(body) != want {
		t.Errorf("body: got %q, want %q", body, want)
	}

	// Incremental: the first event arrives while the second is 20s away;
	// Close then ends the stream.
	resp, err = srv.Client().Get(srv.URL + "/sse?events=3&interval=20s")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: 1\n" {
		t.Fatalf("first line: got %q, %v; want \"data: 1\\n\"", line, err)
	}
	h.Close()
	rest, _ := io.ReadAll(br)
	if string(rest) != "\n" {
		t.Errorf("after Close: got %q, want the end of the first event and EOF", rest)
	}
}

func TestEchoHeaders(t *testing.T) {
	h := New(Options{})
	req := httptest.NewRequest("GET", "/echo-headers?a=1", nil)
	req.Host = "shop.example"
	req.Header.Set("X-Forwarded-For", "10.0.0.1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var got EchoedRequest
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Host != "shop.example" || got.Method != "GET" || got.URI != "/echo-headers?a=1" || got.Header.Get("X-Forwarded-For") != "10.0.0.1" {
		t.Errorf("got %+v", got)
	}
}

func TestAcceptKey(t *testing.T) {
	// The example of RFC 6455 §1.3.
	if got, want := AcceptKey("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// dialWS opens a WebSocket to srv's /ws by hand and returns the
// connection and its reader.
func dialWS(t *testing.T, srv *httptest.Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	key := "dGhlIHNhbXBsZSBub25jZQ=="
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "+key+"\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("handshake: got %d %v", resp.StatusCode, resp.Header)
	}
	return conn, br
}

func readN(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

func TestWebSocket(t *testing.T) {
	h := New(Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	conn, br := dialWS(t, srv)

	// RFC 6455 §5.7: a masked "Hello" from the client, unmasked back.
	conn.Write([]byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58})
	if got, want := string(readN(t, br, 7)), "\x81\x05Hello"; got != want {
		t.Errorf("echo: got %q, want %q", got, want)
	}
	// A ping with "Hello" gets a pong with "Hello".
	conn.Write([]byte{0x89, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58})
	if got, want := string(readN(t, br, 7)), "\x8a\x05Hello"; got != want {
		t.Errorf("pong: got %q, want %q", got, want)
	}
	// A 300-byte binary frame uses the 16-bit length.
	payload := []byte(strings.Repeat("abc", 100))
	frame := append([]byte{0x82, 0x80 | 126, 0x01, 0x2c, 0, 0, 0, 0}, payload...)
	conn.Write(frame)
	if got := readN(t, br, 4+300); string(got[:4]) != "\x82\x7e\x01\x2c" || string(got[4:]) != string(payload) {
		t.Errorf("binary echo: got header % x and %d bytes", got[:4], len(got)-4)
	}
	// A close with 1000 is echoed, and the connection ends.
	conn.Write([]byte{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8})
	if got, want := string(readN(t, br, 4)), "\x88\x02\x03\xe8"; got != want {
		t.Errorf("close: got %q, want %q", got, want)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after close: got %v, want EOF", err)
	}
}

func TestWebSocketRejects(t *testing.T) {
	h := New(Options{MaxBody: 1000})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()

	// An unmasked client frame is a protocol error: close 1002.
	conn, br := dialWS(t, srv)
	conn.Write([]byte{0x81, 0x02, 'h', 'i'})
	if got := readN(t, br, 4); string(got[:4]) != "\x88\x10\x03\xea" {
		t.Errorf("unmasked: got % x, want a close 1002", got)
	}
	// A frame over MaxBody: close 1009.
	conn, br = dialWS(t, srv)
	conn.Write([]byte{0x82, 0x80 | 126, 0x10, 0x00, 0, 0, 0, 0})
	if got := readN(t, br, 4); got[0] != 0x88 || string(got[2:4]) != "\x03\xf1" {
		t.Errorf("too big: got % x, want a close 1009", got)
	}

	for _, tt := range []struct {
		name, headers string
		status        int
	}{
		{"no upgrade", "Connection: keep-alive\r\n", 426},
		{"old version", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", 400},
		{"bad key", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n", 400},
	} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: x\r\n"+tt.headers+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if resp.StatusCode != tt.status {
			t.Errorf("%s: got %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
		conn.Close()
	}
}

func TestWebSocketClosedByHandler(t *testing.T) {
	h := New(Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, br := dialWS(t, srv)
	h.Close()
	if _, err := br.ReadByte(); err == nil {
		t.Errorf("after Handler.Close: got a byte, want the connection closed")
	}
}

// TestWebSocketClient: the client's side (Handshake, WriteClientFrame,
// ReadServerFrame) talks to the echo, short and 16-bit lengths included,
// and ReadServerFrame refuses a masked frame.
func TestWebSocketClient(t *testing.T) {
	h := New(Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br, err := Handshake(conn, "x", "/ws")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"hi", strings.Repeat("0123456789", 50)} {
		if err := WriteClientFrame(conn, opText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if op, payload, err := ReadServerFrame(br); err != nil || op != opText || string(payload) != msg {
			t.Errorf("echo: got %#x %.20q %v, want text %.20q", op, payload, err, msg)
		}
	}
	if _, _, err := ReadServerFrame(strings.NewReader("\x81\x82\x00\x00\x00\x00hi")); err == nil {
		t.Errorf("a masked frame from the server: got no error")
	}
}

// TestHeaderEchoSerial: ?header sets response headers, ?echo writes
// request headers into the answer, ?serial numbers the answers; bad
// values are refused.
func TestHeaderEchoSerial(t *testing.T) {
	h := New(Options{})
	r := httptest.NewRequest("GET", "/x?header=Cache-Control:max-age%3D60&header=Vary:X-User&echo=X-User&serial=1", nil)
	r.Header.Set("X-User", "ann")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Header().Get("Cache-Control") != "max-age=60" || rec.Header().Get("Vary") != "X-User" {
		t.Errorf("headers %v, want Cache-Control max-age=60 and Vary X-User", rec.Header())
	}
	if want := "upstream: GET /x: 200\nX-User: ann\n#1\n"; rec.Body.String() != want {
		t.Errorf("body %q, want %q", rec.Body, want)
	}
	if rec := serve(h, "GET", "/x?serial=1"); !strings.HasSuffix(rec.Body.String(), "#2\n") {
		t.Errorf("second serial answer %q, want #2", rec.Body)
	}
	for _, bad := range []string{"header=NoColon", "header=Bad%20Name:v", "header=N:a%0Ab", "echo=bad%20name", "header=a:b" + strings.Repeat("&header=a:b", maxHeaderKnobs)} {
		if rec := serve(h, "GET", "/x?"+bad); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, rec.Code)
		}
	}
}
