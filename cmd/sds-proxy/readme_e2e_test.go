package main_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/internal/tooltest"
)

// readmeBuild bounds the README's demo line from its start to the demo's
// walk-through: go run compiles the module's packages anew in a new
// directory (the dependencies come from the build cache), which takes
// about a minute on a busy 2-core machine.
const readmeBuild = 5 * time.Minute

// firstCodeBlock returns the lines of the first fenced code block of a
// Markdown text, without the fences, and false when it has none.
func firstCodeBlock(md string) ([]string, bool) {
	var lines []string
	in := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "```") {
			if in {
				return lines, true
			}
			in = true
			continue
		}
		if in {
			lines = append(lines, line)
		}
	}
	return nil, false
}

// TestFirstCodeBlock reads the fences of a small README.
func TestFirstCodeBlock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		md   string
		want []string
		ok   bool
	}{
		{"# T\n\ntext\n\n```sh\na # c\n\nb\n```\n\n```\nc\n```\n", []string{"a # c", "", "b"}, true},
		{"# T\n```\nunclosed\n", nil, false},
		{"no block\n", nil, false},
	} {
		got, ok := firstCodeBlock(tc.md)
		if ok != tc.ok || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("firstCodeBlock(%q): got %q, %v; want %q, %v", tc.md, got, ok, tc.want, tc.ok)
		}
	}
}

// TestReadmeFirstScreen runs the README's first code block as a newcomer
// does: in a fresh clone of the repository at HEAD (what is committed;
// uncommitted edits are not in it), each line as written, in sh, with no
// sds-proxy on the PATH. The demo line runs until its proxy and dashboard
// answer over HTTP, and is then stopped with everything it started (go
// run and the binary it built, one process group). The test line is left
// to CI: .ci/run runs that very command on a clean clone. Any other line
// must exit 0. The README names go install …@latest only beside the words
// "not published", and never in that block.
//
// It needs no network: GOPROXY=off, since the module cache already holds
// every module this test's own build needed. The demo listens on the
// README's ports (8080, 9901, 9000): when another program holds one, the
// test skips, naming it.
func TestReadmeFirstScreen(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	git := tooltest.LookPath(t, "git", "apt-get install git")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command(git, "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("%s is not a git repository with a commit (git rev-parse HEAD: %v): there is nothing to clone", root, err)
	}
	clone := filepath.Join(t.TempDir(), "sds-proxy")
	for _, args := range [][]string{
		{"clone", "--quiet", "--no-checkout", root, clone},
		{"-C", clone, "checkout", "--quiet", "--detach", strings.TrimSpace(string(head))},
	} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, ok := firstCodeBlock(string(readme))
	if !ok {
		t.Fatalf("README.md has no code block")
	}
	// go install @latest fails while the module is not published: the
	// README may name it only with words saying so.
	for para := range strings.SplitSeq(string(readme), "\n\n") {
		if strings.Contains(para, "/cmd/sds-proxy@latest") && !strings.Contains(para, "not published") {
			t.Errorf("README.md names go install …@latest without saying the module is not published:\n%s", para)
		}
	}
	if strings.Contains(strings.Join(block, "\n"), "go install") {
		t.Errorf("README's first code block has go install, which fails while the module is not published")
	}
	env := readmeEnv(t)
	demos := 0
	for _, line := range block {
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
		case strings.HasPrefix(line, "go test "):
			t.Logf("left to CI (.ci/run runs it on a clean clone): %s", line)
		case strings.Contains(line, " demo"):
			demos++
			runReadmeDemo(t, clone, env, line)
		default:
			cmd := exec.Command("sh", "-c", line)
			cmd.Dir, cmd.Env, cmd.WaitDelay = clone, env, wait
			out, ended, err := runWithin(cmd, readmeBuild)
			if !ended {
				t.Fatalf("%s: still running after %v:\n%s", line, readmeBuild, out)
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		}
	}
	if demos != 1 {
		t.Errorf("README's first code block: got %d demo lines, want 1:\n%s", demos, strings.Join(block, "\n"))
	}
}

// readmeEnv is the environment of the README's lines: this one, without
// the PATH directories that hold an sds-proxy (a newcomer has none), and
// with GOPROXY=off.
func readmeEnv(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "sds-proxy")); err == nil {
			t.Logf("PATH without %s, which holds an sds-proxy", dir)
			continue
		}
		dirs = append(dirs, dir)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "GOPROXY=") {
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+strings.Join(dirs, string(os.PathListSeparator)), "GOPROXY=off")
}

// runReadmeDemo runs the demo line in its own process group until the
// walk-through is printed and the proxy and the dashboard answer, then
// stops the group (SIGTERM, then SIGKILL after wait) and checks that no
// process of it is left.
func runReadmeDemo(t *testing.T, dir string, env []string, line string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	p, err := start(t, cmd) // its cleanup stops sh; stopGroup stops the rest
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { stopGroup(pgid) })

	if _, ok := p.stdout.find(0, readmeBuild, p.exited, func(s string) bool { return strings.HasPrefix(s, "Watch it happen") }); !ok {
		if strings.Contains(p.stderr.String(), "is in use by another program") {
			t.Skipf("%s: a port of the README's demo is taken by another program:\n%s", line, p.stderr)
		}
		t.Fatalf("%s: no walk-through within %v (exited: %v):\n%s\n%s", line, readmeBuild, p.hasExited(), p.stdout, p.stderr)
	}
	t.Logf("%s: the walk-through after %v", line, time.Since(began).Round(time.Second))
	out := p.stdout.String()
	urls := map[string]string{}
	for name, re := range map[string]string{
		"proxy":     `\n  proxy +(http://\S+) `,
		"dashboard": `Open the dashboard first: (http://\S+)/\n`,
	} {
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("the walk-through has no %s address:\n%s", name, out)
		}
		urls[name] = m[1]
	}
	if urls["proxy"] != "http://127.0.0.1:8080" || urls["dashboard"] != "http://127.0.0.1:9901" {
		t.Errorf("the demo serves on %v, want the README's proxy http://127.0.0.1:8080 and dashboard http://127.0.0.1:9901", urls)
	}
	client := &http.Client{Timeout: wait}
	for _, url := range []string{urls["proxy"] + "/api/orders", urls["dashboard"] + "/"} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: got %d, want 200", url, resp.StatusCode)
		}
	}

	if err := stopGroup(pgid); err != nil {
		t.Error(err)
	}
	p.stop(wait)
	if _, err := client.Get(urls["proxy"] + "/api/orders"); err == nil {
		t.Errorf("the proxy still answers on %s after the demo was stopped", urls["proxy"])
	}
}

// stopGroup sends SIGINT to the process group pgid, as Ctrl-C in a
// terminal does (the README says Ctrl-C stops the demo; go run passes it
// on to the program it runs), waits up to wait for every process of it to
// exit, then sends SIGKILL. It returns an error naming what had to be
// killed or is left.
func stopGroup(pgid int) error {
	gone := func() bool { return len(groupProcesses(pgid)) == 0 }
	if gone() {
		return nil
	}
	syscall.Kill(-pgid, syscall.SIGINT)
	if eventually(wait, gone) {
		return nil
	}
	left := groupProcesses(pgid)
	syscall.Kill(-pgid, syscall.SIGKILL)
	if eventually(wait, gone) {
		return fmt.Errorf("process group %d: %q still running %v after SIGINT; killed", pgid, left, wait)
	}
	return fmt.Errorf("process group %d: %q still running after SIGKILL", pgid, groupProcesses(pgid))
}

// groupProcesses returns "PID (COMMAND)" of each live process of the
// process group pgid, from /proc; a zombie (exited, not yet reaped: an
// orphan's reaper may be slow) is not live.
func groupProcesses(pgid int) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var live []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ')'.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 3 || f[0] == "Z" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		live = append(live, s[:end+1])
	}
	return live
}
