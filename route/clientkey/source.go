package clientkey

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Kind is what a Source reads from a request. The zero Kind is unknown.
type Kind uint8

// The kinds of Source, one per spec form.
const (
	Header       Kind = iota + 1 // header:NAME
	Query                        // query:NAME
	Cookie                       // cookie:NAME
	ClientIP                     // clientIP
	ForwardedFor                 // forwardedFor:N
)

// MaxHops is the largest N of forwardedFor:N: no deployment has more
// trusted proxies in a row, and it bounds what Key reads of the header.
const MaxHops = 32

// maxNameBytes bounds the NAME of header:, query: and cookie:.
const maxNameBytes = 256

// kinds is the spelling of each kind in a spec.
var kinds = [...]string{
	Header:       "header",
	Query:        "query",
	Cookie:       "cookie",
	ClientIP:     "clientIP",
	ForwardedFor: "forwardedFor",
}

// String is the kind as a spec spells it ("header", "clientIP"), or
// "Kind(N)" for an unknown kind.
func (k Kind) String() string {
	if k >= Header && int(k) < len(kinds) {
		return kinds[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Source is where a request's key is: parse one with ParseSource. A Source
// is a small comparable value, safe for concurrent use; two Sources are ==
// when they read the same key. The zero Source has no Kind, and its Key
// reports every request as having no key.
type Source struct {
	kind Kind
	// name is the header's canonical name (X-Api-Key), or the query
	// parameter's or cookie's name exactly as written.
	name string
	// hops is N of forwardedFor:N.
	hops int
}

// Kind is what the Source reads; 0 for the zero Source.
func (s Source) Kind() Kind { return s.kind }

// Name is the header's name in canonical form (X-Api-Key), the query
// parameter's or the cookie's name; "" for clientIP and forwardedFor.
func (s Source) Name() string { return s.name }

// Hops is N of forwardedFor:N, the number of trusted proxies in front; 0
// for the other kinds.
func (s Source) Hops() int { return s.hops }

// String is the spec of the Source, which ParseSource reads back to an ==
// Source; a header's name is in canonical form. "" for the zero Source.
func (s Source) String() string {
	switch s.kind {
	case Header, Query, Cookie:
		return s.kind.String() + ":" + s.name
	case ClientIP:
		return "clientIP"
	case ForwardedFor:
		return "forwardedFor:" + strconv.Itoa(s.hops)
	}
	return ""
}

// kindsHint is the list of valid specs, for error messages.
const kindsHint = "write header:NAME, query:NAME, cookie:NAME, clientIP or forwardedFor:N"

// ParseSource reads a key's spec as sds.yaml writes it: header:NAME,
// query:NAME, cookie:NAME, clientIP or forwardedFor:N. Kinds are
// case-sensitive, header names are not (header:x-api-key is
// header:X-Api-Key), query and cookie names are. An error says what is
// wrong and what to write instead, for config validation to report at the
// key's line.
func ParseSource(spec string) (Source, error) {
	if spec == "" {
		return Source{}, fmt.Errorf("the key is empty; %s", kindsHint)
	}
	for i := 0; i < len(spec); i++ {
		if c := spec[i]; c <= ' ' || c >= 0x7f {
			return Source{}, fmt.Errorf("key %q contains a space or a character outside printable ASCII; write it without, such as header:X-Api-Key", spec)
		}
	}
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch kind {
	case "header", "query", "cookie":
		return parseNamed(spec, kind, arg, hasArg)
	case "clientIP":
		if hasArg {
			return Source{}, fmt.Errorf("key %q: clientIP takes no argument; write clientIP for the TCP peer, or forwardedFor:N for the Nth address from the right of X-Forwarded-For", spec)
		}
		return Source{kind: ClientIP}, nil
	case "forwardedFor":
		return parseForwardedFor(spec, arg, hasArg)
	}
	for k := Header; int(k) < len(kinds); k++ {
		if strings.EqualFold(kind, kinds[k]) {
			return Source{}, fmt.Errorf("key %q: write %s (the kind is case-sensitive)", spec, kinds[k]+spec[len(kind):])
		}
	}
	return Source{}, fmt.Errorf("key %q is not a key; %s", spec, kindsHint)
}

// parseNamed reads the NAME of header:NAME, query:NAME or cookie:NAME.
func parseNamed(spec, kind, name string, hasArg bool) (Source, error) {
	example := "header:X-Api-Key"
	switch kind {
	case "query":
		example = "query:api_key"
	case "cookie":
		example = "cookie:session"
	}
	switch {
	case !hasArg || name == "":
		return Source{}, fmt.Errorf("key %q: %s needs a name; write %s:NAME, such as %s", spec, kind, kind, example)
	case len(name) > maxNameBytes:
		return Source{}, fmt.Errorf("key %q: the name is %d bytes long; write at most %d, such as %s", spec[:32]+"...", len(name), maxNameBytes, example)
	}
	switch kind {
	case "query":
		if i := strings.IndexAny(name, queryNameRejects); i >= 0 {
			return Source{}, fmt.Errorf("key %q: a query parameter name here cannot contain %q (write the name as the upstream reads it, without %s); write one such as %s", spec, name[i], queryNameRejects, example)
		}
		return Source{kind: Query, name: name}, nil
	case "cookie":
		if !isToken(name) {
			return Source{}, fmt.Errorf("key %q: %q is not a cookie name (letters, digits and !#$%%&'*+-.^_`|~ only); write one such as %s", spec, name, example)
		}
		return Source{kind: Cookie, name: name}, nil
	}
	if !isToken(name) {
		return Source{}, fmt.Errorf("key %q: %q is not a header name (letters, digits and !#$%%&'*+-.^_`|~ only); write one such as %s", spec, name, example)
	}
	canon := http.CanonicalHeaderKey(name)
	switch canon {
	case "X-Forwarded-For", "Forwarded", "X-Real-Ip":
		return Source{}, fmt.Errorf("key %q: a client writes what it likes in %s; write forwardedFor:N, N the number of trusted proxies in front", spec, canon)
	case "Cookie":
		return Source{}, fmt.Errorf("key %q: one value for all cookies lets a client change its key by adding one; write cookie:NAME", spec)
	case "Host":
		return Source{}, fmt.Errorf("key %q: Host names the service, not the client, and net/http keeps it out of the headers; write a header the client sends, such as %s", spec, example)
	}
	return Source{kind: Header, name: canon}, nil
}

// queryNameRejects are the bytes a query: name cannot contain: the
// separators of a query, and the escapes (the name is matched unescaped).
const queryNameRejects = "&=;#%+"

// parseForwardedFor reads the N of forwardedFor:N.
func parseForwardedFor(spec, arg string, hasArg bool) (Source, error) {
	if !hasArg || arg == "" {
		return Source{}, fmt.Errorf("key %q: forwardedFor needs the number of trusted proxies in front; write forwardedFor:1 for one (1 to %d)", spec, MaxHops)
	}
	if strings.Trim(arg, "0123456789") != "" {
		return Source{}, fmt.Errorf("key %q: N is the number of trusted proxies in front, a whole number from 1 to %d; write forwardedFor:1 for one", spec, MaxHops)
	}
	if strings.Trim(arg, "0") == "" {
		return Source{}, fmt.Errorf("key %q trusts no proxy; write clientIP for the TCP peer, or forwardedFor:1 for one proxy in front", spec)
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n > MaxHops {
		return Source{}, fmt.Errorf("key %q: at most %d trusted proxies; write forwardedFor:N with N from 1 to %d", spec, MaxHops, MaxHops)
	}
	if arg[0] == '0' {
		return Source{}, fmt.Errorf("key %q: write forwardedFor:%d, without the leading zero", spec, n)
	}
	return Source{kind: ForwardedFor, hops: n}, nil
}

// isToken reports whether s is an RFC 9110 token: one or more tchar.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if c >= 0x80 || !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}
