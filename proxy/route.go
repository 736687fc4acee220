package proxy

import (
	"net"
	"net/http"
	"strings"
)

// Route maps matching requests to a point. Every field set must match; a
// Route with no field set matches every request.
type Route struct {
	Point *Point
	// Methods, if not empty, lists the methods that match (exact, upper case).
	Methods []string
	// Path, if set, must equal the request path.
	Path string
	// PathPrefix, if set, must be the request path or a prefix of it that
	// ends at a segment boundary: "/api/orders" matches "/api/orders" and
	// "/api/orders/7", not "/api/orders-admin". A prefix ending in "/"
	// matches whatever follows it.
	PathPrefix string
	// Host, if set, must equal the request's host (case-insensitive, port
	// ignored).
	Host string
}

// matches reports whether r falls under the route.
func (rt *Route) matches(r *http.Request) bool {
	if len(rt.Methods) > 0 && !contains(rt.Methods, r.Method) {
		return false
	}
	path := r.URL.Path
	if rt.Path != "" && path != rt.Path {
		return false
	}
	if rt.PathPrefix != "" && !hasPathPrefix(path, rt.PathPrefix) {
		return false
	}
	if rt.Host != "" && !strings.EqualFold(hostOnly(r.Host), rt.Host) {
		return false
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// hasPathPrefix reports whether prefix covers path at a segment boundary.
func hasPathPrefix(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || strings.HasSuffix(prefix, "/") || path[len(prefix)] == '/'
}

// hostOnly strips a port from a Host header value.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// route returns the point of the first route that matches r, or nil.
func route(routes []Route, r *http.Request) *Point {
	for i := range routes {
		if routes[i].matches(r) {
			return routes[i].Point
		}
	}
	return nil
}
