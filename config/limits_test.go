package config

import (
	"fmt"
	"strings"
	"testing"
)

// largeConfig returns a file of routes routes and points points, in the
// compact form that fits both at 10,000 in maxFileSize: each route names
// point p(i mod points); every tenth is a prefix, every seventh lists
// methods and every thirteenth names a host, so that validation compares
// routes of each kind. Route lastRoute, when not "", replaces the last
// route's match.
func largeConfig(routes, points int, lastRoute string) []byte {
	var b strings.Builder
	b.WriteString("upstream: http://127.0.0.1:9000\npoints:\n")
	for i := range points {
		fmt.Fprintf(&b, " p%d: {visitThreshold: 100}\n", i)
	}
	b.WriteString("routes:\n")
	for i := range routes {
		var match string
		switch {
		case i == routes-1 && lastRoute != "":
			match = lastRoute
		case i%10 == 0:
			match = fmt.Sprintf("pathPrefix: /r%d", i)
		case i%7 == 0:
			match = fmt.Sprintf("methods: [GET], path: /r%d/a", i)
		case i%13 == 0:
			match = fmt.Sprintf("host: h%d.example, path: /r%d", i, i)
		default:
			match = fmt.Sprintf("path: /r%d/a", i)
		}
		fmt.Fprintf(&b, "- {point: p%d, match: {%s}}\n", i%points, match)
	}
	return []byte(b.String())
}

// TestLargeConfig: a file of maxRoutes routes and maxPoints points is
// accepted; a route at its end that a route near its start covers is
// still reported; one route or point more is refused.
func TestLargeConfig(t *testing.T) {
	t.Parallel()
	data := largeConfig(maxRoutes, maxPoints, "")
	if len(data) > maxFileSize {
		t.Fatalf("the file is %d bytes, more than maxFileSize %d", len(data), maxFileSize)
	}
	if _, err := Parse("sds.yaml", data, Options{}); err != nil {
		t.Fatalf("%d routes and %d points: %v", maxRoutes, maxPoints, err)
	}
	shadowed := largeConfig(maxRoutes, maxPoints, "path: /r10/x/y")
	_, err := Parse("sds.yaml", shadowed, Options{})
	want := fmt.Sprintf("route %d can never match: route 11 (line %d) matches every request it would", maxRoutes, maxPoints+4+10)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a route under the prefix of route 11: got %v, want %q", err, want)
	}
	for _, tt := range []struct {
		routes, points int
		want           string
	}{
		{maxRoutes + 1, 1, fmt.Sprintf("routes: %d routes; a config holds at most %d", maxRoutes+1, maxRoutes)},
		{1, maxPoints + 1, fmt.Sprintf("points: a config holds at most %d points", maxPoints)},
	} {
		_, err := Parse("sds.yaml", largeConfig(tt.routes, tt.points, ""), Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%d routes, %d points: got %v, want %q", tt.routes, tt.points, err, tt.want)
		}
	}
}

// TestRoutesDiffLarge: two lists of maxRoutes routes that differ in one
// route give the two edits of that route; two that differ everywhere give
// every route removed and added, without a table of their product.
func TestRoutesDiffLarge(t *testing.T) {
	t.Parallel()
	list := func(tag string) []Route {
		routes := make([]Route, maxRoutes)
		for i := range routes {
			routes[i] = Route{Point: "p", Path: fmt.Sprintf("/%s%d", tag, i)}
		}
		return routes
	}
	from, to := list("a"), list("a")
	to[5000] = Route{Point: "q", Path: "/changed"}
	edits := RoutesDiff(from, to)
	want := []RouteEdit{{Index: 5001, Route: from[5000]}, {Added: true, Index: 5001, Route: to[5000]}}
	if fmt.Sprint(edits) != fmt.Sprint(want) {
		t.Errorf("one route changed: got %v, want %v", edits, want)
	}
	edits = RoutesDiff(from, list("b"))
	if len(edits) != 2*maxRoutes || edits[0].Added || edits[0].Index != 1 || !edits[maxRoutes].Added || edits[maxRoutes].Index != 1 {
		t.Errorf("every route changed: got %d edits starting %v, want %d: the old routes removed, then the new added", len(edits), edits[:2], 2*maxRoutes)
	}
}

// BenchmarkParseLarge measures Parse (decoding and validation) of a file
// of maxRoutes routes and maxPoints points: its time and memory.
func BenchmarkParseLarge(b *testing.B) {
	data := largeConfig(maxRoutes, maxPoints, "")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("sds.yaml", data, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPointNamesListed: a route without a point lists the points it may
// name, all of them up to maxNamesListed, then how many more there are.
func TestPointNamesListed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		points int
		want   string
	}{
		{maxNamesListed, "add point: and name one of: p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16, p17, p18, p19\n"},
		{maxNamesListed + 1, "add point: and name one of: p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16, p17, p18, p19 and 1 more\n"},
	} {
		data := string(largeConfig(tt.points, tt.points, "")) + "- {match: {path: /x}}\n"
		_, err := Parse("sds.yaml", []byte(data), Options{})
		if err == nil || !strings.Contains(err.Error()+"\n", tt.want) {
			t.Errorf("%d points: got %v, want a message ending %q", tt.points, err, tt.want)
		}
	}
}
