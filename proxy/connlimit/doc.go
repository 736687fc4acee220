// Package connlimit bounds the connections of a net/http server, built
// for a storm of connections: at most Max are open at once, and at the
// limit a newcomer is admitted by closing the waiting connection that has
// waited longest among those with nothing on the way (an idle one its
// client has stopped using, a new one that has sent nothing for its
// grace; never one whose request has arrived unread), or else waits for a
// place while the kernel's accept queue holds the rest, and is refused
// only when none shows (Options, Limiter.victim). Whoever holds thousands
// of idle keep-alive connections cannot lock other clients out: they only
// lose their own oldest connections.
//
// A Limiter wraps the server's raw listener (under tls.NewListener, when
// there is one) and is told each connection's state through
// http.Server.ConnState:
//
//	ln = lim.Listener(ln)                // raw TCP: counts every connection
//	ln = tls.NewListener(ln, tlsConfig)  // optional
//	srv := &http.Server{ConnState: lim.ConnState}
//	srv.Serve(ln)
//
// A connection is in one of four states:
//
//	new       accepted, no request read yet (TLS handshake included)
//	idle      between requests (HTTP/1 keep-alive; HTTP/2 with no stream)
//	active    a request is being served (HTTP/2: at least one stream)
//	hijacked  taken over by a handler (WebSocket, other upgrades)
//
// New and idle connections are "waiting" and may be closed to admit a new
// one. Active and hijacked connections are never closed by the Limiter; a
// hijacked one counts until the handler closes it. An HTTP/2 connection
// counts once, whatever its number of streams.
//
// Over the soft limit (3/4 of Max), a connection that has been waiting for
// SoftIdleTimeout is closed, oldest first, until the count is back at the
// soft limit; below it, the server's own IdleTimeout and ReadHeaderTimeout
// apply. One timer serves all connections; there is no goroutine per
// connection, and the only queue is the kernel's.
package connlimit
