package proxy_test

import (
	"cmp"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
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
			p = rpPoint(tb, rs.point, func(s *limiter.Settings) { s.VisitThreshold = limiter.At(0) }, proxy.PointOptions{})
			points[rs.point] = p
			cfg.Points = append(cfg.Points, p)
		}
		rt, err := proxy.NewRoute(proxy.Route{Point: p, Rule: route.Rule{Methods: rs.methods, Path: rs.path, PathPrefix: rs.pathPrefix, Host: rs.host}})
		if err != nil {
			tb.Fatalf("NewRoute(%+v): %v", rs, err)
		}
		cfg.Routes = append(cfg.Routes, rt)
	}
	h, _ := rpHandler(tb, cfg, proxy.Options{Transport: rpOK})
	return h, points
}

// badRequest is what routedTo returns for a request answered 400.
const badRequest = "!400"

// routedTo serves one request and returns the point that answered it, ""
// when the request went to the upstream unprotected, or badRequest. target
// is the request-target as a client writes it ("/a/%2e%2e/b?q"), parsed as
// net/http's server parses it.
func routedTo(tb testing.TB, h http.Handler, method, host, target string) string {
	tb.Helper()
	return routedReq(tb, h, routeRequest(tb, method, host, target))
}

// routeRequest builds the request a server hands the handler for target.
func routeRequest(tb testing.TB, method, host, target string) *http.Request {
	tb.Helper()
	u, err := url.ParseRequestURI(target)
	if err != nil {
		tb.Fatalf("request-target %q: %v", target, err)
	}
	return &http.Request{
		Method:     method,
		URL:        u,
		RequestURI: target,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header),
		Host:       host,
		RemoteAddr: "192.0.2.1:1234",
		Body:       http.NoBody,
	}
}

// routedReq serves req as routedTo does.
func routedReq(tb testing.TB, h http.Handler, req *http.Request) string {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	degraded := rec.Header().Get("Sds-Degraded")
	what := req.Method + " " + req.Host + " " + req.RequestURI
	if rec.Code == http.StatusBadRequest && degraded == "" {
		if !strings.HasPrefix(rec.Body.String(), "400 Bad Request: the path contains ") {
			tb.Fatalf("%s: 400 body: got %q, want a reason", what, rec.Body.String())
		}
		return badRequest
	}
	if degraded == "" {
		if rec.Code != http.StatusOK || rec.Body.String() != "upstream" {
			tb.Fatalf("%s: unrouted answer: got %d %q, want 200 \"upstream\"", what, rec.Code, rec.Body.String())
		}
		return ""
	}
	point, ok := strings.CutPrefix(degraded, "visit; point=")
	if !ok {
		tb.Fatalf("%s: Sds-Degraded: got %q, want \"visit; point=...\"", what, degraded)
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
	{point: "blocked", pathPrefix: "/blocked"},
	{point: "tls", host: "Shop.Example.:8443", path: "/tls"},
	{point: "space", path: "/x/.%2E//a%20b"}, // "/a%20b" once normalised
}

// routeTests are requests against shopRoutes and the point each must
// reach: boundary rows on each side of every matching rule.
var routeTests = []struct {
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
	{"host, IPv6 literal without port", "GET", "[::1]", "/v6", "ipv6"},
	{"host with port, same port", "GET", "shop.example:8443", "/tls", "tls"},
	{"host with port, other port", "GET", "shop.example:8444", "/tls", ""},
	{"host with port, no port is 80", "GET", "shop.example", "/tls", ""},

	// Paths are normalised before routing: no spelling slips past.
	{"dot-dot segment", "GET", "a.example", "/soak/../blocked/x", "blocked"},
	{"encoded dot-dot segment", "GET", "a.example", "/soak/%2e%2e/blocked/x", "blocked"},
	{"encoded dot-dot, upper case", "GET", "a.example", "/soak/%2E%2E/blocked/x", "blocked"},
	{"half-encoded dot-dot", "GET", "a.example", "/soak/.%2e/blocked/x", "blocked"},
	{"dot segment", "GET", "a.example", "/./blocked/x", "blocked"},
	{"double slash", "GET", "a.example", "//blocked/x", "blocked"},
	{"double slash inside", "GET", "a.example", "/blocked//x", "blocked"},
	{"dot-dot above the root", "GET", "a.example", "/../../blocked", "blocked"},
	{"encoded unreserved letter", "GET", "a.example", "/%62locked/x", "blocked"},
	{"ends in a dot-dot inside the prefix", "GET", "a.example", "/blocked/x/..", "blocked"},
	{"dot-dot out of the prefix", "GET", "a.example", "/blocked/..", ""},
	{"dot-dot onto an exact path", "GET", "a.example", "/static/../health", "health"},
	{"encoded slash", "GET", "a.example", "/soak/..%2Fblocked/x", badRequest},
	{"encoded slash, lower case", "GET", "a.example", "/blocked%2fx", badRequest},
	{"encoded backslash", "GET", "a.example", "/soak/..%5Cblocked", badRequest},
	{"raw backslash", "GET", "a.example", `/soak/..\blocked`, badRequest},
	{"escaped route path", "GET", "a.example", "/a%20b", "space"},
	{"escaped route path, spelt otherwise", "GET", "a.example", "//x/../a%20b", "space"},
	{"escaped route path is not its plus", "GET", "a.example", "/a+b", ""},
	{"reserved escape is not its character", "GET", "a.example", "/api/orders%3B", ""},

	// Methods list.
	{"methods, GET", "GET", "a.example", "/health", "health"},
	{"methods, HEAD", "HEAD", "a.example", "/health", "health"},
	{"methods, not listed", "DELETE", "a.example", "/health", ""},
	{"exact path, trailing slash", "GET", "a.example", "/health/", ""},

	{"nothing matches", "GET", "a.example", "/", ""},
}

func TestRoute(t *testing.T) {
	for _, tt := range routeTests {
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

// TestNewRoute: route paths are put in normal form once, when built, and
// a path that no request could match is refused.
func TestNewRoute(t *testing.T) {
	for _, tt := range []struct {
		path, prefix         string
		wantPath, wantPrefix string
		err                  error
	}{
		{path: "/api/orders", wantPath: "/api/orders"},
		{path: "/a%20b", wantPath: "/a%20b"},
		{path: "/a b", wantPath: "/a%20b"},
		{path: "/%7euser/./x//", wantPath: "/~user/x/"},
		{prefix: "/static/", wantPrefix: "/static/"},
		{prefix: "//api/v1/../v2", wantPrefix: "/api/v2"},
		{prefix: "/a%c3%a9", wantPrefix: "/a%C3%A9"},
		{path: "/a%2Fb", err: route.ErrEncodedSlash},
		{prefix: `/a\b`, err: route.ErrBackslash},
		{prefix: "/a%5c", err: route.ErrBackslash},
		{path: "/a%zz", err: route.ErrInvalidEscape},
	} {
		rt, err := proxy.NewRoute(proxy.Route{Rule: route.Rule{Path: tt.path, PathPrefix: tt.prefix, Host: "Shop.Example:8443"}})
		if !errors.Is(err, tt.err) {
			t.Errorf("NewRoute(%q, %q): got error %v, want %v", tt.path, tt.prefix, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		if rt.Path != tt.wantPath || rt.PathPrefix != tt.wantPrefix || rt.Host != "Shop.Example:8443" {
			t.Errorf("NewRoute(%q, %q): got %q, %q, host %q; want %q, %q, host as given", tt.path, tt.prefix, rt.Path, rt.PathPrefix, rt.Host, tt.wantPath, tt.wantPrefix)
		}
	}
}

// TestRouteHost: a route's host matches with or without a port on either
// side; a port in the route must be the request's, whose default is its
// scheme's.
func TestRouteHost(t *testing.T) {
	routes := []routeSpec{
		{point: "any-port", host: "shop.example", path: "/any"},
		{point: "port", host: "shop.example:8443", path: "/port"},
		{point: "port-80", host: "shop.example:80", path: "/p80"},
		{point: "port-443", host: "shop.example:443", path: "/p443"},
		{point: "v6", host: "[::1]", path: "/v6"},
		{point: "v6-bare", host: "::1", path: "/v6-bare"},
		{point: "v6-port", host: "[::1]:8080", path: "/v6-port"},
		{point: "dot", host: "shop.example.", path: "/dot"},
		{point: "loopback-port", host: "127.0.0.1:9000", path: "/lo"},
	}
	tests := []struct {
		host string
		tls  bool
		path string
		want string
	}{
		{"shop.example", false, "/any", "any-port"},
		{"shop.example:8443", false, "/any", "any-port"},
		{"SHOP.EXAMPLE.", false, "/any", "any-port"},
		{"shop.example.:1", false, "/any", "any-port"},
		{"shop.example:", false, "/any", "any-port"},
		{"other.example", false, "/any", ""},
		{"shop.example.org", false, "/any", ""},
		{"shop.example:x", false, "/any", ""},

		{"shop.example:8443", false, "/port", "port"},
		{"Shop.Example:08443", false, "/port", "port"},
		{"shop.example.:8443", false, "/port", "port"},
		{"shop.example:8442", false, "/port", ""},
		{"shop.example:8444", false, "/port", ""},
		{"shop.example", false, "/port", ""},
		{"shop.example", true, "/port", ""},

		{"shop.example", false, "/p80", "port-80"},
		{"shop.example:80", false, "/p80", "port-80"},
		{"shop.example", true, "/p80", ""},
		{"shop.example", true, "/p443", "port-443"},
		{"shop.example:443", false, "/p443", "port-443"},
		{"shop.example", false, "/p443", ""},

		{"[::1]", false, "/v6", "v6"},
		{"[::1]:8080", false, "/v6", "v6"},
		{"[::1]:8080", false, "/v6-bare", "v6-bare"},
		{"[::1]", false, "/v6-bare", "v6-bare"},
		{"[::1]:8080", false, "/v6-port", "v6-port"},
		{"[::1]:8081", false, "/v6-port", ""},
		{"[::1]", false, "/v6-port", ""},
		{"[::2]:8080", false, "/v6-port", ""},
		{"[::1]:x", false, "/v6", ""},

		{"shop.example", false, "/dot", "dot"},
		{"shop.example.", false, "/dot", "dot"},

		{"127.0.0.1:9000", false, "/lo", "loopback-port"},
		{"127.0.0.1:9001", false, "/lo", ""},
		{"127.0.0.1", false, "/lo", ""},
	}
	for _, tt := range tests {
		h, _ := routeHandler(t, routes)
		req := routeRequest(t, "GET", tt.host, tt.path)
		if tt.tls {
			req.TLS = &tls.ConnectionState{}
		}
		if got := routedReq(t, h, req); got != tt.want {
			t.Errorf("Host %q (TLS %v) %s: got point %q, want %q", tt.host, tt.tls, tt.path, got, tt.want)
		}
	}
}

// TestUpstreamGetsNormalPath: the upstream receives the normalised path
// that was routed, escaped as it was matched, with the query untouched,
// whether the request was on a point or unprotected.
func TestUpstreamGetsNormalPath(t *testing.T) {
	var got []string // the request-target the upstream was sent
	record := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		if dec, err := url.PathUnescape(r.URL.EscapedPath()); err != nil || dec != r.URL.Path {
			t.Errorf("upstream URL: Path %q and RawPath %q disagree", r.URL.Path, r.URL.RawPath)
		}
		got = append(got, r.URL.RequestURI())
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	open := rpPoint(t, "open", nil, proxy.PointOptions{})
	rt, err := proxy.NewRoute(proxy.Route{Point: open, Rule: route.Rule{PathPrefix: "/open"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &proxy.Config{Upstream: rpFakeUpstream, Routes: []proxy.Route{rt}, Points: []*proxy.Point{open}}
	h, _ := rpHandler(t, cfg, proxy.Options{Transport: record})
	tests := []struct{ target, want string }{
		{"/open/x", "/open/x"},
		{"/soak/../open/x?q=%2F..&r=/./", "/open/x?q=%2F..&r=/./"},
		{"/soak/%2e%2e/open/x", "/open/x"},
		{"//open//x/", "/open/x/"},
		{"/%6Fpen/%7euser", "/open/~user"},
		{"/open/a%20b", "/open/a%20b"},
		{"/open/a%3bb", "/open/a%3Bb"},
		{"/open/caf%c3%a9", "/open/caf%C3%A9"},
		{"/open/a[b]", "/open/a%5Bb%5D"},
		// Unprotected requests are normalised too.
		{"/other/./x/../y", "/other/y"},
		{"/other%2dpath", "/other-path"},
		{"/", "/"},
	}
	for _, tt := range tests {
		got = got[:0]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, routeRequest(t, "GET", "a.example", tt.target))
		if rec.Code != http.StatusOK || len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: got %d, upstream saw %q; want 200 and %q", tt.target, rec.Code, got, tt.want)
		}
	}
}

// TestBadPathRejected: a path with an encoded slash or a backslash is
// answered 400 with a reason; the upstream is not called and no point
// counts it, not even a catch-all.
func TestBadPathRejected(t *testing.T) {
	calls := 0
	count := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		calls++
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	all := rpPoint(t, "all", nil, proxy.PointOptions{})
	h, _ := rpHandler(t, rpConfig(rpFakeUpstream, all), proxy.Options{Transport: count})
	for _, tt := range []struct{ target, reason string }{
		{"/a%2Fb", "encoded slash"},
		{"/a/..%2f", "encoded slash"},
		{"/a%5Cb", "backslash"},
		{`/a\b`, "backslash"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, routeRequest(t, "GET", "a.example", tt.target))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tt.reason) || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Errorf("%s: got %d %q (%s), want 400, text/plain, naming the %s", tt.target, rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"), tt.reason)
		}
	}
	if counts, _ := rpCounts(all, time.Now()); calls != 0 || counts.Visits != 0 {
		t.Errorf("got %d upstream calls and %d visits, want none", calls, counts.Visits)
	}
}

// FuzzRoute: routing never panics, is deterministic, and agrees with a
// plain restatement of the rules for the shop routes. target is a
// request-target as a client sends it; one that net/http's server would
// refuse is skipped.
func FuzzRoute(f *testing.F) {
	for _, seed := range []struct{ method, host, target string }{
		{"POST", "a.example", "/api/orders"},
		{"GET", "shop.example:8080", "/api/orders/7"},
		{"GET", "a.example", "/api/orders-admin"},
		{"GET", "a.example", "/static/"},
		{"HEAD", "a.example", "/health"},
		{"GET", "[::1]:80", "/v6"},
		{"GET", "", "*"},
		{"", "[", "/%25"},
		{"GET", "a.example:", "/static"},
		{"GET", "[::1]:[", "/v6"}, // not a host and port: no match
		{"GET", "a.example", "/soak/%2e%2e/blocked/x"},
		{"GET", "a.example", "//blocked/../api/orders"},
		{"GET", "a.example", "/blocked%2Fx"},
		{"GET", "a.example", `/a\b`},
		{"GET", "shop.example.:08443", "/tls"},
		{"GET", "a.example", "/x/../a%20b"},
		{"GET", "a.example", "http://b.example//api/./orders?x"},
	} {
		f.Add(seed.method, seed.host, seed.target)
	}
	h, _ := routeHandler(f, shopRoutes)
	f.Fuzz(func(t *testing.T, method, host, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Skip("net/http's server refuses it")
		}
		got := routedTo(t, h, method, host, target)
		if again := routedTo(t, h, method, host, target); again != got {
			t.Fatalf("%q %q %q: routed to %q, then to %q", method, host, target, got, again)
		}
		if want := shopOracle(method, host, u.EscapedPath()); got != want {
			t.Fatalf("%q %q %q: got point %q, want %q", method, host, target, got, want)
		}
	})
}

// Host header forms, for shopOracle: a bracketed IPv6 literal or a name
// without ':', each with an optional port of digits.
var (
	bracketedHost = regexp.MustCompile(`^\[([^\]]*)\](?::([0-9]*))?$`)
	namedHost     = regexp.MustCompile(`^([^\[:][^:]*)?:([0-9]*)$`)
)

// shopOracle restates shopRoutes' rules independently of route.go, for a
// request whose escaped path is esc. The path rule is NormalizePath's
// (FuzzNormalizePath checks it).
func shopOracle(method, host, esc string) string {
	path, err := route.NormalizePath(esc)
	switch {
	case esc == "*":
		path, err = esc, nil
	case err != nil:
		return badRequest
	}
	under := func(prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }
	hostname, port := host, "80"
	if m := bracketedHost.FindStringSubmatch(host); m != nil {
		hostname, port = m[1], cmp.Or(m[2], port)
	} else if m := namedHost.FindStringSubmatch(host); m != nil {
		hostname, port = strings.TrimSuffix(m[1], "."), cmp.Or(m[2], port)
	} else if !strings.HasPrefix(host, "[") && strings.Count(host, ":") != 1 {
		hostname = strings.TrimSuffix(host, ".")
	}
	if p, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(p)
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
	case strings.EqualFold(hostname, "::1") && path == "/v6":
		return "ipv6"
	case under("/blocked"):
		return "blocked"
	case strings.EqualFold(hostname, "shop.example") && port == "8443" && path == "/tls":
		return "tls"
	case path == "/a%20b":
		return "space"
	}
	return ""
}
