package main_test

// End-to-end tests of what a hostile or slow client, and signals at the
// wrong moment, must not be able to do: slow clients tripping a point,
// a body that breaks off going uncounted, request smuggling keeping its
// connection, and SIGHUP killing the process. The slow clients are raw
// sockets paced by a ticker: their slowness is what is under test.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowUpload sends a POST of size bytes to addr one byte per gap, and
// returns the status of the answer.
func slowUpload(addr, path string, size int, gap time.Duration) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: shop.example\r\nContent-Length: %d\r\n\r\n", path, size); err != nil {
		return 0, err
	}
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for range size {
		<-tick.C
		if _, err := conn.Write([]byte{'x'}); err != nil {
			return 0, err
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// slowRead GETs path from addr and reads the answer at most chunk bytes
// per gap; it returns the status and the bytes of body read. (A receive
// buffer set smaller than loopback's 64 KiB segments would stall the
// transfer on TCP's persist timer instead of pacing it.)
func slowRead(addr, path string, chunk int, gap time.Duration) (int, int64, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: shop.example\r\n\r\n", path); err != nil {
		return 0, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, chunk), nil)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	tick := time.NewTicker(gap)
	defer tick.Stop()
	var n int64
	for {
		<-tick.C
		m, err := io.CopyN(io.Discard, resp.Body, int64(chunk))
		n += m
		if err == io.EOF {
			return resp.StatusCode, n, nil
		}
		if err != nil {
			return resp.StatusCode, n, err
		}
	}
}

// TestSlowClientsDoNotTrip: three clients sending a 10-byte body over a
// second, and a client reading a 16 MiB answer over 3 seconds (more than
// the socket buffers hold, so the proxy waits on it for over a second),
// neither count a timeout against a point with a 300ms timeoutThreshold
// (3 trip it) nor pass its 300ms upstreamTimeout: the upstream time is
// the service's only. Then the point still serves everyone.
func TestSlowClientsDoNotTrip(t *testing.T) {
	e := setup(t, "10s", 10, `routes:
  - point: p
    match: {}
points:
  p:
    timeoutThreshold: 300ms
    timeoutCountThreshold: 3
    upstreamTimeout: 300ms
`)
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	type result struct {
		status int
		err    error
	}
	uploads := make(chan result, 3)
	for range 3 {
		go func() {
			status, err := slowUpload(addr, "/api/orders", 10, 100*time.Millisecond)
			uploads <- result{status, err}
		}()
	}
	const size = 16 << 20
	start := time.Now()
	status, n, err := slowRead(addr, fmt.Sprintf("/large?body=%d", size), 256<<10, 50*time.Millisecond)
	took := time.Since(start)
	t.Logf("slow reader: %d bytes in %v", n, took)
	if err != nil || status != 200 || n != size {
		t.Errorf("slow reader: got %d, %d bytes, %v, want 200 and %d bytes", status, n, err, size)
	}
	if took < 2*time.Second {
		t.Errorf("slow reader took %v, want over 2s (else the test shows nothing)", took)
	}
	for range 3 {
		if r := <-uploads; r.err != nil || r.status != 201 {
			t.Errorf("slow upload: got %d, %v, want 201", r.status, r.err)
		}
	}
	e.metricIs(0, "sds_timeouts_total", "point", "p")
	e.metricIs(0, "sds_upstream_errors_total", "point", "p", "kind", "upstream_timeout")
	for i := range 5 {
		if r := e.get("/after"); r.status != 200 || r.degraded() != "" {
			t.Errorf("request %d after the slow clients: got %v, want the upstream's 200", i, r)
		}
	}
	// The upstream time stays the service's: well under the threshold.
	if sum, ok := e.metric("sds_upstream_duration_seconds_sum", "point", "p"); !ok || sum > 0.9 {
		t.Errorf("sds_upstream_duration_seconds_sum: got %v (found %v), want under 0.9s for 9 quick calls", sum, ok)
	}
	// A hung upstream still trips the point within about the threshold.
	hung := make(chan reply, 3)
	for range 3 {
		go func() {
			req, _ := http.NewRequest("GET", e.proxy.url+"/hung?sleep=2s", nil)
			r, _ := e.do(req)
			hung <- r
		}()
	}
	if !eventually(2*time.Second, func() bool { r := e.get("/probe"); return r.degraded() == "timeout; point=p" }) {
		t.Errorf("three hung calls did not trip the point")
	}
	for range 3 {
		<-hung
	}
}

// TestBodyBreaksOffIsCounted: an upstream body that breaks off mid-copy
// reaches the client as a cut body and is counted as an exception of kind
// "body".
func TestBodyBreaksOffIsCounted(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    exceptionThreshold: 100\n")
	resp, err := e.client.Get(e.proxy.url + "/cut?body=100000&cut=40000")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || n >= 100000 {
		t.Errorf("cut body: got %d bytes and %v, want fewer than 100000 and %v", n, err, io.ErrUnexpectedEOF)
	}
	e.metricIs(1, "sds_upstream_errors_total", "point", "p", "kind", "body")
	if p := e.point("p"); p.Window.Exceptions != 1 {
		t.Errorf("/status exceptions: got %d, want 1", p.Window.Exceptions)
	}
}

// TestContentLengthWithTransferEncoding: a request with both headers
// (RFC 9112 §6.1, a smuggling attempt) is answered and its connection
// closed, so whatever it smuggled after its body is never read.
func TestContentLengthWithTransferEncoding(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.proxy.url, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	fmt.Fprintf(conn, "POST /api/orders HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s", 5+len(smuggled), smuggled)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !resp.Close {
		t.Errorf("answer to CL+TE: got Connection %q, want close", resp.Header.Get("Connection"))
	}
	if next, err := http.ReadResponse(br, nil); err == nil {
		next.Body.Close()
		t.Errorf("a second answer on the connection: got %d, want the connection closed", next.StatusCode)
	}
	if requests, _ := e.upstreamStats(); requests != 1 {
		t.Errorf("upstream requests: got %d, want 1 (nothing smuggled)", requests)
	}
}

// TestSIGHUPDuringDrain: SIGHUP during the SIGTERM drain is ignored and
// logged; the request in flight finishes and the exit is clean.
func TestSIGHUPDuringDrain(t *testing.T) {
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
	slow := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest("GET", e.proxy.url+"/slow?sleep=1s", nil)
		r, err := e.do(req)
		if err != nil {
			t.Errorf("slow call: %v", err)
		}
		slow <- r
	}()
	if !eventually(3*time.Second, func() bool { _, n := e.upstreamStats(); return n == 1 }) {
		t.Fatalf("the slow call never reached the upstream")
	}
	mark := e.proxy.stderr.mark()
	e.proxy.signal(syscall.SIGTERM)
	e.proxy.waitLog(t, mark, 3*time.Second, msgIs("draining"))
	for range 5 {
		e.proxy.signal(syscall.SIGHUP)
	}
	e.proxy.waitLog(t, mark, 3*time.Second, msgIs("SIGHUP while draining: ignored"))
	if r := <-slow; r.status != 200 {
		t.Errorf("call in flight at SIGTERM: got %v, want 200", r)
	}
	e.proxy.waitExit(t, 5*time.Second)
}

// TestSIGHUPWithoutConfig: a proxy run with -upstream and no config file
// logs SIGHUP as a no-op and goes on serving.
func TestSIGHUPWithoutConfig(t *testing.T) {
	needBinaries(t)
	upstream := "http://" + startUpstream(t)
	// An empty directory: no sds.yaml to read, so it runs as a plain proxy.
	cmd := command("sds-proxy", "run", "-upstream", upstream, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	cmd.Dir = t.TempDir()
	started, err := start(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	p := serving(t, started)
	url := p.url
	mark := p.stderr.mark()
	p.signal(syscall.SIGHUP)
	p.waitLog(t, mark, 3*time.Second, msgIs("SIGHUP: no config file to reload; ignored"))
	client := newClient(t)
	resp, err := client.Get(url + "/after-hup")
	if err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("after SIGHUP: got %d, want 200", resp.StatusCode)
	}
}

// TestSIGHUPAtStartup: SIGHUP sent over and over while the proxy starts,
// from its first log line to serving, 20 times in a row, never kills it.
// (A signal that arrives before any code of the program runs, during the
// Go runtime's own start, takes the default action whatever the program
// does; the first log line is written right after the handler is in.)
func TestSIGHUPAtStartup(t *testing.T) {
	needBinaries(t)
	upstream := "http://" + startUpstream(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "sds.yaml")
	if err := os.WriteFile(config, []byte(configHeader(upstream, "10s", 10)+"routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		p := &proxyProcess{process: startProcess(t, "sds-proxy", proxyArgs(config)...)}
		if _, ok := p.stderr.find(0, 10*time.Second, p.exited, logLine(msgIs("starting"))); !ok {
			t.Fatalf("start %d: no starting line (exited: %v, %v)", i, p.hasExited(), p.err)
		}
		sent := 0
		for sent < 1000 {
			if p.countLog(0, msgIs("serving")) > 0 {
				break
			}
			if err := p.signal(syscall.SIGHUP); err != nil {
				break // exited; checked below
			}
			sent++
		}
		p.waitLog(t, 0, 10*time.Second, msgIs("serving"))
		// One more after serving: a reload, not a death.
		p.signal(syscall.SIGHUP)
		p.waitLog(t, 0, 5*time.Second, msgIs("SIGHUP: reloading the config"))
		p.stop(10 * time.Second)
		if p.err != nil {
			t.Fatalf("start %d, %d SIGHUPs during start-up: exit %v, want 0\n%s", i, sent, p.err, p.stderr)
		}
		if sent == 0 {
			t.Logf("start %d: served before the first SIGHUP could be sent", i)
		}
	}
}
