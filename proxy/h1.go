package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// h1Transport speaks HTTP/1.1 to plain http:// upstreams for requests of
// a safe method (GET, HEAD, OPTIONS, TRACE) without a body, on the calling
// goroutine: it writes the request and reads the response on a pooled
// connection itself, where http.Transport hands each request to a writing
// and a reading goroutine of the connection. That saved about 18% of the
// proxy's CPU per request under the peer harness (docs/benchmarks.md).
// Every other request (another method, a body, an upgrade, https, Expect)
// goes to next, whose connections are its own.
//
// A connection goes back to the pool once its response body has been read
// to the end (or when there is none), unless either side asked to close
// it; a body closed early, a failed read or a canceled request closes it.
// A request that fails on a reused connection (the upstream closed it
// while it was idle) is sent once more on a new connection: its method is
// safe to repeat. Idle connections older than next's IdleConnTimeout are
// closed rather than used, and by Handler.Tick.
type h1Transport struct {
	next        http.RoundTripper
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*h1Conn // by host:port, most recently used last
}

// h1Conn is a pooled upstream connection with its buffers. Its reads go
// through limit, which bounds a response's head (maxResponseHeaderBytes)
// and lets its body through.
type h1Conn struct {
	net.Conn
	limit  io.LimitedReader
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
}

// maxResponseHeaderBytes bounds what an upstream may send before its
// answer's body (1xx answers included), as http.Transport's default does:
// a broken upstream that sends headers without end fails the request
// instead of filling the memory.
const maxResponseHeaderBytes = 10 << 20

// unlimited lets a body through h1Conn.limit.
const unlimited = math.MaxInt64

func newH1Transport(next *http.Transport) *h1Transport {
	return &h1Transport{
		next:        next,
		dial:        next.DialContext,
		maxIdle:     next.MaxIdleConnsPerHost,
		idleTimeout: next.IdleConnTimeout,
		idle:        make(map[string][]*h1Conn),
	}
}

// RoundTrip implements http.RoundTripper.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.next.RoundTrip(req)
	}
	addr := hostPort(req)
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(req.Context(), addr)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(c, addr, req)
		if err == nil {
			return resp, nil
		}
		c.Close()
		if !reused || attempt > 0 || req.Context().Err() != nil || !staleConn(err) {
			return nil, err
		}
	}
}

// handles reports whether req is one h1Transport sends itself.
func (t *h1Transport) handles(req *http.Request) bool {
	return req.URL.Scheme == "http" && repeatable(req) && (req.Body == nil || req.Body == http.NoBody) && req.ContentLength <= 0 &&
		req.Header.Get("Upgrade") == "" && req.Header.Get("Expect") == "" && req.Header.Get("Transfer-Encoding") == ""
}

// hostPort is the address to dial for req.
func hostPort(req *http.Request) string {
	if req.URL.Port() != "" {
		return req.URL.Host
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// repeatable reports whether req may be sent twice: a safe method.
func repeatable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// staleConn reports whether err is how a connection the upstream closed
// while it was idle fails: nothing came back, or a reset or broken pipe.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// get returns an idle connection to addr, or a new one.
func (t *h1Transport) get(ctx context.Context, addr string) (c *h1Conn, reused bool, err error) {
	now := time.Now()
	t.mu.Lock()
	for list := t.idle[addr]; len(list) > 0; list = t.idle[addr] {
		c = list[len(list)-1]
		t.idle[addr] = list[:len(list)-1]
		if now.Sub(c.idleAt) < t.idleTimeout {
			t.mu.Unlock()
			return c, true, nil
		}
		c.Close()
	}
	t.mu.Unlock()
	conn, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c = &h1Conn{Conn: conn, limit: io.LimitedReader{R: conn, N: unlimited}, bw: bufio.NewWriter(conn)}
	c.br = bufio.NewReader(&c.limit)
	return c, false, nil
}

// put returns c to the pool, or closes it when the pool is full.
func (t *h1Transport) put(addr string, c *h1Conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if list := t.idle[addr]; len(list) < t.maxIdle {
		t.idle[addr] = append(list, c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	c.Close()
}

// closeIdle closes the pooled connections idle for idleTimeout or longer:
// without it, those at the bottom of a pool that a burst filled would stay
// open, in CLOSE_WAIT once the upstream has closed its side. Handler.Tick
// calls it.
func (t *h1Transport) closeIdle() {
	now := time.Now()
	var old []*h1Conn
	t.mu.Lock()
	for addr, list := range t.idle {
		keep := list[:0]
		for _, c := range list {
			if now.Sub(c.idleAt) >= t.idleTimeout {
				old = append(old, c)
			} else {
				keep = append(keep, c)
			}
		}
		clear(list[len(keep):])
		t.idle[addr] = keep
	}
	t.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
}

// CloseIdleConnections closes the pooled connections, and next's.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*h1Conn)
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.Close()
		}
	}
	if ci, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// exchange writes req on c and reads its response's head. The response's
// body gives c back (or closes it) when done.
func (t *h1Transport) exchange(c *h1Conn, addr string, req *http.Request) (*http.Response, error) {
	// A canceled request cuts the connection's reads and writes at once.
	stop := context.AfterFunc(req.Context(), func() { c.SetDeadline(time.Unix(1, 0)) })
	if err := req.Write(c.bw); err != nil {
		stop()
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		stop()
		return nil, err
	}
	var resp *http.Response
	c.limit.N = maxResponseHeaderBytes
	for {
		var err error
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			stop()
			if ctxErr := req.Context().Err(); ctxErr != nil {
				return nil, ctxErr
			}
			if c.limit.N <= 0 {
				return nil, errors.New("upstream response headers exceed 10 MiB")
			}
			return nil, err
		}
		// 1xx answers before the final one are not relayed (as
		// http.Transport does without a 1xx trace hook).
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		resp.Body.Close()
	}
	c.limit.N = unlimited
	b := &h1Body{ReadCloser: resp.Body, t: t, c: c, addr: addr, stop: stop, reuse: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.done(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// h1Body is a response body that gives its connection back at its end.
type h1Body struct {
	io.ReadCloser
	t     *h1Transport
	c     *h1Conn
	addr  string
	stop  func() bool
	reuse bool // neither side asked to close the connection
	ended bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.ended {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done(true)
	} else if err != nil {
		b.done(false)
	}
	return n, err
}

// Close closes a body not read to its end along with its connection.
func (b *h1Body) Close() error {
	b.done(false)
	return nil
}

// done ends the body once: the connection goes back to the pool when the
// body was read whole, nothing asked to close it and no cancel cut it.
func (b *h1Body) done(whole bool) {
	if b.ended {
		return
	}
	b.ended = true
	if b.stop() && whole && b.reuse {
		b.t.put(b.addr, b.c)
		return
	}
	b.c.Close()
}
