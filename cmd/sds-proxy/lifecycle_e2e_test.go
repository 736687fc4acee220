package main_test

// End-to-end tests of the process's life and of its clients: SIGTERM's
// drain, SIGHUP at every moment (start-up, the drain, no config file), the
// commands (validate, version, demo), and what a slow, hostile or departing
// client must not be able to do: slow clients tripping a point, a body
// that breaks off going uncounted, request smuggling keeping its
// connection, a client's short body or departure counted against the
// service, forwarded headers spoofed. The slow clients are raw sockets
// paced by a ticker: their slowness is what is under test.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	t.Parallel()
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
	if !eventually(wait, func() bool { r := e.get("/probe"); return r.degraded() == "timeout; point=p" }) {
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
	slow := e.slowCallInFlight()
	mark := e.proxy.stderr.mark()
	e.proxy.signal(syscall.SIGTERM)
	e.proxy.waitLog(t, mark, wait, msgIs("draining"))
	for range 5 {
		e.proxy.signal(syscall.SIGHUP)
	}
	e.proxy.waitLog(t, mark, wait, msgIs("SIGHUP while draining: ignored"))
	if r := <-slow; r.status != 200 {
		t.Errorf("call in flight at SIGTERM: got %v, want 200", r)
	}
	e.proxy.waitExit(t, wait)
}

// TestSIGHUPWithoutConfig: a proxy run with -upstream and no config file
// logs SIGHUP as a no-op and goes on serving.
func TestSIGHUPWithoutConfig(t *testing.T) {
	t.Parallel()
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
	p.waitLog(t, mark, wait, msgIs("SIGHUP: no config file to reload; ignored"))
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
// TestSIGHUPBeforeMain covers the moments before the first log line.
func TestSIGHUPAtStartup(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	upstream := "http://" + startUpstream(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "sds.yaml")
	// Thousands of routes keep the start-up (reading and checking them)
	// long enough for SIGHUPs to land in it, however fast the rest starts.
	var routes strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&routes, "  - point: p\n    match: {path: /r%d}\n", i)
	}
	if err := os.WriteFile(config, []byte(configHeader(upstream, "10s", 10)+"routes:\n"+routes.String()+"points:\n  p:\n    visitThreshold: 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	duringStartUp := 0 // SIGHUPs the proxy handled while starting, over all runs
	for i := range 20 {
		p := &proxyProcess{process: startProcess(t, "sds-proxy", proxyArgs(config)...)}
		if _, ok := p.stderr.find(0, wait, p.exited, logLine(msgIs("starting"))); !ok {
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
		p.waitLog(t, 0, wait, msgIs("serving"))
		// One more after serving: a reload, not a death.
		p.signal(syscall.SIGHUP)
		p.waitLog(t, 0, wait, msgIs("SIGHUP: reloading the config"))
		p.stop(10 * time.Second)
		if p.err != nil {
			t.Fatalf("start %d, %d SIGHUPs during start-up: exit %v, want 0\n%s", i, sent, p.err, p.stderr)
		}
		duringStartUp += p.countLog(0, msgStarts("SIGHUP during start-up"))
	}
	// Else every SIGHUP came after the start-up, and the test showed nothing.
	if duringStartUp == 0 {
		t.Errorf("no SIGHUP reached the proxy during its start-up in 20 runs")
	}
	t.Logf("%d SIGHUPs handled during start-up over 20 runs", duringStartUp)
}

// TestSIGHUPBeforeMain: SIGHUP sent while the binary's packages are still
// being initialised, before main runs, does not kill the proxy: from the
// moment package hangup's init has run, the signal waits on its channel
// and is handled once the proxy starts; the proxy then serves and exits 0
// on SIGTERM. GODEBUG=inittrace=1 makes the runtime print a line as each
// package's init ends: the test sends one SIGHUP on hangup's line and on
// each line after it, over five starts. (A SIGHUP before hangup's init,
// in the runtime's own start, still takes the default action: nothing of
// a Go program runs earlier.)
func TestSIGHUPBeforeMain(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	upstream := "http://" + startUpstream(t)
	const hangupInit = "init github.com/sds-proxy/sds-proxy/cmd/sds-proxy/internal/hangup @"
	for i := range 5 {
		cmd := command("sds-proxy", "run", "-upstream", upstream, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
		cmd.Dir = t.TempDir() // no sds.yaml there
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		started, err := start(t, cmd)
		if err != nil {
			t.Fatal(err)
		}
		sent, mainAfter := 0, false
		for n := 0; ; n++ {
			line, ok := started.stderr.find(n, wait, started.exited, func(string) bool { return true })
			if !ok || !strings.HasPrefix(line, "init ") {
				break
			}
			if sent > 0 || strings.HasPrefix(line, hangupInit) {
				if err := started.signal(syscall.SIGHUP); err != nil {
					t.Fatalf("start %d: SIGHUP %d: %v", i, sent+1, err)
				}
				sent++
				mainAfter = mainAfter || strings.HasPrefix(line, "init main @")
			}
		}
		if sent == 0 || !mainAfter {
			t.Fatalf("start %d: got %d SIGHUPs sent, main initialised after hangup: %v; want hangup's init line before main's (exited: %v)",
				i, sent, mainAfter, started.hasExited())
		}
		p := serving(t, started)
		p.waitLog(t, 0, wait, msgStarts("SIGHUP")) // handled, not lost
		resp, err := http.Get(p.url + "/")
		if err != nil {
			t.Fatalf("start %d: after %d SIGHUPs: %v", i, sent, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("start %d: after %d SIGHUPs: got %d, want 200", i, sent, resp.StatusCode)
		}
		p.stop(wait)
		if p.err != nil {
			t.Fatalf("start %d: after %d SIGHUPs before main: exit %v, want 0", i, sent, p.err)
		}
	}
}

// TestSIGTERMDrains checks that SIGTERM fails /readyz, lets a slow call in
// flight finish, refuses new connections and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
	if r := e.getURL(e.proxy.admin + "/readyz"); r.status != 200 {
		t.Fatalf("/readyz while serving: got %v, want 200", r)
	}
	if r := e.getURL(e.proxy.admin + "/healthz"); r.status != 200 {
		t.Fatalf("/healthz: got %v, want 200", r)
	}
	slow := e.slowCallInFlight()
	e.proxy.signal(syscall.SIGTERM)

	admin := newClient(t)
	if !eventually(wait, func() bool {
		resp, err := admin.Get(e.proxy.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	}) {
		t.Errorf("/readyz did not turn 503 during the drain")
	}
	select {
	case r := <-slow:
		t.Fatalf("the slow call ended before /readyz turned 503: %v", r)
	default:
	}
	fresh := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 2 * time.Second}
	if resp, err := fresh.Get(e.proxy.url + "/new"); err == nil {
		resp.Body.Close()
		t.Errorf("a new connection during the drain: got %d, want it refused", resp.StatusCode)
	}

	if r := <-slow; r.status != 200 || !strings.HasPrefix(r.body, "upstream: GET /slow") {
		t.Errorf("slow call in flight at SIGTERM: got %v, want the upstream's 200", r)
	}
	e.proxy.waitExit(t, wait)
}

// TestClientGoesAway checks that a client that goes away mid-request is not
// an exception and frees its concurrency slot.
func TestClientGoesAway(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, "routes:\n  - point: c\n    match: {}\npoints:\n  c:\n    exceptionThreshold: 1\n    concurrentThreshold: 1\n")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.proxy.url+"/gone?sleep=5s", nil)
	done := make(chan error, 1)
	go func() {
		_, err := e.do(req)
		done <- err
	}()
	if !eventually(wait, func() bool { _, n := e.upstreamStats(); return n == 1 }) {
		t.Fatalf("the call never reached the upstream")
	}
	cancel()
	<-done
	if !eventually(wait, func() bool { _, n := e.upstreamStats(); return n == 0 }) {
		t.Errorf("the upstream call was not cancelled when the client went away")
	}
	if !eventually(wait, func() bool { return e.point("c").Window.InFlight == 0 }) {
		t.Fatalf("the concurrency slot was not freed")
	}
	if p := e.point("c"); p.Window.Exceptions != 0 {
		t.Errorf("/status: got %d exceptions, want 0 for a client that went away", p.Window.Exceptions)
	}
	// With exceptionThreshold 1 and concurrentThreshold 1, the next call
	// passes only if neither was charged.
	if r := e.get("/next"); r.status != 200 || r.degraded() != "" {
		t.Errorf("next call: got %v, want 200", r)
	}
	e.metricIs(0, "sds_upstream_errors_total", "point", "c", "kind", "transport")
}

// TestBadClientBody checks that a request body shorter than its
// Content-Length, the client's fault, is not an upstream exception.
func TestBadClientBody(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    exceptionThreshold: 1\n")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// /api/orders reads the body, so the upstream call waits for the
	// missing bytes until the proxy sees the client's body end early.
	io.WriteString(conn, "POST /api/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"item\":")
	conn.(*net.TCPConn).CloseWrite()
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		t.Logf("short body: answered %d", resp.StatusCode)
		resp.Body.Close()
	}
	if !eventually(wait, func() bool { return e.point("p").Window.InFlight == 0 }) {
		t.Fatalf("the call of the short body never ended")
	}
	if p := e.point("p"); p.Window.Exceptions != 0 {
		t.Errorf("/status: got %d exceptions, want 0 for a client's short body", p.Window.Exceptions)
	}
	if r := e.get("/api/orders"); r.status != 200 || r.degraded() != "" {
		t.Errorf("next call: got %v, want 200 (exceptionThreshold 1 not reached)", r)
	}
}

// TestForwardedHeaders checks X-Forwarded-* and that the client's Host
// reaches the upstream.
func TestForwardedHeaders(t *testing.T) {
	t.Parallel()
	echo := func(e *env, spoof bool) (got struct {
		Host   string
		Header http.Header
	}) {
		e.t.Helper()
		req, _ := http.NewRequest("GET", e.proxy.url+"/echo-headers", nil)
		req.Host = "shop.example"
		if spoof {
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("X-Forwarded-Host", "evil.example")
		}
		r, err := e.do(req)
		if err != nil || r.status != 200 {
			e.t.Fatalf("/echo-headers: %v %v", r, err)
		}
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			e.t.Fatal(err)
		}
		return got
	}
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "10s", 10, "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
		for _, spoof := range []bool{false, true} {
			got := echo(e, spoof)
			if got.Host != "shop.example" {
				t.Errorf("spoof %v: Host got %q, want the client's shop.example", spoof, got.Host)
			}
			for k, want := range map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "shop.example"} {
				if v := got.Header.Values(k); len(v) != 1 || v[0] != want {
					t.Errorf("spoof %v: %s got %q, want %q", spoof, k, v, want)
				}
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		e := setup(t, "10s", 10, "forwardedHeaders: false\nroutes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 1000\n")
		got := echo(e, true)
		if got.Host != "shop.example" {
			t.Errorf("Host got %q, want shop.example", got.Host)
		}
		for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
			if v := got.Header.Values(k); len(v) != 0 {
				t.Errorf("forwardedHeaders false: %s got %q, want none", k, v)
			}
		}
	})
}

// TestCommands checks validate and version.
func TestCommands(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := command("sds-proxy", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return out.String(), 0
		case errors.As(err, &exit):
			return out.String(), exit.ExitCode()
		}
		t.Fatalf("sds-proxy %q: %v", args, err)
		return "", -1
	}
	dir := t.TempDir()

	t.Run("validate broken", func(t *testing.T) {
		path := filepath.Join(dir, "broken.yaml")
		os.WriteFile(path, []byte(`upstream: http://127.0.0.1:9
window: 10s
bogus: 1
routes:
  - point: nosuch
    match: {}
points:
  a:
    timeoutCountThreshold: 5
`), 0o644)
		out, code := run("validate", "-config", path)
		if code != 1 {
			t.Errorf("exit code: got %d, want 1", code)
		}
		lineRE := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:(\d+):(\d+): \S.*$`)
		lines := map[string]bool{}
		for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			m := lineRE.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("output line %q: want FILE:LINE:COL: message", l)
				continue
			}
			lines[m[1]] = true
		}
		for _, want := range []string{"3", "5", "9"} { // bogus, nosuch, timeoutCountThreshold alone
			if !lines[want] {
				t.Errorf("no problem reported on line %s; got:\n%s", want, out)
			}
		}
	})
	t.Run("validate good", func(t *testing.T) {
		path := filepath.Join(dir, "good.yaml")
		os.WriteFile(path, []byte(configHeader("http://127.0.0.1:9", "10s", 10)+"routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    visitThreshold: 5\n"), 0o644)
		if out, code := run("validate", "-config", path); code != 0 || out != "OK\n" {
			t.Errorf("got exit %d and %q, want 0 and OK", code, out)
		}
	})
	t.Run("validate the example", func(t *testing.T) {
		path, _ := filepath.Abs("../../sds.yaml")
		if _, err := os.Stat(path); err != nil {
			t.Skip("no sds.yaml at the repo root")
		}
		if out, code := run("validate", "-config", path); code != 0 || out != "OK\n" {
			t.Errorf("sds.yaml: got exit %d and %q, want 0 and OK", code, out)
		}
	})
	t.Run("version", func(t *testing.T) {
		if out, code := run("version"); code != 0 || !strings.HasPrefix(out, "sds-proxy ") || !strings.Contains(out, "go1.") {
			t.Errorf("got exit %d and %q, want 0 and the version with the Go version", code, out)
		}
	})
}

// TestDemo runs the newcomer's first command, `sds-proxy demo`, on the
// repository's example sds.yaml (moved to free loopback ports) and follows
// the instructions it prints: orders.read trips on its 21st visit, slow
// trips on its third timeout and enters its delay, and once the demo
// service is fast again a probe ends the delay.
func TestDemo(t *testing.T) {
	// Not parallel: the example config takes fixed ports, found free by
	// freePort, which a parallel test's process could take meanwhile.
	needBinaries(t)
	example, err := os.ReadFile("../../sds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr, serviceAddr, adminAddr := freePort(t), freePort(t), freePort(t)
	config := string(example)
	for key, value := range map[string]string{"listen": proxyAddr, "upstream": "http://" + serviceAddr, "admin": adminAddr} {
		re := regexp.MustCompile(`(?m)^` + key + `: \S+`)
		if !re.MatchString(config) {
			t.Fatalf("the example sds.yaml has no top-level %s", key)
		}
		config = re.ReplaceAllString(config, key+": "+value)
	}
	path := filepath.Join(t.TempDir(), "sds.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	demo := startProcess(t, "sds-proxy", "demo", "-config", path)
	// The instructions end with "Watch it happen": wait for all of them.
	if _, ok := demo.stdout.find(0, wait, demo.exited, func(s string) bool { return strings.Contains(s, "Watch it happen") }); !ok {
		t.Fatalf("the demo did not start:\n%s\n%s", demo.stdout, demo.stderr)
	}
	proxyURL, serviceURL := "http://"+proxyAddr, "http://"+serviceAddr
	if out := demo.stdout.String(); !strings.Contains(out, proxyURL+"/api/orders") || !strings.Contains(out, serviceURL+"/_control") {
		t.Errorf("the printed instructions do not name the proxy and service addresses:\n%s", out)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Sds-Degraded")
	}

	statuses := map[int]int{}
	for range 25 {
		code, _ := get(proxyURL + "/api/orders")
		statuses[code]++
	}
	if statuses[200] != 20 || statuses[429] != 5 {
		t.Errorf("25 GET /api/orders: got %v, want 20×200 and 5×429 (visitThreshold 20)", statuses)
	}

	var got []string
	for range 5 {
		code, degraded := get(proxyURL + "/api/slow")
		got = append(got, fmt.Sprintf("%d %s", code, degraded))
	}
	want := []string{"200 ", "200 ", "200 ", "503 timeout; point=slow", "503 timeout; point=slow; delay"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("5 GET /api/slow:\n got %q\nwant %q", got, want)
	}

	if code, _ := get(serviceURL + "/_control?slowLatency=10ms"); code != 200 {
		t.Fatalf("healing the demo service: got %d, want 200", code)
	}
	recovered := eventually(wait, func() bool {
		code, _ := get(proxyURL + "/api/slow")
		return code == 200
	})
	if !recovered {
		t.Errorf("slow did not recover within %v after the service was healed (retryInterval 2s)", wait)
	}
}

// TestMemoryLimitFromTheContainer: the proxy sets Go's soft memory limit
// to 90% of the container's limit given by the downward API, says so in
// its log, and refuses to start on a limit that is not a byte count.
func TestMemoryLimitFromTheContainer(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	upstream := "http://" + startUpstream(t)
	args := []string{"run", "-upstream", upstream, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}

	cmd := command("sds-proxy", args...)
	cmd.Dir = t.TempDir() // no sds.yaml: a plain proxy
	cmd.Env = append(cmd.Environ(), "GOMEMLIMIT=", "SDS_MEMORY_LIMIT=134217728")
	p, err := start(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	pp := serving(t, p)
	e := pp.waitLog(t, 0, wait, msgIs("memory limit"))
	if e["bytes"] != float64(134217728/100*90) || e["from"] != "SDS_MEMORY_LIMIT" {
		t.Errorf("memory limit line: got %v, want 90%% of 134217728 from SDS_MEMORY_LIMIT", e)
	}

	cmd = command("sds-proxy", args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), "GOMEMLIMIT=", "SDS_MEMORY_LIMIT=128Mi")
	bad, err := start(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-bad.exited:
	case <-time.After(wait):
		t.Fatalf("SDS_MEMORY_LIMIT=128Mi: the proxy did not exit within %v", wait)
	}
	if bad.err == nil || !strings.Contains(bad.stderr.String(), `SDS_MEMORY_LIMIT="128Mi": want the container's memory limit in bytes`) {
		t.Errorf("SDS_MEMORY_LIMIT=128Mi: got exit %v and %q, want exit 1 and the reason", bad.err, bad.stderr)
	}
}

// slowCallInFlight starts a call that the upstream answers after 3s and
// returns once the upstream holds it; its reply arrives on the channel.
// 3s is far longer than SIGTERM, SIGHUP and /readyz take to be handled,
// and within the 5s drainTimeout of the tests' configs.
func (e *env) slowCallInFlight() <-chan reply {
	e.t.Helper()
	slow := make(chan reply, 1)
	go func() {
		req, _ := http.NewRequest("GET", e.proxy.url+"/slow?sleep=3s", nil)
		r, err := e.do(req)
		if err != nil {
			e.t.Errorf("slow call: %v", err)
		}
		slow <- r
	}()
	if !eventually(wait, func() bool { _, n := e.upstreamStats(); return n == 1 }) {
		e.t.Fatalf("the slow call never reached the upstream")
	}
	return slow
}
