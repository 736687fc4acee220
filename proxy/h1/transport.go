package h1

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// Transport is the fast path's http.RoundTripper. It is safe for
// concurrent use. Its zero value is not usable: build it with New.
type Transport struct {
	next        http.RoundTripper
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration

	mu      sync.Mutex
	idle    map[string][]*conn // by host:port, least recently used first
	sweeper *time.Timer        // fires when the oldest idle connection expires; nil until first needed
	armed   bool               // sweeper is pending
}

// New returns a Transport that sends what it handles itself and the rest to
// next, with next's dialer (a zero net.Dialer when it has none),
// MaxIdleConnsPerHost (http.DefaultMaxIdleConnsPerHost when 0) and
// IdleConnTimeout (90 s when 0).
func New(next *http.Transport) *Transport {
	dial := next.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	maxIdle := next.MaxIdleConnsPerHost
	if maxIdle <= 0 {
		maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	idleTimeout := next.IdleConnTimeout
	if idleTimeout <= 0 {
		idleTimeout = 90 * time.Second
	}
	return newTransport(next, dial, maxIdle, idleTimeout)
}

func newTransport(next http.RoundTripper, dial func(context.Context, string, string) (net.Conn, error), maxIdle int, idleTimeout time.Duration) *Transport {
	return &Transport{next: next, dial: dial, maxIdle: maxIdle, idleTimeout: idleTimeout, idle: make(map[string][]*conn)}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !peekSupported || !handles(req) {
		return t.next.RoundTrip(req)
	}
	addr := hostPort(req)
	trace := httptrace.ContextClientTrace(req.Context())
	for attempt := 0; ; attempt++ {
		c, reused, idleFor, err := t.get(req.Context(), addr)
		if err != nil {
			return nil, err
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: c.Conn, Reused: reused, WasIdle: reused, IdleTime: idleFor})
		}
		resp, err := t.exchange(c, addr, req, trace)
		if err == nil {
			return resp, nil
		}
		if !reused || attempt > 0 || req.Context().Err() != nil || !isNothingRead(err) {
			return nil, err
		}
	}
}

// handles reports whether req is one the Transport sends itself.
func handles(req *http.Request) bool {
	return req.URL.Scheme == "http" && safeMethod(req.Method) && (req.Body == nil || req.Body == http.NoBody) && req.ContentLength <= 0 &&
		req.Header.Get("Upgrade") == "" && req.Header.Get("Expect") == "" && req.Header.Get("Transfer-Encoding") == ""
}

// safeMethod reports whether a request of method may be sent twice.
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// hostPort is the address to dial for req.
func hostPort(req *http.Request) string {
	if req.URL.Port() != "" {
		return req.URL.Host
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// get returns an idle connection to addr that is still quiet, with how
// long it was idle, or a new one. The peek happens outside the lock.
func (t *Transport) get(ctx context.Context, addr string) (c *conn, reused bool, idleFor time.Duration, err error) {
	now := time.Now()
	for {
		c, expired := t.pop(addr, now)
		closeAll(expired)
		if c == nil {
			break
		}
		if c.quiet() {
			return c, true, now.Sub(c.idleAt), nil
		}
		c.Close()
	}
	nc, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, 0, err
	}
	return newConn(nc), false, 0, nil
}

// pop takes the most recently used idle connection to addr. When that one
// has been idle for idleTimeout at now, so have all the others: it returns
// none, and them all as expired.
func (t *Transport) pop(addr string, now time.Time) (c *conn, expired []*conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.idle[addr]
	if len(list) == 0 {
		return nil, nil
	}
	c = list[len(list)-1]
	if now.Sub(c.idleAt) >= t.idleTimeout {
		t.idle[addr] = nil
		return nil, list
	}
	list[len(list)-1] = nil
	t.idle[addr] = list[:len(list)-1]
	return c, nil
}

// put returns c to the pool, or closes it when the pool is full or c
// cannot be checked while idle.
func (t *Transport) put(addr string, c *conn) {
	if c.raw == nil {
		c.Close()
		return
	}
	c.idleAt = time.Now()
	t.mu.Lock()
	list := t.idle[addr]
	if len(list) >= t.maxIdle {
		t.mu.Unlock()
		c.Close()
		return
	}
	t.idle[addr] = append(list, c)
	if !t.armed {
		t.armed = true
		if t.sweeper == nil {
			t.sweeper = time.AfterFunc(t.idleTimeout, t.sweep)
		} else {
			t.sweeper.Reset(t.idleTimeout)
		}
	}
	t.mu.Unlock()
}

// sweep closes the connections idle for idleTimeout or longer, and sets
// the sweeper for the next to expire. Without it, those at the bottom of a
// pool that a burst filled would stay open, in CLOSE_WAIT once the
// upstream has closed its side.
func (t *Transport) sweep() {
	now := time.Now()
	var old []*conn
	t.mu.Lock()
	var next time.Time
	for addr, list := range t.idle {
		n := 0
		for n < len(list) && now.Sub(list[n].idleAt) >= t.idleTimeout {
			n++
		}
		old = append(old, list[:n]...)
		t.idle[addr] = append(list[:0], list[n:]...)
		clear(list[len(list)-n:])
		if rest := t.idle[addr]; len(rest) > 0 && (next.IsZero() || rest[0].idleAt.Before(next)) {
			next = rest[0].idleAt
		}
	}
	t.armed = !next.IsZero()
	if t.armed {
		t.sweeper.Reset(next.Add(t.idleTimeout).Sub(now))
	}
	t.mu.Unlock()
	closeAll(old)
}

// CloseIdleConnections closes the pooled connections, and next's.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*conn)
	if t.sweeper != nil {
		t.sweeper.Stop()
	}
	t.armed = false
	t.mu.Unlock()
	for _, list := range idle {
		closeAll(list)
	}
	if ci, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func closeAll(conns []*conn) {
	for _, c := range conns {
		c.Close()
	}
}
