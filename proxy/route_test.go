package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// The routing tests see which route matched from the outside: every point
// has visitThreshold 0, so a request on point P is answered at once with
// "Sds-Degraded: visit; point=P", and a request that matches no route
// reaches the fake upstream.

// routeSpec is a route naming its point by name, so that each test row can
// build fresh points.
type routeSpec struct {
	point      string
	methods    []string
	path       string
	pathPrefix string
	host       string
}

// routeHandler builds a handler over specs; every point degrades every
// request. It returns the points by name.
func routeHandler(tb testing.TB, specs []routeSpec) (*proxy.Handler, map[string]*proxy.Point) {
	tb.Helper()
	points := make(map[string]*proxy.Point)
	cfg := &proxy.Config{Upstream: rpFakeUpstream, ForwardedHeaders: true}
	for _, rs := range specs {
		p, ok := points[rs.point]
		if !ok {
			p = rpPoint(tb, rs.point, func(s *limiter.Settings) { s.VisitThreshold = 0 }, proxy.PointOptions{})
			points[rs.point] = p
			cfg.Points = append(cfg.Points, p)
		}
		cfg.Routes = append(cfg.Routes, proxy.Route{
			Point: p, Methods: rs.methods, Path: rs.path, PathPrefix: rs.pathPrefix, Host: rs.host,
		})
	}
	h, _ := rpHandler(tb, cfg, proxy.Options{Transport: rpOK})
	return h, points
}

// routedTo serves one request and returns the point that answered it, or ""
// when the request went to the upstream unprotected.
func routedTo(tb testing.TB, h http.Handler, method, host, path string) string {
	tb.Helper()
	req := &http.Request{
		Method:     method,
		URL:        &url.URL{Path: path},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header),
		Host:       host,
		RemoteAddr: "192.0.2.1:1234",
		Body:       http.NoBody,
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	degraded := rec.Header().Get("Sds-Degraded")
	if degraded == "" {
		if rec.Code != http.StatusOK || rec.Body.String() != "upstream" {
			tb.Fatalf("%s %s%s: unrouted answer: got %d %q, want 200 \"upstream\"", method, host, path, rec.Code, rec.Body.String())
		}
		return ""
	}
	point, ok := strings.CutPrefix(degraded, "visit; point=")
	if !ok {
		tb.Fatalf("%s %s%s: Sds-Degraded: got %q, want \"visit; point=...\"", method, host, path, degraded)
	}
	return point
}

// shopRoutes is the route table of TestRoute.
var shopRoutes = []routeSpec{
	{point: "orders.create", methods: []string{"POST"}, path: "/api/orders"},
	{point: "orders.shop", pathPrefix: "/api/orders", host: "shop.example"},
	{point: "orders.read", pathPrefix: "/api/orders"},
	{point: "static", pathPrefix: "/static/"},
	{point: "health", methods: []string{"GET", "HEAD"}, path: "/health"},
	{point: "ipv6", host: "::1", path: "/v6"},
}

func TestRoute(t *testing.T) {
	tests := []struct {
		name, method, host, path string
		want                     string // point; "" means unmatched
	}{
		// Exact path and methods.
		{"exact path and method", "POST", "a.example", "/api/orders", "orders.create"},
		{"exact path, other method falls through", "GET", "a.example", "/api/orders", "orders.read"},
		{"exact path does not cover a subpath", "POST", "a.example", "/api/orders/7", "orders.read"},
		{"methods are exact", "post", "a.example", "/api/orders", "orders.read"},
		{"first match wins over a later host route", "POST", "shop.example", "/api/orders", "orders.create"},

		// Path prefix at a segment boundary.
		{"prefix itself", "GET", "a.example", "/api/orders", "orders.read"},
		{"prefix, one segment more", "GET", "a.example", "/api/orders/7", "orders.read"},
		{"prefix, trailing slash", "GET", "a.example", "/api/orders/", "orders.read"},
		{"prefix, deeper", "DELETE", "a.example", "/api/orders/7/items/1", "orders.read"},
		{"prefix is not a string prefix", "GET", "a.example", "/api/orders-admin", ""},
		{"shorter than the prefix", "GET", "a.example", "/api/order", ""},
		{"parent of the prefix", "GET", "a.example", "/api", ""},
		{"prefix is case-sensitive", "GET", "a.example", "/API/orders", ""},
		{"prefix ending in / covers what follows", "GET", "a.example", "/static/css/site.css", "static"},
		{"prefix ending in /, itself", "GET", "a.example", "/static/", "static"},
		{"prefix ending in /, without it", "GET", "a.example", "/static", ""},
		{"prefix ending in /, string prefix", "GET", "a.example", "/staticx", ""},

		// Host.
		{"host", "GET", "shop.example", "/api/orders/7", "orders.shop"},
		{"host, case-insensitive", "GET", "SHOP.Example", "/api/orders/7", "orders.shop"},
		{"host, port ignored", "GET", "shop.example:8080", "/api/orders", "orders.shop"},
		{"host, other host falls through", "GET", "shop.example.org", "/api/orders", "orders.read"},
		{"host, IPv6 literal with port", "GET", "[::1]:8080", "/v6", "ipv6"},
		{"host, IPv6 literal, other path", "GET", "[::1]:8080", "/v7", ""},

		// Methods list.
		{"methods, GET", "GET", "a.example", "/health", "health"},
		{"methods, HEAD", "HEAD", "a.example", "/health", "health"},
		{"methods, not listed", "DELETE", "a.example", "/health", ""},
		{"exact path, trailing slash", "GET", "a.example", "/health/", ""},

		{"nothing matches", "GET", "a.example", "/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, points := routeHandler(t, shopRoutes)
			if got := routedTo(t, h, tt.method, tt.host, tt.path); got != tt.want {
				t.Fatalf("%s %s%s: got point %q, want %q", tt.method, tt.host, tt.path, got, tt.want)
			}
			// Only the matched point counted the request; an unmatched
			// request is proxied unprotected and counts nowhere.
			for name, p := range points {
				want := int64(0)
				if name == tt.want {
					want = 1
				}
				if counts, _ := rpCounts(p, time.Now()); counts.Visits != want {
					t.Errorf("point %s: got %d visits, want %d", name, counts.Visits, want)
				}
			}
		})
	}
}

// TestRouteCatchAll: a Route with no field set matches every request, and
// routes are tried in order.
func TestRouteCatchAll(t *testing.T) {
	tests := []struct {
		name   string
		routes []routeSpec
		method string
		path   string
		want   string
	}{
		{"specific before catch-all, specific", []routeSpec{{point: "a", path: "/a"}, {point: "all"}}, "GET", "/a", "a"},
		{"specific before catch-all, other", []routeSpec{{point: "a", path: "/a"}, {point: "all"}}, "PATCH", "/b/c", "all"},
		{"catch-all, root", []routeSpec{{point: "a", path: "/a"}, {point: "all"}}, "GET", "/", "all"},
		{"catch-all first shadows the rest", []routeSpec{{point: "all"}, {point: "a", path: "/a"}}, "GET", "/a", "all"},
		{"no routes", nil, "GET", "/a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := routeHandler(t, tt.routes)
			if got := routedTo(t, h, tt.method, "any.example", tt.path); got != tt.want {
				t.Errorf("%s %s: got point %q, want %q", tt.method, tt.path, got, tt.want)
			}
		})
	}
}

// TestUnmatchedUnprotected: a request that matches no route reaches the
// upstream as it is: no Sds headers, no counts, whatever the points say.
func TestUnmatchedUnprotected(t *testing.T) {
	h, points := routeHandler(t, shopRoutes)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/unrouted", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "upstream" {
		t.Errorf("got %d %q, want 200 \"upstream\"", rec.Code, rec.Body.String())
	}
	for k := range rec.Header() {
		if strings.HasPrefix(k, "Sds-") {
			t.Errorf("header %s: got %q, want none", k, rec.Header().Get(k))
		}
	}
	for name, p := range points {
		if counts, inflight := rpCounts(p, time.Now()); counts != (limiter.Counts{}) || inflight != 0 {
			t.Errorf("point %s: got %+v, %d in flight, want nothing counted", name, counts, inflight)
		}
	}
}

// FuzzRoute: routing never panics, is deterministic, and agrees with a
// plain restatement of the rules for the shop routes.
func FuzzRoute(f *testing.F) {
	for _, seed := range []struct{ method, host, path string }{
		{"POST", "a.example", "/api/orders"},
		{"GET", "shop.example:8080", "/api/orders/7"},
		{"GET", "a.example", "/api/orders-admin"},
		{"GET", "a.example", "/static/"},
		{"HEAD", "a.example", "/health"},
		{"GET", "[::1]:80", "/v6"},
		{"GET", "", ""},
		{"", "[", "%"},
		{"GET", "a.example:", "/static"},
		{"GET", "[::1]:[", "/v6"}, // not a host and port: no match
	} {
		f.Add(seed.method, seed.host, seed.path)
	}
	h, _ := routeHandler(f, shopRoutes)
	f.Fuzz(func(t *testing.T, method, host, path string) {
		got := routedTo(t, h, method, host, path)
		if again := routedTo(t, h, method, host, path); again != got {
			t.Fatalf("%q %q %q: routed to %q, then to %q", method, host, path, got, again)
		}
		if want := shopOracle(method, host, path); got != want {
			t.Fatalf("%q %q %q: got point %q, want %q", method, host, path, got, want)
		}
	})
}

// shopOracle restates shopRoutes' rules independently of route.go.
func shopOracle(method, host, path string) string {
	under := func(prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }
	hostname := host
	if i := strings.LastIndexByte(hostname, ':'); i >= 0 && !strings.ContainsAny(hostname[i:], "[]") {
		// A port: strip it when the rest is a plain name or a bracketed
		// IPv6 literal, as net.SplitHostPort does.
		name := hostname[:i]
		if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") && !strings.ContainsAny(name[1:len(name)-1], "[]") {
			hostname = name[1 : len(name)-1]
		} else if !strings.ContainsAny(name, ":[]") {
			hostname = name
		}
	}
	switch {
	case method == "POST" && path == "/api/orders":
		return "orders.create"
	case under("/api/orders") && strings.EqualFold(hostname, "shop.example"):
		return "orders.shop"
	case under("/api/orders"):
		return "orders.read"
	case strings.HasPrefix(path, "/static/"):
		return "static"
	case (method == "GET" || method == "HEAD") && path == "/health":
		return "health"
	case hostname == "::1" && path == "/v6":
		return "ipv6"
	}
	return ""
}
