// Package h1 is sds-proxy's HTTP/1.1 client for plain http:// upstreams:
// an http.RoundTripper that sends a bodiless request of a safe method (GET,
// HEAD, OPTIONS, TRACE) and reads its answer on the calling goroutine, on
// a pooled connection, where http.Transport hands each request to a
// writing and a reading goroutine of the connection. Every other request
// (another method, a body, an upgrade, https, Expect) goes to the
// http.Transport it was built on, whose connections are its own.
//
// It parses with the standard library (http.Request.Write,
// http.ReadResponse); what it does by hand is decide when a connection may
// carry the next request, and it decides as http.Transport does, or more
// strictly:
//
//   - A connection goes back to the pool only when its response was framed
//     (a Content-Length, chunked, or no body allowed), read to its end with
//     nothing left in the read buffer, neither side asked to close, the
//     status was neither 1xx nor 101, and the request was not canceled.
//     Anything else closes it.
//   - A pooled connection is looked at when it is taken: a byte or an EOF
//     that arrived while it sat idle (a late second response, the body of
//     a HEAD answer sent after its head) closes it and the next one is
//     tried. http.Transport keeps a reading goroutine on every idle
//     connection for this; here it costs one non-blocking peek (a recv
//     with MSG_PEEK) per reused connection.
//   - 1xx answers before the final one are passed to the request's
//     httptrace.ClientTrace.Got1xxResponse, which httputil.ReverseProxy
//     sets to relay them (103 Early Hints). All of a response's heads, its
//     1xx ones included, share one budget of 10 MiB. Its GotConn and
//     WroteHeaders are called as http.Transport calls them: WroteHeaders
//     once the request is flushed to the connection, which is how the
//     proxy tells a request the upstream was sent from one whose client
//     went away first.
//   - A request that fails on a reused connection before any byte of its
//     answer arrived is sent once more on a new connection: its method is
//     safe to repeat, as http.Transport does.
//
// The pool keeps at most MaxIdleConnsPerHost connections per address and
// closes those idle for IdleConnTimeout, both the http.Transport's. On
// systems where the peek is not available the Transport sends everything
// to the http.Transport.
package h1
