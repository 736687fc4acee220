// Package tooltest skips a test whose outside tool (a browser, a server,
// a shell) is missing, with one line that names the tool, why it counts as
// missing and how to install it. Every such skip of the module's tests
// starts with Prefix, so that
//
//	go test -v ./... | grep 'missing tool'
//
// lists what did not run and why; .ci/run installs every tool. The deploy
// module's tests (a module of their own) write the same line by hand.
package tooltest

import (
	"os/exec"
	"testing"
)

// Prefix starts every skip message of this package, before the tool's
// name.
const Prefix = "missing tool "

// Message returns the line Skip writes: "missing tool TOOL: WHY; install:
// HOW", without the install part when install is "".
func Message(tool, why, install string) string {
	msg := Prefix + tool + ": " + why
	if install != "" {
		msg += "; install: " + install
	}
	return msg
}

// Skip skips t with Message(tool, why, install).
func Skip(t testing.TB, tool, why, install string) {
	t.Helper()
	t.Skip(Message(tool, why, install))
}

// LookPath returns the path of tool on $PATH, or skips t with "not on
// PATH" and install.
func LookPath(t testing.TB, tool, install string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		Skip(t, tool, "not on PATH", install)
	}
	return path
}
