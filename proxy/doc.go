// Package proxy is the request path of sds-proxy: an http.Handler that
// names each request's point by its routes, has the point's limiter judge
// it, and either forwards it with httputil.ReverseProxy or answers at once
// with the point's prebuilt fallback.
//
// One request, top to bottom (handler.go):
//
//	ServeHTTP  route.RequestPath, routeTable.find  → the point, or none
//	enter      an operator's switch (force.go), or limiter.Point.Enter,
//	           whose Request.Gate is the fleet-wide bucket
//	defer exit call.end: the limiter's Exit, once; the access log line
//	forward    ReverseProxy → meter.RoundTrip (meter.go) records what the
//	           upstream did; its bodies time their reads (clock.go)
//	  or       the point's fallback.Handler (proxy/fallback)
//
// The meter (meter.go) is the one place a call's outcome is decided:
// classify decides it from what the meter recorded, once, when the call
// ends (at exit, or at a stream's response headers), and a gRPC stream's
// body judges the trailers it reads at its end, which may add an
// exception to a call that ended without one. The ErrorHandler only
// writes the answer of the failure the meter returned. Timeouts are
// counted apart, and decide no outcome: the upstream clock and the
// alarms' sweeper (clock.go, alarms.go) count a call's timeout the moment
// its upstream time reaches the threshold, while it is in flight (or at
// its end, call.end, if no alarm fired first), and cut it at its
// UpstreamTimeout, which classify then sees as a failure. Run settles the
// points every TickInterval (record.go).
//
// What it leaves to other packages: route matching and path normal form
// (route), the degraded answers (proxy/fallback), the state-change lines
// and events (proxy/statelog), the metrics and traffic figures
// (proxy/metrics), the HTTP/1.1 client (proxy/h1), the admin port
// (proxy/admin), connection limits (proxy/connlimit), the event history
// (proxy/events) and the fleet-wide bucket (proxy/cluster).
//
// The running configuration is one immutable Config, swapped atomically
// (Handler.Swap), so a request sees one configuration from start to end.
// The package never sees YAML: cmd translates the config file into Config.
package proxy
