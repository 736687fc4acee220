package proxy

import (
	"net/url"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Config is one complete, immutable configuration of the request path.
// Build it whole, then hand it to Handler.Swap; never change it after.
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
	// that matches none is proxied unprotected.
	Routes []Route
	// Points lists every point, in config order (for status and metrics).
	Points []*Point
}

// Point is a protected point of the request path: its limiter and how its
// calls and fallbacks are made. Build it with NewPoint.
type Point struct {
	Name    string
	Limiter *limiter.Point
	// UpstreamTimeout cuts the upstream call after this long (504, or the
	// fallback with FallbackOnError); 0 means no deadline.
	UpstreamTimeout time.Duration
	// FallbackOnError answers the fallback instead of 502/504 when the
	// upstream call fails (transport error or UpstreamTimeout).
	FallbackOnError bool

	fallbacks *fallbacks
	errorFB   fallbackResponse // the answer when FallbackOnError applies
	metrics   *pointMetrics
}

// PointOptions are the parts of a Point besides its limiter.
type PointOptions struct {
	UpstreamTimeout time.Duration
	FallbackOnError bool
	Fallback        Fallback
}

// NewPoint builds a point around lim, preparing its fallback answers.
func NewPoint(lim *limiter.Point, opts PointOptions) *Point {
	p := &Point{
		Name:            lim.Name(),
		Limiter:         lim,
		UpstreamTimeout: opts.UpstreamTimeout,
		FallbackOnError: opts.FallbackOnError,
		fallbacks:       buildFallbacks(lim.Name(), opts.Fallback, lim.Settings()),
	}
	p.errorFB = buildErrorFallback(lim.Name(), opts.Fallback)
	return p
}

// buildErrorFallback is the answer for a failed upstream call on a point
// with FallbackOnError: the fallback, marked "Sds-Degraded: error".
func buildErrorFallback(name string, f Fallback) fallbackResponse {
	r := buildFallback(name, f, limiter.Settings{}, limiter.Exception, false)
	r.header.Set("Sds-Degraded", "upstream_error; point="+name)
	if f.Header.Get("Retry-After") == "" {
		r.header.Del("Retry-After")
	}
	if f.Status == 0 {
		r.status = 503
	}
	return r
}
