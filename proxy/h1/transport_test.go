package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream is an upstream on 127.0.0.1 whose connections serve is given
// as they are accepted, numbered from 1; it counts them. When the test
// ends it closes the connections still open (a client may never close
// one: ReverseProxy leaks the connection of a 101 it refuses) and waits
// for serve to return on each.
type rawUpstream struct {
	ln    net.Listener
	conns atomic.Int32
	wg    sync.WaitGroup

	mu   sync.Mutex
	open map[net.Conn]bool
}

func newRawUpstream(t *testing.T, serve func(c net.Conn, n int32)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, open: make(map[net.Conn]bool)}
	u.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := u.conns.Add(1)
			u.mu.Lock()
			u.open[c] = true
			u.mu.Unlock()
			u.wg.Go(func() {
				defer func() {
					u.mu.Lock()
					delete(u.open, c)
					u.mu.Unlock()
					c.Close()
				}()
				serve(c, n)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		for c := range u.open {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

// readRequests reads the requests on c and answers each with answer, until
// answer returns false or the client goes away.
func readRequests(c net.Conn, answer func(r *http.Request, w *bufio.Writer) bool) {
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, r.Body)
		more := answer(r, bw)
		bw.Flush()
		if !more {
			return
		}
	}
}

// countingNext is a next transport that counts the requests handed to it.
type countingNext struct{ n atomic.Int32 }

func (c *countingNext) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return &http.Response{StatusCode: http.StatusTeapot, Body: http.NoBody, Request: r}, nil
}

// newTestH1 returns a Transport whose idle connections close when the
// test ends (before the upstreams, whose cleanup waits for them).
func newTestH1(t *testing.T, next http.RoundTripper) *Transport {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := newTransport(next, d.DialContext, 8, time.Minute)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// get sends method to u through t and returns the status and body.
func (u *rawUpstream) get(t *testing.T, tr *Transport, method, path string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+u.ln.Addr().String()+path, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, path, err)
	}
	return resp, string(body)
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// TestReuse: one connection serves GETs, HEADs and bodiless answers in
// turn; an answer with Connection: close is the connection's last.
func TestReuse(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			switch {
			case r.Method == http.MethodHead:
				w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n") // the length a GET would get, no body
			case r.URL.Path == "/none":
				w.WriteString("HTTP/1.1 204 No Content\r\n\r\n")
			case r.URL.Path == "/close":
				w.WriteString("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
				return false
			default:
				w.WriteString(okAnswer)
			}
			return true
		})
	})
	tr := newTestH1(t, nil)
	for _, step := range []struct{ method, path, body string }{
		{"GET", "/a", "ok"}, {"HEAD", "/a", ""}, {"GET", "/none", ""}, {"OPTIONS", "/a", "ok"}, {"GET", "/a", "ok"},
	} {
		if resp, body := u.get(t, tr, step.method, step.path); resp.StatusCode/100 != 2 || body != step.body {
			t.Errorf("%s %s: %d %q, want 2xx %q", step.method, step.path, resp.StatusCode, body, step.body)
		}
	}
	if n := u.conns.Load(); n != 1 {
		t.Errorf("%d connections for five requests, want 1", n)
	}
	u.get(t, tr, "GET", "/close")
	u.get(t, tr, "GET", "/a")
	if n := u.conns.Load(); n != 2 {
		t.Errorf("%d connections after Connection: close, want 2", n)
	}
}

// TestStaleConnection: the upstream closes a connection after its first
// answer; the next GET finds it closed (when the connection is taken, or by
// a failure before any byte of the answer) and goes on a new one.
func TestStaleConnection(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString(okAnswer)
			return false // keep-alive promised, closed anyway
		})
	})
	tr := newTestH1(t, nil)
	for i := range 3 {
		if resp, body := u.get(t, tr, "GET", "/"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i+1, resp.StatusCode, body)
		}
	}
	if n := u.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (each pooled one found closed, a new one dialled)", n)
	}
}

// TestEarlyHintsAndTrailers: a 103 before the answer reaches the
// request's trace hook (and is skipped without one); a chunked answer's
// trailers arrive; the connection is reused after.
func TestEarlyHintsAndTrailers(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
			w.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 5\r\n\r\n")
			return true
		})
	})
	tr := newTestH1(t, nil)
	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprintf("%d %s", code, h.Get("Link")))
		return nil
	}}
	for i := range 2 {
		req, _ := http.NewRequest("GET", "http://"+u.ln.Addr().String()+"/", nil)
		if i == 1 {
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello" || resp.Trailer.Get("X-Sum") != "5" {
			t.Errorf("got %d %q, trailer %v; want 200 hello with X-Sum 5", resp.StatusCode, body, resp.Trailer)
		}
	}
	if want := []string{"103 </a.css>; rel=preload"}; !slices.Equal(hints, want) {
		t.Errorf("trace saw %q, want %q (only the traced request's)", hints, want)
	}
	if n := u.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestInformationalBudget: an upstream that sends 1xx answers without end
// fails the request once their heads pass the 10 MiB of a response's
// heads, even when every one is relayed.
func TestInformationalBudget(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			hint := "HTTP/1.1 103 Early Hints\r\nLink: </" + strings.Repeat("a", 1000) + ">\r\n\r\n"
			for range 11 << 10 {
				if _, err := w.WriteString(hint); err != nil {
					return false
				}
			}
			return false
		})
	})
	tr := newTestH1(t, nil)
	relayed := 0
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error {
		relayed++
		return nil
	}})
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+u.ln.Addr().String()+"/", nil)
	if resp, err := tr.RoundTrip(req); !errors.Is(err, errHeaderLimit) {
		t.Fatalf("got %v, %v; want the header limit's error", resp, err)
	}
	if relayed == 0 || relayed > 10<<10 {
		t.Errorf("%d 1xx answers relayed, want some and at most 10 MiB of them", relayed)
	}
}

// TestBodyClosedEarly: a body closed before its end closes its
// connection; the next request takes a new one.
func TestBodyClosedEarly(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 100000))
			return true
		})
	})
	tr := newTestH1(t, nil)
	req, _ := http.NewRequest("GET", "http://"+u.ln.Addr().String()+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 10))
	resp.Body.Close()
	u.get(t, tr, "GET", "/")
	if n := u.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestCancel: a request canceled while the upstream has not answered
// returns at once with the context's error, and its connection is not
// pooled.
func TestCancel(t *testing.T) {
	reached, release := make(chan struct{}), make(chan struct{})
	u := newRawUpstream(t, func(c net.Conn, n int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			if n == 1 {
				close(reached)
				<-release // hang the first connection's first request
			}
			w.WriteString(okAnswer)
			return true
		})
	})
	defer close(release)
	tr := newTestH1(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+u.ln.Addr().String()+"/", nil)
	done := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		done <- err
	}()
	<-reached
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled request: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a canceled request did not return within 5s")
	}
	u.get(t, tr, "GET", "/")
	if n := u.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the canceled one not reused)", n)
	}
}

// TestDelegates: a request with a body, another method, https or an
// upgrade goes to next.
func TestDelegates(t *testing.T) {
	next := &countingNext{}
	tr := newTestH1(t, next)
	reqs := []*http.Request{}
	add := func(method, url string, body io.Reader, header ...string) {
		r, _ := http.NewRequest(method, url, body)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		reqs = append(reqs, r)
	}
	add("POST", "http://127.0.0.1:1/", strings.NewReader("x"))
	add("POST", "http://127.0.0.1:1/", nil)
	add("DELETE", "http://127.0.0.1:1/", nil)
	add("GET", "https://127.0.0.1:1/", nil)
	add("GET", "http://127.0.0.1:1/", nil, "Upgrade", "websocket", "Connection", "Upgrade")
	add("GET", "http://127.0.0.1:1/", nil, "Expect", "100-continue")
	for _, r := range reqs {
		resp, err := tr.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusTeapot {
			t.Errorf("%s %s %v: got %v, %v; want next's 418", r.Method, r.URL, r.Header, resp, err)
		}
	}
	if got := next.n.Load(); got != int32(len(reqs)) {
		t.Errorf("next got %d requests, want %d", got, len(reqs))
	}
}

// TestIdleTimeout: an idle connection older than the idle timeout is
// closed, not used.
func TestIdleTimeout(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString(okAnswer)
			return true
		})
	})
	tr := newTestH1(t, nil)
	tr.idleTimeout = time.Nanosecond
	u.get(t, tr, "GET", "/")
	u.get(t, tr, "GET", "/")
	if n := u.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestHeaderLimit: an upstream that sends headers without end fails the
// request once they pass 10 MiB, and the connection is not pooled.
func TestHeaderLimit(t *testing.T) {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString("HTTP/1.1 200 OK\r\n")
			line := "X-Filler: " + strings.Repeat("f", 1000) + "\r\n"
			for range 11 << 10 { // 11 MiB of headers
				if _, err := w.WriteString(line); err != nil {
					return false
				}
			}
			return false
		})
	})
	tr := newTestH1(t, nil)
	req, _ := http.NewRequest("GET", "http://"+u.ln.Addr().String()+"/", nil)
	if resp, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "exceed") {
		t.Fatalf("got %v, %v; want the header limit's error", resp, err)
	}
	if idle := len(tr.idle[u.ln.Addr().String()]); idle != 0 {
		t.Errorf("%d pooled connections after the failure, want 0", idle)
	}
}

// TestSweep: the sweep closes the connections idle for the idle timeout,
// and the upstream sees them closed.
func TestSweep(t *testing.T) {
	closed := make(chan struct{})
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString(okAnswer)
			return true
		})
		close(closed) // the client closed the connection
	})
	tr := newTestH1(t, nil)
	u.get(t, tr, "GET", "/")
	tr.sweep() // not idle long enough: kept
	if n := len(tr.idle[u.ln.Addr().String()]); n != 1 {
		t.Fatalf("%d pooled connections, want 1", n)
	}
	tr.idleTimeout = time.Nanosecond
	tr.sweep()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream never saw the idle connection closed")
	}
	if n := len(tr.idle[u.ln.Addr().String()]); n != 0 {
		t.Errorf("%d pooled connections after the sweep, want 0", n)
	}
}
