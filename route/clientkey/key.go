package clientkey

import (
	"crypto/sha256"
	"net/http"
	"net/url"
	"strings"
)

// MaxKeyBytes is the longest raw key Key returns as it is. A longer one is
// replaced by a fixed-size digest of all of it (never cut, so two long keys
// never merge), which bounds what a limiter may keep per key.
const MaxKeyBytes = 256

// maxValues is the most values of one key Key compares (header lines,
// query parameters, cookies of the same name); more count as Conflicting.
const maxValues = 64

// Conflicting is the key of every request that sends several different
// values for its key (two X-Api-Key lines, ?k=a&k=b, two cookies named k).
// They all share it, so that adding a second value never gives a client a
// budget of its own: whichever value the upstream then uses, the client
// spends this one key's budget, with everyone else who tried. A caller may
// also compare a key with it, to treat such requests as it treats requests
// without a key. No well-behaved client is expected to send one.
const Conflicting = "\x00perkey:conflicting"

// longPrefix starts the key standing for a key longer than MaxKeyBytes.
const longPrefix = "\x00perkey:sha256:"

// Key is the raw key of r, or ok=false when r has none: the header,
// parameter or cookie is absent or empty, the peer's address cannot be
// read, or X-Forwarded-For has fewer than N addresses or anything other
// than an address among its N rightmost elements. The key is at most
// MaxKeyBytes long, and is Conflicting for a request that sends several
// different values (see the package documentation for why).
//
// Key does not modify r and is safe for concurrent use. It allocates
// nothing when the key is in r as it is (a header, an unescaped parameter
// or cookie, an address already in canonical form); otherwise it allocates
// the canonical key once. Its work is bounded whatever r holds: at most
// maxValues values are compared, and at most a few kilobytes of
// X-Forwarded-For are read, from the right.
func (s Source) Key(r *http.Request) (key string, ok bool) {
	switch s.kind {
	case Header:
		key, ok = headerKey(r.Header[s.name])
	case Query:
		if r.URL != nil {
			key, ok = queryKey(r.URL.RawQuery, s.name)
		}
	case Cookie:
		key, ok = cookieKey(r.Header["Cookie"], s.name)
	case ClientIP:
		key, ok = peerKey(r.RemoteAddr)
	case ForwardedFor:
		key, ok = forwardedKey(r.Header["X-Forwarded-For"], s.hops)
	}
	if !ok || key == "" {
		return "", false
	}
	return bound(key), true
}

// bound replaces a key longer than MaxKeyBytes by its SHA-256 digest, with
// a prefix no short key has unless its sender wrote it on purpose. Only
// the owner of a long key can compute its digest, so only it could reach
// that key's budget with a short key, and it could as well send the long
// one; the digest makes two long keys collide only as SHA-256 would.
func bound(key string) string {
	if len(key) <= MaxKeyBytes {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return longPrefix + string(sum[:])
}

// values folds the values of one key into the key: "" with ok=false when
// there is none or every one is empty, the value when they are all equal,
// Conflicting when they differ. It is fed one value at a time.
type values struct {
	first string
	n     int
	mixed bool
}

func (v *values) add(s string) {
	v.n++
	if v.n == 1 {
		v.first = s
	} else if s != v.first {
		v.mixed = true
	}
}

// full reports whether no more values should be read: the result is
// already Conflicting.
func (v *values) full() bool { return v.mixed || v.n > maxValues }

func (v *values) key() (string, bool) {
	switch {
	case v.mixed || v.n > maxValues:
		return Conflicting, true
	case v.first == "":
		return "", false
	}
	return v.first, true
}

// trimOWS removes the optional whitespace of RFC 9110 (spaces and tabs)
// around s.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// headerKey is the key in the lines of one header: each line is one
// value, spaces and tabs around it removed, commas and all.
func headerKey(lines []string) (string, bool) {
	var v values
	for _, line := range lines {
		if v.add(trimOWS(line)); v.full() {
			break
		}
	}
	return v.key()
}

// maxQueryParams is net/url's limit on a query's parameters (GODEBUG
// urlmaxqueryparams): a query with more has none for an upstream in Go, and
// none here.
const maxQueryParams = 10000

// queryKey is the key in parameter name of a raw query, parsed as
// url.ParseQuery parses it: pairs separated by &, a pair with a ; or a bad
// escape skipped, + and %XX unescaped in names and values.
func queryKey(query, name string) (string, bool) {
	if strings.Count(query, "&") >= maxQueryParams {
		return "", false
	}
	var v values
	for query != "" && !v.full() {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		if pair == "" || strings.IndexByte(pair, ';') >= 0 {
			continue
		}
		k, val, _ := strings.Cut(pair, "=")
		if !queryNameIs(k, name) {
			continue
		}
		if strings.IndexByte(val, '%') >= 0 || strings.IndexByte(val, '+') >= 0 {
			var err error
			if val, err = url.QueryUnescape(val); err != nil {
				continue
			}
		}
		v.add(val)
	}
	return v.key()
}

// queryNameIs reports whether the raw (escaped) parameter name k is name,
// allocating only when k has escapes.
func queryNameIs(k, name string) bool {
	if strings.IndexByte(k, '%') < 0 && strings.IndexByte(k, '+') < 0 {
		return k == name
	}
	u, err := url.QueryUnescape(k)
	return err == nil && u == name
}

// maxCookies is net/http's limit on the cookies of a request (GODEBUG
// httpcookiemaxnum): a request with more has none for an upstream in Go,
// and none here.
const maxCookies = 3000

// cookieKey is the key in cookie name of the Cookie lines, parsed as
// net/http's Request.Cookies parses them: pairs separated by ;, names that
// are not tokens and values with bytes outside RFC 6265's skipped, one pair
// of double quotes around a value removed.
func cookieKey(lines []string, name string) (string, bool) {
	n := 0
	for _, line := range lines {
		n += strings.Count(line, ";") + 1
	}
	if n > maxCookies {
		return "", false
	}
	var v values
	for _, line := range lines {
		for line != "" && !v.full() {
			var part string
			part, line, _ = strings.Cut(line, ";")
			k, val, _ := strings.Cut(trimASCII(part), "=")
			if trimASCII(k) != name {
				continue
			}
			if val, ok := cookieValue(val); ok {
				v.add(val)
			}
		}
	}
	return v.key()
}

// trimASCII removes ASCII white space around s, as net/textproto.TrimString.
func trimASCII(s string) string {
	for len(s) > 0 && isASCIISpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isASCIISpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isASCIISpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// cookieValue is a cookie's value without its double quotes, if its bytes
// are those RFC 6265 allows (as net/http checks them).
func cookieValue(raw string) (string, bool) {
	if len(raw) > 1 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		raw = raw[1 : len(raw)-1]
	}
	for i := 0; i < len(raw); i++ {
		if b := raw[i]; b < 0x20 || b >= 0x7f || b == '"' || b == ';' || b == '\\' {
			return "", false
		}
	}
	return raw, true
}
