package proxy

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/proxy/fallback"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
)

// staleOn marks c, a request on a point with stale: and a cache, as one
// whose answer may be recorded and that may be served a kept one: a GET or
// a HEAD, not gRPC. It keeps r, the client's request, which staleRequest
// reads when needed (the call stays small: a request pays for stale: only
// when it records or is served).
func (c *call) staleOn(r *http.Request) {
	if c.point.staleMaxAge <= 0 || c.h.opts.Stale == nil || r.Method != http.MethodGet && r.Method != http.MethodHead || fallback.IsGRPC(r) {
		return
	}
	c.staleIn = r
}

// staleRequest is what the stale cache keys c's request by: the client's
// method, scheme, host, the escaped normalised path the request was routed
// by, its raw query and its header.
func (c *call) staleRequest() stale.Request {
	r := c.staleIn
	scheme, path := "http", c.path
	if r.TLS != nil {
		scheme = "https"
	}
	if path == "" {
		path = r.URL.EscapedPath()
	}
	return stale.Request{Point: c.point.name, Method: r.Method, Scheme: scheme, Host: r.Host, Path: path, RawQuery: r.URL.RawQuery, Header: r.Header}
}

// serveStale answers c's request, degraded for why, with its point's kept
// answer for it, when there is one young enough, marked as fb would mark
// it with "; stale" added. It reports whether it did.
func (c *call) serveStale(w http.ResponseWriter, fb *fallback.Handler, why fallback.Reason) bool {
	if c.staleIn == nil {
		return false
	}
	now := c.h.now()
	a, ok := c.h.opts.Stale.Lookup(c.staleRequest(), c.point.staleMaxAge, now)
	if !ok {
		return false
	}
	c.status = a.Serve(w, c.staleIn.Method == http.MethodHead, fb.Mark(why)+"; stale", now)
	c.staleServed = true
	if n := c.snap.staleServed[c.point]; n != nil {
		n.Inc()
	}
	return true
}

// record starts keeping aside the upstream's answer to c, a GET on a point
// with stale:, as it is relayed, when the answer is one to keep: not an
// exception, not a stream, and what a shared cache may store (package
// stale).
func (c *call) record(resp *http.Response) {
	if c.staleIn.Method != http.MethodGet || c.statusFailed || isStream(resp) {
		return
	}
	c.recorder = c.h.opts.Stale.Record(c.staleRequest(), resp, c.h.now())
}

// recorded ends the recording of c's answer: kept when the body ended
// cleanly (complete), dropped otherwise. Later calls do nothing.
func (c *call) recorded(complete bool) {
	if c.recorder != nil {
		c.recorder.Done(complete, c.h.now())
		c.recorder = nil
	}
}

// staleField is the access log's "stale" field: true for a request
// answered with a kept answer, nothing otherwise.
func staleField(served bool) zap.Field {
	if !served {
		return zap.Skip()
	}
	return zap.Bool("stale", true)
}
