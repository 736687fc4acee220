package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/config"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestDiffUnreachable: validate -diff against an admin port nothing
// listens on fails with an error naming the address and the cause (exit
// 1), and prints nothing, not even OK.
func TestDiffUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	valid := filepath.Join(t.TempDir(), "sds.yaml")
	if err := os.WriteFile(valid, []byte("upstream: http://127.0.0.1:9000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	err = run(context.Background(), []string{"validate", "-config", valid, "-diff", closed, "-timeout", "50ms"}, &stdout, &bytes.Buffer{})
	want := "admin port at http://" + closed + " cannot be reached: GET /config:"
	if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, cli.ErrUsage) || errors.Is(err, cli.ErrInvalid) || stdout.Len() > 0 {
		t.Errorf("got %v and stdout %q; want a failure with %q (exit 1, printed by main) and nothing on stdout", err, stdout.String(), want)
	}
}

// TestDescribeChange: what validate -diff prints, for each kind of change.
func TestDescribeChange(t *testing.T) {
	t.Parallel()
	const base = `upstream: http://127.0.0.1:9000
routes:
  - {point: a, match: {path: /a}}
  - {point: b, match: {path: /b, methods: [GET]}}
points:
  a: {visitThreshold: 10}
  b: {visitThreshold: 10, fallback: {status: 503, bodyFile: bodies/b.json}}
`
	parse := func(src string) *config.File {
		f, err := config.ParseText("sds.yaml", []byte(src), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		name, next, want string
	}{
		{"same", base, "no changes\n"},
		{"comment", "# edited\n" + base, "no changes\n"},
		{"everything", "window: 20s\nlisten: 127.0.0.1:8081\n" + strings.NewReplacer(
			"a: {visitThreshold: 10}", "a: {visitThreshold: 12, mode: shadow}\n  c: {concurrentThreshold: 4}",
			"bodies/b.json", "bodies/b2.json",
			"  - {point: a, match: {path: /a}}\n", "  - {point: c, match: {pathPrefix: /c}}\n  - {point: a, match: {path: /a}}\n",
		).Replace(base), `points added: c
point a changed:
  visitThreshold: 10 -> 12
  mode: enforce -> shadow
point b changed:
  fallback.bodyFile: "bodies/b.json" -> "bodies/b2.json"
routes changed (first match wins; - in force, + new, by position):
  + 1: pathPrefix /c -> c
settings changed (apply on reload):
  window: 10s -> 20s
needs a restart (a reload keeps the old value):
  listen: "0.0.0.0:8080" -> "127.0.0.1:8081"
`},
		{"removed", strings.Replace(strings.Replace(base, "  b: {visitThreshold: 10, fallback: {status: 503, bodyFile: bodies/b.json}}\n", "", 1),
			"  - {point: b, match: {path: /b, methods: [GET]}}\n", "", 1), `points removed: b
routes changed (first match wins; - in force, + new, by position):
  - 2: methods GET path /b -> b
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeChange(parse(base), parse(tt.next)); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
