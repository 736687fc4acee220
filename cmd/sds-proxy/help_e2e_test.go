package main_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodes: the real binary exits 0 on success, 1 on an invalid
// config or a failure, 2 on a wrong command line, as sds-proxy help says;
// its help lists the commands on stdout, and --version prints the version.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("upstream: http://127.0.0.1:9000\npoints:\n  p: {visitThreshold: many}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // in stdout
		stderr string // in stderr
	}{
		{[]string{"help"}, 0, "\n  validate  ", ""},
		{[]string{"--help"}, 0, "exit codes:", ""},
		{[]string{"-h"}, 0, "\n  demo  ", ""},
		{[]string{"help", "status"}, 0, "usage: sds-proxy status", ""},
		{[]string{"validate", "-h"}, 0, "", "usage: sds-proxy validate"},
		{[]string{"--version"}, 0, "sds-proxy ", ""},
		{[]string{"-version"}, 0, " go1.", ""},
		{[]string{"validate", "-config", broken}, 1, "visitThreshold: want an integer", ""},
		{[]string{"validate", "-config", filepath.Join(dir, "missing.yaml")}, 1, "missing.yaml", ""},
		{[]string{"validate", "-o", "json", "-config", broken}, 1, `"valid": false`, ""},
		{[]string{"validate", "-o", "yaml"}, 2, "", `-o "yaml": want text or json`},
		{[]string{"bogus"}, 2, "", `sds-proxy: unknown command "bogus"`},
		{[]string{"-bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"help", "bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"validate", "extra"}, 2, "", `validate: unexpected arguments ["extra"]`},
		{[]string{"inject"}, 2, "", "sds-proxy: inject: -image is required"},
		{[]string{"inject", "-image", "i", "-service-target"}, 2, "", "sds-proxy: inject: -service-target needs -upstream-port"},
		{[]string{"inject", "-image", "i", "-upstream-port", "70000"}, 2, "", "-upstream-port 70000: want a port from 1 to 65535"},
	} {
		var stdout, stderr strings.Builder
		cmd := command("sds-proxy", tc.args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: got exit code %d, stdout %q, stderr %q; want %d, %q in stdout, %q in stderr",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
