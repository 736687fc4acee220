package route

import (
	"math"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Table is a list of rules compiled once (the proxy compiles its routes
// when a Config is swapped in), so that finding the rule of a request
// costs about the same with 10,000 rules as with one. It answers exactly
// what trying the rules in order would
// (first match wins): each route is filed under the most selective key it
// has, a request looks up the few sets its own path, host and method can
// fall under, checks the routes of each set in config order with every
// field of Rule (Rule.matchesHost), and takes the lowest index found.
//
//   - A route with a Path is filed under that path (exact).
//   - Else one with a PathPrefix is filed in a trie of path segments, at
//     the node its prefix ends on.
//   - Else one with a Host is filed under its host; one with Methods only
//     under each method; a catch-all on its own.
//
// Within a path set, routes that name a host are filed again by their
// folded host name (foldHost), so that routes sharing a path across many
// hosts cost one lookup too. What a request pays grows with the depth of
// its path (one map lookup per segment, while the trie follows it) and
// with the routes that share both its path key and its host, never with
// the length of the table. A Table is immutable and safe for concurrent
// use.
type Table struct {
	rules []Rule
	hosts []routeHost // routes[i]'s host, split once
	// exact holds the routes with a Path, by that path; maxExact is the
	// longest such path, beyond which no lookup is made.
	exact    map[string]*routeSet
	maxExact int
	// prefixes holds the routes with a PathPrefix and no Path.
	prefixes prefixNode
	// byHost holds the routes with neither path but a Host.
	byHost routeSet
	// byMethod is, for each method, the first route that lists it and
	// names neither path nor host; anyMethod is the first route that
	// names no path, host or method (a catch-all); noRoute when none.
	byMethod  map[string]int32
	anyMethod int32
	// hostNamed: some route names a host, so a request's host is folded
	// to be looked up.
	hostNamed bool
}

// noRoute is the index of no route: above every real one, so that the
// first match is the minimum over the sets a request looks in.
const noRoute = math.MaxInt32

// routeHost is a route's Host split as splitHost splits it; set is false
// for a route that names no host.
type routeHost struct {
	set        bool
	name, port string
}

// routeSet is the routes that share a path key, in config order.
type routeSet struct {
	// anyHost lists the routes that name no host, or a host no key can
	// stand for (longer than maxHostKey once folded).
	anyHost []int32
	// named lists the routes that name a host, by its folded name.
	named map[string][]int32
}

// prefixNode is a node of the segment trie of route prefixes: the node
// reached from the root by the segments s0, s1, ... sk stands for the
// prefix "s0/s1/.../sk" (s0 is "" for a prefix that starts with "/").
type prefixNode struct {
	children map[string]*prefixNode
	// whole holds the prefixes that end here: they match a path of these
	// segments exactly, or followed by "/" and more.
	whole *routeSet
	// open holds the prefixes that end here with one "/" more: they match
	// any path that goes on past these segments.
	open *routeSet
}

// NewTable compiles rules, which it keeps and never changes. Its cost is
// linear in the rules and their paths.
func NewTable(rules []Rule) *Table {
	rt := &Table{
		rules:     rules,
		hosts:     make([]routeHost, len(rules)),
		exact:     make(map[string]*routeSet),
		byMethod:  make(map[string]int32),
		anyMethod: noRoute,
	}
	for i := range rules {
		r := &rules[i]
		idx := int32(i)
		if r.Host != "" {
			name, port := splitHost(r.Host)
			rt.hosts[i] = routeHost{set: true, name: name, port: port}
			rt.hostNamed = true
		}
		switch {
		case r.Path != "":
			set := rt.exact[r.Path]
			if set == nil {
				set = &routeSet{}
				rt.exact[r.Path] = set
			}
			set.add(idx, rt.hosts[i])
			rt.maxExact = max(rt.maxExact, len(r.Path))
		case r.PathPrefix != "":
			rt.prefixes.add(r.PathPrefix).add(idx, rt.hosts[i])
		case r.Host != "":
			rt.byHost.add(idx, rt.hosts[i])
		case len(r.Methods) > 0:
			for _, m := range r.Methods {
				if _, ok := rt.byMethod[m]; !ok {
					rt.byMethod[m] = idx
				}
			}
		default:
			rt.anyMethod = min(rt.anyMethod, idx)
		}
	}
	return rt
}

// add files route i, whose host is h, in s.
func (s *routeSet) add(i int32, h routeHost) {
	var key [maxHostKey]byte
	n, ok := 0, false
	if h.set {
		n, ok = foldHost(&key, h.name)
	}
	if !ok {
		s.anyHost = append(s.anyHost, i)
		return
	}
	if s.named == nil {
		s.named = make(map[string][]int32)
	}
	s.named[string(key[:n])] = append(s.named[string(key[:n])], i)
}

// add returns the set of prefix, making the nodes on its way.
func (n *prefixNode) add(prefix string) *routeSet {
	open := strings.HasSuffix(prefix, "/")
	if open {
		prefix = prefix[:len(prefix)-1]
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		child := n.children[seg]
		if child == nil {
			if n.children == nil {
				n.children = make(map[string]*prefixNode)
			}
			child = &prefixNode{}
			n.children[seg] = child
		}
		n = child
	}
	set := &n.whole
	if open {
		set = &n.open
	}
	if *set == nil {
		*set = &routeSet{}
	}
	return *set
}

// Find returns the index of the first rule that matches r, whose escaped
// path in normal form is path (RequestPath), or -1 when none does. It
// allocates nothing.
func (rt *Table) Find(r *http.Request, path string) int {
	if len(rt.rules) == 0 {
		return -1
	}
	t := newTarget(r, path)
	return rt.match(&t)
}

// newTarget works out what routing reads of r, whose routed path is path.
func newTarget(r *http.Request, path string) target {
	t := target{method: r.Method, path: path}
	t.host, t.port = splitHost(r.Host)
	if t.port == "" {
		t.port = "80"
		if r.TLS != nil {
			t.port = "443"
		}
	}
	return t
}

// hostKey is what a request's host is looked up by in routeSet.named.
type hostKey struct {
	// folded is the host's fold (foldHost) when it is not the host
	// itself; nil when it is.
	folded []byte
	// none: the host's fold is longer than maxHostKey, so no route is
	// filed under it.
	none bool
}

// match returns the index of the first route that matches t, or -1.
func (rt *Table) match(t *target) int {
	if rt.hostNamed && !isFolded(t.host) {
		return rt.matchFolding(t)
	}
	return rt.matchKey(t, hostKey{})
}

// matchFolding is match for a host that needs folding, on a stack buffer.
func (rt *Table) matchFolding(t *target) int {
	var buf [maxHostKey]byte
	n, ok := foldHost(&buf, t.host)
	return rt.matchKey(t, hostKey{folded: buf[:n], none: !ok})
}

// matchKey is match once the host's key is known.
func (rt *Table) matchKey(t *target, key hostKey) int {
	best := rt.anyMethod
	if len(rt.byMethod) > 0 {
		if i, ok := rt.byMethod[t.method]; ok {
			best = min(best, i)
		}
	}
	best = rt.first(&rt.byHost, best, t, key)
	if len(t.path) <= rt.maxExact {
		best = rt.first(rt.exact[t.path], best, t, key)
	}
	best = rt.firstPrefix(best, t, key)
	if best == noRoute {
		return -1
	}
	return int(best)
}

// firstPrefix walks the prefix trie along t's path and returns the index of
// the first route filed on the way that matches t, if below best, else best.
func (rt *Table) firstPrefix(best int32, t *target, key hostKey) int32 {
	n, rest := &rt.prefixes, t.path
	for n.children != nil {
		// A byte loop, not strings.Cut: segments are short, and
		// IndexByte's setup costs more than scanning one.
		end := 0
		for end < len(rest) && rest[end] != '/' {
			end++
		}
		if n = n.children[rest[:end]]; n == nil {
			break
		}
		best = rt.first(n.whole, best, t, key)
		if end == len(rest) {
			break
		}
		best = rt.first(n.open, best, t, key)
		rest = rest[end+1:]
	}
	return best
}

// first returns the index of the first route of s that matches t, if below
// best, else best. s may be nil.
func (rt *Table) first(s *routeSet, best int32, t *target, key hostKey) int32 {
	if s == nil {
		return best
	}
	best = rt.firstOf(s.anyHost, best, t)
	switch {
	case s.named == nil || key.none:
	case key.folded == nil:
		best = rt.firstOf(s.named[t.host], best, t)
	default:
		best = rt.firstOf(s.named[string(key.folded)], best, t)
	}
	return best
}

// firstOf returns the first index of list, which is in ascending order,
// whose route matches t, if below best, else best.
func (rt *Table) firstOf(list []int32, best int32, t *target) int32 {
	for _, i := range list {
		if i >= best {
			break
		}
		if rt.rules[i].matchesHost(rt.hosts[i], t) {
			return i
		}
	}
	return best
}

// maxHostKey bounds a folded host name kept as a key, in bytes: a DNS name
// has at most 253. A route whose host folds to more is checked against
// every request of its path set instead of being looked up.
const maxHostKey = 256

// isFolded reports whether name is its own fold: ASCII with no upper case.
func isFolded(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return len(name) <= maxHostKey
}

// foldHost writes into key the folded form of name: each rune replaced by
// one chosen member of its Unicode simple-folding orbit (the ASCII lower
// case letter when there is one, else the smallest rune), so that two names
// have the same fold exactly when strings.EqualFold reports them equal
// (an invalid byte reads as U+FFFD, as EqualFold reads it). It returns the
// fold's length, and false when the fold does not fit in key.
func foldHost(key *[maxHostKey]byte, name string) (int, bool) {
	n := 0
	for _, r := range name {
		r = foldRune(r)
		if n+utf8.RuneLen(r) > len(key) {
			return 0, false
		}
		n += utf8.EncodeRune(key[n:], r)
	}
	return n, true
}

// FoldHost returns s folded as the table folds host names (foldHost), with
// no bound on its length: two strings fold alike exactly when
// strings.EqualFold reports them equal, so the fold can key a map of hosts.
// An invalid byte folds to U+FFFD.
func FoldHost(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune returns the member of r's simple-folding orbit that stands for
// the orbit (foldHost).
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return unicode.ToLower(f)
		}
		least = min(least, f)
	}
	return least
}
