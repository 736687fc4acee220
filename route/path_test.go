package route

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
)

// normalizePathTests are paths and what NormalizePath makes of them: the
// normal form, or the error for the first problem in the path.
var normalizePathTests = []struct {
	in, want string
	err      error
}{
	// Already normal: returned as they are.
	{"/", "/", nil},
	{"/a", "/a", nil},
	{"/a/", "/a/", nil},
	{"/a/b.c/d", "/a/b.c/d", nil},
	{"/...", "/...", nil},
	{"/.a/a./..a/a..", "/.a/a./..a/a..", nil},
	{"/a%20b", "/a%20b", nil},
	{"/a%3Bb", "/a%3Bb", nil},
	{"/a%25", "/a%25", nil},
	{"/a%252e", "/a%252e", nil}, // decoded once, never twice
	{"/a;b=c,d@e:f!$&'()*+", "/a;b=c,d@e:f!$&'()*+", nil},

	// Empty and relative.
	{"", "/", nil},
	{"a/b", "/a/b", nil},
	{".", "/", nil},

	// Repeated slashes.
	{"//", "/", nil},
	{"//a", "/a", nil},
	{"/a//b", "/a/b", nil},
	{"/a///", "/a/", nil},
	{"///a//b//", "/a/b/", nil},

	// Dot segments (RFC 3986 §5.2.4).
	{"/.", "/", nil},
	{"/..", "/", nil},
	{"/./a", "/a", nil},
	{"/a/.", "/a/", nil},
	{"/a/..", "/", nil},
	{"/a/b/..", "/a/", nil},
	{"/a/./b/../c", "/a/c", nil},
	{"/../../a", "/a", nil},
	{"/a/b/c/./../../g", "/a/g", nil},
	{"/soak/../blocked/x", "/blocked/x", nil},
	{"/./blocked/x", "/blocked/x", nil},
	{"//blocked/x", "/blocked/x", nil},

	// Unreserved escapes are decoded, then take part in dot removal.
	{"/soak/%2e%2e/blocked/x", "/blocked/x", nil},
	{"/soak/%2E%2E/blocked/x", "/blocked/x", nil},
	{"/soak/.%2e/blocked", "/blocked", nil},
	{"/%2e/a", "/a", nil},
	{"/a/%2e", "/a/", nil},
	{"/%41%7e%2D%5f%30", "/A~-_0", nil},
	{"/%62locked", "/blocked", nil},
	{"/%2e%2e%2e", "/...", nil},

	// Other escapes keep their byte, in upper-case hex.
	{"/a%3bb", "/a%3Bb", nil},
	{"/a%c3%a9", "/a%C3%A9", nil},
	{"/%7b%7D", "/%7B%7D", nil},

	// Bytes that may not appear raw are escaped.
	{"/a b", "/a%20b", nil},
	{"/caf\xc3\xa9", "/caf%C3%A9", nil},
	{"/a[b]", "/a%5Bb%5D", nil},
	{"/a?b#c", "/a%3Fb%23c", nil},
	{"/a\x00", "/a%00", nil},

	// Rejected.
	{"/a%2fb", "", ErrEncodedSlash},
	{"/a%2Fb", "", ErrEncodedSlash},
	{"/soak/..%2Fblocked", "", ErrEncodedSlash},
	{"/a%5cb", "", ErrBackslash},
	{"/a%5Cb", "", ErrBackslash},
	{`/a\b`, "", ErrBackslash},
	{`\`, "", ErrBackslash},
	{"/a%zz", "", ErrInvalidEscape},
	{"/a%", "", ErrInvalidEscape},
	{"/a%2", "", ErrInvalidEscape},
	{"/a%g0", "", ErrInvalidEscape},
	{"/a%%41", "", ErrInvalidEscape},
	// The first problem in the path is the one reported.
	{"/a%zz/%2F", "", ErrInvalidEscape},
	{"/a%2F/%zz", "", ErrEncodedSlash},
	{`/a\/%2F`, "", ErrBackslash},

	// Longer than the stack buffer.
	{"/" + strings.Repeat("ab/./", 100), "/" + strings.Repeat("ab/", 100), nil},
}

func TestNormalizePath(t *testing.T) {
	for _, tt := range normalizePathTests {
		got, err := NormalizePath(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("NormalizePath(%q): got %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestNormalizePathError: Normalize says which path of a rule is rejected,
// why, and at which byte: the first fault, raw or escaped.
func TestNormalizePathError(t *testing.T) {
	for _, tt := range []struct {
		rule   Rule
		path   string
		offset int
		err    error
	}{
		{Rule{Path: "/a%2fb"}, "/a%2fb", 2, ErrEncodedSlash},
		{Rule{PathPrefix: "/soak/..%2Fblocked"}, "/soak/..%2Fblocked", 8, ErrEncodedSlash},
		{Rule{Path: "/a%5cb"}, "/a%5cb", 2, ErrBackslash},
		{Rule{Path: `/a/b\c`}, `/a/b\c`, 4, ErrBackslash},
		{Rule{Path: `\`}, `\`, 0, ErrBackslash},
		{Rule{Path: "/a%zz/%2F"}, "/a%zz/%2F", 2, ErrInvalidEscape},
		{Rule{Path: "/x/a%2F/%zz"}, "/x/a%2F/%zz", 4, ErrEncodedSlash},
		{Rule{Path: "/a%"}, "/a%", 2, ErrInvalidEscape},
		{Rule{Path: "/a%4/b"}, "/a%4/b", 2, ErrInvalidEscape},
		{Rule{Path: "//x/./../%%41"}, "//x/./../%%41", 9, ErrInvalidEscape},
		// Path is checked before PathPrefix.
		{Rule{Path: "/%5C", PathPrefix: "/%2F"}, "/%5C", 1, ErrBackslash},
		{Rule{Path: "/ok", PathPrefix: "/%2F"}, "/%2F", 1, ErrEncodedSlash},
	} {
		_, err := Normalize(tt.rule)
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("Normalize(%+v): got %v, want a *PathError", tt.rule, err)
			continue
		}
		if pe.Path != tt.path || pe.Offset != tt.offset || pe.Err != tt.err || !errors.Is(err, tt.err) {
			t.Errorf("Normalize(%+v): got %q at %d: %v; want %q at %d: %v", tt.rule, pe.Path, pe.Offset, pe.Err, tt.path, tt.offset, tt.err)
		}
		if want := fmt.Sprintf("route path %q: %v", tt.path, tt.err); err.Error() != want {
			t.Errorf("Normalize(%+v): got message %q, want %q", tt.rule, err.Error(), want)
		}
	}
}

// TestNormalizePathAllocs: a path already in normal form costs no
// allocation; a dirty one costs one, the result.
func TestNormalizePathAllocs(t *testing.T) {
	for _, tt := range []struct {
		path string
		want float64
	}{
		{"/api/orders/7/items", 0},
		{"/a%20b/%C3%A9", 0},
		{"/api/./orders//7/../7", 1},
		{"/api/%6frders", 1},
	} {
		if got := testing.AllocsPerRun(100, func() { NormalizePath(tt.path) }); got != tt.want {
			t.Errorf("NormalizePath(%q): got %v allocs, want %v", tt.path, got, tt.want)
		}
	}
}

// TestRouteAllocs: routing a request whose path is normal allocates
// nothing, host and port matching included.
func TestRouteAllocs(t *testing.T) {
	routes := benchRoutes(t)
	rt := NewTable(routes)
	r, err := http.NewRequest(http.MethodGet, "http://shop.example:8443/api/orders/7?x=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		path, _, err := RequestPath(r)
		if err != nil || rt.Find(r, path) < 0 {
			t.Fatal("no route")
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocs per routed request, want 0", allocs)
	}
}

// TestSplitHost covers the host forms a Host header or a route carries.
func TestSplitHost(t *testing.T) {
	for _, tt := range []struct{ in, host, port string }{
		{"shop.example", "shop.example", ""},
		{"shop.example:8443", "shop.example", "8443"},
		{"shop.example.", "shop.example", ""},
		{"shop.example.:80", "shop.example", "80"},
		{"shop.example:", "shop.example", ""},
		{"[::1]", "::1", ""},
		{"[::1]:8080", "::1", "8080"},
		{"[::1]:", "::1", ""},
		{"::1", "::1", ""},
		{"fe80::1", "fe80::1", ""},
		{"127.0.0.1:9", "127.0.0.1", "9"},
		{"", "", ""},
		// Not a host and a port of digits: the whole value, which no
		// route names.
		{"shop.example:x", "shop.example:x", ""},
		{"[::1]:[", "[::1]:[", ""},
		{"[::1]x", "[::1]x", ""},
		{"[::1", "[::1", ""},
	} {
		host, port := splitHost(tt.in)
		if host != tt.host || port != tt.port {
			t.Errorf("splitHost(%q): got %q, %q; want %q, %q", tt.in, host, port, tt.host, tt.port)
		}
	}
}

// FuzzNormalizePath: NormalizePath agrees with its slow definition, is
// idempotent, and its output is a clean, valid, escaped path; on paths
// without escapes it agrees with path.Clean, a trailing slash aside.
func FuzzNormalizePath(f *testing.F) {
	for _, seed := range []string{
		"/", "", "/a/b", "/a//b", "/a/./b/../c", "/soak/%2e%2e/blocked/x",
		"/a%2Fb", "/a%5c", `/a\b`, "/a%zz", "/a%", "/%41%c3", "/a b", "..", "/a/b/..",
		"/%2e%2E/.%2e/", "a", "/a%20b/",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := NormalizePath(p)
		slow, at, slowErr := normalizeSlow(p)
		if err != nil {
			if slowErr != err {
				t.Fatalf("%q: NormalizePath failed with %v, normalizeSlow with %v", p, err, slowErr)
			}
			if err != ErrEncodedSlash && err != ErrBackslash && err != ErrInvalidEscape {
				t.Fatalf("%q: unexpected error %v", p, err)
			}
			// The fault is the first: at a '%' or '\', with none before it.
			if p[at] != '%' && p[at] != '\\' {
				t.Fatalf("%q: fault at %d is %q, want '%%' or '\\'", p, at, p[at])
			}
			if _, err := NormalizePath(p[:at]); err != nil {
				t.Fatalf("%q: fault at %d, but %q before it fails too: %v", p, at, p[:at], err)
			}
			return
		}
		if slowErr != nil || slow != got {
			t.Fatalf("%q: NormalizePath gave %q, normalizeSlow %q, %v", p, got, slow, slowErr)
		}
		if !strings.HasPrefix(got, "/") {
			t.Fatalf("%q → %q: does not start with /", p, got)
		}
		for _, bad := range []string{"//", "/./", "/../", `\`} {
			if strings.Contains(got, bad) {
				t.Fatalf("%q → %q: contains %q", p, got, bad)
			}
		}
		if strings.HasSuffix(got, "/.") || strings.HasSuffix(got, "/..") {
			t.Fatalf("%q → %q: ends in a dot segment", p, got)
		}
		if again, err := NormalizePath(got); again != got || err != nil {
			t.Fatalf("%q → %q → %q, %v: not idempotent", p, got, again, err)
		}
		if !isNormalPath(got) {
			t.Fatalf("%q → %q: not seen as normal", p, got)
		}
		// The normal form is what net/url sends as it is.
		decoded, err := url.PathUnescape(got)
		if err != nil {
			t.Fatalf("%q → %q: %v", p, got, err)
		}
		if esc := (&url.URL{Path: decoded, RawPath: got}).EscapedPath(); esc != got {
			t.Fatalf("%q → %q: url.URL sends it as %q", p, got, esc)
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r == '%' || r > 0x7e || !isPathByte(byte(r)) }) {
			return
		}
		want := path.Clean("/" + p)
		last := p[strings.LastIndexByte(p, '/')+1:]
		if want != "/" && (last == "" || last == "." || last == "..") {
			want += "/"
		}
		if got != want {
			t.Fatalf("%q: got %q, path.Clean gives %q", p, got, want)
		}
	})
}

// BenchmarkRouting measures what routing adds to a request: its path
// normalised, its host split, and a table of routes tried in order (the
// last one matches), for a normal path and a dirty one.
func BenchmarkRouting(b *testing.B) {
	routes := benchRoutes(b)
	rt := NewTable(routes)
	for _, bc := range []struct{ name, target string }{
		{"normal", "http://a.example:8080/api/orders/7/items?x=1"},
		{"dirty", "http://a.example:8080/soak/%2e%2e/api//orders/./7/items?x=1"},
	} {
		r, err := http.NewRequest(http.MethodGet, bc.target, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					path, _, err := RequestPath(r)
					if err != nil || rt.Find(r, path) < 0 {
						b.Fatal("no route")
					}
				}
			})
		})
	}
}

// benchRoutes is the route table of TestRouteAllocs and BenchmarkRouting:
// four rules, the last one matching /api/orders/7 on any host.
func benchRoutes(tb testing.TB) []Rule {
	tb.Helper()
	var routes []Rule
	for _, r := range []Rule{
		{Methods: []string{"POST"}, Path: "/api/orders"},
		{PathPrefix: "/api/orders", Host: "shop.example:8443"},
		{PathPrefix: "/static/", Host: "[::1]"},
		{PathPrefix: "/api/orders"},
	} {
		rt, err := Normalize(r)
		if err != nil {
			tb.Fatal(err)
		}
		routes = append(routes, rt)
	}
	return routes
}
