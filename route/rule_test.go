package route

import (
	"math/rand/v2"
	"net"
	"strings"
	"testing"
)

// coverPools are what TestCovers draws rules from: the forms Covers tells
// apart (exact paths, prefixes with and without "/", hosts in several
// cases, with and without ports, IPv6, method sets).
var coverPools = struct {
	paths, hosts []string
	methods      [][]string
}{
	paths: []string{"", "/", "/a", "/a/", "/a/b", "/a/b/", "/ab", "/a/b/c", "/A", "/a%20b"},
	hosts: []string{
		"", "shop.example", "SHOP.example", "shop.example.", "shop.example:8443", "shop.example:08443",
		"shop.example:80", "shop.example:443", "ſhop.example", "[::1]", "::1", "[::1]:80", "k", "\u212a",
	},
	methods: [][]string{nil, {"GET"}, {"POST"}, {"GET", "POST"}, {"POST", "GET"}, {"HEAD", "GET", "POST"}},
}

// randomRule draws a rule from coverPools: an exact path, a prefix, both
// (which may match nothing) or neither.
func randomRule(rng *rand.Rand) Rule {
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	r := Rule{Host: pick(coverPools.hosts), Methods: coverPools.methods[rng.IntN(len(coverPools.methods))]}
	switch rng.IntN(5) {
	case 0, 1:
		r.Path = pick(coverPools.paths)
	case 2, 3:
		r.PathPrefix = pick(coverPools.paths)
	default:
		r.Path, r.PathPrefix = pick(coverPools.paths), pick(coverPools.paths)
	}
	return r
}

// probes returns requests (as targets) that tell whether a rule covers b:
// each method, path and host b matches, and some b's dimensions leave
// open, so that if any request matches b and not a, one of these does.
func probes(b Rule) []target {
	methods := append([]string{"PATCH"}, b.Methods...)
	paths := []string{"/zz-none", "*"} // "*": OPTIONS *, under no prefix
	for _, p := range []string{b.Path, b.PathPrefix} {
		if p != "" {
			paths = append(paths, p, strings.TrimSuffix(p, "/")+"/zz-below")
		}
	}
	hosts := []string{"none.example"}
	if b.Host != "" {
		name, port := splitHost(b.Host)
		hosts = append(hosts, b.Host, name, net.JoinHostPort(name, "1"), net.JoinHostPort(name, "80"), net.JoinHostPort(name, "443"))
		if port != "" {
			hosts = append(hosts, net.JoinHostPort(name, port))
		}
	}
	var out []target
	for _, m := range methods {
		for _, p := range paths {
			for _, h := range hosts {
				for _, def := range []string{"80", "443"} {
					t := target{method: m, path: p}
					if t.host, t.port = splitHost(h); t.port == "" {
						t.port = def
					}
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// TestCovers: over random pairs of rules, Covers(a, b) holds exactly when
// no probe request matches b and not a, as the router matches them
// (linearMatches): it never claims a cover the router does not give, and
// it misses none.
func TestCovers(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	covered := 0
	for range 20000 {
		a, b := randomRule(rng), randomRule(rng)
		var witness *target
		for _, p := range probes(b) {
			if linearMatches(&b, &p) && !linearMatches(&a, &p) {
				witness = &p
				break
			}
		}
		switch got := Covers(a, b); {
		case got && witness != nil:
			t.Fatalf("Covers(%+v, %+v): got true, but %+v matches only the second", a, b, *witness)
		case !got && witness == nil:
			t.Fatalf("Covers(%+v, %+v): got false, want true: no probe matches the second alone", a, b)
		case got:
			covered++
		}
	}
	if covered < 2000 {
		t.Errorf("got %d covered pairs, want at least 2000, so that the comparison means something", covered)
	}
}

// TestFoldHost: two hosts fold alike exactly when strings.EqualFold says
// they are equal, Unicode folds and invalid bytes included.
func TestFoldHost(t *testing.T) {
	hosts := []string{
		"shop.example", "SHOP.EXAMPLE", "ſhop.example", "Shop.Example:8443", "k", "K", "\u212a",
		"σ", "Σ", "ς", "ß", "SS", "\xff", "\xfe", "\ufffd", "", strings.Repeat("ſ", 200),
	}
	for _, a := range hosts {
		for _, b := range hosts {
			if same, want := FoldHost(a) == FoldHost(b), strings.EqualFold(a, b); same != want {
				t.Errorf("FoldHost(%q) == FoldHost(%q): got %v, want %v (strings.EqualFold)", a, b, same, want)
			}
		}
	}
}
