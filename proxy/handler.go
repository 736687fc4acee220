package proxy

import (
	"context"
	"errors"
	stdlog "log"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/proxy/h1"
)

// StatusClientClosedRequest is logged for a client that went away before
// its answer (nginx's 499); nothing is written to it.
const StatusClientClosedRequest = 499

// errUpstreamTimeout is the cause of a context cut by a point's
// UpstreamTimeout, telling it apart from a client that went away.
var errUpstreamTimeout = errors.New("upstream timeout")

// errUnaskedSwitch is the error of a 101 to a request that asked for no
// upgrade: the upstream's answer is refused with a 502.
var errUnaskedSwitch = errors.New("upstream switched protocols on a request that asked for no upgrade")

// Options are a Handler's collaborators. Logger and Metrics are required.
type Options struct {
	// Logger receives one line per point state change (trip, recovery,
	// delay start and end).
	Logger *zap.Logger
	// Events records the same state changes, and the delays' probes, for
	// the admin port; nil records nothing.
	Events *events.Log
	// AccessLog receives one line per request on a point while the
	// Config in force has AccessLog set. It must not be sampled.
	AccessLog *zap.Logger
	// Metrics records the request path's metrics.
	Metrics *Metrics
	// Transport overrides the upstream transport (tests); nil means one
	// built by NewTransport.
	Transport http.RoundTripper
	// Now overrides the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Handler is the proxy's http.Handler. It is safe for concurrent use; Swap
// replaces its configuration while requests are served.
type Handler struct {
	opts    Options
	now     func() time.Time
	current atomic.Pointer[snapshot]
	rp      *httputil.ReverseProxy
	plain   http.RoundTripper // http/https upstreams
	h2c     http.RoundTripper // h2c upstreams, built on first use
	alarms  alarms            // the upstream clocks' alarms of the calls in flight
	forces  forces            // operators' switches by point name (force.go)
}

// snapshot is a Config with what the request path derives from it: the
// transport, and each point's metric series, resolved when the Config is
// swapped in so that the Config is never written and a request does no
// label lookup.
type snapshot struct {
	*Config
	transport http.RoundTripper
	metrics   map[*Point]*pointMetrics // every point of Points and Routes
	router    *router                  // Routes compiled (router.go)
}

// New returns a Handler serving cfg.
func New(cfg *Config, opts Options) *Handler {
	h := &Handler{opts: opts, now: opts.Now}
	if h.now == nil {
		h.now = time.Now
	}
	opts.Metrics.setClock(h.now)
	h.alarms.now, h.alarms.wake = h.now, make(chan struct{}, 1)
	h.plain = opts.Transport
	if h.plain == nil {
		h.plain = h1.New(NewTransport(false))
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      roundTripperFunc(h.roundTrip),
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.errorHandler,
		BufferPool:     &bufferPool{},
		// ReverseProxy logs a line per failed body copy; the outcome is
		// already counted, so those lines go to debug, not to every reader.
		ErrorLog: newDebugLog(opts.Logger.Named("reverseproxy")),
	}
	h.Swap(cfg)
	return h
}

// Swap makes cfg the configuration of every request that starts after it
// returns. Requests in flight finish under the configuration they began with.
// Swap reads cfg and writes nothing into it: each point's metric series are
// looked up by the point's name (the same series across reloads) and kept
// in the new snapshot, beside cfg. Swap is not safe to call concurrently
// with itself; it is safe with requests.
func (h *Handler) Swap(cfg *Config) {
	s := &snapshot{Config: cfg, transport: h.plain}
	if cfg.UpstreamH2C {
		if h.h2c == nil {
			h.h2c = NewTransport(true)
		}
		s.transport = h.h2c
	}
	s.metrics = make(map[*Point]*pointMetrics, len(cfg.Points))
	for _, p := range cfg.Points {
		s.metrics[p] = h.opts.Metrics.forPoint(p.name)
	}
	for _, rt := range cfg.Routes {
		if _, ok := s.metrics[rt.Point]; !ok && rt.Point != nil {
			s.metrics[rt.Point] = h.opts.Metrics.forPoint(rt.Point.name)
		}
	}
	s.router = newRouter(cfg.Routes)
	h.current.Store(s)
	h.dropForces(cfg)
}

// Config returns the configuration in force.
func (h *Handler) Config() *Config { return h.current.Load().Config }

// Points returns the points of the configuration in force.
func (h *Handler) Points() []*Point { return h.current.Load().Points }

// Snapshots returns the state of each point of the configuration in force
// at now, in config order (limiter.Point.Snapshot): what the admin port
// shows. It has no side effects and is safe for concurrent use.
func (h *Handler) Snapshots(now time.Time) []limiter.Snapshot {
	points := h.Points()
	out := make([]limiter.Snapshot, len(points))
	for i, p := range points {
		out[i] = p.lim.Snapshot(now)
	}
	return out
}

// call is the state of one request on a point, from Enter to Exit. It
// travels in the request context to the ReverseProxy hooks.
type call struct {
	h       *Handler
	snap    *snapshot
	point   *Point
	metrics *pointMetrics // the point's series; nil when point is nil
	// path is the escaped, normalised path the request was routed by,
	// which the upstream receives; "" when it is the request's own.
	path    string
	lim     limiter.Call
	verdict limiter.Verdict
	outcome limiter.Outcome
	exited  bool // exit has run (a stream exits at its headers)
	status  int  // status answered to the client (access log)
	// clock measures the upstream time (clock.go); cancel cuts the call
	// when its UpstreamTimeout passes (nil without one).
	clock  upstreamClock
	cancel context.CancelCauseFunc
	// prev and next link the call into the Handler's alarms while its
	// clock has alarms (alarms.go).
	prev, next *call
	// ctx is the request's context with the call in it (withCall).
	ctx callContext
	// grpc is the upstream's gRPC response, whose trailers are read once
	// the stream has been copied; nil for other responses.
	grpc *http.Response
	// reqBody and respBody wrap the request and response bodies; they
	// live here so that wrapping allocates nothing.
	reqBody  clientBody
	respBody upstreamBody
	// header is the client's request header, whose W3C traceparent
	// gives the exemplar of the upstream time (traceparent.go); nil for a
	// request that is not forwarded on a point.
	header http.Header
	// upstreamFailed: a read of the upstream's response body failed. Only
	// the request's goroutine, which copies the body, touches it.
	upstreamFailed bool
	// forced is the operator's switch the request was answered under;
	// 0 when it was judged (force.go).
	forced ForceAction

	// bodyFailed: the client's request body failed to read. Atomic: the
	// transport reads the body on its own goroutine, which can outlive the
	// call.
	bodyFailed atomic.Bool
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

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	closeIfChunked(w, r)
	s := h.current.Load()
	path, rewritten, err := requestPath(r)
	if err != nil {
		h.opts.Metrics.rejectedPath.Inc()
		badPath(w, err)
		return
	}
	var p *Point
	var priority limiter.Priority
	if m := s.router.find(r, path); m != nil {
		p, priority = m.Point, m.Priority
	}
	if p == nil {
		h.opts.Metrics.unrouted.Inc()
		c := &call{snap: s, path: rewritten}
		ctx := withCall(r, c)
		h.rp.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	c := &call{h: h, snap: s, point: p, metrics: s.metrics[p], path: rewritten}
	now := h.now()
	if f := h.forces.active(p.name, now); f != nil {
		h.serveForced(w, r, c, f, now)
		return
	}
	pressure := s.PressureTestHeader != "" && isTrue(r.Header.Get(s.PressureTestHeader))
	c.verdict = p.lim.EnterPriority(&c.lim, now, pressure, priority)
	h.pointEvents(p, c.verdict, c.verdict.Events, now, byRequest)
	if !c.verdict.Allowed {
		status := p.fallback.serve(w, r, verdictReason(c.verdict))
		c.metrics.degraded.Inc()
		c.metrics.strategyCounter(c.verdict.Strategy).Inc()
		h.access(r, c, status, 0)
		return
	}
	if p.shared != nil && !c.verdict.Shadow && !p.shared.Take(now) && h.sharedEmpty(w, r, c, now) {
		return
	}
	if c.verdict.Shadow {
		w.Header().Set("Sds-Shadow-Degraded", p.fallback.answer(verdictReason(c.verdict)).degraded)
		c.metrics.shadowDegraded.Inc()
		c.metrics.shadowStrategyCounter(c.verdict.Strategy).Inc()
	} else {
		c.metrics.proxied.Inc()
	}
	h.forward(w, r, c)
}

// forward calls the upstream for an allowed request and reports the
// outcome to the limiter, whatever happens (ReverseProxy aborts a response
// whose body fails mid-copy by panicking with http.ErrAbortHandler).
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, c *call) {
	p := c.point
	ctx := withCall(r, c)
	if p.upstreamTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		c.cancel = cancel
	}
	if r.Body != nil && r.Body != http.NoBody {
		c.reqBody = clientBody{ReadCloser: r.Body, c: c}
		r.Body = &c.reqBody
	}
	c.header = r.Header
	c.startClock(p.lim.TimeoutThreshold(), p.upstreamTimeout)
	completed := false
	defer func() {
		if !completed || c.upstreamFailed {
			h.aborted(r, ctx, c)
		}
		took := h.exit(c)
		h.access(r, c, c.status, took)
	}()
	rw := w
	if c.snap.AccessLog && h.opts.AccessLog != nil {
		rw = &statusWriter{ResponseWriter: w, c: c}
	}
	h.rp.ServeHTTP(rw, r.WithContext(ctx))
	completed = true
	if c.outcome == 0 {
		c.outcome = limiter.OK
	}
	// A gRPC call ended at its headers; its status may come in the trailers.
	if c.grpc != nil && grpcFailed(c.grpc.Trailer) && c.lim.FailAfterExit(h.now()) {
		c.metrics.statusErrors.Inc()
	}
}

// aborted classifies a copy that ReverseProxy aborted. A failed read of
// the upstream's body is the upstream's exception (a passed UpstreamTimeout
// or a body that broke off), unless the client had gone away, which also
// cuts the upstream read; a failed write to the client is the client's.
func (h *Handler) aborted(r *http.Request, ctx context.Context, c *call) {
	if c.exited {
		return // a stream, whose outcome was its headers'
	}
	c.outcome = limiter.Canceled
	if !c.upstreamFailed || r.Context().Err() != nil {
		return
	}
	c.outcome = limiter.Failed
	if errors.Is(context.Cause(ctx), errUpstreamTimeout) {
		c.metrics.timeoutErrors.Inc()
	} else {
		c.metrics.bodyErrors.Inc()
	}
}

// exit ends c's upstream call in the limiter, once; streams end it early,
// at their response headers. It returns the call's upstream time.
func (h *Handler) exit(c *call) time.Duration {
	end := h.now()
	took := c.endClock(end)
	if c.exited {
		return took
	}
	c.exited = true
	timedOutBefore := c.lim.Timeout(end) // counts it now if not yet counted
	ev := c.lim.Exit(end, c.outcome)
	h.pointEvents(c.point, c.verdict, ev, end, byProbe)
	if c.verdict.Probe {
		h.probeEnded(c, end)
	}
	if timedOutBefore {
		c.metrics.timeouts.Inc()
	}
	c.metrics.observeDuration(took.Seconds(), traceID(c.header), end)
	return took
}

func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	c := pr.In.Context().Value(callKey{}).(*call)
	if c.path != "" {
		setPath(pr.Out.URL, c.path) // before SetURL, which joins it to the upstream's
	}
	pr.SetURL(c.snap.Upstream)
	pr.Out.Host = pr.In.Host
	if c.snap.ForwardedHeaders {
		pr.SetXForwarded()
	}
}

func (h *Handler) roundTrip(r *http.Request) (*http.Response, error) {
	c := r.Context().Value(callKey{}).(*call)
	return c.snap.transport.RoundTrip(r)
}

// modifyResponse classifies the upstream's answer: a 101 to a request that
// asked for no upgrade is refused (502); a 5xx (or a gRPC error
// status in the headers) is an exception. A stream's call ends here.
func (h *Handler) modifyResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols && resp.Request.Header.Get("Upgrade") == "" {
		// ReverseProxy would refuse it too, but without closing its body:
		// through http.Transport that body is the upstream connection,
		// which would stay open for good. An error here closes it.
		return errUnaskedSwitch
	}
	c := resp.Request.Context().Value(callKey{}).(*call)
	if c.point == nil {
		return nil
	}
	c.headers()
	c.outcome = limiter.OK
	if resp.StatusCode >= 500 || grpcFailed(resp.Header) {
		c.outcome = limiter.Failed
		c.metrics.statusErrors.Inc()
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// ReverseProxy writes the 101 on the hijacked connection, past
		// the statusWriter: record it for the access log here.
		c.status = resp.StatusCode
	}
	if isStream(resp) {
		if isGRPCResponse(resp) {
			c.grpc = resp
		}
		h.exit(c)
		return nil
	}
	c.respBody = upstreamBody{ReadCloser: resp.Body, c: c}
	resp.Body = &c.respBody
	return nil
}

// errorHandler answers a failed upstream call: 504 for a passed
// UpstreamTimeout, 502 for a transport error (or, for both, the point's
// fallback with FallbackOnError: the same handler as every degraded answer,
// marked upstream_error), 400 for a client body that failed to read, and
// for a client that went away a 502 nobody reads, logged as 499.
func (h *Handler) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	c := r.Context().Value(callKey{}).(*call)
	var status int
	switch {
	case errors.Is(context.Cause(r.Context()), errUpstreamTimeout):
		status = http.StatusGatewayTimeout
		c.outcome = limiter.Failed
		if c.point != nil {
			c.metrics.timeoutErrors.Inc()
		}
	case c.bodyFailed.Load():
		// Before the client-cancel case: the server cancels the context
		// when it meets the end of the client's input, so a client that
		// half-closes after a short body would otherwise get an empty 200.
		c.outcome = limiter.Canceled
		status = http.StatusBadRequest
	case r.Context().Err() != nil:
		// The client went away (or half-closed its side): nobody may read
		// the 502, but an implicit empty 200 would be a lie.
		c.outcome, c.status = limiter.Canceled, StatusClientClosedRequest
		w.WriteHeader(http.StatusBadGateway)
		return
	default:
		status = http.StatusBadGateway
		c.outcome = limiter.Failed
		if c.point != nil {
			c.metrics.transportErrors.Inc()
		}
	}
	if c.point != nil && c.point.fallbackOnError && c.outcome == limiter.Failed {
		c.point.fallback.ServeHTTP(w, r)
		return
	}
	w.WriteHeader(status)
}

// access writes the access log line of a request on a point. Its path is
// the escaped, normalised path the request was routed by.
func (h *Handler) access(r *http.Request, c *call, status int, upstream time.Duration) {
	if !c.snap.AccessLog || h.opts.AccessLog == nil {
		return
	}
	path := c.path
	if path == "" {
		path = r.URL.EscapedPath()
	}
	h.opts.AccessLog.Info("request",
		zap.String("point", c.point.name),
		zap.String("method", r.Method),
		zap.String("path", path),
		zap.Int("status", status),
		zap.String("strategy", c.verdict.Strategy.String()),
		zap.Bool("degraded", !c.verdict.Allowed),
		zap.Bool("shadow", c.verdict.Shadow),
		zap.Duration("upstream_latency", upstream),
		forcedField(c.forced),
	)
}

// isStream reports whether the response is a stream whose call ends at its
// headers: an upgrade, server-sent events, or gRPC.
func isStream(resp *http.Response) bool {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return true
	}
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || isGRPCResponse(resp)
}

// isGRPCResponse reports whether resp answers a gRPC call.
func isGRPCResponse(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "application/grpc")
}

// grpcFailed reports a gRPC status other than 0 in h: the response headers
// (a trailers-only error) or the trailers.
func grpcFailed(h http.Header) bool {
	s := h.Get("Grpc-Status")
	return s != "" && s != "0"
}

// closeIfChunked closes the connection of an HTTP/1 request with a chunked
// body once it is answered. RFC 9112 §6.1: a request with both
// Content-Length and Transfer-Encoding may be an attempt at request
// smuggling, and its connection must be closed. net/http drops the
// Content-Length of such a request before the handler sees it, so every
// chunked request's connection is closed; clients that send chunked bodies
// are rare and lose only the reuse of one connection.
func closeIfChunked(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 && len(r.TransferEncoding) > 0 {
		w.Header().Set("Connection", "close")
	}
}

func isTrue(s string) bool { return s == "1" || strings.EqualFold(s, "true") }

// statusWriter remembers the status written, for the access log.
type statusWriter struct {
	http.ResponseWriter
	c *call
}

func (w *statusWriter) WriteHeader(code int) {
	if w.c.status == 0 && code >= 200 { // a 101 is recorded by modifyResponse
		w.c.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.c.status == 0 {
		w.c.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// newDebugLog adapts log to a standard logger that writes at debug level.
func newDebugLog(log *zap.Logger) *stdlog.Logger {
	l, err := zap.NewStdLogAt(log, zap.DebugLevel)
	if err != nil {
		return zap.NewStdLog(log)
	}
	return l
}

// copyBufferSize is the size of ReverseProxy's response copy buffers (its
// own default).
const copyBufferSize = 32 << 10

// bufferPool recycles ReverseProxy's response copy buffers, which it would
// otherwise allocate, 32 KiB each, for every response. Buffers are kept as
// array pointers so that Put does not allocate. Safe for concurrent use.
type bufferPool struct{ pool sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.pool.Get().(*[copyBufferSize]byte); ok {
		return buf[:]
	}
	return make([]byte, copyBufferSize)
}

func (b *bufferPool) Put(buf []byte) {
	if len(buf) >= copyBufferSize {
		b.pool.Put((*[copyBufferSize]byte)(buf))
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
