package tooltest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMessage(t *testing.T) {
	for _, tc := range []struct{ tool, why, install, want string }{
		{"zsh", "not on PATH", "apt-get install zsh", "missing tool zsh: not on PATH; install: apt-get install zsh"},
		{"chromium", "no /usr/bin/chromium", "", "missing tool chromium: no /usr/bin/chromium"},
	} {
		if got := Message(tc.tool, tc.why, tc.install); got != tc.want {
			t.Errorf("Message(%q, %q, %q): got %q, want %q", tc.tool, tc.why, tc.install, got, tc.want)
		}
	}
}

// TestLookPath: a tool that is on PATH comes back as its path; one that
// is not skips, with the message (seen by a sub-test's result).
func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "sds-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if got := LookPath(t, "sds-tool", "nowhere"); got != tool {
		t.Errorf("LookPath of a tool on PATH: got %q, want %q", got, tool)
	}
	var skipped bool
	t.Run("absent", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		LookPath(t, "sds-no-such-tool", "nowhere")
	})
	if !skipped {
		t.Errorf("LookPath of a tool not on PATH: the test was not skipped")
	}
}
