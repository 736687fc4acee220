package main

import "testing"

// TestReadiness: /readyz is ready while serving and, with ACME, once the
// certificates are there (certReady); not while draining.
func TestReadiness(t *testing.T) {
	for _, tc := range []struct {
		serving   bool
		certReady func() bool
		want      bool
	}{
		{true, nil, true},
		{false, nil, false},
		{true, func() bool { return false }, false},
		{true, func() bool { return true }, true},
		{false, func() bool { return true }, false},
	} {
		in := &instance{certReady: tc.certReady}
		in.ready.Store(tc.serving)
		if got := in.isReady(); got != tc.want {
			t.Errorf("serving %v, certificates there %v: got ready %v, want %v", tc.serving, tc.certReady != nil && tc.certReady(), got, tc.want)
		}
	}
}
