//go:build unix

package config

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A bodyFile that is a named pipe is an error, not a read that blocks
// until something writes to the pipe.
func TestParseBodyFileFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "body"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	src := withPoint("visitThreshold: 1\nfallback:\n  bodyFile: body")
	_, err := Parse(filepath.Join(dir, "sds.yaml"), []byte(src), Options{})
	if err == nil {
		t.Fatal("a named pipe as bodyFile parsed")
	}
	if got, want := err.Error(), dir+"/sds.yaml:9:17: fallback.bodyFile: "+dir+"/body is not a regular file"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
