package metrics

import "net/http"

// TraceID returns the trace id of h's W3C traceparent header
// (https://www.w3.org/TR/trace-context/#traceparent-header), or "" when
// there is none or it is not valid. It is strict: exactly one
// traceparent value, version 00 with exactly 55 characters
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"), lowercase
// hex only, neither id all zeros. The id is a substring of the header's
// value: TraceID allocates nothing.
func TraceID(h http.Header) string {
	values := h["Traceparent"]
	if len(values) != 1 {
		return "" // none, or several: the spec treats duplicates as invalid
	}
	v := values[0]
	const (
		traceStart  = 3
		parentStart = traceStart + 32 + 1
		flagsStart  = parentStart + 16 + 1
		length      = flagsStart + 2
	)
	if len(v) != length || v[0] != '0' || v[1] != '0' ||
		v[traceStart-1] != '-' || v[parentStart-1] != '-' || v[flagsStart-1] != '-' {
		return ""
	}
	trace, parent, flags := v[traceStart:parentStart-1], v[parentStart:flagsStart-1], v[flagsStart:]
	if !lowerHex(trace) || !lowerHex(parent) || !lowerHex(flags) || allZeros(trace) || allZeros(parent) {
		return ""
	}
	return trace
}

// lowerHex reports whether s is made of 0-9 and a-f only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// allZeros reports whether every byte of s is '0'.
func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
