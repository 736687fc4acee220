package main_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateWarnings runs sds-proxy validate on files that are valid
// but probably not what their author meant: each prints its warning as
// FILE:LINE:COL: warning: message, then OK, and exits 0. A row marked
// invalid is a file with an error, which prints its problems without OK
// and exits 1.
func TestValidateWarnings(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	for _, tt := range []struct {
		name, config string
		want         []string // LINE:COL: message, after FILE:
		invalid      bool
	}{
		{"h2c with an http upstream", "h2c: true\nupstream: http://127.0.0.1:9000\n" + pointRoute + "    visitThreshold: 5\n",
			[]string{"1:6: warning: h2c: true accepts cleartext HTTP/2 from clients, but the upstream http://127.0.0.1:9000 is called over HTTP/1.1, so gRPC calls fail; use h2c://127.0.0.1:9000 for a gRPC upstream (or remove h2c if no client speaks gRPC)"}, false},
		{"h2c with an h2c upstream", "h2c: true\nupstream: h2c://127.0.0.1:9000\n" + pointRoute + "    visitThreshold: 5\n", nil, false},
		{"durations as bare integers", "upstream: http://127.0.0.1:9000\nwindow: 10\n" + pointRoute + "    visitThreshold: 5\n    delayTime: 30\n", []string{
			"2:9: warning: window is 10ms: a bare integer is milliseconds (as in SDS); did you mean 10s? (write 10ms if you meant milliseconds)",
			"9:16: warning: delayTime is 30ms: a bare integer is milliseconds (as in SDS); did you mean 30s? (write 30ms if you meant milliseconds)",
		}, false},
		{"durations with units", "upstream: http://127.0.0.1:9000\nwindow: 10s\n" + pointRoute + "    visitThreshold: 5\n    delayTime: 30s\n    retryInterval: 1000\n", nil, false},
		{"a prefix that looks like a file's name", "upstream: http://127.0.0.1:9000\n" + strings.Replace(pointRoute, "match: {}", "match: {pathPrefix: /index}", 1) + "    visitThreshold: 5\n", []string{
			`4:25: warning: route 1: pathPrefix "/index" matches whole path segments, so it matches /index and /index/... but not /index.html; to match the file, write path: /index.html`,
		}, false},
		{"a folder's prefix", "upstream: http://127.0.0.1:9000\n" + strings.Replace(pointRoute, "match: {}", "match: {pathPrefix: /api/orders}", 1) + "    visitThreshold: 5\n", nil, false},
		{"timeoutThreshold off beside a count", "upstream: http://127.0.0.1:9000\n" + pointRoute + "    timeoutThreshold: -1\n    timeoutCountThreshold: 5\n", []string{
			"8:5: timeoutCountThreshold is set but timeoutThreshold is -1 (off): no call is ever counted as a timeout; set timeoutThreshold: 250ms or remove timeoutCountThreshold",
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "sds.yaml")
			if err := os.WriteFile(path, []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := command("sds-proxy", "validate", "-config", path).CombinedOutput()
			code, wantCode := 0, 0
			if tt.invalid {
				wantCode = 1
			}
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != wantCode {
				t.Fatalf("validate: exit %d, output %q; want exit %d", code, out, wantCode)
			}
			var want strings.Builder
			for _, w := range tt.want {
				want.WriteString(path + ":" + w + "\n")
			}
			if !tt.invalid {
				want.WriteString("OK\n")
			}
			if string(out) != want.String() {
				t.Errorf("validate: got\n%s\nwant\n%s", out, want.String())
			}
		})
	}
}

// TestRunLogsGRPCUpstreamWarning: the proxy started with h2c: true and an
// http:// upstream serves, and logs why gRPC calls will fail, as validate
// prints it.
func TestRunLogsGRPCUpstreamWarning(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	path := filepath.Join(t.TempDir(), "sds.yaml")
	if err := os.WriteFile(path, []byte("h2c: true\n"+configHeader("http://127.0.0.1:9", "10s", 10)+pointRoute+"    visitThreshold: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, path)
	entry := p.waitLog(t, 0, wait, msgIs("config warning"))
	if w, _ := entry["warning"].(string); !strings.HasPrefix(w, path+":1:6: warning: h2c: true accepts cleartext HTTP/2 from clients") || !strings.Contains(w, "use h2c://127.0.0.1:9 ") {
		t.Errorf("config warning: got %q, want the h2c warning at %s:1:6 naming h2c://127.0.0.1:9", w, path)
	}
}
