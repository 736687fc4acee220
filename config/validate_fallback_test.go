package config

import (
	"strings"
	"testing"
)

// TestGRPCFallbackProblems covers a fallback's gRPC answer: grpcStatus and
// grpcMessage at their limits, and the warning for an HTTP fallback that
// gRPC clients never see, which rejects nothing.
func TestGRPCFallbackProblems(t *testing.T) {
	h2cUpstream := func(src string) string {
		return strings.Replace(src, "upstream: http://", "upstream: h2c://", 1)
	}
	h2cInbound := func(src string) string { return "h2c: true\n" + h2cUpstream(src) }
	tests := []struct {
		name     string
		src      string
		errs     []string // problems that reject the file
		warnings []string // File.Warnings of a file without errors
	}{
		{"grpcStatus 0", withPoint("visitThreshold: 1\nfallback: {grpcStatus: 0}"), nil, nil},
		{"grpcStatus 16", withPoint("visitThreshold: 1\nfallback: {grpcStatus: 16}"), nil, nil},
		{"grpcStatus 17", withPoint("visitThreshold: 1\nfallback: {grpcStatus: 17}"), []string{"8:28: fallback.grpcStatus: 17 is not a gRPC status code; write one from 0 to 16"}, nil},
		{"grpcStatus -1", withPoint("visitThreshold: 1\nfallback: {grpcStatus: -1}"), []string{"8:28: fallback.grpcStatus: -1 is not a gRPC status code"}, nil},
		{"grpcStatus a string", withPoint("visitThreshold: 1\nfallback: {grpcStatus: UNAVAILABLE}"), []string{"8:28: grpcStatus: want an integer"}, nil},
		{"grpcMessage", withPoint("visitThreshold: 1\nfallback: {grpcMessage: try later}"), nil, nil},
		{"grpcMessage empty", withPoint("visitThreshold: 1\nfallback: {grpcMessage: ''}"), []string{"8:29: fallback.grpcMessage is empty"}, nil},
		{"grpcMessage 1024 bytes", withPoint("visitThreshold: 1\nfallback: {grpcMessage: " + strings.Repeat("x", 1024) + "}"), nil, nil},
		{"grpcMessage 1025 bytes", withPoint("visitThreshold: 1\nfallback: {grpcMessage: " + strings.Repeat("x", 1025) + "}"), []string{"8:29: fallback.grpcMessage: 1025 bytes is more than 1024"}, nil},
		// The warning: an HTTP answer, gRPC carried, no gRPC answer.
		{"HTTP body, no gRPC", withPoint("visitThreshold: 1\nfallback: {status: 503, body: busy}"), nil, nil},
		{"HTTP body, h2c upstream", h2cUpstream(withPoint("visitThreshold: 1\nfallback: {status: 503, body: busy}")), nil,
			[]string{`8:5: warning: point "p": gRPC clients (the h2c:// upstream) never get this fallback's HTTP status and body`}},
		{"HTTP status, h2c inbound", h2cInbound(withPoint("visitThreshold: 1\nfallback: {status: 503}")), nil,
			[]string{`9:5: warning: point "p": gRPC clients (h2c: true) never get this fallback's HTTP status and body`}},
		{"bodyFile, h2c inbound", h2cInbound(withPoint("visitThreshold: 1\nfallback: {bodyFile: validate_test.go}")), nil,
			[]string{`9:5: warning: point "p": gRPC clients (h2c: true)`}},
		{"HTTP body with grpcStatus", h2cInbound(withPoint("visitThreshold: 1\nfallback: {body: busy, grpcStatus: 14}")), nil, nil},
		{"HTTP body with grpcMessage", h2cUpstream(withPoint("visitThreshold: 1\nfallback: {body: busy, grpcMessage: busy}")), nil, nil},
		{"headers only", h2cInbound(withPoint("visitThreshold: 1\nfallback: {headers: {X-A: b}}")), nil, nil},
		{"no fallback", h2cInbound(withPoint("visitThreshold: 1")), nil, nil},
		// A file with errors reports its warnings too, in position order.
		{"warning beside an error", h2cUpstream(withPoint("visitThreshold: 1\nfallback: {status: 503}\ndowngradeRate: 101")), []string{
			`8:5: warning: point "p": gRPC clients (the h2c:// upstream)`,
			"9:20: downgradeRate: 101 is not a percent",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, problemsOf(t, tt.src, Options{}), tt.errs)
			if tt.errs != nil {
				return
			}
			checkProblems(t, warningsOf(t, tt.src, Options{}), tt.warnings)
		})
	}
}
