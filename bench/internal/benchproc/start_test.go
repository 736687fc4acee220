package benchproc

import (
	"strings"
	"testing"
)

// TestLineMatch: the first line that matches is passed on once, whole,
// whatever the writes' boundaries; a line longer than maxLine is dropped,
// not matched in pieces.
func TestLineMatch(t *testing.T) {
	m := NewLineMatch(func(l string) bool { return strings.HasPrefix(l, "serving ") })
	for _, w := range []string{"starting\nserv", "ing 127.0.0.1:80", "80\nserving again\n"} {
		if n, err := m.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if got := <-m.Line(); got != "serving 127.0.0.1:8080" {
		t.Errorf("Line = %q, want the first matching line whole", got)
	}
	select {
	case l := <-m.Line():
		t.Errorf("a second line passed on: %q", l)
	default:
	}

	long := NewLineMatch(func(l string) bool { return strings.Contains(l, "x") })
	long.Write([]byte(strings.Repeat("y", maxLine+1)))
	long.Write([]byte("x\nfirst x\n"))
	if got := <-long.Line(); got != "first x" {
		t.Errorf("after an over-long line: Line = %q, want %q", got, "first x")
	}
	first := NewFirstLine()
	first.Write([]byte("a\nb\n"))
	if got := <-first.Line(); got != "a" {
		t.Errorf("NewFirstLine: %q, want a", got)
	}
}
