package proxy

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy/fallback"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
	"github.com/sds-proxy/sds-proxy/proxy/statelog"
)

// call is one request on its way through the Handler, from ServeHTTP's
// enter to its exit. ServeHTTP owns it: it fills the verdict, and its
// deferred exit ends it. The metered transport and its bodies (meter.go)
// record what the upstream did in its fields; classify reads them once,
// when the call ends (call.end), and a gRPC stream's body judges its
// trailers once it has read them. It travels in the request's context
// (callContext) to the ReverseProxy's Rewrite and transport. A request
// that no route names has a call with no point: it is forwarded and
// answered, never measured.
type call struct {
	h      *Handler
	snap   *snapshot
	point  *Point         // nil: unrouted
	series *metrics.Point // the point's series; nil when point is nil
	// path is the escaped, normalised path the request was routed by,
	// which the upstream receives; "" when it is the request's own.
	path    string
	lim     limiter.Call
	verdict limiter.Verdict
	// keys hold the request's calls in flight on its point's per-key
	// rules, by rule (keys.go); keyLabel is the label of the key that
	// degraded it (or would have, on a shadow point), "" for none, and
	// keyRetry its Retry-After.
	keys     [MaxKeyRules]perkey.Call
	keyLabel string
	keyRetry time.Duration
	// staleIn is the client's request when the point has stale: and the
	// request is a GET or a HEAD, nil otherwise (stale.go). recorder keeps
	// the answer aside as it is relayed (nil when it is not kept), and
	// staleServed is true when a kept answer was served.
	staleIn     *http.Request
	recorder    *stale.Recorder
	staleServed bool
	// queue is the point's queue (nil without one), and waited how long
	// the request waited in it (wait.go).
	queue  *queue.Queue
	waited time.Duration
	// arrived and ended are, in Unix nanoseconds, when the request was
	// judged on its point (enter) and when its upstream call ended in the
	// limiter (end); 0 before. The access log gives them to replay.
	arrived, ended int64
	// status is the status written to the client, for the access log:
	// 101 for a switch (the meter's: it is written on the hijacked
	// connection, past the statusWriter); 0 before any.
	status int
	// clock measures the upstream time (clock.go); cancel cuts the call
	// when its UpstreamTimeout passes (nil without one).
	clock  upstreamClock
	cancel context.CancelCauseFunc
	// prev and next link the call into the Handler's alarms while its
	// clock has alarms (alarms.go).
	prev, next *call
	// ctx is the request's context with the call in it (withCall).
	ctx callContext
	// reqBody and respBody wrap the request and response bodies; they
	// live here so that wrapping allocates nothing.
	reqBody  clientBody
	respBody upstreamBody
	// header is the client's request header, whose W3C traceparent
	// gives the exemplar of the upstream time (traceparent.go); nil for a
	// request that is not forwarded on a point.
	header http.Header

	// What the upstream did, as the meter saw it. The request's
	// goroutine writes these, except where marked atomic.
	//
	// forced is the operator's switch the request was answered under;
	// 0 when it was judged (force.go). It sits with the flags below so
	// that the small fields share one word.
	forced ForceAction
	// priority is the request's priority, from its route.
	priority limiter.Priority
	// classified is how the upstream call counted in the limiter (end):
	// its outcome and error kind; zero before it ended, and for a request
	// not forwarded.
	classified classification
	// statusFailed: the answer is an exception (a 5xx, or a gRPC error
	// status in the headers).
	statusFailed bool
	// failure is why the upstream call produced no answer; 0 if it did.
	failure failure
	// streamed: the answer is a stream, whose call ended at its headers.
	streamed bool
	// bodyBroke: a read of the upstream's response body failed.
	bodyBroke bool
	// copied: the ReverseProxy returned; false when it aborted the copy.
	copied bool
	// bodyFailed: the client's request body failed to read. Atomic: the
	// transport reads the body on its own goroutine, which can outlive
	// the call.
	bodyFailed atomic.Bool
	// cut: the point's UpstreamTimeout cut the call. Atomic: the alarms'
	// sweeper sets it.
	cut atomic.Bool
	// counted: the request is counted in sds_requests_total (count).
	// Atomic: the transport's trace sets it from its own goroutine.
	counted atomic.Bool
	// trace tells the call when the upstream is sent its headers
	// (wroteHeaders); set by forward on a request let through.
	trace httptrace.ClientTrace
}

type callKey struct{}

// callContext is the context of a request on its way through the
// ReverseProxy: the request's own, whose callKey value is the call. It
// lives in the call, so that carrying the call costs no allocation of its
// own (context.WithValue's would).
type callContext struct {
	context.Context
	c *call
}

// Value returns the call for callKey, and asks the request's context for
// any other key.
func (x *callContext) Value(key any) any {
	if key == (callKey{}) {
		return x.c
	}
	return x.Context.Value(key)
}

// withCall returns r's context carrying c (in c itself).
func withCall(r *http.Request, c *call) context.Context {
	c.ctx = callContext{Context: r.Context(), c: c}
	return &c.ctx
}

// callOf returns the call r carries (withCall).
func callOf(r *http.Request) *call { return r.Context().Value(callKey{}).(*call) }

// clientGone reports whether the client's side of the request is over:
// it went away, or half-closed its connection.
func (c *call) clientGone() bool { return c.ctx.Context != nil && c.ctx.Context.Err() != nil }

// errorCounter returns the sds_upstream_errors_total series of e on c's
// point, or nil for none.
func (c *call) errorCounter(e upstreamError) *metrics.Counter {
	switch e {
	case errTimeout:
		return c.series.TimeoutErrors
	case errTransport:
		return c.series.TransportErrors
	case errBody:
		return c.series.BodyErrors
	}
	return nil
}

// reason is why a degraded request gets its point's fallback.
func (c *call) reason() fallback.Reason {
	if c.forced == ForceDegrade {
		return fallback.Reason{Forced: true}
	}
	why := fallback.ReasonOf(c.verdict)
	why.Waited = c.waited
	if c.keyLabel != "" {
		why.Key, why.Reopens = c.keyLabel, c.keyRetry
	}
	return why
}

// wroteHeaders is the call's httptrace hook: the transport has written
// the request's headers to an upstream connection, so the upstream has
// seen the request, which now counts as proxied. A transport that writes
// the request twice (a retry on a dead keep-alive connection) counts it
// once.
func (c *call) wroteHeaders() {
	if !c.counted.Swap(true) {
		c.series.Proxied.Inc()
	}
}

// count counts a request let through on c's point that the upstream was
// never sent, once its call is over: canceled when its client went away
// first (it reached the proxy, never the upstream), proxied otherwise (the
// proxy tried, and the transport failed: refused, unreachable). A request
// the upstream was sent is already counted (wroteHeaders).
func (c *call) count() {
	if c.counted.Swap(true) {
		return
	}
	if c.failure == failClientGone || c.clientGone() {
		c.series.Canceled.Inc()
		return
	}
	c.series.Proxied.Inc()
}

// end ends c's upstream call at now, once: its clock stops, the outcome
// is classified from what the meter saw and reported to the limiter with
// the state changes it caused, and the upstream time is observed. Later
// calls change nothing. It returns the call's upstream time.
func (c *call) end(now time.Time) time.Duration {
	took, first := c.endClock(now)
	if !first {
		return took
	}
	o := classify(c)
	if o.status {
		c.series.StatusErrors.Inc()
	}
	if n := c.errorCounter(o.err); n != nil {
		n.Inc()
	}
	c.ended, c.classified = now.UnixNano(), o
	timedOutBefore := c.lim.Timeout(now) // counts it now if not yet counted
	ev := c.lim.Exit(now, o.outcome)
	if c.queue != nil {
		c.queue.Observe(took)
		c.queue.Release(now)
	}
	c.h.changes.Changes(c.point.lim, c.verdict, ev, now, statelog.ByProbe)
	if c.verdict.Probe {
		c.h.probeEnded(c, o.outcome, now)
	}
	if timedOutBefore {
		c.series.Timeouts.Inc()
	}
	c.series.ObserveDuration(took.Seconds(), metrics.TraceID(c.header), now)
	return took
}
