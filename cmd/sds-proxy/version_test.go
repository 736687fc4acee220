package main

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	info := func(v string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: v}}, true }
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name, stamped string
		read          func() (*debug.BuildInfo, bool)
		want          string
	}{
		{"stamped by -ldflags", "v1.2.3", info("v1.0.0"), "v1.2.3"},
		{"go install @version", "dev", info("v1.4.0"), "v1.4.0"},
		{"a build from a checkout", "dev", info("(devel)"), "dev"},
		{"no module version", "dev", info(""), "dev"},
		{"no build info", "dev", none, "dev"},
	} {
		if got := moduleVersion(tc.stamped, tc.read); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
