//go:build linux

package main_test

// End-to-end tests of maxConnections: the real sds-proxy in front of the
// real sds-upstream, attacked with raw sockets. Linux only: they read the
// proxy's memory in /proc and peek at sockets without blocking.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/upstream"
	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// connsConfig is a config body with maxConnections set and one point that
// never trips.
func connsConfig(max int) string {
	return fmt.Sprintf(`maxConnections: %d
routes:
  - {point: all, match: {}}
points:
  all: {visitThreshold: 1000000000}
`, max)
}

// raiseNoFile makes sure the test process may hold n more sockets: Go
// raises the soft RLIMIT_NOFILE to the hard one at start; the test is
// skipped, with the reason, if the hard limit is too low.
func raiseNoFile(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below the %d sockets this test opens", lim.Max, n)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot raise RLIMIT_NOFILE to %d: %v", n, err)
	}
}

// rssKiB reads a process's resident memory (VmRSS) from /proc, in KiB.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// rawConn is a client connection driven by hand.
type rawConn struct {
	*net.TCPConn
	br *bufio.Reader
}

// dialRaw connects to the proxy port at addr (host:port).
func dialRaw(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &rawConn{TCPConn: c.(*net.TCPConn), br: bufio.NewReader(c)}, nil
}

// roundTrip sends GET path and reads the whole answer, within 5s.
func (c *rawConn) roundTrip(path string) (int, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// closedByPeer reports, without waiting, whether the proxy closed c: a
// non-blocking peek sees the end of the stream (or a reset) at once, and
// EAGAIN while the connection is open.
func (c *rawConn) closedByPeer(t *testing.T) bool {
	t.Helper()
	if c.br.Buffered() > 0 {
		t.Fatalf("unexpected bytes from the proxy on an idle connection")
	}
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var rerr error
	buf := make([]byte, 1)
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return true // closed on this side already
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN):
		return false
	case rerr != nil: // ECONNRESET
		return true
	default:
		return n == 0
	}
}

// connectionsOpen sums sds_connections over its states, from the admin
// port; it is safe to call from any goroutine.
func connectionsOpen(admin string) (float64, error) {
	ms, err := scrape(admin)
	if err != nil {
		return 0, err
	}
	sum, ok := ms.sum("sds_connections")
	if !ok {
		return 0, errors.New("no sds_connections series")
	}
	return sum, nil
}

// watchConnections samples the proxy's open connections until stop is
// closed and returns the largest count seen and the first error.
func watchConnections(admin string, stop <-chan struct{}) (peak func() (float64, error)) {
	var (
		mu      sync.Mutex
		highest float64
		first   error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			n, err := connectionsOpen(admin)
			mu.Lock()
			highest = max(highest, n)
			if first == nil {
				first = err
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (float64, error) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return highest, first
	}
}

// TestIdleConnectionFlood: 5,000 keep-alive connections each send one
// request, read the answer and stay idle, against maxConnections 1000. Each
// new one gets in by closing the oldest idle one; the proxy never holds
// more than 1000; a fresh client is served; the proxy's memory stays that
// of 1000 idle connections. A lower maxConnections applies on a reload.
func TestIdleConnectionFlood(t *testing.T) {
	// Not parallel: it raises this process's RLIMIT_NOFILE, opens 5,000
	// sockets and measures the proxy's RSS, which other tests' load would
	// blur.
	const (
		max   = 1000
		flood = 5000
	)
	raiseNoFile(t, flood+512)
	e := setup(t, "10s", 10, connsConfig(max))
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	pid := e.proxy.cmd.Process.Pid
	if r := e.get("/"); r.status != 200 {
		t.Fatalf("warm-up: got %v", r)
	}
	e.client.CloseIdleConnections()
	rss0 := rssKiB(t, pid)

	stop := make(chan struct{})
	peak := watchConnections(e.proxy.admin, stop)
	start := time.Now()
	// rssMax: with max idle connections, none closed yet.
	conns, rssMax := floodIdle(t, addr, flood, stop, pid, max)
	took := time.Since(start)
	close(stop)

	// Count the connections still open between two reads of the proxy's
	// closes: the soft idle timeout may close more meanwhile.
	shed := func() float64 {
		evicted, _ := e.metric("sds_connections_shed_total", "reason", "evicted")
		soft, _ := e.metric("sds_connections_shed_total", "reason", "soft_idle")
		return evicted + soft
	}
	shedBefore := shed()
	alive := 0
	for _, c := range conns {
		if !c.closedByPeer(t) {
			alive++
		}
	}
	if alive > max || alive == 0 {
		t.Errorf("connections still open: got %d, want 1 to %d", alive, max)
	}
	if !conns[0].closedByPeer(t) || conns[flood-1].closedByPeer(t) {
		t.Errorf("the oldest connection should be closed and the newest open")
	}
	rssN := rssKiB(t, pid)
	t.Logf("proxy RSS: %d KiB with no connection, %d KiB with %d idle (%.1f KiB each)", rss0, rssMax, max, float64(rssMax-rss0)/max)
	t.Logf("%d connections in %v, %d still open; proxy RSS then %d KiB (%.1f KiB per open one, the closed ones' garbage included)",
		flood, took.Round(time.Millisecond), alive, rssN, float64(rssN-rss0)/float64(alive))
	if highest, err := peak(); err != nil || highest > max {
		t.Errorf("sds_connections peak: got %v (%v), want at most %d", highest, err, max)
	}
	if closed, shedAfter := float64(flood-alive), shed(); closed < shedBefore || closed > shedAfter {
		t.Errorf("connections closed: got %v, want it between the proxy's counts of evicted and soft_idle before (%v) and after (%v)", closed, shedBefore, shedAfter)
	}
	if rssN-rss0 > max*64 {
		t.Errorf("proxy RSS grew by %d KiB, more than %d idle connections can take", rssN-rss0, max)
	}

	// A fresh client is served at once.
	if r := e.get("/"); r.status != 200 {
		t.Errorf("fresh client: got %v, want 200", r)
	}

	// Lowering the limit on a reload closes the idle connections over it.
	e.write(e.config, configHeader(e.upstream, "10s", 10)+connsConfig(max/2))
	if !eventually(wait, func() bool {
		n, _ := e.metric("sds_connections_max")
		open, err := connectionsOpen(e.proxy.admin)
		return n == max/2 && err == nil && open <= max/2
	}) {
		n, _ := e.metric("sds_connections_max")
		open, err := connectionsOpen(e.proxy.admin)
		t.Errorf("after the reload: sds_connections_max %v, open %v (%v); want %d and at most that", n, open, err, max/2)
	}
}

// floodIdle opens n connections to addr one after another, each sending
// one request, answered 200, and left idle. It returns them, and the RSS
// of process pid just before the connection numbered rssAt (from 0). A
// failure closes stop (a watcher's) and fails the test. The connections
// are closed when the test ends.
func floodIdle(t *testing.T, addr string, n int, stop chan struct{}, pid, rssAt int) (conns []*rawConn, rss int) {
	t.Helper()
	conns = make([]*rawConn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		if i == rssAt {
			rss = rssKiB(t, pid)
		}
		c, err := dialRaw(addr)
		if err != nil {
			close(stop)
			t.Fatalf("connection %d: dial: %v", i, err)
		}
		conns = append(conns, c)
		if status, err := c.roundTrip("/"); err != nil || status != 200 {
			close(stop)
			t.Fatalf("connection %d: got %d, %v; want 200 (a new connection gets in by closing an idle one)", i, status, err)
		}
	}
	return conns, rss
}

// TestBusyConnectionsRefuse: with every connection serving a request, a
// new connection waits for a place (connlimit.DefaultAcceptWait, 2 s) and
// is refused when none shows, each in turn; they are served again once
// the busy ones end.
func TestBusyConnectionsRefuse(t *testing.T) {
	t.Parallel()
	const max = 20
	e := setup(t, "10s", 10, connsConfig(max))
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	var busy []*rawConn
	defer func() {
		for _, c := range busy {
			c.Close()
		}
	}()
	for i := range max {
		c, err := dialRaw(addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		busy = append(busy, c)
		if _, err := fmt.Fprint(c, "GET /?hang=1 HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	if !eventually(wait, func() bool { n, _ := e.metric("sds_connections", "state", "active"); return n == max }) {
		n, _ := e.metric("sds_connections", "state", "active")
		t.Fatalf("active connections: got %v, want %d", n, max)
	}

	for i := range 3 {
		c, err := dialRaw(addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.roundTrip("/")
		c.Close()
		var ne net.Error
		switch {
		case err == nil:
			t.Errorf("attempt %d: served, want refused", i)
		case errors.As(err, &ne) && ne.Timeout():
			t.Errorf("attempt %d: no answer within 5s, want the connection closed within the accept wait", i)
		case time.Since(start) < connlimit.DefaultAcceptWait/2:
			// The proxy's wait starts at its accept, which may come a
			// little before the client's connect returns.
			t.Errorf("attempt %d: refused after %v, want it to wait %v for a place first", i, time.Since(start), connlimit.DefaultAcceptWait)
		default:
			t.Logf("attempt %d: refused after %v: %v", i, time.Since(start).Round(time.Microsecond), err)
		}
	}
	e.metricIs(3, "sds_connections_shed_total", "reason", "refused")
	e.metricIs(3, "sds_connections_queued_total")
	e.metricIs(0, "sds_connections_shed_total", "reason", "evicted")
	e.metricIs(max, "sds_connections", "state", "active")

	for _, c := range busy {
		c.Close()
	}
	busy = nil
	if !eventually(wait, func() bool { n, err := connectionsOpen(e.proxy.admin); return err == nil && n == 0 }) {
		t.Fatal("the busy connections did not close")
	}
	if r := e.get("/"); r.status != 200 {
		t.Errorf("after the busy ones ended: got %v, want 200", r)
	}
}

// TestWebSocketsCountUntilClosed: an upgraded connection counts as
// hijacked until it closes, and is never closed to admit another.
func TestWebSocketsCountUntilClosed(t *testing.T) {
	t.Parallel()
	const max = 2
	e := setup(t, "10s", 10, connsConfig(max))
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	var sockets []*rawConn
	defer func() {
		for _, c := range sockets {
			c.Close()
		}
	}()
	for i := range max {
		c, err := dialRaw(addr)
		if err != nil {
			t.Fatal(err)
		}
		sockets = append(sockets, c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br, err := upstream.Handshake(c, "test", "/ws")
		if err != nil {
			t.Fatalf("WebSocket %d: %v; want 101", i, err)
		}
		c.br = br
		c.SetReadDeadline(time.Time{})
	}
	if !eventually(wait, func() bool { n, _ := e.metric("sds_connections", "state", "hijacked"); return n == max }) {
		n, _ := e.metric("sds_connections", "state", "hijacked")
		t.Fatalf("hijacked connections: got %v, want %d", n, max)
	}
	c, err := dialRaw(addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.roundTrip("/")
	c.Close()
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a connection over the limit of WebSockets: got %v, want it refused at once", err)
	}
	e.metricIs(1, "sds_connections_shed_total", "reason", "refused")
	for _, ws := range sockets {
		if ws.closedByPeer(t) {
			t.Error("a WebSocket was closed, want every one kept")
		}
	}

	if err := upstream.WriteClientFrame(sockets[0], 0x8, []byte{0x03, 0xe8}); err != nil {
		t.Fatal(err)
	}
	if op, _, err := upstream.ReadServerFrame(sockets[0].br); err != nil || op != 0x8 {
		t.Fatalf("close: got opcode %#x (%v), want 0x8", op, err)
	}
	sockets[0].Close()
	if !eventually(wait, func() bool { n, err := connectionsOpen(e.proxy.admin); return err == nil && n == max-1 }) {
		n, err := connectionsOpen(e.proxy.admin)
		t.Fatalf("after one WebSocket closed: got %v open (%v), want %d", n, err, max-1)
	}
	if r := e.get("/"); r.status != 200 {
		t.Errorf("with a place free: got %v, want 200", r)
	}
}

// TestAdminConnectionFlood: 1,000 connections to the admin port that never
// send a byte (a port scanner, a broken client, an attacker) cost the
// proxy a goroutine for at most adminMaxConnections (256) of them, not one
// each: the others wait in the kernel's accept queue, and a newcomer gets
// in by closing one silent for adminFirstRequestGrace. Meanwhile /healthz
// answers on a connection of its own, /metrics is read, and the proxy port
// serves.
func TestAdminConnectionFlood(t *testing.T) {
	t.Parallel()
	const (
		flood = 1000
		limit = 256 // adminMaxConnections
		// spare is the proxy's own goroutines beside the admin port's
		// connections: servers, watcher, ticker, the scrape's own.
		spare = 64
	)
	raiseNoFile(t, flood+512)
	e := setup(t, "10s", 10, connsConfig(100))
	admin := strings.TrimPrefix(e.proxy.admin, "http://")
	goroutines := func() float64 {
		t.Helper()
		var n float64
		var err error
		if !eventually(wait, func() bool {
			var ms metrics
			if ms, err = scrape(e.proxy.admin); err != nil {
				return false
			}
			var ok bool
			n, ok = ms.value("go_goroutines")
			return ok
		}) {
			t.Fatalf("go_goroutines on /metrics: %v", err)
		}
		return n
	}
	before := goroutines()

	silent := make([]*rawConn, 0, flood)
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	start := time.Now()
	for i := range flood {
		c, err := dialRaw(admin)
		if err != nil {
			t.Fatalf("silent connection %d: %v", i, err)
		}
		silent = append(silent, c)
	}
	dialled := time.Since(start)
	var status int
	var err error
	if !eventually(wait, func() bool {
		c, derr := dialRaw(admin)
		if derr != nil {
			err = derr
			return false
		}
		defer c.Close()
		status, err = c.roundTrip("/healthz")
		return err == nil && status == 200
	}) {
		t.Fatalf("/healthz with %d silent connections held: got %d, %v; want 200 within %v", flood, status, err, wait)
	}
	answered := time.Since(start)
	during := goroutines()
	t.Logf("%d silent connections dialled in %v; /healthz answered %v after the first; go_goroutines %v before, %v with them held",
		flood, dialled.Round(time.Millisecond), answered.Round(time.Millisecond), before, during)
	// A liveness probe (every 10 s, 1 s to answer) must not wait behind
	// the flood: at the limit, each admission closes a connection silent
	// for adminFirstRequestGrace (100 ms).
	if answered > 5*time.Second {
		t.Errorf("/healthz answered %v after the flood began, want within 5s", answered)
	}
	if during > before+limit+spare {
		t.Errorf("go_goroutines with %d silent connections held: got %v, want at most %v (%v before, %d admitted at most, %d spare)",
			flood, during, before+limit+spare, before, limit, spare)
	}
	if r := e.get("/"); r.status != 200 {
		t.Errorf("the proxy port during the admin port's flood: got %v, want 200", r)
	}
}
