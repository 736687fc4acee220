package connlimit_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// Tests with a real http.Server on 127.0.0.1 and raw client sockets.

// serve runs an http.Server with h behind lim on 127.0.0.1 and returns its
// address; t.Cleanup closes it.
func serve(t *testing.T, lim *connlimit.Limiter, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnState: lim.ConnState, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lim.Listener(ln))
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// client is a raw keep-alive HTTP/1.1 connection.
type client struct {
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, br: bufio.NewReader(c)}
}

// send writes a GET of path.
func (c *client) send(path string) error {
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path)
	return err
}

// get sends a GET and reads the whole answer, within 5s.
func (c *client) get(path string) (string, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if err := c.send(path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// mustGet is get that fails the test unless the answer is "ok".
func (c *client) mustGet(t *testing.T) {
	t.Helper()
	if body, err := c.get("/"); err != nil || body != "ok" {
		t.Fatalf("GET: got %q, %v; want ok", body, err)
	}
}

// closedByServer reports whether the server closed c, waiting up to 5s for
// the close (io.EOF or a reset); a timeout means it is still open.
func (c *client) closedByServer() bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// noSoftIdle is a SoftIdleTimeout no test reaches: over the soft limit
// (3/4 of Max) the default, 5s, would close idle connections of a test
// slowed down by a loaded machine.
const noSoftIdle = time.Hour

// dialIdle opens n keep-alive connections one after the other, each served
// once and idle before the next is dialled, so that they became idle in
// dial order.
func dialIdle(t *testing.T, lim *connlimit.Limiter, addr string, n int) []*client {
	t.Helper()
	var cs []*client
	for i := range n {
		c := dial(t, addr)
		c.mustGet(t)
		waitStats(t, lim, fmt.Sprintf("%d idle", i+1), func(s connlimit.Stats) bool { return s.Idle == i+1 })
		cs = append(cs, c)
	}
	return cs
}

// waitStats polls lim until cond holds, for up to 5s.
func waitStats(t *testing.T, lim *connlimit.Limiter, what string, cond func(connlimit.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond(lim.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: got %+v", what, lim.Stats())
		}
		<-tick.C
	}
}

func TestServerEvictsOldestIdle(t *testing.T) {
	lim := connlimit.New(connlimit.Options{Max: 3, SoftIdleTimeout: noSoftIdle})
	addr := serve(t, lim, ok)
	cs := dialIdle(t, lim, addr, 3)
	fresh := dial(t, addr)
	fresh.mustGet(t)
	if !cs[0].closedByServer() {
		t.Error("the oldest idle connection is still open, want it closed")
	}
	for i, c := range cs[1:] {
		if _, err := c.get("/"); err != nil {
			t.Errorf("connection %d: got %v, want it still served", i+1, err)
		}
	}
	if st := lim.Stats(); st.Open() != 3 || st.Evicted != 1 {
		t.Errorf("got %+v, want 3 open and 1 evicted", st)
	}
}

// blocking answers only once release is closed, and counts the requests
// that reached it.
type blocking struct {
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	<-b.release
	io.WriteString(w, "ok")
}

func TestServerRefusesWhenAllActive(t *testing.T) {
	lim := connlimit.New(connlimit.Options{Max: 2, SoftIdleTimeout: noSoftIdle})
	h := &blocking{release: make(chan struct{})}
	addr := serve(t, lim, h)
	var busy []*client
	for range 2 {
		c := dial(t, addr)
		if err := c.send("/"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
	}
	waitStats(t, lim, "2 active", func(s connlimit.Stats) bool { return s.Active == 2 })
	refused := dial(t, addr)
	refused.send("/") // may fail: the server may have closed it already
	if !refused.closedByServer() {
		t.Fatal("a connection over the limit with every one active is still open, want it refused")
	}
	if st := lim.Stats(); st.Refused != 1 || st.Open() != 2 {
		t.Errorf("got %+v, want 1 refused, 2 open", st)
	}
	close(h.release)
	for _, c := range busy {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatalf("busy connection: %v", err)
		}
		resp.Body.Close()
	}
	waitStats(t, lim, "2 idle", func(s connlimit.Stats) bool { return s.Idle == 2 })
	dial(t, addr).mustGet(t)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n != 3 {
		t.Errorf("handler saw %d requests, want 3 (the refused one never reached it)", h.n)
	}
}

func TestServerHijackedCountsUntilClosed(t *testing.T) {
	lim := connlimit.New(connlimit.Options{Max: 1, SoftIdleTimeout: noSoftIdle})
	hijacked := make(chan net.Conn, 1)
	addr := serve(t, lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		hijacked <- c
	}))
	ws := dial(t, addr)
	ws.send("/")
	hc := <-hijacked
	waitStats(t, lim, "1 hijacked", func(s connlimit.Stats) bool { return s.Hijacked == 1 })
	other := dial(t, addr)
	if !other.closedByServer() {
		t.Fatal("a connection over the limit held by a hijacked one is open, want it refused")
	}
	hc.Close()
	if st := lim.Stats(); st.Open() != 0 || st.Refused != 1 {
		t.Errorf("after the handler closed the hijacked connection: got %+v, want 0 open, 1 refused", st)
	}
}

func TestServerSoftIdle(t *testing.T) {
	const softIdle = 20 * time.Millisecond
	lim := connlimit.New(connlimit.Options{Max: 4, SoftIdleTimeout: softIdle})
	addr := serve(t, lim, ok)
	cs := dialIdle(t, lim, addr, 3)
	fourth := dial(t, addr)
	fourth.mustGet(t)
	cs = append(cs, fourth)
	// 4 open is over the soft limit of 3: the oldest idle one goes after
	// softIdle, and the other three stay under the server's IdleTimeout.
	waitStats(t, lim, "one shed", func(s connlimit.Stats) bool { return s.SoftClosed == 1 })
	if !cs[0].closedByServer() {
		t.Error("the oldest idle connection is open, want it closed")
	}
	for i, c := range cs[1:] {
		if _, err := c.get("/"); err != nil {
			t.Errorf("connection %d: got %v, want it served", i+1, err)
		}
	}
	if st := lim.Stats(); st.Open() != 3 || st.SoftClosed != 1 {
		t.Errorf("got %+v, want 3 open, 1 soft-closed", st)
	}
}

// TestServerTLSAndHTTP2: the Limiter under tls.NewListener; an HTTP/2
// connection counts once, active while any stream is.
func TestServerTLSAndHTTP2(t *testing.T) {
	lim := connlimit.New(connlimit.Options{Max: 1, SoftIdleTimeout: noSoftIdle})
	h := &blocking{release: make(chan struct{})}
	var release sync.Once
	unblock := func() { release.Do(func() { close(h.release) }) }
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			h.ServeHTTP(w, r)
			return
		}
		ok.ServeHTTP(w, r)
	}))
	srv.Listener = lim.Listener(srv.Listener)
	srv.Config.ConnState = lim.ConnState
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer unblock() // before Close, which waits for the handlers
	cl := srv.Client()
	cl.Timeout = 10 * time.Second

	get := func(cl *http.Client, path string) {
		resp, err := cl.Get(srv.URL + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Errorf("got %s, want HTTP/2", resp.Proto)
		}
	}
	get(cl, "/") // one connection, then three streams on it
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { get(cl, "/block") })
	}
	waitStats(t, lim, "3 streams on 1 active connection", func(s connlimit.Stats) bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.n == 3 && s.Active == 1 && s.Open() == 1
	})
	unblock()
	wg.Wait()
	waitStats(t, lim, "1 idle connection", func(s connlimit.Stats) bool { return s.Idle == 1 && s.Open() == 1 })

	// A second client's connection evicts the idle HTTP/2 one.
	other := &http.Client{Transport: cl.Transport.(*http.Transport).Clone(), Timeout: 10 * time.Second}
	defer other.CloseIdleConnections()
	get(other, "/")
	if st := lim.Stats(); st.Evicted != 1 || st.Open() != 1 {
		t.Errorf("got %+v, want 1 evicted, 1 open", st)
	}
}

// TestServerH2C: cleartext HTTP/2, which net/http reports through a
// stand-in *tls.Conn, counts once too.
func TestServerH2C(t *testing.T) {
	lim := connlimit.New(connlimit.Options{Max: 4, SoftIdleTimeout: noSoftIdle})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: ok, ConnState: lim.ConnState, Protocols: &protocols}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lim.Listener(ln))
	}()
	defer func() {
		srv.Close()
		<-done
	}()
	var clientProtocols http.Protocols
	clientProtocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &clientProtocols}
	defer tr.CloseIdleConnections()
	for range 3 {
		resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("got %s, want HTTP/2", resp.Proto)
		}
	}
	waitStats(t, lim, "1 idle HTTP/2 connection", func(s connlimit.Stats) bool { return s.Idle == 1 && s.Open() == 1 })
	tr.CloseIdleConnections()
	waitStats(t, lim, "none open", func(s connlimit.Stats) bool { return s.Open() == 0 })
}
