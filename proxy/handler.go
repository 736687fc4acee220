package proxy

import (
	"context"
	"iter"
	stdlog "log"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/proxy/fallback"
	"github.com/sds-proxy/sds-proxy/proxy/h1"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
	"github.com/sds-proxy/sds-proxy/proxy/statelog"
	"github.com/sds-proxy/sds-proxy/route"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// StatusClientClosedRequest is logged for a client that went away before
// its answer (nginx's 499); nothing is written to it.
const StatusClientClosedRequest = 499

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
	Metrics *metrics.Set
	// Transport overrides the upstream transport (tests); nil means one
	// built by NewTransport.
	Transport http.RoundTripper
	// Now overrides the clock (tests); nil means time.Now.
	Now func() time.Time
	// Stale keeps the last good answers of the points with a stale max
	// age (PointOptions.StaleMaxAge) and serves them to their degraded
	// requests; nil keeps none. It outlives Configs: the caller sets its
	// size and drops the answers of points that lost stale: on each load.
	Stale *stale.Cache
	// Hasher turns the keys of per-key rules into numbers and labels;
	// nil means a new one (clientkey.NewHasher). Give the one the admin
	// port labels keys with.
	Hasher *clientkey.Hasher
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
	// changes logs and records the points' state changes, throttled.
	changes *statelog.Log
	queues  queue.Set // by point name, across reloads (wait.go)
	hasher  *clientkey.Hasher
}

// snapshot is a Config with what the request path derives from it: the
// transport, and each point's metric series, resolved when the Config is
// swapped in so that the Config is never written and a request does no
// label lookup.
type snapshot struct {
	*Config
	transport http.RoundTripper
	// upgrades carries the requests that ask for a protocol upgrade
	// (WebSocket): HTTP/1.1 always, since an upgrade has no HTTP/2 form
	// (RFC 9113 §8.6), so that an h2c upstream gets them over HTTP/1.1.
	upgrades http.RoundTripper
	series   map[*Point]*metrics.Point // every point of Points and Routes
	sources  []metrics.Source          // Points, as the metrics read them
	routes   routeTable                // Routes compiled
	queues   map[*Point]*queue.Queue   // the points that have a queue
	// staleServed counts, for the points with stale:, the requests
	// answered with a kept answer (sds_stale_served_total).
	staleServed map[*Point]prometheus.Counter
}

// New returns a Handler serving cfg.
func New(cfg *Config, opts Options) *Handler {
	h := &Handler{opts: opts, now: opts.Now, changes: statelog.New(opts.Logger, opts.Events), hasher: opts.Hasher}
	if h.now == nil {
		h.now = time.Now
	}
	if h.hasher == nil {
		h.hasher = clientkey.NewHasher()
	}
	opts.Metrics.SetClock(h.now)
	h.alarms.now, h.alarms.wake = h.now, make(chan struct{}, 1)
	h.plain = opts.Transport
	if h.plain == nil {
		h.plain = h1.New(NewTransport(false))
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:      h.rewrite,
		Transport:    meter{},
		ErrorHandler: answerFailure,
		BufferPool:   &bufferPool{},
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
	s := &snapshot{Config: cfg, transport: h.plain, upgrades: h.plain}
	if cfg.UpstreamH2C {
		if h.h2c == nil {
			h.h2c = NewTransport(true)
		}
		s.transport = h.h2c
	}
	s.series = make(map[*Point]*metrics.Point, len(cfg.Points))
	for _, p := range cfg.Points {
		s.series[p] = h.opts.Metrics.ForPoint(p.name)
	}
	for _, rt := range cfg.Routes {
		if _, ok := s.series[rt.Point]; !ok && rt.Point != nil {
			s.series[rt.Point] = h.opts.Metrics.ForPoint(rt.Point.name)
		}
	}
	s.routes = newRouteTable(cfg.Routes)
	for p := range s.series {
		if p.staleMaxAge > 0 {
			if s.staleServed == nil {
				s.staleServed = make(map[*Point]prometheus.Counter)
			}
			s.staleServed[p] = h.opts.Metrics.StaleServed(p.name)
		}
	}
	s.queues = h.keepQueues(cfg)
	s.sources = make([]metrics.Source, len(cfg.Points))
	for i, p := range cfg.Points {
		s.sources[i] = metrics.Source{Limiter: p.lim, Gated: p.shared != nil, Queue: s.queues[p], Keys: keySources(p.keys), StaleMaxAge: p.staleMaxAge}
	}
	h.current.Store(s)
	h.dropForces(cfg)
}

// Config returns the configuration in force.
func (h *Handler) Config() *Config { return h.current.Load().Config }

// Points returns the points of the configuration in force.
func (h *Handler) Points() []*Point { return h.current.Load().Points }

// Sources returns the points of the configuration in force as the
// metrics read them (metrics.NewSet's points), in config order. The slice
// is the configuration's: it must not be changed.
func (h *Handler) Sources() []metrics.Source { return h.current.Load().sources }

// Snapshots returns the state of each point of the configuration in force
// at now, in config order (limiter.Point.Snapshot): what the admin port
// shows. It has no side effects and is safe for concurrent use.
func (h *Handler) Snapshots(now time.Time) iter.Seq[limiter.Snapshot] {
	points := h.Points()
	return func(yield func(limiter.Snapshot) bool) {
		for _, p := range points {
			if !yield(p.lim.Snapshot(now)) {
				return
			}
		}
	}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	closeIfChunked(w, r)
	if r.Method == http.MethodConnect {
		h.opts.Metrics.RejectedMethod.Inc()
		route.RefuseConnect(w)
		return
	}
	s := h.current.Load()
	path, rewritten, err := route.RequestPath(r)
	if err != nil {
		h.opts.Metrics.RejectedPath.Inc()
		route.BadPath(w, err)
		return
	}
	rt := s.routes.find(r, path)
	if rt == nil || rt.Point == nil {
		h.opts.Metrics.Unrouted.Inc()
		h.forward(w, r, &call{h: h, snap: s, path: rewritten})
		return
	}
	c := &call{h: h, snap: s, point: rt.Point, series: s.series[rt.Point], path: rewritten}
	if len(s.queues) > 0 {
		c.queue = s.queues[rt.Point]
	}
	if rt.Point.staleMaxAge > 0 {
		c.staleOn(r)
	}
	h.enter(w, r, c, rt.Priority)
	defer h.exit(r, c)
	switch {
	case c.failure == failClientGone: // went away while waiting
		return
	case !c.verdict.Allowed:
		if why := c.reason(); !c.serveStale(w, c.point.fallback, why) {
			c.status = c.point.fallback.Serve(w, r, why)
		}
		return
	}
	h.forward(w, r, c)
}

// enter judges a request on c's point: by the operator's switch in force
// on the point, or else by its per-key rules and then its limiter, the
// fleet-wide bucket included (limiter.Request.Gate). It records the
// verdict in c, logs the state changes it caused and counts it; a shadow
// point's would-be degraded request is marked on w.
//
// A request a per-key rule degrades is a degraded visit of the point
// (limiter.Point.Refuse), which spends none of its thresholds: one key
// over its limit never trips the point for the others.
func (h *Handler) enter(w http.ResponseWriter, r *http.Request, c *call, priority limiter.Priority) {
	p, now := c.point, h.now()
	c.arrived, c.priority = now.UnixNano(), priority
	if f := h.forces.active(p.name, now); f != nil {
		c.forced = f.Action
		f.requests.Inc()
		if f.Action == ForceDegrade {
			p.lim.Refuse(now)
			c.series.Degraded.Inc()
			return
		}
		p.lim.Admit(&c.lim, now)
		c.verdict.Allowed = true
		return
	}
	var key keyVerdict
	if len(p.keys) > 0 {
		key = h.judgeKeys(r, c, now)
		if !key.Allowed && !p.shadow {
			p.lim.Refuse(now)
			c.verdict = limiter.Verdict{Strategy: key.Strategy, Count: key.Count, Threshold: key.Threshold}
			c.keyLabel, c.keyRetry = key.label, key.rule.retryAfter(key.Strategy)
			c.series.Degraded.Inc()
			c.series.Strategy(key.Strategy).Inc()
			return
		}
	}
	// With a queue and nobody waiting, a sheddable request may use every
	// slot: a request of a higher priority that comes waits for the next.
	req := limiter.Request{Priority: priority, Gate: p.shared, Wait: c.queue != nil, WholeLimit: c.queue != nil}
	req.PressureTest = c.snap.PressureTestHeader != "" && isTrue(r.Header.Get(c.snap.PressureTestHeader))
	if c.queue != nil && c.queue.Len() > 0 {
		c.verdict = limiter.Verdict{Wait: true} // behind those waiting, never ahead
	} else {
		c.verdict = p.lim.Enter(&c.lim, now, req)
		h.changes.Changes(p.lim, c.verdict, c.verdict.Events, now, statelog.ByRequest)
	}
	if c.verdict.Wait {
		h.wait(r, c, req)
	}
	if len(p.keys) > 0 && !key.Allowed && c.verdict.Allowed && !c.verdict.Shadow {
		// A shadow point's key rule would have degraded it.
		c.verdict.Shadow, c.verdict.Strategy, c.verdict.Count, c.verdict.Threshold = true, key.Strategy, key.Count, key.Threshold
		c.keyLabel = key.label
	}
	switch {
	case c.failure == failClientGone: // went away while waiting, counted (wait)
	case !c.verdict.Allowed:
		c.series.Degraded.Inc()
		c.series.Strategy(c.verdict.Strategy).Inc()
	case c.verdict.Shadow:
		mark := p.fallback.Degraded(fallback.ReasonOf(c.verdict))
		if c.queue != nil && c.verdict.Strategy.Queues() {
			mark += "; queued" // it would have waited, and been degraded only past it
		}
		if c.keyLabel != "" {
			mark += "; key=" + c.keyLabel
		}
		w.Header().Set("Sds-Shadow-Degraded", mark)
		c.series.ShadowDegraded.Inc()
		c.series.ShadowStrategy(c.verdict.Strategy).Inc()
		c.counted.Store(true)
	}
	// A request let through is counted proxied when the upstream is
	// sent its headers, or canceled at its exit (call.count).
}

// forward calls the upstream through the ReverseProxy, whose transport
// (meter.go) measures and classifies the call. ReverseProxy aborts a
// response whose body fails mid-copy by panicking with
// http.ErrAbortHandler; then c.copied stays false.
//
// The client's body is wrapped on the shallow copy that goes to the
// ReverseProxy, never on r: the server recognises its own body by type
// (an Expect: 100-continue body that sends 100 on its first read; a body
// it may drain before the answer), and a wrapper on its request would
// make it send 100 and read up to 256 KiB of a body that the upstream
// refused before answering.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, c *call) {
	ctx := withCall(r, c)
	if p := c.point; p != nil && p.upstreamTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		c.cancel = cancel
	}
	if c.point != nil && !c.counted.Load() {
		c.trace.WroteHeaders = c.wroteHeaders
		ctx = httptrace.WithClientTrace(ctx, &c.trace)
	}
	out := r.WithContext(ctx)
	if h2ExpectsContinue(r) {
		out.Header = r.Header.Clone()
		out.Header.Set("Expect", "100-continue")
	}
	if p := c.point; p != nil {
		if out.Body != nil && out.Body != http.NoBody {
			c.reqBody = clientBody{ReadCloser: out.Body, c: c}
			out.Body = &c.reqBody
		}
		c.header = r.Header
		c.startClock(p.lim.TimeoutThreshold(), p.upstreamTimeout)
	}
	rw := w
	if c.snap.AccessLog && h.opts.AccessLog != nil && c.point != nil {
		rw = &statusWriter{ResponseWriter: w, c: c}
	}
	h.rp.ServeHTTP(rw, out)
	c.copied = true
}

// exit is the one end of a request on a point, deferred by ServeHTTP: the
// upstream call, if there was one, ends in the limiter (call.end; a stream
// has ended it at its headers already), and the access log line is
// written.
func (h *Handler) exit(r *http.Request, c *call) {
	c.exitKeys()
	c.recorded(false) // the body did not reach its end
	var took time.Duration
	if c.verdict.Allowed {
		took = c.end(h.now())
		c.count()
	}
	h.access(r, c, took)
}

func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	c := callOf(pr.In)
	if c.path != "" {
		route.SetPath(pr.Out.URL, c.path) // before SetURL, which joins it to the upstream's
	}
	pr.SetURL(c.snap.Upstream)
	pr.Out.URL.RawQuery = route.UpstreamQuery(c.snap.Upstream, pr.In.URL) // undo ReverseProxy's cleaning
	pr.Out.Host = pr.In.Host
	if c.snap.ForwardedHeaders {
		pr.SetXForwarded()
	}
}

// access writes the access log line of a request on a point, once it is
// over. Its path is the escaped, normalised path the request was routed
// by; its status is the one the client was written, 101 for a switch
// (written on the hijacked connection, past the statusWriter), and 499
// for a client that went away before its answer.
func (h *Handler) access(r *http.Request, c *call, upstream time.Duration) {
	if !c.snap.AccessLog || h.opts.AccessLog == nil {
		return
	}
	path := c.path
	if path == "" {
		path = r.URL.EscapedPath()
	}
	status := c.status
	if c.failure == failClientGone {
		status = StatusClientClosedRequest
	}
	h.opts.AccessLog.Info("request",
		zap.String("point", c.point.name),
		zap.String("arrived", time.Unix(0, c.arrived).UTC().Format(startLayout)),
		zap.String("host", r.Host),
		zap.String("method", r.Method),
		zap.String("path", path),
		zap.String("priority", c.priority.String()),
		zap.Int("status", status),
		zap.String("strategy", c.verdict.Strategy.String()),
		zap.Bool("degraded", !c.verdict.Allowed && c.failure != failClientGone),
		zap.Bool("shadow", c.verdict.Shadow),
		zap.Duration("upstream_latency", upstream),
		startField(c),
		forcedField(c.forced),
		waitedField(c.waited),
		keyField(c.keyLabel),
		h.keysField(c, r),
		pressureField(c.snap.PressureTestHeader != "" && isTrue(r.Header.Get(c.snap.PressureTestHeader))),
		outcomeField(c),
		errorField(c),
		endedField(c),
		staleField(c.staleServed),
	)
}

// startLayout is the access log's start: when the call entered the point,
// to the microsecond, so that `sds-proxy suggest` tells calls in a row
// from calls at once (the line's ts is to the millisecond).
const startLayout = "2006-01-02T15:04:05.000000Z07:00"

// startField is the access log's "start" field of a forwarded request, or
// nothing for one that was not.
func startField(c *call) zap.Field {
	began := c.lim.Began()
	if began.IsZero() {
		return zap.Skip()
	}
	return zap.String("start", began.UTC().Format(startLayout))
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
	if w.c.status == 0 && code >= 200 { // a 101 is the meter's (call.status)
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
