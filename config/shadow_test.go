package config

import (
	"math/rand/v2"
	"testing"
)

// quadraticShadow is the check shadows replaced: every route compared with
// every route above it, the first that covers it found.
func quadraticShadow(routes []Route, i int) int {
	for j := range i {
		if covers(routes[j], routes[i]) {
			return j
		}
	}
	return -1
}

// TestShadowsMatchQuadratic: over random tables drawn from forms that
// cover one another (exact paths, prefixes with and without "/", paths
// that covers does not judge, hosts in several cases and Unicode folds,
// method sets), shadows names the same covering route as comparing every
// pair.
func TestShadowsMatchQuadratic(t *testing.T) {
	t.Parallel()
	paths := []string{"", "/", "/a", "/a/", "/a/b", "/a/b/", "/ab", "/a/b/c", "/a//b", "/a/./b", "/%41", "a", "a/b"}
	hosts := []string{"", "shop.example", "SHOP.example", "shop.example:8443", "ſhop.example", "\u212a", "k", "\xff", "\xfe"}
	methods := [][]string{nil, {"GET"}, {"POST"}, {"GET", "POST"}, {"POST", "GET"}, {"HEAD", "GET", "POST"}, {}}
	rng := rand.New(rand.NewPCG(1, 2))
	shadowed := 0
	for range 3000 {
		routes := make([]Route, rng.IntN(30))
		for i := range routes {
			r := Route{Host: hosts[rng.IntN(len(hosts))], Methods: methods[rng.IntN(len(methods))]}
			// At most one of Path and PathPrefix: routes compares no route
			// that gives both (completeRoutes).
			switch rng.IntN(3) {
			case 0:
				r.Path = paths[rng.IntN(len(paths))]
			case 1:
				r.PathPrefix = paths[rng.IntN(len(paths))]
			}
			routes[i] = r
		}
		s := newShadows(routes)
		for i := range routes {
			want := quadraticShadow(routes, i)
			if got := s.coveredBy(i); got != want {
				t.Fatalf("route %d of %+v: got covered by %d, want %d", i, routes, got, want)
			}
			if want >= 0 {
				shadowed++
			}
			s.add(i)
		}
	}
	if shadowed < 1000 {
		t.Errorf("got %d shadowed routes, want at least 1000, so that the comparison means something", shadowed)
	}
}
