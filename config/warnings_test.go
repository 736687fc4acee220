package config

import (
	"strings"
	"testing"
)

// warningsOf parses src, which must have no error, and returns its
// warnings as "LINE:COL: warning: message".
func warningsOf(t *testing.T, src string, opts Options) []string {
	t.Helper()
	f, err := Parse("sds.yaml", []byte(src), opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, w := range f.Warnings {
		if !w.Warning {
			t.Errorf("%v: Warning is false", w)
		}
		got = append(got, strings.TrimPrefix(w.Error(), "sds.yaml:"))
	}
	return got
}

// TestGRPCUpstreamWarning: h2c: true with an http:// upstream takes gRPC
// from clients and calls the upstream over HTTP/1.1, so every gRPC call
// fails; validate warns at h2c and names h2c:// as the fix.
func TestGRPCUpstreamWarning(t *testing.T) {
	withUpstream := func(top, upstream string) string {
		return top + strings.Replace(withPoint("visitThreshold: 1"), "http://127.0.0.1:9000", upstream, 1)
	}
	const warning = "1:6: warning: h2c: true accepts cleartext HTTP/2 from clients, but the upstream http://127.0.0.1:9000 is called over HTTP/1.1, so gRPC calls fail; use h2c://127.0.0.1:9000 for a gRPC upstream"
	for _, tt := range []struct {
		name string
		src  string
		opts Options
		want []string
	}{
		{"h2c with http upstream", withUpstream("h2c: true\n", "http://127.0.0.1:9000"), Options{}, []string{warning}},
		{"h2c with http upstream, no port", withUpstream("h2c: true\n", "http://svc"), Options{}, []string{"1:6: warning: h2c: true accepts cleartext HTTP/2 from clients, but the upstream http://svc is called over HTTP/1.1, so gRPC calls fail; use h2c://svc for a gRPC upstream"}},
		{"h2c with http upstream from the flag", "h2c: true\n" + strings.Replace(withPoint("visitThreshold: 1"), "upstream: http://127.0.0.1:9000\n", "", 1), Options{Upstream: "http://127.0.0.1:9000"}, []string{warning}},
		{"h2c with h2c upstream", withUpstream("h2c: true\n", "h2c://127.0.0.1:9000"), Options{}, nil},
		{"h2c with https upstream", withUpstream("h2c: true\n", "https://127.0.0.1:9000"), Options{}, nil},
		{"h2c false with http upstream", withUpstream("h2c: false\n", "http://127.0.0.1:9000"), Options{}, nil},
		{"no h2c with http upstream", withUpstream("", "http://127.0.0.1:9000"), Options{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, warningsOf(t, tt.src, tt.opts), tt.want)
		})
	}
}
