package proxy

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/fallback"
)

// Config is one complete, immutable configuration of the request path.
// Build it whole, then hand it to Handler.Swap; never change it after.
// Swap reads it and writes nothing into it, so one Config may be swapped in
// again (a rollback) while requests under it are still in flight.
type Config struct {
	// Upstream is the service's base URL (http or https).
	Upstream *url.URL
	// UpstreamH2C speaks cleartext HTTP/2 to an http Upstream (gRPC).
	UpstreamH2C bool
	// ForwardedHeaders sets X-Forwarded-For/Proto/Host for the upstream.
	// When false they are removed, never passed from the client.
	ForwardedHeaders bool
	// PressureTestHeader names the request header that marks pressure-test
	// traffic ("1" or "true", case-insensitive); "" means none is.
	PressureTestHeader string
	// AccessLog writes one line per request on a point to
	// Options.AccessLog (when that is set).
	AccessLog bool
	// Routes are tried in order; the first match names the point. A request
	// that matches none is proxied unprotected. Handler.Swap compiles them
	// (route.Table), so that routing costs about the same whatever their
	// number.
	Routes []Route
	// Points lists every point, in config order (for status and metrics).
	Points []*Point
}

// Point is a protected point of the request path: its limiter, how its
// upstream calls are made and its fallback. Build it with
// NewPoint; it is immutable after (its limiter keeps the point's live
// state) and safe for concurrent use. A Point holds no metrics: the
// Handler resolves each point's series by name when a Config is swapped in,
// so one Point may serve under several Handlers and registries.
type Point struct {
	name            string
	lim             *limiter.Point
	upstreamTimeout time.Duration
	fallbackOnError bool
	fallback        *fallback.Handler
	shared          limiter.Gate  // nil: none
	keys            []KeyRule     // judged in order before lim
	staleMaxAge     time.Duration // 0: keeps and serves no answer
	shadow          bool          // lim's settings are in shadow mode
}

// PointOptions are the parts of a Point besides its limiter. The zero
// value is no deadline, 502/504 on failed upstream calls and the default
// fallback.
type PointOptions struct {
	// UpstreamTimeout cuts the upstream call after this long, measured on
	// the upstream's time only (504, or the fallback with
	// FallbackOnError); 0 means no deadline.
	UpstreamTimeout time.Duration
	// FallbackOnError answers the fallback, marked
	// "Sds-Degraded: upstream_error; point=P", instead of 502/504 when
	// the upstream call fails (a transport error or UpstreamTimeout); an
	// upstream 5xx is relayed as it is.
	FallbackOnError bool
	// Fallback is the answer of every degraded request of the point.
	Fallback Fallback
	// Shared is the point's token bucket shared with other proxies, such
	// as proxy/cluster's Bucket: the gate its limiter judges after the
	// point's own strategies admit a request (limiter.Request.Gate); nil
	// means none.
	Shared limiter.Gate
	// Keys are the point's per-key rules, at most MaxKeyRules, judged in
	// order before its limiter (docs/semantics.md, Per-key rules); nil
	// means none. NewPoint copies the slice.
	Keys []KeyRule
	// StaleMaxAge, above 0, keeps the point's good answers to GET aside in
	// the Handler's stale cache (Options.Stale) and serves them, no older
	// than this, to its degraded GET and HEAD requests instead of the
	// fallback (docs/protections.md, Stale answers); 0 means none.
	StaleMaxAge time.Duration
}

// Fallback is what a point answers instead of calling the service; its
// fields and their zero values are fallback.Response's.
type Fallback = fallback.Response

// NewPoint builds a point around lim. Its fallback answers are built the
// first time each is needed, then kept (fallback.Handler). It panics on
// more than MaxKeyRules per-key rules, or one without a table.
func NewPoint(lim *limiter.Point, opts PointOptions) *Point {
	if len(opts.Keys) > MaxKeyRules || slices.ContainsFunc(opts.Keys, func(k KeyRule) bool { return k.Table == nil }) {
		panic(fmt.Sprintf("proxy: point %s: %d per-key rules, want at most %d, each with a table", lim.Name(), len(opts.Keys), MaxKeyRules))
	}
	return &Point{
		keys:            slices.Clone(opts.Keys),
		staleMaxAge:     opts.StaleMaxAge,
		shadow:          lim.Settings().Shadow,
		name:            lim.Name(),
		lim:             lim,
		upstreamTimeout: opts.UpstreamTimeout,
		fallbackOnError: opts.FallbackOnError,
		fallback:        fallback.New(lim.Name(), opts.Fallback, lim.Settings()),
		shared:          opts.Shared,
	}
}

// Name is the point's name, as its limiter has it.
func (p *Point) Name() string { return p.name }

// Keys returns the point's per-key rules, in judging order. The slice is
// the point's: it must not be changed.
func (p *Point) Keys() []KeyRule { return p.keys }

// Limiter is the point's limiter: its window, strategies and delay, and the
// live state that a reload keeps (limiter.Point.Reconfigure).
func (p *Point) Limiter() *limiter.Point { return p.lim }
