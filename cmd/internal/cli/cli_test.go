package cli

import (
	"bytes"
	"errors"
	"flag"
	"testing"
)

func TestLoopback(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0.0.0.0:8080":   "127.0.0.1:8080",
		"[::]:8080":      "127.0.0.1:8080",
		":8080":          "127.0.0.1:8080",
		"127.0.0.1:0":    "127.0.0.1:0",
		"10.0.0.1:8080":  "10.0.0.1:8080",
		"localhost:9000": "localhost:9000",
	} {
		if got := Loopback(in); got != want {
			t.Errorf("Loopback(%q): got %q, want %q", in, got, want)
		}
	}
}

// TestParse: -h is flag.ErrHelp, a wrong flag ErrUsage after the flag
// package printed why; a Usagef error is ErrUsage with its reason.
func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want error
	}{{nil, nil}, {[]string{"-v"}, nil}, {[]string{"-h"}, flag.ErrHelp}, {[]string{"-bogus"}, ErrUsage}} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		fs.Bool("v", false, "")
		if err := Parse(fs, tc.args); err != tc.want {
			t.Errorf("%q: got %v, want %v", tc.args, err, tc.want)
		}
	}
	err := Usagef("x: %d", 1)
	if !errors.Is(err, ErrUsage) || err.Error() != "x: 1" {
		t.Errorf("Usagef: got %q (ErrUsage %v), want \"x: 1\" matching ErrUsage", err, errors.Is(err, ErrUsage))
	}
}
