package config

import (
	"strings"

	"github.com/sds-proxy/sds-proxy/route"
)

// maxShadowChecks bounds, for each route, how many routes above it that
// share its path and host (and differ from each other in their methods)
// are compared with it to find one that covers it. Routes that differ in
// path or host are never compared, so a table of distinct paths costs one
// lookup per route; the bound only cuts the search in a table that lists
// hundreds of method sets on one path and host.
const maxShadowChecks = 64

// shadows finds, for each route in turn, the first route above it that
// matches every request it would (covers), in time linear in the routes
// and their paths. Routes are added with add, in order, once checked; each
// gives at most one of Path and PathPrefix (completeRoutes).
type shadows struct {
	routes []Route
	// exact, prefixes and rest hold the routes added so far by the path
	// covers compares them on: an exact path, a path prefix, or none.
	exact    map[string]*shadowSet
	prefixes map[string]*shadowSet
	rest     shadowSet
	// prefixLens marks the lengths of the prefixes in prefixes, so that a
	// path is looked up only at lengths some prefix has.
	prefixLens map[int]bool
}

// shadowSet is the routes of one path key, by the fold of their host
// ("" for none): for each host, the first route with no methods, and the
// first route of each other method set, in order.
type shadowSet struct {
	byHost map[string]*shadowList
}

type shadowList struct {
	anyMethod int   // the first route naming no method, or -1
	methods   []int // the first route of each method set, in order
	sets      map[string]bool
}

func newShadows(routes []Route) *shadows {
	return &shadows{
		routes:     routes,
		exact:      make(map[string]*shadowSet),
		prefixes:   make(map[string]*shadowSet),
		prefixLens: make(map[int]bool),
	}
}

// add files route i, to be found by the routes below it.
func (s *shadows) add(i int) {
	r := s.routes[i]
	var set *shadowSet
	switch path := r.Path + r.PathPrefix; {
	case path == "":
		set = &s.rest
	case !plainPath(path):
		return // covers no route (covers)
	case r.Path != "":
		set = s.exact[r.Path]
		if set == nil {
			set = &shadowSet{}
			s.exact[r.Path] = set
		}
	default:
		set = s.prefixes[r.PathPrefix]
		if set == nil {
			set = &shadowSet{}
			s.prefixes[r.PathPrefix] = set
			s.prefixLens[len(r.PathPrefix)] = true
		}
	}
	if set.byHost == nil {
		set.byHost = make(map[string]*shadowList)
	}
	host := route.FoldHost(r.Host)
	l := set.byHost[host]
	if l == nil {
		l = &shadowList{anyMethod: -1, sets: make(map[string]bool)}
		set.byHost[host] = l
	}
	if len(r.Methods) == 0 {
		if l.anyMethod < 0 {
			l.anyMethod = i
		}
		return
	}
	key := strings.Join(r.Methods, "\x00")
	if l.anyMethod < 0 && !l.sets[key] {
		l.sets[key] = true
		l.methods = append(l.methods, i)
	}
}

// coveredBy returns the first route added so far that covers route i, or -1.
func (s *shadows) coveredBy(i int) int {
	b := s.routes[i]
	best := s.first(&s.rest, b, -1)
	path := b.Path + b.PathPrefix
	if path == "" || !plainPath(path) {
		return best
	}
	if b.Path != "" {
		best = s.first(s.exact[b.Path], b, best)
	}
	// A prefix covers path when it is path, or path's start up to a "/"
	// (the "/" included or not).
	for end := range len(path) + 1 {
		if end == len(path) || path[end] == '/' {
			for _, n := range []int{end, end + 1} {
				if n <= len(path) && s.prefixLens[n] {
					best = s.first(s.prefixes[path[:n]], b, best)
				}
			}
		}
	}
	return best
}

// first returns the first route of set that covers b, if it comes before
// best (or best is -1), else best.
func (s *shadows) first(set *shadowSet, b Route, best int) int {
	if set == nil {
		return best
	}
	for _, host := range []string{"", route.FoldHost(b.Host)} {
		l := set.byHost[host]
		if l == nil {
			continue
		}
		if l.anyMethod >= 0 && covers(s.routes[l.anyMethod], b) {
			best = earlier(best, l.anyMethod)
		}
		for n, j := range l.methods {
			if n == maxShadowChecks || best >= 0 && j >= best {
				break
			}
			if covers(s.routes[j], b) {
				best = j
				break
			}
		}
		if b.Host == "" {
			break
		}
	}
	return best
}

// earlier returns the lower of two route indexes, where -1 is none.
func earlier(a, b int) int {
	if a < 0 || b >= 0 && b < a {
		return b
	}
	return a
}
