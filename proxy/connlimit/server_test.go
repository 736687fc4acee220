package connlimit_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// Tests with a real http.Server and raw client connections, in a synctest
// bubble over an in-memory network: once synctest.Wait returns, the server
// has acted on what the clients sent (its ConnState calls included), so a
// test reads the Limiter's counts at once instead of polling for them, and
// the soft idle timeout passes on the bubble's clock.

// memListener is an in-memory net.Listener: dial returns the client end of
// a net.Pipe whose server end Accept hands out. A goroutine blocked on
// either end is durably blocked, as synctest.Wait needs.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial connects to the listener; it returns once Accept has taken the
// server end.
func (l *memListener) dial(context.Context, string, string) (net.Conn, error) {
	s, c := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.done:
		s.Close()
		c.Close()
		return nil, net.ErrClosed
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// serve runs srv (with ConnState set to lim's) behind lim on an in-memory
// listener, with tlsConfig when it is not nil, and returns the listener;
// t.Cleanup closes the server.
func serve(t *testing.T, lim *connlimit.Limiter, srv *http.Server, tlsConfig *tls.Config) *memListener {
	t.Helper()
	ml := newMemListener()
	srv.ConnState = lim.ConnState
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = 10 * time.Second
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if tlsConfig == nil {
			srv.Serve(lim.Listener(ml))
			return
		}
		srv.TLSConfig = tlsConfig
		srv.ServeTLS(lim.Listener(ml), "", "")
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ml
}

// serveHandler is serve with a plain HTTP/1 server of h.
func serveHandler(t *testing.T, lim *connlimit.Limiter, h http.Handler) *memListener {
	t.Helper()
	return serve(t, lim, &http.Server{Handler: h}, nil)
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// client is a raw keep-alive HTTP/1.1 connection.
type client struct {
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, ml *memListener) *client {
	t.Helper()
	c, err := ml.dial(t.Context(), "", "")
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

// closedByServer reports whether the server closed c, waiting up to 5s of
// the bubble's clock for the close; a timeout means it is still open.
func (c *client) closedByServer() bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// noSoftIdle is a SoftIdleTimeout no test reaches: closedByServer lets 5s
// pass, the default, when a connection stays open.
const noSoftIdle = time.Hour

// dialIdle opens n keep-alive connections one after the other, each served
// once and idle before the next is dialled, so that they became idle in
// dial order.
func dialIdle(t *testing.T, lim *connlimit.Limiter, ml *memListener, n int) []*client {
	t.Helper()
	var cs []*client
	for i := range n {
		c := dial(t, ml)
		c.mustGet(t)
		synctest.Wait()
		if st := lim.Stats(); st.Idle != i+1 {
			t.Fatalf("after %d served: got %+v, want %d idle", i+1, st, i+1)
		}
		cs = append(cs, c)
	}
	return cs
}

func TestServerEvictsOldestIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := connlimit.New(connlimit.Options{Max: 3, SoftIdleTimeout: noSoftIdle})
		ml := serveHandler(t, lim, ok)
		cs := dialIdle(t, lim, ml, 3)
		fresh := dial(t, ml)
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
	})
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

func (b *blocking) requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func TestServerRefusesWhenAllActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := connlimit.New(connlimit.Options{Max: 2, SoftIdleTimeout: noSoftIdle})
		h := &blocking{release: make(chan struct{})}
		ml := serveHandler(t, lim, h)
		var busy []*client
		for range 2 {
			c := dial(t, ml)
			if err := c.send("/"); err != nil {
				t.Fatal(err)
			}
			busy = append(busy, c)
		}
		synctest.Wait()
		if st := lim.Stats(); st.Active != 2 {
			t.Fatalf("two requests in the handler: got %+v, want 2 active", st)
		}
		refused := dial(t, ml)
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
		synctest.Wait()
		if st := lim.Stats(); st.Idle != 2 {
			t.Fatalf("both answered: got %+v, want 2 idle", st)
		}
		time.Sleep(connlimit.DefaultIdleGrace) // the bubble's clock: both are idle, not in use
		dial(t, ml).mustGet(t)
		if n := h.requests(); n != 3 {
			t.Errorf("handler saw %d requests, want 3 (the refused one never reached it)", n)
		}
	})
}

func TestServerHijackedCountsUntilClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := connlimit.New(connlimit.Options{Max: 1, SoftIdleTimeout: noSoftIdle})
		hijacked := make(chan net.Conn, 1)
		ml := serveHandler(t, lim, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			hijacked <- c
		}))
		ws := dial(t, ml)
		ws.send("/")
		hc := <-hijacked
		synctest.Wait()
		if st := lim.Stats(); st.Hijacked != 1 {
			t.Fatalf("after the hijack: got %+v, want 1 hijacked", st)
		}
		other := dial(t, ml)
		if !other.closedByServer() {
			t.Fatal("a connection over the limit held by a hijacked one is open, want it refused")
		}
		hc.Close()
		if st := lim.Stats(); st.Open() != 0 || st.Refused != 1 {
			t.Errorf("after the handler closed the hijacked connection: got %+v, want 0 open, 1 refused", st)
		}
	})
}

// TestServerSoftIdle: 4 open is over the soft limit of 3: the oldest idle
// connection goes once it has waited SoftIdleTimeout, not a nanosecond
// before, and the other three stay.
func TestServerSoftIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const softIdle = 5 * time.Second
		lim := connlimit.New(connlimit.Options{Max: 4, SoftIdleTimeout: softIdle})
		ml := serveHandler(t, lim, ok)
		// The bubble's clock stands still while the four are served: they
		// are all idle from start on.
		start := time.Now()
		cs := dialIdle(t, lim, ml, 4)
		time.Sleep(start.Add(softIdle - time.Nanosecond).Sub(time.Now()))
		synctest.Wait()
		if st := lim.Stats(); st.SoftClosed != 0 || st.Open() != 4 {
			t.Fatalf("a nanosecond before the timeout: got %+v, want 4 open, none soft-closed", st)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st := lim.Stats(); st.SoftClosed != 1 || st.Open() != 3 {
			t.Fatalf("at the timeout: got %+v, want 3 open, 1 soft-closed", st)
		}
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
	})
}

// testTLS returns a server config with a self-signed certificate for
// "test" that offers HTTP/2, and a client config that trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, DNSNames: []string{"test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"h2", "http/1.1"}}
	return server, &tls.Config{RootCAs: roots, ServerName: "test", NextProtos: []string{"h2"}}
}

// TestServerTLSAndHTTP2: the Limiter under tls.NewListener (ServeTLS); an
// HTTP/2 connection counts once, active while any stream is.
func TestServerTLSAndHTTP2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := connlimit.New(connlimit.Options{Max: 1, SoftIdleTimeout: noSoftIdle})
		h := &blocking{release: make(chan struct{})}
		serverTLS, clientTLS := testTLS(t)
		ml := serve(t, lim, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/block" {
				h.ServeHTTP(w, r)
				return
			}
			ok.ServeHTTP(w, r)
		})}, serverTLS)
		newClient := func() *http.Client {
			tr := &http.Transport{ForceAttemptHTTP2: true, DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := ml.dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(c, clientTLS)
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}}
			t.Cleanup(tr.CloseIdleConnections)
			return &http.Client{Transport: tr, Timeout: 10 * time.Second}
		}
		get := func(cl *http.Client, path string) {
			resp, err := cl.Get("https://test" + path)
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
		cl := newClient()
		get(cl, "/") // one connection, then three streams on it
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { get(cl, "/block") })
		}
		synctest.Wait()
		if st, n := lim.Stats(), h.requests(); n != 3 || st.Active != 1 || st.Open() != 1 {
			t.Errorf("3 streams in the handler: got %d requests and %+v, want 3 on 1 active connection", n, st)
		}
		close(h.release)
		wg.Wait()
		synctest.Wait()
		if st := lim.Stats(); st.Idle != 1 || st.Open() != 1 {
			t.Errorf("streams done: got %+v, want 1 idle connection", st)
		}

		// A second client's connection evicts the idle HTTP/2 one.
		get(newClient(), "/")
		if st := lim.Stats(); st.Evicted != 1 || st.Open() != 1 {
			t.Errorf("got %+v, want 1 evicted, 1 open", st)
		}
	})
}

// TestServerH2C: cleartext HTTP/2, which net/http reports through a
// stand-in *tls.Conn, counts once too.
func TestServerH2C(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := connlimit.New(connlimit.Options{Max: 4, SoftIdleTimeout: noSoftIdle})
		var protocols http.Protocols
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(true)
		ml := serve(t, lim, &http.Server{Handler: ok, Protocols: &protocols}, nil)
		var clientProtocols http.Protocols
		clientProtocols.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &clientProtocols, DialContext: ml.dial}
		defer tr.CloseIdleConnections()
		for range 3 {
			resp, err := (&http.Client{Transport: tr}).Get("http://test/")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("got %s, want HTTP/2", resp.Proto)
			}
		}
		synctest.Wait()
		if st := lim.Stats(); st.Idle != 1 || st.Open() != 1 {
			t.Errorf("after 3 requests: got %+v, want 1 idle HTTP/2 connection", st)
		}
		tr.CloseIdleConnections()
		synctest.Wait()
		if st := lim.Stats(); st.Open() != 0 {
			t.Errorf("after the client closed it: got %+v, want none open", st)
		}
	})
}
