package route

import (
	"fmt"
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
// encoded slash, a backslash, an invalid escape): no request could match it.
func Normalize(r Rule) (Rule, error) {
	for _, p := range []*string{&r.Path, &r.PathPrefix} {
		if *p == "" {
			continue
		}
		norm, err := NormalizePath(*p)
		if err != nil {
			return Rule{}, fmt.Errorf("route path %q: %w", *p, err)
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
