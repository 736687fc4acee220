package route

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Errors of NormalizePath: a path that no route could match safely. The
// proxy answers each with 400 and calls no upstream.
var (
	// ErrEncodedSlash: the path holds %2F or %2f. Decoding it would change
	// the path's segments, and keeping it lets "/a%2Fb" name what the
	// upstream may read as "/a/b"; Envoy rejects it by default too.
	ErrEncodedSlash = errors.New("the path contains an encoded slash (%2F)")
	// ErrBackslash: the path holds a backslash, raw or as %5C, which some
	// servers read as a slash.
	ErrBackslash = errors.New(`the path contains a backslash (\ or %5C)`)
	// ErrInvalidEscape: a '%' is not followed by two hexadecimal digits.
	ErrInvalidEscape = errors.New("the path contains a '%' not followed by two hexadecimal digits")
)

// PathError is the error of Normalize: a rule's path that NormalizePath
// rejects, and where. Config validation words its messages from it.
type PathError struct {
	// Path is the path as the rule gives it.
	Path string
	// Offset is the byte offset in Path of the first fault: the '%' of a
	// bad or forbidden escape, or a raw '\'.
	Offset int
	// Err is ErrEncodedSlash, ErrBackslash or ErrInvalidEscape.
	Err error
}

// Error reads `route path "/a%2Fb": the path contains an encoded slash (%2F)`.
func (e *PathError) Error() string { return fmt.Sprintf("route path %q: %v", e.Path, e.Err) }

// Unwrap returns Err, so that errors.Is(err, ErrEncodedSlash) holds.
func (e *PathError) Unwrap() error { return e.Err }

// NormalizePath returns the normal form of p, an escaped URL path as
// url.URL.EscapedPath gives it (or as a route is written), by the rules of
// Envoy's normalize_path and merge_slashes:
//
//   - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are
//     decoded, so "%2e" is a dot and "%41" is "A";
//   - the other escapes keep their byte with upper-case hex ("%c3" → "%C3");
//   - a byte that may not appear raw in a path (a space, '"', '[', a
//     non-ASCII byte...) is escaped, as url.URL.EscapedPath escapes it;
//   - repeated slashes are merged into one ("//a///b" → "/a/b");
//   - dot segments are removed as in RFC 3986 §5.2.4 ("/a/./b/../c" →
//     "/a/c", "/.." → "/"), after the decoding, so "/a/%2e%2e/b" is "/b";
//     a path that ends in a dot segment keeps a trailing slash ("/a/b/.."
//     → "/a/");
//   - the result starts with "/": "" is "/", and "a/b" is "/a/b".
//
// A trailing slash is kept: "/a/" and "/a" stay distinct. Reserved
// characters are not decoded ("%3B" and ";" stay distinct, as RFC 3986
// has them). p is rejected with ErrEncodedSlash, ErrBackslash or
// ErrInvalidEscape, whichever comes first in p.
//
// NormalizePath is idempotent, and a path already in normal form is
// returned as it is, without allocating. It is safe for concurrent use.
func NormalizePath(p string) (string, error) {
	if isNormalPath(p) {
		return p, nil
	}
	norm, _, err := normalizeSlow(p)
	return norm, err
}

// isNormalPath reports whether p is its own normal form.
func isNormalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/':
			// "//", "/./" and "/../", or "/." and "/.." at the end; one
			// trailing slash (and "/" itself) is normal.
			if i+1 < len(p) && dotSegmentOrEmpty(p[i+1:]) {
				return false
			}
		case c == '%':
			if i+2 >= len(p) || !isUpperHex(p[i+1]) || !isUpperHex(p[i+2]) {
				return false
			}
			b := unhex(p[i+1])<<4 | unhex(p[i+2])
			if isUnreserved(b) || b == '/' || b == '\\' {
				return false
			}
			i += 2
		case !isPathByte(c):
			return false
		}
	}
	return true
}

// dotSegmentOrEmpty reports whether the segment at the start of rest (up
// to the next '/') is "", "." or "..", written raw.
func dotSegmentOrEmpty(rest string) bool {
	switch {
	case rest == "" || rest[0] == '/':
		return true
	case rest[0] != '.':
		return false
	case len(rest) == 1 || rest[1] == '/':
		return true
	}
	return rest[1] == '.' && (len(rest) == 2 || rest[2] == '/')
}

// normalizeSlow builds the normal form of p segment by segment: the
// definition that isNormalPath agrees with. When p is rejected, at is the
// byte offset in p of the first fault (PathError.Offset).
func normalizeSlow(p string) (norm string, at int, err error) {
	var buf [256]byte
	out := buf[:0]
	rest := strings.TrimPrefix(p, "/")
	for {
		raw, next, more := strings.Cut(rest, "/")
		out = append(out, '/')
		start := len(out)
		var i int
		if out, i, err = canonicalSegment(out, raw); err != nil {
			// rest is a suffix of p, and raw starts it.
			return "", len(p) - len(rest) + i, err
		}
		dot := true
		switch string(out[start:]) {
		case "", ".":
			// An empty segment is a repeated slash, merged away; "."
			// names the segment before it.
			out = out[:start-1]
		case "..":
			out = out[:start-1]
			out = out[:max(bytes.LastIndexByte(out, '/'), 0)]
		default:
			dot = false
		}
		if !more {
			// A path that ends in a dot segment or a slash ends in "/".
			if dot || len(out) == 0 {
				out = append(out, '/')
			}
			return string(out), 0, nil
		}
		rest = next
	}
}

// canonicalSegment appends to dst the segment raw (no '/' in it) with
// unreserved escapes decoded, other escapes upper-cased, and bytes that may
// not appear raw escaped. When raw is rejected, at is the offset in raw of
// the '%' or '\' at fault.
func canonicalSegment(dst []byte, raw string) (out []byte, at int, err error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return nil, i, ErrInvalidEscape
			}
			b := unhex(raw[i+1])<<4 | unhex(raw[i+2])
			switch {
			case b == '/':
				return nil, i, ErrEncodedSlash
			case b == '\\':
				return nil, i, ErrBackslash
			case isUnreserved(b):
				dst = append(dst, b)
			default:
				dst = appendEscaped(dst, b)
			}
			i += 2
		case c == '\\':
			return nil, i, ErrBackslash
		case isPathByte(c):
			dst = append(dst, c)
		default:
			dst = appendEscaped(dst, c)
		}
	}
	return dst, 0, nil
}

const upperHex = "0123456789ABCDEF"

func appendEscaped(dst []byte, b byte) []byte {
	return append(dst, '%', upperHex[b>>4], upperHex[b&15])
}

// isUnreserved reports whether b is an RFC 3986 unreserved character.
func isUnreserved(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~'
}

// isPathByte reports whether b may appear raw in a normal path: '/', an
// unreserved character, a sub-delim, ':' or '@' (RFC 3986 pchar).
func isPathByte(b byte) bool {
	if isUnreserved(b) {
		return true
	}
	switch b {
	case '/', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
		return true
	}
	return false
}

func isHex(b byte) bool { return isUpperHex(b) || 'a' <= b && b <= 'f' }

func isUpperHex(b byte) bool { return '0' <= b && b <= '9' || 'A' <= b && b <= 'F' }

func unhex(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b <= 'F':
		return b - 'A' + 10
	}
	return b - 'a' + 10
}
