package h1

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// A faulty upstream answers each request whose query has f=1 with one
// fault and every other one correctly: a 200 whose body, X-Path header and
// Set-Cookie name the request's path. Every answer a fault adds is marked
// the same way with the path of the request it came with, so a client
// that gets an answer naming another path got another client's response.

// answer is the correct answer to a request for path.
func answer(path string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Path: %s\r\nSet-Cookie: session=%s\r\n\r\n@%s", len(path)+1, path, path, path)
}

// stray is an answer nobody asked for, sent along with the one to path.
func stray(path string) string {
	body := "stray@" + path
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Path: %s\r\nSet-Cookie: session=%s\r\n\r\n%s", len(body), path, path, body)
}

// fault is how the upstream answers a faulty request. write writes the
// answer to a request for path on c (br is c's reader, for a fault that
// waits for the client to go away) and returns whether the connection
// serves on.
type fault struct {
	name     string
	method   string // of the faulty requests; GET when empty
	requests int    // per client; 40 when 0
	write    func(c net.Conn, br *bufio.Reader, path string) bool
	// stalls says the faulty answer's body stops after its marker: the
	// client reads the marker and gives up, instead of reading to the end.
	stalls bool
}

// writeAll writes the parts in one write and reports whether it worked.
func writeAll(c net.Conn, parts ...string) bool {
	_, err := io.WriteString(c, strings.Join(parts, ""))
	return err == nil
}

var faults = []fault{
	{name: "second response after a Content-Length body", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, answer(p), stray(p))
	}},
	{name: "Content-Length and chunked hiding a response", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		hidden := stray(p)
		return writeAll(c, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 5+len(hidden)), hidden)
	}},
	{name: "duplicate Content-Length", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\nok", stray(p))
	}},
	{name: "malformed Content-Length", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok", stray(p))
	}},
	{name: "body on HEAD", method: http.MethodHead, write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, answer(p), stray(p)) // answer's body is the one HEAD must not have
	}},
	{name: "body on 204", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", stray(p))
	}},
	{name: "body on 304", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, "HTTP/1.1 304 Not Modified\r\n\r\n", stray(p))
	}},
	{name: "two responses in one write", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, answer(p)+answer(p)) // the second names this path too: a later client must not get it
	}},
	{name: "101 to a GET without Upgrade", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n", stray(p))
	}},
	{name: "1xx flood", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n", 1000), answer(p))
	}},
	{name: "endless header", requests: 3, write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		w := bufio.NewWriter(c)
		w.WriteString("HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("f", 1000) + "\r\n"
		for range 11 << 10 { // 11 MiB, past the 10 MiB limit
			if _, err := w.WriteString(line); err != nil {
				return false
			}
		}
		return false
	}},
	{name: "close mid-body", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n@"+p)
		return false
	}},
	{name: "stall mid-body", stalls: true, write: func(c net.Conn, br *bufio.Reader, p string) bool {
		writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n@"+p)
		io.Copy(io.Discard, br) // until the proxy gives up and closes
		return false
	}},
	{name: "Connection: close, socket left open", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		return writeAll(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", stray(p))
	}},
	{name: "HTTP/1.0 without a length", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
		writeAll(c, "HTTP/1.0 200 OK\r\n\r\n@"+p)
		return false
	}},
}

// faultyUpstream serves f on 127.0.0.1 until the test ends.
func faultyUpstream(t *testing.T, f fault) string {
	u := newRawUpstream(t, func(c net.Conn, _ int32) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			path := r.URL.Path
			if r.URL.Query().Get("f") != "1" {
				if !writeAll(c, answer(path)) {
					return
				}
				continue
			}
			if !f.write(c, br, path) {
				return
			}
		}
	})
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

// tally is what the clients of one run got.
type tally struct {
	mu          sync.Mutex
	checked     int      // answers whose status and body were read
	wrong       []string // answers that named another request's path
	cleanFailed int      // correct requests (no fault) that did not get their answer
}

func (tl *tally) String() string {
	return fmt.Sprintf("%d wrong of %d checked, %d correct requests failed", len(tl.wrong), tl.checked, tl.cleanFailed)
}

// misdirected says what in resp names a path other than own, or "".
func misdirected(resp *http.Response, body []byte, own string) string {
	if p := resp.Header.Get("X-Path"); p != "" && p != own {
		return "X-Path " + p
	}
	for _, c := range resp.Cookies() {
		if c.Name == "session" && c.Value != own {
			return "Set-Cookie " + c.Value
		}
	}
	if i := strings.IndexByte(string(body), '@'); i >= 0 && string(body[i+1:]) != own {
		return "body " + string(body)
	}
	return ""
}

// drive sends clients × f.requests requests through the proxy at addr,
// every third one faulty, each client asking its own paths, and counts
// what came back.
func drive(t *testing.T, addr string, f fault, clients int) *tally {
	perClient := f.requests
	if perClient == 0 {
		perClient = 40
	}
	tl := &tally{}
	var wg sync.WaitGroup
	for ci := range clients {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			for n := range perClient {
				own := fmt.Sprintf("/c%d/%d", ci, n)
				faulty := n%3 == 0
				method, target := http.MethodGet, "http://"+addr+own
				if faulty {
					target += "?f=1"
					if f.method != "" {
						method = f.method
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, method, target, nil)
				resp, err := client.Do(req)
				if err != nil {
					cancel()
					if !faulty {
						tl.add("", true)
					}
					continue
				}
				var body []byte
				if faulty && f.stalls {
					body = make([]byte, len("@"+own))
					_, err = io.ReadFull(resp.Body, body)
					cancel()
				} else {
					body, err = io.ReadAll(resp.Body)
				}
				resp.Body.Close()
				cancel()
				wrong := misdirected(resp, body, own)
				if wrong != "" {
					wrong = own + " got " + wrong
				}
				tl.add(wrong, !faulty && (err != nil || resp.StatusCode != http.StatusOK || string(body) != "@"+own))
			}
		})
	}
	wg.Wait()
	return tl
}

func (tl *tally) add(wrong string, cleanFailed bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.checked++
	if wrong != "" {
		tl.wrong = append(tl.wrong, wrong)
	}
	if cleanFailed {
		tl.cleanFailed++
	}
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
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			next := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
			fast := New(next)
			ref := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
			t.Cleanup(fast.CloseIdleConnections)
			t.Cleanup(ref.CloseIdleConnections)
			fastGot := drive(t, serveProxy(t, faultyUpstream(t, f), fast), f, clients)
			refGot := drive(t, serveProxy(t, faultyUpstream(t, f), ref), f, clients)
			t.Logf("fast path: %v; http.Transport: %v", fastGot, refGot)
			if len(fastGot.wrong) > 0 {
				t.Errorf("fast path: %v; first: %s", fastGot, fastGot.wrong[0])
			}
			if fastGot.cleanFailed > 0 {
				t.Errorf("fast path: %d correct requests did not get their answer", fastGot.cleanFailed)
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
			w.WriteString(answer(r.URL.Path))
			if r.URL.Path == "/late" {
				w.Flush()
				<-read
				w.WriteString(stray(r.URL.Path))
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
			w.WriteString(answer(r.URL.Path))
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
						w.WriteString(answer("/probe"))
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
