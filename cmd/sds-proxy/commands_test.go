package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
)

// TestHelpListsEveryCommand: sds-proxy help, -h, -help and --help print
// the same list, with every command of the table on a line of its own
// beside its summary, and the exit codes.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	var want string
	for _, args := range [][]string{{"help"}, {"-h"}, {"-help"}, {"--help"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("%q: got %v, want no error", args, err)
		}
		got := stdout.String()
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("%q: got\n%s\nwant the same as sds-proxy help:\n%s", args, got, want)
		}
		if stderr.Len() > 0 {
			t.Errorf("%q: stderr %q, want nothing", args, stderr.String())
		}
	}
	lines := strings.Split(want, "\n")
	for _, c := range commands() {
		found := false
		for _, l := range lines {
			f := strings.Fields(l)
			found = found || len(f) > 1 && f[0] == c.name && strings.Join(f[1:], " ") == c.summary
		}
		if !found {
			t.Errorf("help: no line %q beside its summary %q in\n%s", c.name, c.summary, want)
		}
	}
	for _, code := range []string{"0  success", "1  an invalid config", "2  a wrong command line"} {
		if !strings.Contains(want, code) {
			t.Errorf("help: want the exit code line %q in\n%s", code, want)
		}
	}
}

// TestCommandTable: each command has a one-line summary, and its usage
// (help COMMAND, COMMAND -h) starts with its synopsis and is not an
// error; COMMAND -h does nothing else.
func TestCommandTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range commands() {
		if seen[c.name] {
			t.Errorf("command %q: declared twice", c.name)
		}
		seen[c.name] = true
		if c.summary == "" || strings.Contains(c.summary, "\n") || len(c.name)+len(c.summary) > 110 {
			t.Errorf("command %q: summary %q, want one line of at most 110 characters with the name", c.name, c.summary)
		}
		wantUsage := strings.TrimSpace("usage: sds-proxy " + c.name + " " + c.synopsis)
		var help, helpErr bytes.Buffer
		if err := run(context.Background(), []string{"help", c.name}, &help, &helpErr); err != nil {
			t.Errorf("help %s: got %v, want no error", c.name, err)
		}
		if !strings.HasPrefix(help.String(), wantUsage+"\n") || !strings.Contains(help.String(), c.summary) {
			t.Errorf("help %s: got\n%s\nwant it to start with %q and hold the summary", c.name, help.String(), wantUsage)
		}
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{c.name, "-h"}, &stdout, &stderr); err != nil {
			t.Errorf("%s -h: got %v, want no error", c.name, err)
		}
		if stderr.String() != help.String() || stdout.Len() > 0 {
			t.Errorf("%s -h: stdout %q, stderr\n%s\nwant nothing on stdout and the usage help %s prints on stderr", c.name, stdout.String(), stderr.String(), c.name)
		}
	}
}

// TestVersionAliases: -version and --version are version.
func TestVersionAliases(t *testing.T) {
	t.Parallel()
	want := "sds-proxy " + versionString() + " " + runtime.Version() + "\n"
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		var stdout bytes.Buffer
		if err := run(context.Background(), args, &stdout, &bytes.Buffer{}); err != nil || stdout.String() != want {
			t.Errorf("%q: got %q, %v, want %q", args, stdout.String(), err, want)
		}
	}
}

// TestUsageErrors: a wrong command line is cli.ErrUsage (exit 2), with a
// reason for the user on stderr or in the error.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		why  string // in stderr or in the error's text
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"help", "run", "demo"}, `unexpected arguments ["run" "demo"]`},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"run", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"validate", "-config"}, "flag needs an argument: -config"},
		{[]string{"demo", "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"inject", "in.yaml"}, `unexpected arguments ["in.yaml"]`},
		{[]string{"version", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"completion"}, "want one shell, bash or zsh"},
		{[]string{"completion", "fish"}, `want one shell, bash or zsh; got ["fish"]`},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), tc.args, &bytes.Buffer{}, &stderr)
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: got %v, want cli.ErrUsage", tc.args, err)
			continue
		}
		if msg := stderr.String() + " " + err.Error(); !strings.Contains(msg, tc.why) {
			t.Errorf("%q: got %q, want %q in it", tc.args, msg, tc.why)
		}
	}
}

// TestClosestCommand: a misspelt command is matched to the command fewest
// edits away, up to 1 edit for a name of up to 5 bytes and 2 for a longer
// one; past that, none.
func TestClosestCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string // want "": no suggestion
	}{
		{"valdate", "validate"},  // a letter left out
		{"vaildate", "validate"}, // two swapped: 2 edits, 8 bytes
		{"stauts", "status"},     // 2 edits, 6 bytes
		{"forse", "force"},       // 1 edit, 5 bytes
		{"rn", "run"},            // 1 edit, 2 bytes
		{"shema", "schema"},
		{"verison", "version"},
		{"fprce", "force"},
		{"focre", ""},        // 2 edits, 5 bytes: past the limit
		{"vldte", ""},        // 3 edits from validate
		{"bogus", ""},        // nothing close
		{"", ""},             // 3 edits from run
		{"install", ""},      // a command elsewhere, not here
		{"relpay", "replay"}, // two swapped
		{"validate", "validate"},
	} {
		got, ok := closestCommand(tc.name)
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("closestCommand(%q): got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestHelpNamesTheDocs: help says where the contract is, the docs/ folder,
// which holds its pages (the commands, the config, the semantics, the
// admin port), and does not send the reader to the README for it.
func TestHelpNamesTheDocs(t *testing.T) {
	t.Parallel()
	var help strings.Builder
	if err := writeHelp(&help); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "The whole contract is in the docs/ folder of\nhttps://github.com/sds-proxy/sds-proxy") {
		t.Errorf("help:\n%s\nwant it to say that the contract is in the docs/ folder", help.String())
	}
	if strings.Contains(help.String(), "README has") {
		t.Errorf("help:\n%s\nsays the README has the contract; it is in docs/", help.String())
	}
	for _, page := range []string{"commands.md", "configuration.md", "semantics.md", "admin.md"} {
		if _, err := os.Stat(filepath.Join("..", "..", "docs", page)); err != nil {
			t.Errorf("help sends the reader to docs/, which lacks %s: %v", page, err)
		}
	}
}
