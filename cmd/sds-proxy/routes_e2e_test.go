package main_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// manyRoutes is a config body of 10,000 routes, the most a config holds:
// first a route for host shop.example under the prefix of the last exact
// path, to point first; then exact API paths (point exact), prefixes ending
// in "/" (point prefix) and POST-only gRPC-like paths (point grpc) in turn.
// Every point degrades every request (visitThreshold 0), so the point that
// answers shows in Sds-Degraded; a request no route matches reaches the
// upstream. The first route goes to point a, the second, for /other, to
// point b: "first" and "other", or the other way round.
func manyRoutes(a, b string) string {
	var out strings.Builder
	out.WriteString("points:\n")
	for _, p := range []string{"first", "exact", "prefix", "grpc", "other"} {
		fmt.Fprintf(&out, "  %s: {visitThreshold: 0}\n", p)
	}
	out.WriteString("routes:\n")
	fmt.Fprintf(&out, "- {point: %s, match: {host: shop.example, pathPrefix: /api/v1/resource9999}}\n", a)
	fmt.Fprintf(&out, "- {point: %s, match: {path: /other}}\n", b)
	for i := 2; i < 10_000; i++ {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&out, "- {point: exact, match: {path: /api/v1/resource%d/action}}\n", i)
		case 1:
			fmt.Fprintf(&out, "- {point: prefix, match: {pathPrefix: /files%d/}}\n", i)
		case 2:
			fmt.Fprintf(&out, "- {point: grpc, match: {methods: [POST], path: /pkg.Service/Method%d}}\n", i)
		}
	}
	return out.String()
}

// TestManyRoutes: the real binary loads a config of 10,000 routes and
// routes requests at its end to the right point, where the first route
// that matches wins whatever its kind; a reload that swaps the points of
// the first two routes takes effect.
func TestManyRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, configHeader(e.upstream, "10s", 10)+manyRoutes("first", "other"))
	e.proxy = startProxy(t, e.config)

	check := func(when, method, host, path, want string) {
		t.Helper()
		req, err := http.NewRequest(method, e.proxy.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		r, err := e.do(req)
		if err != nil {
			t.Fatalf("%s %s %s: %v", method, host, path, err)
		}
		switch {
		case want == "" && (r.degraded() != "" || r.status != http.StatusOK):
			t.Errorf("%s: %s %s %s: got %v, want the upstream's answer (no route)", when, method, host, path, r)
		case want != "" && r.degraded() != "visit; point="+want:
			t.Errorf("%s: %s %s %s: got %v, want degraded by point %s", when, method, host, path, r, want)
		}
	}
	for _, tt := range []struct{ method, host, path, want string }{
		{"GET", "a.example", "/api/v1/resource9999/action", "exact"},
		{"GET", "SHOP.example.:8080", "/api/v1/resource9999/action", "first"},
		{"GET", "shop.example", "/api/v1/resource9999", "first"},
		{"GET", "a.example", "/api/v1/resource9999/action/7", ""},
		{"GET", "a.example", "/api/v1/resource9999", ""},
		{"GET", "a.example", "/files9997/a/b", "prefix"},
		{"GET", "a.example", "/files9997", ""},
		{"POST", "a.example", "/pkg.Service/Method9998", "grpc"},
		{"GET", "a.example", "/pkg.Service/Method9998", ""},
		{"GET", "a.example", "/api/v1/resource3/action", "exact"},
		{"GET", "a.example", "/other", "other"},
	} {
		check("at start", tt.method, tt.host, tt.path, tt.want)
	}

	mark := e.proxy.stderr.mark()
	e.write(e.config, configHeader(e.upstream, "10s", 10)+manyRoutes("other", "first"))
	if err := e.proxy.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	check("after the reload", "GET", "shop.example:8443", "/api/v1/resource9999/action", "other")
	check("after the reload", "GET", "a.example", "/api/v1/resource9999/action", "exact")
	check("after the reload", "GET", "a.example", "/other", "first")
}
