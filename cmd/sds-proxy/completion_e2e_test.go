package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/internal/tooltest"
)

// completionCase is a command line being typed and what the completion
// offers for its last word.
type completionCase struct {
	words []string // the command line; the last word is being completed
	want  []string // the completions, in any order
}

// sorted returns the words of s sorted, space-separated.
func sorted(s string) string {
	words := strings.Fields(s)
	slices.Sort(words)
	return strings.Join(words, " ")
}

// helpCommands returns the command names sds-proxy help lists.
func helpCommands(t *testing.T) []string {
	t.Helper()
	out, err := command("sds-proxy", "help").Output()
	if err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(string(out), "\ncommands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for line := range strings.SplitSeq(list, "\n") {
		names = append(names, strings.Fields(line)[0])
	}
	return names
}

// flagsOf returns the flags sds-proxy CMD -h lists, sorted.
func flagsOf(t *testing.T, cmd string) []string {
	t.Helper()
	out, _ := command("sds-proxy", cmd, "-h").CombinedOutput()
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  (-\S+)`).FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	slices.Sort(flags)
	return flags
}

// completionCases returns the cases both shells must answer: every
// command by name, every command's flags, choices of flag values and
// arguments, command names after help, and files after -config.
func completionCases(t *testing.T) []completionCase {
	names := helpCommands(t)
	if len(names) < 9 {
		t.Fatalf("sds-proxy help lists %q, want every command", names)
	}
	cases := []completionCase{
		{[]string{"sds-proxy", ""}, names},
		{[]string{"sds-proxy", "va"}, []string{"validate"}},
		{[]string{"sds-proxy", "-c"}, []string{"-config"}},
		{[]string{"sds-proxy", "validate", "-o", ""}, []string{"text", "json"}},
		{[]string{"sds-proxy", "status", "-o", "j"}, []string{"json"}},
		{[]string{"sds-proxy", "completion", ""}, []string{"bash", "zsh"}},
		{[]string{"sds-proxy", "help", "de"}, []string{"demo"}},
		{[]string{"sds-proxy", "validate", "-config", "s"}, []string{"sds.yaml"}},
		{[]string{"sds-proxy", "-config", ""}, []string{"other.yaml", "sds.yaml"}},
		{[]string{"sds-proxy", "status", "-admin", ""}, nil},
	}
	for _, name := range names {
		if flags := flagsOf(t, name); len(flags) > 0 {
			cases = append(cases, completionCase{[]string{"sds-proxy", name, "-"}, flags})
		}
	}
	return cases
}

// completionDir returns a directory holding sds.yaml and other.yaml, for
// file name completion.
func completionDir(t *testing.T) string {
	dir := t.TempDir()
	for _, name := range []string{"sds.yaml", "other.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// shellWords quotes words for a shell command line.
func shellWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	return strings.Join(quoted, " ")
}

// TestBashCompletion: the script of sds-proxy completion bash, sourced in
// bash, registers _sds_proxy for sds-proxy, and the function completes
// commands, flags, flag values and files as a user typing would get.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	tooltest.LookPath(t, "bash", "apt-get install bash")
	bin := filepath.Join(binDir, "sds-proxy")
	script := "source <('" + bin + "' completion bash) || exit 1\ncomplete -p sds-proxy\n" +
		`t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sds_proxy; echo "${COMPREPLY[*]}"; }` + "\n"
	cases := completionCases(t)
	for _, c := range cases {
		script += "t " + shellWords(c.words) + "\n"
	}
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", script)
	cmd.Dir = completionDir(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(cases)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(cases)+1, out)
	}
	if want := "complete -o default -F _sds_proxy sds-proxy"; lines[0] != want {
		t.Errorf("complete -p sds-proxy: got %q, want %q", lines[0], want)
	}
	for i, c := range cases {
		if got, want := sorted(lines[i+1]), sorted(strings.Join(c.want, " ")); got != want {
			t.Errorf("%q: got %q, want %q", c.words, got, want)
		}
	}
}

// TestZshCompletion: the script of sds-proxy completion zsh registers the
// same function through zsh's bashcompinit. With zsh installed, the
// function runs as bashcompinit runs it (sh emulation, which does not
// filter by the typed prefix: zsh does that afterwards); without, the
// script's text is checked.
func TestZshCompletion(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	bash, err := command("sds-proxy", "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	zsh, err := command("sds-proxy", "completion", "zsh").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(zsh), "autoload -U +X bashcompinit && bashcompinit\n") || !strings.HasSuffix(string(zsh), string(bash)) {
		t.Errorf("the zsh script does not load bashcompinit and then the bash script:\n%s", zsh)
	}
	if _, err := exec.LookPath("zsh"); err != nil {
		tooltest.Skip(t, "zsh", "not on PATH, so only the script's text was checked", "apt-get install zsh (.ci/run does)")
	}
	bin := filepath.Join(binDir, "sds-proxy")
	script := "source <('" + bin + "' completion zsh) || exit 1\nprint -r -- ${_comps[sds-proxy]}\n" +
		`t() { emulate -L sh; COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _sds_proxy; print -r -- "${COMPREPLY[*]}"; }` + "\n"
	cases := []completionCase{
		{[]string{"sds-proxy", ""}, helpCommands(t)},
		{[]string{"sds-proxy", "validate", "-o", ""}, []string{"text", "json"}},
		{[]string{"sds-proxy", "completion", ""}, []string{"bash", "zsh"}},
		{[]string{"sds-proxy", "-config", ""}, []string{"other.yaml", "sds.yaml"}},
		{[]string{"sds-proxy", "status", "-"}, flagsOf(t, "status")},
	}
	for _, c := range cases {
		script += "t " + shellWords(c.words) + "\n"
	}
	cmd := exec.Command("zsh", "-f", "-c", script)
	cmd.Dir = completionDir(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(cases)+1 {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(cases)+1, out)
	}
	if want := "_bash_complete -o default -F _sds_proxy"; lines[0] != want {
		t.Errorf("zsh's completion of sds-proxy: got %q, want %q", lines[0], want)
	}
	for i, c := range cases {
		if got, want := sorted(lines[i+1]), sorted(strings.Join(c.want, " ")); got != want {
			t.Errorf("%q: got %q, want %q", c.words, got, want)
		}
	}
}
