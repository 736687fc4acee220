package h1

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/sds-proxy/sds-proxy/proxy/h1/h1test"
)

// faultyUpstream serves f on 127.0.0.1 until the test ends.
func faultyUpstream(t *testing.T, f h1test.Fault) string {
	u := newRawUpstream(t, func(c net.Conn, _ int32) { h1test.Serve(c, bufio.NewReader(c), f) })
	return u.ln.Addr().String()
}

// serveProxy serves a ReverseProxy to upstream through rt on 127.0.0.1,
// as sds-proxy does, and returns its address.
func serveProxy(t *testing.T, upstream string, rt http.RoundTripper) string {
	target := &url.URL{Scheme: "http", Host: upstream}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1, // a stalled body's first bytes reach the client
		ErrorLog:      discardLog,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ErrorLog: discardLog}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestDifferentialFaults: behind each faulty upstream, eight clients
// through a ReverseProxy on the fast path and through one on
// http.Transport, side by side. No client of the fast path gets an answer
// meant for another, and every correct request gets its answer; what
// http.Transport does in the same run is logged beside it.
func TestDifferentialFaults(t *testing.T) {
	if !peekSupported {
		t.Skip("no fast path on this system: every request goes to http.Transport")
	}
	const clients = 8
	for _, f := range h1test.Faults() {
		t.Run(f.Name, func(t *testing.T) {
			next := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
			fast := New(next)
			ref := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
			t.Cleanup(fast.CloseIdleConnections)
			t.Cleanup(ref.CloseIdleConnections)
			perClient := 40
			if f.Expensive {
				perClient = 3
			}
			fastGot := h1test.Drive("http://"+serveProxy(t, faultyUpstream(t, f), fast), "", "", f, clients, perClient)
			refGot := h1test.Drive("http://"+serveProxy(t, faultyUpstream(t, f), ref), "", "", f, clients, perClient)
			t.Logf("%s: fast path: %v; http.Transport: %v", f.Doc, fastGot, refGot)
			if len(fastGot.Wrong) > 0 {
				t.Errorf("fast path: %v; first: %s", fastGot, fastGot.Wrong[0])
			}
			if fastGot.CleanFailed > 0 {
				t.Errorf("fast path: %d correct requests did not get their answer", fastGot.CleanFailed)
			}
		})
	}
}

// TestLateResponse: a second answer that arrives after the first was read,
// while the connection sits in the pool, closes it; the next request gets
// its own answer on a new connection. The upstream sends the late answer
// when the client has read the first, and the client sends its next
// request once it is written: no clock decides the order.
func TestLateResponse(t *testing.T) {
	read, written := make(chan struct{}), make(chan struct{})
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString(h1test.Answer(r.URL.Path))
			if r.URL.Path == "/late" {
				w.Flush()
				<-read
				w.WriteString(h1test.Stray(r.URL.Path))
				w.Flush()
				close(written)
			}
			return true
		})
	})
	tr := newTestH1(t, nil)
	if _, body := u.get(t, tr, "GET", "/late"); body != "@/late" {
		t.Fatalf("first answer %q, want @/late", body)
	}
	close(read)
	<-written
	resp, body := u.get(t, tr, "GET", "/next")
	if body != "@/next" || resp.Header.Get("X-Path") != "/next" {
		t.Errorf("next request got %q (X-Path %q), want its own answer", body, resp.Header.Get("X-Path"))
	}
	if n := u.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the one the late answer dirtied closed)", n)
	}
}

// TestIdleEOF: a connection the upstream closed while it was idle is found
// closed when it is taken, and the request goes on a new one at once.
func TestIdleEOF(t *testing.T) {
	closed := make(chan struct{})
	u := newRawUpstream(t, func(c net.Conn, n int32) {
		readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
			w.WriteString(h1test.Answer(r.URL.Path))
			return n != 1
		})
		if n == 1 {
			close(closed)
		}
	})
	tr := newTestH1(t, nil)
	u.get(t, tr, "GET", "/a")
	<-closed
	c, reused, _, err := tr.get(context.Background(), u.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if reused {
		t.Error("took the connection the upstream had closed")
	}
}

// TestPoolRules: which answers leave their connection in the pool, judged
// by a second request on the same transport.
func TestPoolRules(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer string
		reuse  bool
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", true},
		{"no body allowed", "HTTP/1.1 204 No Content\r\n\r\n", true},
		{"close asked", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", true},
		{"left in the buffer", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n", false},
		{"101", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := newRawUpstream(t, func(c net.Conn, _ int32) {
				readRequests(c, func(r *http.Request, w *bufio.Writer) bool {
					if r.URL.Path == "/probe" {
						w.WriteString(h1test.Answer("/probe"))
					} else {
						w.WriteString(tt.answer)
					}
					return true
				})
			})
			tr := newTestH1(t, nil)
			u.get(t, tr, "GET", "/")
			u.get(t, tr, "GET", "/probe")
			if got := u.conns.Load() == 1; got != tt.reuse {
				t.Errorf("reused: %v, want %v (%d connections)", got, tt.reuse, u.conns.Load())
			}
		})
	}
}

// discardLog drops the proxies' and servers' log lines about the faults.
var discardLog = log.New(io.Discard, "", 0)
