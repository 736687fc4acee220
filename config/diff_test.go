package config

import (
	"slices"
	"strings"
	"testing"
)

func mustParse(t testing.TB, src string) *File {
	t.Helper()
	f, err := Parse("sds.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return f
}

const diffBase = `upstream: http://127.0.0.1:9000
routes:
  - {point: a, match: {path: /a}}
  - {point: b, match: {path: /b}}
  - {point: c, match: {path: /c}}
points:
  a: {visitThreshold: 10}
  b: {visitThreshold: 10}
  c: {visitThreshold: 10, fallback: {status: 503, body: x}}
`

func TestDiff(t *testing.T) {
	base := mustParse(t, diffBase)
	tests := []struct {
		name string
		edit func(string) string
		want Change
		str  string
	}{
		{"same", func(s string) string { return s }, Change{}, "no changes"},
		{"comment only", func(s string) string { return "# hello\n" + s }, Change{}, "no changes"},
		{
			"threshold changed", func(s string) string {
				return strings.Replace(s, "a: {visitThreshold: 10}", "a: {visitThreshold: 11}", 1)
			},
			Change{Changed: []string{"a"}}, "points changed [a]",
		},
		{
			"fallback body changed", func(s string) string { return strings.Replace(s, "body: x", "body: y", 1) },
			Change{Changed: []string{"c"}}, "points changed [c]",
		},
		{
			"added and removed", func(s string) string {
				s = strings.Replace(s, "{point: b,", "{point: d,", 1)
				s = strings.Replace(s, "  b: {visitThreshold: 10}\n", "", 1)
				return s + "  d: {visitThreshold: 1}\n"
			},
			Change{Added: []string{"d"}, Removed: []string{"b"}, Routes: true}, "points added [d], removed [b]; routes changed",
		},
		{
			"routes reordered", func(s string) string {
				return strings.Replace(s, "  - {point: a, match: {path: /a}}\n  - {point: b, match: {path: /b}}\n", "  - {point: b, match: {path: /b}}\n  - {point: a, match: {path: /a}}\n", 1)
			},
			Change{Routes: true}, "routes changed",
		},
		{
			"settings and restart", func(s string) string {
				return "window: 20s\nlisten: 127.0.0.1:8081\nh2c: true\naccessLog: true\n" + s
			},
			Change{Settings: []string{"window", "accessLog"}, NeedsRestart: []string{"listen", "h2c"}},
			"settings changed [window accessLog]; needs restart [listen h2c]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := mustParse(t, tt.edit(diffBase))
			got := Diff(base, next)
			if !equalChange(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.String() != tt.str {
				t.Errorf("String: got %q, want %q", got.String(), tt.str)
			}
			if got.Empty() != (tt.str == "no changes") {
				t.Errorf("Empty: got %v for %q", got.Empty(), tt.str)
			}
		})
	}
}

// TestMaxConnections: the default, and a change that applies on a reload
// (the limit is swapped in live), not on a restart.
func TestMaxConnections(t *testing.T) {
	base := mustParse(t, diffBase)
	if base.MaxConnections != DefaultMaxConnections {
		t.Errorf("default: got %d, want %d", base.MaxConnections, DefaultMaxConnections)
	}
	next := mustParse(t, "maxConnections: 10\n"+diffBase)
	if next.MaxConnections != 10 {
		t.Errorf("got %d, want 10", next.MaxConnections)
	}
	got := Diff(base, next)
	if want := (Change{Settings: []string{"maxConnections"}}); !equalChange(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if s := got.String(); s != "settings changed [maxConnections]" {
		t.Errorf("String: got %q", s)
	}
}

func TestDiffFromNothing(t *testing.T) {
	got := Diff(nil, mustParse(t, diffBase))
	if want := (Change{Added: []string{"a", "b", "c"}, Routes: true}); !equalChange(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func equalChange(a, b Change) bool {
	return slices.Equal(a.Added, b.Added) && slices.Equal(a.Removed, b.Removed) && slices.Equal(a.Changed, b.Changed) &&
		a.Routes == b.Routes && slices.Equal(a.Settings, b.Settings) && slices.Equal(a.NeedsRestart, b.NeedsRestart)
}
