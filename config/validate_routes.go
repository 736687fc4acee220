package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sds-proxy/sds-proxy/route"
)

// maxNamesListed bounds the point names a message lists.
const maxNamesListed = 20

// pointNames tells which point names a route may give, for messages.
func (c *checker) pointNames() string {
	names := make([]string, 0, min(len(c.d.f.Points), maxNamesListed))
	more := 0
	for _, p := range c.d.f.Points {
		switch {
		case p.Name == "":
		case len(names) == maxNamesListed:
			more++
		default:
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("define a point under %s: first", keyPoints.name)
	}
	if more > 0 {
		return fmt.Sprintf("name one of: %s and %d more", strings.Join(names, ", "), more)
	}
	return "name one of: " + strings.Join(names, ", ")
}

// routes checks each route: its point, its match, and that no route above
// it matches all its requests (in time linear in the routes: shadows).
func (c *checker) routes() {
	f := c.d.f
	complete := c.completeRoutes()
	defined := make(map[string]bool, len(f.Points))
	known := make([]string, 0, len(f.Points))
	for _, p := range f.Points {
		defined[p.Name] = true
		known = append(known, p.Name)
	}
	shadowed := newShadows(f.Routes)
	for i, r := range f.Routes {
		n := i + 1
		route, point := loc{route: n}, rl(n, keyRoutePoint)
		if c.d.bad[route] {
			continue
		}
		if !c.d.has(rl(n, keyRouteMatch)) {
			c.p.add(c.key(route), "route %d has no %s; write %[2]s: {} to match every request", n, keyRouteMatch.name)
		}
		switch {
		case !c.d.has(point):
			c.p.add(c.key(route), "route %d has no %s; add %[2]s: and %s", n, keyRoutePoint.name, c.pointNames())
		case !c.d.ok(point):
		case r.Point == "":
			c.p.add(c.val(point), "route %d: %s is empty; %s", n, keyRoutePoint.name, c.pointNames())
		case !defined[r.Point]:
			hint := ""
			if s := suggest(r.Point, known); strings.HasPrefix(s, "; did") {
				hint = s
			}
			c.p.add(c.val(point), "route %d: %s %q is not defined under %s:%s", n, keyRoutePoint.name, r.Point, keyPoints.name, hint)
		}
		c.match(n, r)
		if !complete[i] {
			continue
		}
		if j := shadowed.coveredBy(i); j >= 0 {
			c.p.add(c.key(route), "route %d can never match: route %d (line %d) matches every request it would; move it above route %d or remove it", n, j+1, c.key(loc{route: j + 1}).line, j+1)
		}
		shadowed.add(i)
	}
}

// completeRoutes reports for each route whether it can be compared with
// the others: it decoded completely, match included, and gives at most one
// of path and pathPrefix (both is an error of its own).
func (c *checker) completeRoutes() []bool {
	complete := make([]bool, len(c.d.f.Routes))
	for i, r := range c.d.f.Routes {
		complete[i] = c.d.has(rl(i+1, keyRouteMatch)) && (r.Path == "" || r.PathPrefix == "")
	}
	for l, bad := range c.d.bad {
		if bad && l.route > 0 {
			complete[l.route-1] = false
		}
	}
	return complete
}

// rl is the location of the key k of route n (from 1).
func rl(n int, k *key) loc { return loc{route: n, field: k.path} }

// match checks the match of route n.
func (c *checker) match(n int, r Route) {
	methods := rl(n, keyMatchMethods)
	if c.d.ok(methods) && len(r.Methods) == 0 {
		c.p.add(c.val(methods), "route %d: %[2]s is empty, which would match any method; list %[2]s such as [GET] or remove it", n, keyMatchMethods.name)
	}
	if len(r.Methods) > maxMethods {
		c.p.add(c.val(methods), "route %d lists %d methods; list at most %d, or remove %s to match any", n, len(r.Methods), maxMethods, keyMatchMethods.name)
		return
	}
	for i, m := range r.Methods {
		at := c.val(methods.item(i))
		switch {
		case !tokenRE.MatchString(m):
			c.p.add(at, "route %d: %q is not an HTTP method; write one such as GET or POST", n, m)
		case m != strings.ToUpper(m):
			c.p.add(at, "route %d: method %q is not upper case, and methods are case-sensitive; write %s", n, m, strings.ToUpper(m))
		case slices.Index(r.Methods, m) < i:
			c.p.add(at, "route %d: method %s is listed twice; remove one", n, m)
		}
	}
	if c.d.ok(rl(n, keyMatchPath)) && c.d.ok(rl(n, keyMatchPathPrefix)) {
		c.p.add(c.key(rl(n, keyMatchPathPrefix)), "route %d: give %s (exact) or %s, not both", n, keyMatchPath.name, keyMatchPathPrefix.name)
	}
	for _, e := range []struct {
		key *key
		v   string
	}{{keyMatchPath, r.Path}, {keyMatchPathPrefix, r.PathPrefix}} {
		l, field, v := rl(n, e.key), e.key.name, e.v
		if !c.d.ok(l) {
			continue
		}
		switch {
		case !strings.HasPrefix(v, "/"):
			c.p.add(c.val(l), "route %d: %s %q does not start with /; write /%s", n, field, v, v)
		case strings.ContainsAny(v, "?#"):
			c.p.add(c.val(l), "route %d: %s %q contains ? or #, but a path never does (the query is not matched); remove it", n, field, v)
		case strings.ContainsFunc(v, isSpaceOrControl):
			c.p.add(c.val(l), "route %d: %s %q contains a space or control character; write it percent-encoded, as clients send it", n, field, v)
		default:
			if why := unroutablePath(v); why != "" {
				c.p.add(c.val(l), "route %d: %s %q %s", n, field, v, why)
			} else if e.key == keyMatchPathPrefix {
				c.filePrefix(n, l, v)
			}
		}
	}
	if l := rl(n, keyMatchHost); c.d.ok(l) {
		switch {
		case r.Host == "":
			c.p.add(c.val(l), "route %d: %s is empty; remove it to match any host", n, keyMatchHost.name)
		case !validHostPort(r.Host):
			c.p.add(c.val(l), "route %d: %s %q is not a host name (with an optional :port) such as shop.example; leave out scheme and path", n, keyMatchHost.name, r.Host)
		}
	}
}

// filePrefix warns when the pathPrefix p of route n (at l) ends in what
// looks like a file's name without its extension, such as /index: a
// prefix matches whole path segments (docs/semantics.md), so /index never
// matches /index.html. An ordinary prefix names a folder or an API
// resource (/api/orders, /app), so to keep false positives few it judges
// only a prefix spelt as routed (plainPath), not ending in '/', whose last
// segment fileExtension knows.
func (c *checker) filePrefix(n int, l loc, p string) {
	if !plainPath(p) || strings.HasSuffix(p, "/") {
		return
	}
	folder, name := p[:strings.LastIndex(p, "/")+1], p[strings.LastIndex(p, "/")+1:]
	ext := fileExtension(name, folder)
	if ext == "" {
		return
	}
	c.p.warn(c.val(l), "route %[1]d: %[2]s %[3]q matches whole path segments, so it matches %[3]s and %[3]s/... but not %[3]s%[4]s; to match the file, write %[5]s: %[3]s%[4]s", n, keyMatchPathPrefix.name, p, ext, keyMatchPath.name)
}

// fileExtension returns the extension, with its dot, that a file called
// name most often has on the web, when name is a file's far more often
// than a folder's: index, favicon, robots and the like anywhere, the names
// of build outputs (main, app, bundle ...) only when folder has a segment
// of static assets (static, js, css ...); "" for any other name.
func fileExtension(name, folder string) string {
	switch strings.ToLower(name) {
	case "index":
		return ".html"
	case "favicon":
		return ".ico"
	case "robots", "humans":
		return ".txt"
	case "sitemap", "crossdomain", "browserconfig":
		return ".xml"
	case "apple-touch-icon":
		return ".png"
	case "service-worker":
		return ".js"
	case "main", "app", "bundle", "vendor", "vendors", "runtime", "polyfills", "style", "styles":
	default:
		return ""
	}
	assets, css := false, false
	for seg := range strings.SplitSeq(strings.ToLower(folder), "/") {
		switch seg {
		case "css":
			assets, css = true, true
		case "static", "assets", "dist", "build", "public", "js":
			assets = true
		}
	}
	switch {
	case !assets:
		return ""
	case css || strings.HasPrefix(strings.ToLower(name), "style"):
		return ".css"
	}
	return ".js"
}

// unroutablePath says why no request could ever match the route path p, or
// returns "" when one could, by the proxy's own check (route.Normalize):
// it answers a path with an encoded slash, a backslash or an invalid
// escape 400 before routing (docs/semantics.md).
func unroutablePath(p string) string {
	var bad *route.PathError
	if _, err := route.Normalize(route.Rule{Path: p}); !errors.As(err, &bad) {
		return ""
	}
	const never = "so no request could match it: the proxy answers such a request 400 before routing"
	at := p[bad.Offset:]
	switch {
	case errors.Is(bad.Err, route.ErrInvalidEscape):
		return fmt.Sprintf("has an invalid escape %q: %% must be followed by two hexadecimal digits; write %%25 for a %% itself", at[:min(3, len(at))])
	case errors.Is(bad.Err, route.ErrEncodedSlash):
		return fmt.Sprintf("contains an encoded slash (%s), %s; write / to match a path separator", at[:3], never)
	case at[0] == '\\':
		return "contains a backslash, " + never
	}
	return fmt.Sprintf("contains an encoded backslash (%s), %s", at[:3], never)
}

// plainPath reports whether the route path p is spelt as the proxy routes
// it, with no escape, repeated slash or dot segment, so that covers and
// filePrefix can judge it as written.
func plainPath(p string) bool {
	if strings.Contains(p, "%") || strings.Contains(p, "//") {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// covers reports whether route a matches every request that route b
// matches (route.Covers), so that b, listed after a, can never match. It
// judges only routes written alike (plain paths, hosts equal but for
// case): a shadowed route refuses the file, and judging every spelling the
// router folds would refuse files that load today.
func covers(a, b Route) bool {
	if a.Host != "" && !strings.EqualFold(a.Host, b.Host) {
		return false
	}
	if a.Path+a.PathPrefix != "" && (!plainPath(a.Path+a.PathPrefix) || !plainPath(b.Path+b.PathPrefix)) {
		return false
	}
	return route.Covers(a.Rule(), b.Rule())
}

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
	// lists holds the routes added so far by the path covers compares
	// them on and the fold of their host.
	lists map[shadowKey]*shadowList
	// prefixLens marks the lengths of the path prefixes in lists, so that
	// a path is looked up only at lengths some prefix has.
	prefixLens map[int]bool
}

// shadowKey is an exact path, a path prefix, or none (path ""), and a
// folded host ("" for none).
type shadowKey struct {
	exact      bool
	path, host string
}

// shadowList is the routes of one shadowKey: the first route with no
// methods, and the first route of each other method set, in order.
type shadowList struct {
	anyMethod int   // the first route naming no method, or -1
	methods   []int // the first route of each method set, in order
	sets      map[string]bool
}

func newShadows(routes []Route) *shadows {
	return &shadows{routes: routes, lists: make(map[shadowKey]*shadowList), prefixLens: make(map[int]bool)}
}

// add files route i, to be found by the routes below it.
func (s *shadows) add(i int) {
	r := s.routes[i]
	path := r.Path + r.PathPrefix
	if path != "" && !plainPath(path) {
		return // covers no route (covers)
	}
	if r.PathPrefix != "" {
		s.prefixLens[len(path)] = true
	}
	k := shadowKey{exact: r.Path != "", path: path, host: route.FoldHost(r.Host)}
	l := s.lists[k]
	if l == nil {
		l = &shadowList{anyMethod: -1, sets: make(map[string]bool)}
		s.lists[k] = l
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
	best := s.first(false, "", b, -1)
	path := b.Path + b.PathPrefix
	if path == "" || !plainPath(path) {
		return best
	}
	if b.Path != "" {
		best = s.first(true, b.Path, b, best)
	}
	// A prefix covers path when it is path, or path's start up to a "/"
	// (the "/" included or not).
	for end := range len(path) + 1 {
		if end == len(path) || path[end] == '/' {
			for _, n := range []int{end, end + 1} {
				if n <= len(path) && s.prefixLens[n] {
					best = s.first(false, path[:n], b, best)
				}
			}
		}
	}
	return best
}

// first returns the first route filed under the path (exact or a prefix)
// that covers b, if it comes before best (or best is -1), else best.
func (s *shadows) first(exact bool, path string, b Route, best int) int {
	for _, host := range []string{"", route.FoldHost(b.Host)} {
		if l := s.lists[shadowKey{exact, path, host}]; l != nil {
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
