package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"
	"syscall"
	"time"
)

// maxResponseHeaderBytes bounds what an upstream may send before its
// answer's body, its 1xx answers included, as http.Transport's default
// does: a broken upstream that sends headers without end fails the
// request instead of filling the memory.
const maxResponseHeaderBytes = 10 << 20

// unlimited lets a body through conn.limit.
const unlimited = math.MaxInt64

// conn is an upstream connection with its buffers. Its reads go through
// limit, which bounds a response's heads (maxResponseHeaderBytes) and lets
// its body through. raw is nil when the connection cannot be peeked at,
// and then it is never pooled.
type conn struct {
	net.Conn
	raw    syscall.RawConn
	limit  io.LimitedReader
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time

	peek     func(fd uintptr) bool // c.peekFD, bound once so that a peek does not allocate
	peekBuf  [1]byte
	peekSays bool // what the last peek found: true when nothing had arrived
}

func newConn(nc net.Conn) *conn {
	c := &conn{Conn: nc, limit: io.LimitedReader{R: nc, N: unlimited}, bw: bufio.NewWriter(nc)}
	c.br = bufio.NewReader(&c.limit)
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
			c.peek = c.peekFD
		}
	}
	return c
}

// quiet reports whether nothing has arrived on the idle connection c since
// its last response: no byte and no EOF. It does not block.
func (c *conn) quiet() bool {
	c.peekSays = false
	if err := c.raw.Read(c.peek); err != nil {
		return false
	}
	return c.peekSays
}

// errNothingRead marks a failure before any byte of the answer arrived: a
// request that met it on a reused connection may be sent again.
type errNothingRead struct{ err error }

func (e errNothingRead) Error() string { return e.err.Error() }
func (e errNothingRead) Unwrap() error { return e.err }

func isNothingRead(err error) bool {
	var e errNothingRead
	return errors.As(err, &e)
}

// errHeaderLimit is the error of an answer whose heads pass
// maxResponseHeaderBytes.
var errHeaderLimit = fmt.Errorf("upstream response headers exceed %d MiB", maxResponseHeaderBytes>>20)

// aLongTimeAgo is a deadline that cuts a connection's reads and writes.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req on c and reads its response's head, relaying 1xx
// answers to trace. The response's body gives c back to the pool at its
// end, or closes it; on an error c is closed.
func (t *Transport) exchange(c *conn, addr string, req *http.Request, trace *httptrace.ClientTrace) (*http.Response, error) {
	ctx := req.Context()
	// A canceled request cuts the connection's reads and writes at once.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(errNothingRead{err})
	}
	if err := c.bw.Flush(); err != nil {
		return fail(errNothingRead{err})
	}
	if trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders() // the request has no body: its headers are all of it
	}
	c.limit.N = maxResponseHeaderBytes
	if _, err := c.br.Peek(1); err != nil {
		return fail(errNothingRead{err})
	}
	var resp *http.Response
	for {
		var err error
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			if c.limit.N <= 0 {
				err = errHeaderLimit
			}
			return fail(err)
		}
		code := resp.StatusCode
		if code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
			break // final, as http.Transport takes it: any status but a 1xx, 101 included
		}
		// A 1xx before the final answer: the heads share one budget, so
		// an upstream that sends them without end fails the request.
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return fail(err)
			}
		}
	}
	c.limit.N = unlimited
	b := &body{ReadCloser: resp.Body, t: t, c: c, addr: addr, stop: stop, reusable: reusable(req, resp)}
	if resp.Body == http.NoBody {
		b.done(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// reusable reports whether, by its head, resp leaves its connection able
// to carry another request once its body is read to the end: neither side
// asked to close it, the status is final and no switch, and the body is
// framed (a length, chunked, or none allowed) rather than ended by a close.
func reusable(req *http.Request, resp *http.Response) bool {
	if resp.Close || req.Close || resp.StatusCode < 200 {
		return false
	}
	return resp.Body == http.NoBody || resp.ContentLength >= 0 ||
		(len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked")
}

// body is a response body that gives its connection back at its end.
// Close may be called concurrently with Read, and more than once.
type body struct {
	io.ReadCloser
	t        *Transport
	c        *conn
	addr     string
	stop     func() bool
	reusable bool // by the response's head (reusable)
	ended    atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.ended.Load() {
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
func (b *body) Close() error {
	b.done(false)
	return nil
}

// done ends the body once. The connection goes back to the pool only when
// the body was read whole, its head allowed it, no cancel cut it (stop
// returns false once the cut is made) and nothing past the answer sits in
// the read buffer: bytes there are a second answer nobody asked for.
func (b *body) done(whole bool) {
	if !b.ended.CompareAndSwap(false, true) {
		return
	}
	if b.stop() && whole && b.reusable && b.c.br.Buffered() == 0 {
		b.t.put(b.addr, b.c)
		return
	}
	b.c.Close()
}
