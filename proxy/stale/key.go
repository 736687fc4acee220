package stale

import (
	"encoding/binary"
	"net/http"
	"strings"
)

// appendKey appends req's key to b: the point, scheme, host (ASCII
// lower-cased), path and raw query, each preceded by its length, so that
// no two requests share a key by moving bytes from one part to the next.
func appendKey(b []byte, req *Request) []byte {
	b = appendField(b, req.Point)
	b = appendField(b, req.Scheme)
	b = binary.AppendUvarint(b, uint64(len(req.Host)))
	for i := 0; i < len(req.Host); i++ {
		c := req.Host[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	b = appendField(b, req.Path)
	return appendField(b, req.RawQuery)
}

// appendVariant appends to b the values that h holds for the header
// names (canonical) a kept answer's Vary lists: per name, the number of
// lines, then each line preceded by its length; an absent header and one
// without lines are alike. Lines are compared exactly: no trimming, no
// joining. It says false when h holds one of the names under two
// spellings (a header map not built by net/http), or when h's Connection
// names one of them: the proxy removes the headers Connection names
// before the upstream sees the request (hop-by-hop, RFC 9110 §7.6.1), so
// an answer to it does not depend on the value the client sent, and
// keying it so would let a client plant an answer under another user's
// value. Such a request neither keeps nor gets an answer.
func appendVariant(b []byte, h http.Header, names []string) ([]byte, bool) {
	for _, name := range names {
		vv, ok := values(h, name)
		if !ok || connectionNames(h, name) {
			return b, false
		}
		b = binary.AppendUvarint(b, uint64(len(vv)))
		for _, v := range vv {
			b = appendField(b, v)
		}
	}
	return b, true
}

// connectionNames reports whether h's Connection header, under any
// spelling, lists name (comma-separated tokens, case-insensitive).
func connectionNames(h http.Header, name string) bool {
	for k, vv := range h {
		if !foldEqual(k, "Connection") {
			continue
		}
		for _, v := range vv {
			for tok := range strings.SplitSeq(v, ",") {
				if foldEqual(strings.TrimSpace(tok), name) {
					return true
				}
			}
		}
	}
	return false
}

// values returns the lines h holds for name, whatever the case of the
// key they are under; false if two keys spell name.
func values(h http.Header, name string) ([]string, bool) {
	vv, found := h[name]
	for k, kv := range h {
		if k == name || !foldEqual(k, name) {
			continue
		}
		if found {
			return nil, false
		}
		vv, found = kv, true
	}
	return vv, true
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
