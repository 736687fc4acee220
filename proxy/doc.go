// Package proxy is the request path of sds-proxy: an http.Handler that maps
// each request to a point by its routes, asks the point's limiter whether
// the service may be called, and either forwards the request with
// httputil.ReverseProxy (measuring the upstream call and feeding the
// outcome back to the limiter) or answers at once with the point's prebuilt
// fallback.
//
// The running configuration is one immutable Config, swapped atomically
// (Handler.Swap), so a request sees one configuration from start to end.
// The package never sees YAML: cmd translates the config file into Config.
package proxy
