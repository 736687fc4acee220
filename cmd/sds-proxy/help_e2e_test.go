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
		{[]string{"help"}, 0, "The whole contract is in the docs/ folder of\nhttps://github.com/sds-proxy/sds-proxy (its README links each page).\n", ""},
		{[]string{"--help"}, 0, "exit codes:", ""},
		{[]string{"-h"}, 0, "\n  demo  ", ""},
		{[]string{"help", "status"}, 0, "usage: sds-proxy status", ""},
		{[]string{"validate", "-h"}, 0, "", "usage: sds-proxy validate"},
		{[]string{"--version"}, 0, "sds-proxy ", ""},
		{[]string{"-version"}, 0, " go1.", ""},
		{[]string{"validate", "-config", broken}, 1, "visitThreshold: want an integer", ""},
		{[]string{"validate", "-config", filepath.Join(dir, "missing.yaml")}, 1, "", "sds-proxy: no config file " + filepath.Join(dir, "missing.yaml")},
		{[]string{"validate", "-o", "json", "-config", broken}, 1, `"valid": false`, ""},
		{[]string{"validate", "-o", "yaml"}, 2, "", `-o "yaml": want text or json`},
		{[]string{"bogus"}, 2, "", `sds-proxy: unknown command "bogus"; sds-proxy help lists the commands`},
		{[]string{"valdate"}, 2, "", "sds-proxy: unknown command \"valdate\"; did you mean \"validate\"?\n"},
		{[]string{"help", "stauts"}, 2, "", "sds-proxy: help: unknown command \"stauts\"; did you mean \"status\"?\n"},
		{[]string{"force", "orders", "degrade", "-token-file", ""}, 2, "", "sds-proxy force: -ttl: give how long the switch lasts, such as -ttl 10m (at most 24h)\n" +
			"sds-proxy force: -reason: say why, for whoever reads /status and the logs\n" +
			"sds-proxy force: -token-file: give the file holding the proxy's token (its adminTokenFile), or set $SDS_ADMIN_TOKEN_FILE\n" +
			"usage: sds-proxy force"},
		{[]string{"-bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"help", "bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"validate", "extra"}, 2, "", `validate: unexpected arguments ["extra"]`},
		{[]string{"inject"}, 2, "", "sds-proxy: inject: -image is required"},
		{[]string{"inject", "-image", "i", "-service-target"}, 2, "", "sds-proxy: inject: -service-target needs -upstream-port"},
		{[]string{"inject", "-image", "i", "-upstream-port", "70000"}, 2, "", "-upstream-port 70000: want a port from 1 to 65535"},
		{[]string{"injector"}, 2, "", "sds-proxy: injector: -image is required"},
		{[]string{"injector", "-image", "i", "-tls-cert", "c.pem"}, 2, "", "sds-proxy: injector: -tls-cert and -tls-key go together"},
		{[]string{"injector", "-image", "i"}, 2, "", "sds-proxy: injector: -namespace not given and not in a pod"},
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

// TestFirstRunMessages: what a newcomer sees on a first try. sds-proxy
// run in a directory without sds.yaml, or on a -config file that does not
// exist, says what to run instead (-config, -upstream, demo), and so does
// validate (-config, demo); a config indented with a tab is refused at the
// tab's line, naming the tab, by run and by validate. Each exits 1.
func TestFirstRunMessages(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	dir := t.TempDir()
	tabbed := filepath.Join(dir, "tabbed.yaml")
	if err := os.WriteFile(tabbed, []byte("upstream: http://127.0.0.1:9000\npoints:\n  p:\n\t  visitThreshold: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := "Next, one of:\n" +
		"  sds-proxy -config FILE    run the proxy on the config file FILE\n" +
		"  sds-proxy -upstream URL   run a plain proxy in front of URL, with no points\n" +
		"  sds-proxy demo            run the built-in example in front of a demo service\n"
	nextValidate := "Next, one of:\n" +
		"  sds-proxy validate -config FILE   check the config file FILE\n" +
		"  sds-proxy demo                    run the built-in example; it prints the path of its sds.yaml, a start for yours\n"
	tabLine := tabbed + ":4:1: YAML syntax: a tab indents this line, and YAML indents with spaces only: replace the tab with spaces"
	for _, tc := range []struct {
		args []string
		want string // in stdout and stderr together
	}{
		{nil, "sds-proxy: no sds.yaml in this directory (stat sds.yaml: no such file or directory). " + next},
		{[]string{"run"}, "sds-proxy: no sds.yaml in this directory (stat sds.yaml: no such file or directory). " + next},
		{[]string{"run", "-config", "other.yaml"}, "sds-proxy: no config file other.yaml (stat other.yaml: no such file or directory). " + next},
		{[]string{"validate"}, "sds-proxy: no sds.yaml in this directory (stat sds.yaml: no such file or directory). " + nextValidate},
		{[]string{"validate", "-config", "/nonexistent.yaml"}, "sds-proxy: no config file /nonexistent.yaml (stat /nonexistent.yaml: no such file or directory). " + nextValidate},
		{[]string{"run", "-config", tabbed}, "sds-proxy: " + tabLine},
		{[]string{"validate", "-config", tabbed}, tabLine},
	} {
		var out strings.Builder
		cmd := command("sds-proxy", tc.args...)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("sds-proxy %q: got %v and\n%s\nwant exit code 1 and\n%s", tc.args, err, out.String(), tc.want)
		}
	}
}
