package hangup

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestRunsProxy: the command lines that run the proxy catch SIGHUP early;
// the other commands keep its default action.
func TestRunsProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"run"}, true},
		{[]string{"run", "-config", "sds.yaml"}, true},
		{[]string{"-config", "sds.yaml"}, true},
		{[]string{"-upstream", "http://127.0.0.1:9000"}, true},
		{[]string{"demo"}, true},
		{[]string{"-h"}, true}, // a flag first: exits at once
		{[]string{"validate", "-config", "sds.yaml"}, false},
		{[]string{"status"}, false},
		{[]string{"inject", "-image", "i"}, false},
		{[]string{"help", "run"}, false},
		{[]string{"version"}, false},
		{[]string{"runner"}, false},
	} {
		if got := RunsProxy(tc.args); got != tc.want {
			t.Errorf("RunsProxy(%q): got %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestTake: the test binary's command line starts with a flag (-test.…),
// so init subscribed; the first Take gets the channel, later ones nil.
func TestTake(t *testing.T) {
	first := Take()
	if first == nil {
		t.Fatal("first Take: got nil, want the channel init subscribed")
	}
	if cap(first) != 1 {
		t.Errorf("cap: got %d, want 1", cap(first))
	}
	if second := Take(); second != nil {
		t.Errorf("second Take: got a channel, want nil")
	}
}

// TestDependsOnlyOnOSSignal: the package needs no package that os/signal
// does not, but sync/atomic (no init): each one more could put its init
// after dozens of others' (strings: after a hundred), and SIGHUP would
// kill the process that much longer.
func TestDependsOnlyOnOSSignal(t *testing.T) {
	t.Parallel()
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	allowed := append(deps("os/signal"), "sync/atomic", "github.com/sds-proxy/sds-proxy/cmd/sds-proxy/internal/hangup")
	for _, d := range deps("github.com/sds-proxy/sds-proxy/cmd/sds-proxy/internal/hangup") {
		if !slices.Contains(allowed, d) {
			t.Errorf("hangup depends on %s, which os/signal does not: its init may run later", d)
		}
	}
}
