package route

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// linearRoute is the reference the router must agree with: the routes tried
// in order, each with every field of Rule (the router's code before it was
// compiled), returning the index of the first match or -1.
func linearRoute(routes []Rule, r *http.Request, path string) int {
	t := target{method: r.Method, path: path}
	t.host, t.port = splitHost(r.Host)
	if t.port == "" {
		t.port = "80"
		if r.TLS != nil {
			t.port = "443"
		}
	}
	for i := range routes {
		if linearMatches(&routes[i], &t) {
			return i
		}
	}
	return -1
}

// linearMatches reports whether t falls under rt, splitting rt's host anew.
func linearMatches(rt *Rule, t *target) bool {
	if len(rt.Methods) > 0 && !contains(rt.Methods, t.method) {
		return false
	}
	if rt.Path != "" && t.path != rt.Path {
		return false
	}
	if rt.PathPrefix != "" && !hasPathPrefix(t.path, rt.PathPrefix) {
		return false
	}
	if rt.Host != "" {
		host, port := splitHost(rt.Host)
		if !strings.EqualFold(host, t.host) || port != "" && !samePort(port, t.port) {
			return false
		}
	}
	return true
}

// compiledRoute is the router's answer as an index, for comparison.
func compiledRoute(rt *Table, r *http.Request, path string) int {
	t := newTarget(r, path)
	return rt.match(&t)
}

// Pools the fuzzer's route tables draw from, besides pieces of the request
// itself: methods, paths and hosts in the forms that routing tells apart.
var (
	fuzzMethods = []string{"GET", "POST", "HEAD", "PUT", "get", "DELETE", "OPTIONS", ""}
	fuzzPaths   = []string{
		"/", "/a", "/a/", "/a/b", "/a/b/", "/ab", "/a/b/c", "*", "a", "a/", "//", "/a//b",
		"/A", "/api/v1/x", "/api/v1/", "/api", "/a%20b", "/%C3%A9/",
	}
	fuzzHosts = []string{
		"shop.example", "SHOP.example.", "shop.example:8443", "shop.example:08443", "shop.example:80",
		"::1", "[::1]", "[::1]:443", "[::1]:x", "[::1", "ſhop.example", "\u212a.example", "k.example",
		":80", "[]", "a", "ß.example", "SS.example", "\xff.example", "\ufffd.example", "σ", "Σ", "ς",
		strings.Repeat("h", 300), strings.Repeat("ſ", 200), "shop.example:", "a:b:c",
	}
)

// fuzzTable builds a route table from spec, five bytes a route, mixing
// the pools with cuts and variants of the request's own path and host so
// that many routes nearly match it. Routes are literals: their paths need
// not be in normal form, and the router must agree with the scan anyway.
func fuzzTable(spec []byte, path, host string) []Rule {
	const maxRoutes = 64
	var routes []Rule
	for len(spec) >= 5 && len(routes) < maxRoutes {
		flags, pathSel, prefixSel, hostSel, methodSel := spec[0], spec[1], spec[2], spec[3], spec[4]
		spec = spec[5:]
		var rt Rule
		if flags&1 != 0 {
			rt.Methods = append(rt.Methods, fuzzMethods[int(methodSel)%len(fuzzMethods)])
			if methodSel&0x80 != 0 {
				rt.Methods = append(rt.Methods, fuzzMethods[int(methodSel>>3)%len(fuzzMethods)])
			}
		}
		if flags&2 != 0 {
			rt.Path = fuzzPath(pathSel, path)
		}
		if flags&4 != 0 {
			rt.PathPrefix = fuzzPath(prefixSel, path)
		}
		if flags&8 != 0 {
			rt.Host = fuzzHost(hostSel, host)
		}
		routes = append(routes, rt)
	}
	return routes
}

// fuzzPath picks a route path: from the pool, or a cut of the request's
// path, with a "/" added when sel says so.
func fuzzPath(sel byte, path string) string {
	if sel&0x80 == 0 {
		return fuzzPaths[int(sel)%len(fuzzPaths)]
	}
	cut := path[:int(sel&0x3f)%(len(path)+1)]
	if sel&0x40 != 0 {
		cut += "/"
	}
	return cut
}

// fuzzHost picks a route host: from the pool, or the request's host upper
// cased, with a port or a trailing dot as sel says.
func fuzzHost(sel byte, host string) string {
	if sel&0x80 == 0 {
		return fuzzHosts[int(sel)%len(fuzzHosts)]
	}
	name, _ := splitHost(host)
	if sel&1 != 0 {
		name = strings.ToUpper(name)
	}
	if sel&2 != 0 {
		name += "."
	}
	if strings.Contains(name, ":") && sel&4 != 0 {
		name = "[" + name + "]"
	}
	switch sel >> 3 & 3 {
	case 1:
		name += ":80"
	case 2:
		name += ":443"
	case 3:
		name += ":8443"
	}
	return name
}

// checkRouter fails t when the router and the linear scan disagree on the
// request, and returns the index they agree on.
func checkRouter(t *testing.T, routes []Rule, rt *Table, method, host, path string, overTLS bool) int {
	t.Helper()
	r := &http.Request{Method: method, Host: host}
	if overTLS {
		r.TLS = &tls.ConnectionState{}
	}
	want := linearRoute(routes, r, path)
	if got := compiledRoute(rt, r, path); got != want {
		t.Fatalf("%s %q %q (tls %v) over %s: router gave route %d, linear scan %d", method, host, path, overTLS, describeRoutes(routes), got, want)
	}
	return want
}

func describeRoutes(routes []Rule) string {
	var b strings.Builder
	for i, rt := range routes {
		fmt.Fprintf(&b, "\n  %d: methods %q path %q prefix %q host %q", i, rt.Methods, rt.Path, rt.PathPrefix, rt.Host)
	}
	return b.String()
}

// FuzzRouterMatchesLinear: for any route table (methods, exact paths,
// prefixes with and without a trailing "/", hosts with and without ports,
// IPv6, case and Unicode folding, catch-alls, duplicates) and any request,
// the compiled router picks the same route as trying the routes in order.
func FuzzRouterMatchesLinear(f *testing.F) {
	for _, seed := range []struct {
		table              []byte
		method, host, path string
		overTLS            bool
	}{
		{[]byte{2, 0x80 | 10, 0, 0, 0}, "GET", "shop.example", "/api/v1/x", false},
		{[]byte{4, 0, 0x80 | 0x40 | 4, 0, 0, 4, 0, 0x80 | 3, 0, 0}, "GET", "a.example", "/api/v1/x", false},
		{[]byte{8, 0, 0, 0x80 | 1, 0, 8, 0, 0, 0x80 | 3<<3, 0, 0, 0, 0, 0, 0}, "POST", "Shop.Example:8443", "/", true},
		{[]byte{9, 0, 0, 7, 0x81, 9, 0, 0, 6, 1, 1, 0, 0, 0, 2}, "HEAD", "[::1]", "/x", true},
		{[]byte{8, 0, 0, 10, 0, 8, 0, 0, 11, 0, 8, 0, 0, 12, 0}, "GET", "K.EXAMPLE", "/", false},
		{[]byte{8, 0, 0, 17, 0, 8, 0, 0, 18, 0, 8, 0, 0, 20, 0, 8, 0, 0, 21, 0}, "GET", "\xfe.example", "/", false},
		{[]byte{14, 2, 2, 0x80, 0, 6, 3, 1, 0, 0, 0, 0, 0, 0, 0}, "GET", "shop.example.", "/a/b", false},
		{[]byte{8, 0, 0, 23, 0, 8, 0, 0, 24, 0}, "GET", strings.Repeat("S", 200), "*", false},
		{[]byte{4, 0, 11, 0, 0, 4, 0, 10, 0, 0, 4, 0, 9, 0, 0}, "GET", "", "//a", false},
	} {
		f.Add(seed.table, seed.method, seed.host, seed.path, seed.overTLS)
	}
	f.Fuzz(func(t *testing.T, table []byte, method, host, path string, overTLS bool) {
		routes := fuzzTable(table, path, host)
		checkRouter(t, routes, NewTable(routes), method, host, path, overTLS)
	})
}

// TestRouterMatchesLinear runs the fuzzer's comparison over random tables
// and requests drawn from the same pools, so that every test run covers
// more than the seeds.
func TestRouterMatchesLinear(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 10_000))
	requestPaths := append([]string{"", "/a/b/c/d", "/api/v1/x/y", "/a/"}, fuzzPaths...)
	requestHosts := append([]string{"", "a.example:8443", "SHOP.EXAMPLE:443", "[::1]:80", "::1"}, fuzzHosts...)
	matched := 0
	for range 2000 {
		path := requestPaths[rng.IntN(len(requestPaths))]
		host := requestHosts[rng.IntN(len(requestHosts))]
		table := make([]byte, 5*rng.IntN(40))
		for i := range table {
			table[i] = byte(rng.Uint32())
		}
		routes := fuzzTable(table, path, host)
		rt := NewTable(routes)
		for range 20 {
			method := fuzzMethods[rng.IntN(len(fuzzMethods))]
			if checkRouter(t, routes, rt, method, host, path, rng.IntN(2) == 0) >= 0 {
				matched++
			}
			path = requestPaths[rng.IntN(len(requestPaths))]
			host = requestHosts[rng.IntN(len(requestHosts))]
		}
	}
	if matched < 2000 || matched > 38_000 {
		t.Errorf("got %d of 40000 requests matched, want between 2000 and 38000, so that both outcomes are compared often", matched)
	}
}

// TestRouterFirstMatchWins: where routes of different kinds (exact, prefix,
// host, method, catch-all) all match, the one listed first answers,
// whichever kind it is.
func TestRouterFirstMatchWins(t *testing.T) {
	t.Parallel()
	all := []Rule{
		{Path: "/api/orders"},
		{PathPrefix: "/api/"},
		{PathPrefix: "/api"},
		{Host: "Shop.Example:8443"},
		{Methods: []string{"GET"}},
		{},
	}
	r := &http.Request{Method: "GET", Host: "shop.example.:8443"}
	for first := range all {
		routes := append(append([]Rule{}, all[first:]...), all[:first]...)
		if got := compiledRoute(NewTable(routes), r, "/api/orders"); got != 0 {
			t.Errorf("%v listed first: got route %d, want 0", describeRoutes(routes[:1]), got)
		}
	}
	if got := compiledRoute(NewTable(nil), r, "/"); got != -1 {
		t.Errorf("no routes: got route %d, want -1", got)
	}
}

// TestRouterAllocs: routing allocates nothing, whether the host needs
// folding or not and whichever index answers.
func TestRouterAllocs(t *testing.T) {
	routes := append(benchTable(1000, "exact"), Rule{Host: "Shop.Example"}, Rule{PathPrefix: "/static/"})
	rt := NewTable(routes)
	for _, tt := range []struct {
		host, path string
		want       int
	}{
		{"a.example", "/api/v1/resource999/action", 999},
		{"SHOP.EXAMPLE:8443", "/nowhere", 1000},
		{"ſhop.example", "/nowhere", 1000},
		{"a.example", "/static/x/y/z", 1001},
	} {
		r := &http.Request{Method: "GET", Host: tt.host}
		allocs := testing.AllocsPerRun(100, func() {
			if got := rt.Find(r, tt.path); got != tt.want {
				t.Fatalf("%s %s: got rule %d, want %d", tt.host, tt.path, got, tt.want)
			}
		})
		if allocs != 0 {
			t.Errorf("%s %s: got %v allocs, want 0", tt.host, tt.path, allocs)
		}
	}
}

// benchTable returns n rules of the given kind:
// "exact" (distinct API paths), "prefix" (distinct API path prefixes) or
// "grpc" (one exact path per gRPC method), all with the method POST for
// gRPC and none otherwise. benchPath is the path the last one matches.
func benchTable(n int, kind string) []Rule {
	routes := make([]Rule, n)
	for i := range routes {
		var rt Rule
		switch kind {
		case "exact":
			rt.Path = fmt.Sprintf("/api/v1/resource%d/action", i)
		case "prefix":
			rt.PathPrefix = fmt.Sprintf("/api/v1/resource%d", i)
		case "grpc":
			rt.Methods = []string{"POST"}
			rt.Path = fmt.Sprintf("/pkg.Service/Method%d", i)
		}
		routes[i] = rt
	}
	return routes
}

// benchPath is the request path of BenchmarkRoute for a table of n routes
// of kind: the last route is the one it matches.
func benchPath(n int, kind string) string {
	switch kind {
	case "prefix":
		return fmt.Sprintf("/api/v1/resource%d/action/7", n-1)
	case "grpc":
		return fmt.Sprintf("/pkg.Service/Method%d", n-1)
	}
	return fmt.Sprintf("/api/v1/resource%d/action", n-1)
}

// BenchmarkRoute measures routing one request against tables of 1, 100,
// 1,000 and 10,000 routes whose last route is the one that matches, with
// the compiled router and, for comparison, the linear scan it replaced.
func BenchmarkRoute(b *testing.B) {
	for _, kind := range []string{"exact", "prefix", "grpc"} {
		for _, n := range []int{1, 100, 1000, 10_000} {
			routes := benchTable(n, kind)
			path := benchPath(n, kind)
			r := &http.Request{Method: "POST", Host: "svc.example:8080"}
			rt := NewTable(routes)
			b.Run(fmt.Sprintf("%s/routes=%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if rt.Find(r, path) != n-1 {
						b.Fatal("wrong route")
					}
				}
			})
			b.Run(fmt.Sprintf("%s-linear/routes=%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if linearRoute(routes, r, path) != n-1 {
						b.Fatal("wrong route")
					}
				}
			})
		}
	}
}
