package route

import (
	"net/http"
	"net/url"
	"strings"
)

// Rule matches requests. Every field set must match; a Rule with no
// field set matches every request. Build it with Normalize, which puts
// its paths in normal form; a Rule whose paths are not in normal form
// never matches the spellings that differ.
type Rule struct {
	// Methods, if not empty, lists the methods that match (exact, upper case).
	Methods []string
	// Path, if set, must equal the request's path, both escaped and in
	// normal form (NormalizePath): "/a%20b" matches a request for
	// "/a%20b", "/x/../a%20b" or "//a%20b", never one for "/a+b".
	Path string
	// PathPrefix, if set, must be the request path or a prefix of it that
	// ends at a segment boundary, compared as Path is: "/api/orders"
	// matches "/api/orders" and "/api/orders/7", not "/api/orders-admin".
	// A prefix ending in "/" matches whatever follows it.
	PathPrefix string
	// Host, if set, must name the request's host: case-insensitive, a
	// trailing dot ignored, an IPv6 literal with or without brackets
	// ("::1" and "[::1]" are the same). With no port ("shop.example") it
	// matches any port; with a port ("shop.example:8443") the request's
	// port must be that one, where a request whose Host carries no port
	// has its scheme's default (80, or 443 over TLS).
	Host string
}

// Normalize returns r with Path and PathPrefix in normal form
// (NormalizePath), so that a rule matches whichever spelling of its path
// the user wrote. It fails on a path that NormalizePath rejects (an
// encoded slash, a backslash, an invalid escape), since no request could
// match it, with a *PathError that says where; Path is checked first.
func Normalize(r Rule) (Rule, error) {
	for _, p := range []*string{&r.Path, &r.PathPrefix} {
		if *p == "" || isNormalPath(*p) {
			continue
		}
		norm, at, err := normalizeSlow(*p)
		if err != nil {
			return Rule{}, &PathError{Path: *p, Offset: at, Err: err}
		}
		*p = norm
	}
	return r, nil
}

// target is what routing reads of one request, worked out once.
type target struct {
	method string
	path   string // escaped, in normal form
	host   string // without brackets or a trailing dot
	port   string // the Host header's port, or the scheme's default
}

// matchesHost reports whether t falls under the rule, whose Host split by
// splitHost is h.
func (rt *Rule) matchesHost(h routeHost, t *target) bool {
	if len(rt.Methods) > 0 && !contains(rt.Methods, t.method) {
		return false
	}
	if rt.Path != "" && t.path != rt.Path {
		return false
	}
	if rt.PathPrefix != "" && !hasPathPrefix(t.path, rt.PathPrefix) {
		return false
	}
	if h.set && (!strings.EqualFold(h.name, t.host) || h.port != "" && !samePort(h.port, t.port)) {
		return false
	}
	return true
}

// Covers reports whether rule a matches every request that rule b
// matches, as Table.Find matches them, so that b, listed after a, is never
// the first match. The paths are compared as given: give both rules in
// normal form (Normalize), as a Table is given them. A rule that matches no
// request (a Path outside its own PathPrefix) is covered by every rule.
//
// Hosts are compared as requests are matched: without case, brackets or a
// trailing dot, and a host without a port covers the same host with any
// port, while one with a port covers that port only. Covers is exact: when
// it reports false, some request matches b and not a.
func Covers(a, b Rule) bool {
	if b.Path != "" && b.PathPrefix != "" && !hasPathPrefix(b.Path, b.PathPrefix) {
		return true
	}
	return coversMethods(a.Methods, b.Methods) && coversHost(a.Host, b.Host) && coversPath(a, b)
}

// coversMethods reports whether a rule listing the methods a matches every
// method a rule listing b does (an empty list matches any).
func coversMethods(a, b []string) bool {
	if len(a) == 0 {
		return true
	}
	if len(b) == 0 {
		return false
	}
	for _, m := range b {
		if !contains(a, m) {
			return false
		}
	}
	return true
}

// coversHost reports whether a rule's Host a matches every request a
// rule's Host b does ("" matches any).
func coversHost(a, b string) bool {
	switch {
	case a == "":
		return true
	case b == "":
		return false
	}
	aName, aPort := splitHost(a)
	bName, bPort := splitHost(b)
	return strings.EqualFold(aName, bName) && (aPort == "" || bPort != "" && samePort(aPort, bPort))
}

// coversPath reports whether a's Path and PathPrefix match every path that
// b's do, b being a rule that matches some path.
func coversPath(a, b Rule) bool {
	switch {
	case a.Path == "" && a.PathPrefix == "":
		return true
	case b.Path != "":
		return (a.Path == "" || a.Path == b.Path) && (a.PathPrefix == "" || hasPathPrefix(b.Path, a.PathPrefix))
	case b.PathPrefix != "":
		// b matches b.PathPrefix itself and the paths below it, all of
		// which lie below a.PathPrefix exactly when b.PathPrefix does.
		return a.Path == "" && hasPathPrefix(b.PathPrefix, a.PathPrefix)
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// hasPathPrefix reports whether prefix covers path at a segment boundary.
func hasPathPrefix(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || strings.HasSuffix(prefix, "/") || path[len(prefix)] == '/'
}

// splitHost splits a Host header value (or a route's host) into its name,
// without IPv6 brackets or one trailing dot, and its port, "" when there is
// none. A port must be digits; a value that does not parse, such as
// "[::1]:x", is returned whole as the name, which no route names.
// "::1", an IPv6 literal without brackets, has no port.
func splitHost(s string) (host, port string) {
	name, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return s, ""
		}
		rest := s[end+1:]
		if rest != "" && (rest[0] != ':' || !isDigits(rest[1:])) {
			return s, ""
		}
		name, port = s[1:end], strings.TrimPrefix(rest, ":")
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		if !isDigits(s[i+1:]) {
			return s, ""
		}
		name, port = s[:i], s[i+1:]
	}
	return strings.TrimSuffix(name, "."), port
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// samePort reports whether two ports of digits are the same number
// ("8443" and "08443" are).
func samePort(a, b string) bool {
	return strings.TrimLeft(a, "0") == strings.TrimLeft(b, "0")
}

// RequestPath returns the escaped path r is routed by, in normal form, and
// the same again as rewritten when it differs from the path r carries, for
// the upstream; rewritten is "" when r's own path is normal. A path that
// NormalizePath rejects is returned as err. "*" (OPTIONS *) is routed as it
// is, and an empty path as "/".
func RequestPath(r *http.Request) (path, rewritten string, err error) {
	esc := r.URL.EscapedPath()
	switch esc {
	case "*":
		return esc, "", nil
	case "":
		return "/", "", nil
	}
	path, err = NormalizePath(esc)
	if err != nil || path == esc {
		return path, "", err
	}
	return path, path, nil
}

// BadPath answers a request whose path NormalizePath rejected: 400 with a
// one-line plain-text reason. Nothing reaches the upstream or a point.
func BadPath(w http.ResponseWriter, err error) {
	http.Error(w, "400 Bad Request: "+err.Error(), http.StatusBadRequest)
}

// SetPath gives the outgoing request the escaped path path (in normal
// form), keeping URL.Path and URL.RawPath consistent; the query is left
// as it is.
func SetPath(u *url.URL, path string) {
	decoded, err := url.PathUnescape(path)
	if err != nil {
		return // not reached: a normal path's escapes are all valid
	}
	u.Path, u.RawPath = decoded, path
}

// UpstreamQuery is the raw query the upstream is sent for a request whose
// URL is in: the client's, byte for byte. ReverseProxy re-encodes a query
// holding a ';' or an invalid '%' escape (or more than 10,000 parameters)
// and drops what it cannot parse before Rewrite runs; a sidecar leaves the
// query to the service behind it, which decides what ';' means. Nothing in
// the proxy reads the query (routes match the path, the host and the
// method), so what it acts on and what the upstream reads cannot differ.
//
// An upstream URL's own query (sds.yaml cannot give one: validate rejects
// it; a Config built in code may have one) comes first, joined to the client's by '&' as
// httputil.ProxyRequest.SetURL joins them. An empty client query ("" or a
// bare "?") adds nothing; in.ForceQuery, kept on the outgoing URL, sends
// the bare "?".
func UpstreamQuery(upstream, in *url.URL) string {
	switch {
	case upstream.RawQuery == "":
		return in.RawQuery
	case in.RawQuery == "":
		return upstream.RawQuery
	}
	return upstream.RawQuery + "&" + in.RawQuery
}

// allowedMethods is the Allow header of the answer to CONNECT: the
// methods the proxy forwards, which are all but CONNECT.
const allowedMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE"

// RefuseConnect answers a CONNECT request 405. A reverse proxy has no
// tunnel to offer: forwarded, CONNECT would reach the upstream as a
// request for "/" (net/http's server keeps only the authority of its
// target), so it never reaches a point or the upstream. HTTP/2's
// extended CONNECT (RFC 8441) is off in net/http's server, so every
// CONNECT that arrives here asks for a tunnel.
func RefuseConnect(w http.ResponseWriter) {
	w.Header().Set("Allow", allowedMethods)
	http.Error(w, "405 Method Not Allowed: a reverse proxy opens no tunnels (CONNECT)", http.StatusMethodNotAllowed)
}
