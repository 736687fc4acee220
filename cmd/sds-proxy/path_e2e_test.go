package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/route"
)

// pathRoutes: every point but open and echo degrades every request
// (visitThreshold 0), so the point that answers a request shows in its
// Sds-Degraded header; open and echo never degrade, so what the upstream
// received shows in its answer.
const pathRoutes = `routes:
  - point: blocked
    match: {pathPrefix: /blocked}
  - point: space
    match: {path: /a%20b}
  - point: dirty
    match: {pathPrefix: '//x/../dirty/./'}
  - point: v6
    match: {host: '[::1]', path: /v6}
  - point: port
    match: {host: '127.0.0.1:8443', path: /port}
  - point: open
    match: {pathPrefix: /open}
  - point: echo
    match: {path: /echo-headers}
points:
  blocked: {visitThreshold: 0}
  space: {visitThreshold: 0}
  dirty: {visitThreshold: 0}
  v6: {visitThreshold: 0}
  port: {visitThreshold: 0}
  open: {visitThreshold: 1000000}
  echo: {visitThreshold: 1000000}
`

// TestPathNormalisation: no spelling of a path slips past its point. Raw
// requests for every bypass spelling are degraded under the route they
// normalise to, or answered 400 without reaching the upstream; the
// upstream receives the normalised path; route paths written escaped or
// unclean match; host routes match with and without a port, IPv6 included.
func TestPathNormalisation(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, pathRoutes)
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	port := addr[strings.LastIndexByte(addr, ':')+1:]

	degradedUnder := map[string]int{} // point → requests degraded
	for _, tt := range pathsToPoints(port) {
		r := rawGet(t, addr, tt.target, tt.host)
		if want := "visit; point=" + tt.point; r.status != http.StatusTooManyRequests || r.degraded() != want {
			t.Errorf("GET %s (Host %s): got %v, want 429 with Sds-Degraded %q", tt.target, tt.host, r, want)
		}
		degradedUnder[tt.point]++
	}

	// Requests that match none of those points reach the upstream, which
	// names the (decoded) path it received.
	requestsBefore, _ := e.upstreamStats()
	upstreamAnswers := pathsToUpstream(port)
	for _, tt := range upstreamAnswers {
		r := rawGet(t, addr, tt.target, tt.host)
		if r.status != http.StatusOK || r.degraded() != "" || r.body != tt.want {
			t.Errorf("GET %s (Host %s): got %v, want 200 %q", tt.target, tt.host, r, tt.want)
		}
	}

	// The upstream's request-target: the normalised path, escaped as it
	// was matched, the query as the client sent it.
	for _, tt := range []struct{ target, want string }{
		{"/x/../echo-headers?q=%2F..%5C&r=/./", "/echo-headers?q=%2F..%5C&r=/./"},
		{"/%65cho-headers", "/echo-headers"},
		{"//echo-headers", "/echo-headers"},
	} {
		r := rawGet(t, addr, tt.target, "a.example")
		var echoed struct{ URI string }
		if err := json.Unmarshal([]byte(r.body), &echoed); err != nil || r.status != http.StatusOK {
			t.Errorf("GET %s: got %v (%v), want the upstream's echo", tt.target, r, err)
			continue
		}
		if echoed.URI != tt.want {
			t.Errorf("GET %s: upstream request-target got %q, want %q", tt.target, echoed.URI, tt.want)
		}
	}
	requestsAfter, _ := e.upstreamStats()
	if got, want := requestsAfter-requestsBefore, int64(len(upstreamAnswers)+3); got != want {
		t.Errorf("upstream requests: got %d, want %d", got, want)
	}

	// Encoded slashes, backslashes and invalid escapes: 400, and nothing
	// reaches the upstream or any point.
	for _, target := range pathsRejected {
		r := rawGet(t, addr, target, "a.example")
		if r.status != http.StatusBadRequest || r.degraded() != "" {
			t.Errorf("GET %s: got %v, want 400", target, r)
		}
	}
	if n, _ := e.upstreamStats(); n != requestsAfter {
		t.Errorf("upstream requests after the rejected paths: got %d, want %d", n, requestsAfter)
	}

	for point, n := range degradedUnder {
		e.metricIs(float64(n), "sds_requests_total", "point", point, "result", "degraded")
		if p := e.point(point); p.Window.Visits != int64(n) {
			t.Errorf("point %s: got %d visits, want %d", point, p.Window.Visits, n)
		}
	}
	e.metricIs(3, "sds_requests_total", "point", "open", "result", "proxied")
	e.metricIs(3, "sds_requests_total", "point", "echo", "result", "proxied")
}

// pathsToPoints are requests, each a spelling of its point's route
// (pathRoutes), that the point must degrade; port is the proxy's.
func pathsToPoints(port string) []struct{ target, host, point string } {
	return []struct{ target, host, point string }{
		{"/blocked/x", "a.example", "blocked"},
		{"/soak/../blocked/x", "a.example", "blocked"},
		{"/soak/%2e%2e/blocked/x", "a.example", "blocked"},
		{"/soak/%2E%2E/blocked/x", "a.example", "blocked"},
		{"/soak/.%2e/blocked/x", "a.example", "blocked"},
		{"/./blocked/x", "a.example", "blocked"},
		{"//blocked/x", "a.example", "blocked"},
		{"/blocked//x", "a.example", "blocked"},
		{"/../../blocked", "a.example", "blocked"},
		{"/%62locked/x", "a.example", "blocked"},
		{"/a%20b", "a.example", "space"},
		{"/x/../a%20b", "a.example", "space"},
		{"//a%20b?q=1", "a.example", "space"},
		{"/dirty/1", "a.example", "dirty"},
		{"/dirty/", "a.example", "dirty"},
		{"/v6", "[::1]:" + port, "v6"},
		{"/v6", "[::1]", "v6"},
		{"/./v6", "[::1]:8080", "v6"},
		{"/port", "127.0.0.1:8443", "port"},
		{"/port", "127.0.0.1.:8443", "port"},
	}
}

// pathsToUpstream are requests that match none of the degrading points
// and reach the upstream, with the answer in which it names the (decoded)
// path it received; port is the proxy's.
func pathsToUpstream(port string) []struct{ target, host, want string } {
	return []struct{ target, host, want string }{
		{"/soak/../open/x", "a.example", "upstream: GET /open/x\n"},
		{"/%6fpen//y/./z/", "a.example", "upstream: GET /open/y/z/\n"},
		{"/open/a%20b", "a.example", "upstream: GET /open/a b\n"},
		{"/blocked/..", "a.example", "upstream: GET /\n"},
		{"/a%20b/", "a.example", "upstream: GET /a b/\n"},
		{"/a+b", "a.example", "upstream: GET /a+b\n"},
		{"/dirty", "a.example", "upstream: GET /dirty\n"},
		{"/v6", "[::2]:" + port, "upstream: GET /v6\n"},
		{"/port", "127.0.0.1:" + port, "upstream: GET /port\n"},
		{"/port", "127.0.0.1", "upstream: GET /port\n"},
	}
}

// pathsRejected are request-targets with an encoded slash, a backslash or
// an invalid escape: each answered 400.
var pathsRejected = []string{
	"/soak/..%2Fblocked/x",
	"/blocked%2fx",
	"/open/a%2Fb",
	"/soak/..%5Cblocked/x",
	"/open/%5c",
	`/soak/..\blocked/x`,
	`/open\x`,
	"/open/%zz",
	"/blocked/%",
}

// TestRoutePathRuleAgrees: config validation, which asks route.Normalize,
// and the proxy's normaliser agree on which route paths can match: a path
// that validate accepts is one the proxy routes by, and one it refuses is
// one the proxy answers 400.
func TestRoutePathRuleAgrees(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"/a", "/a%20b", "/a%2Fb", "/a%2fb", "/a%5Cb", "/a%5cb", `/a\b`, "/a%zz", "/a%", "/a%2",
		"/a%g1", "/a%1", "//x/../a/./", "/%7euser", "/%2e%2e", "/a%25", "/a%252F", "/caf%c3%a9",
	} {
		src := fmt.Sprintf("upstream: http://127.0.0.1:9\nroutes:\n  - point: p\n    match: {path: '%s'}\npoints:\n  p: {visitThreshold: 1}\n", p)
		_, cfgErr := config.Parse("sds.yaml", []byte(src), config.Options{})
		_, proxyErr := route.NormalizePath(p)
		if (cfgErr == nil) != (proxyErr == nil) {
			t.Errorf("path %q: config says %v, proxy says %v", p, cfgErr, proxyErr)
		}
	}
}
