package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
)

// TestPerKeyProblems: each problem of a per-key rule is reported at its
// line and column, named by its place in the list.
func TestPerKeyProblems(t *testing.T) {
	rule := func(lines ...string) string {
		return withPoint("perKey:\n  - " + strings.Join(lines, "\n    "))
	}
	checkProblemCases(t, []problemCase{
		{"the issue's rule", rule("key: header:X-Api-Key", "visitThreshold: 300", "tokenBucketGeneratedTokensInSecond: 10", "tokenBucketSize: 20", "concurrentThreshold: 4", "missing: pass", "maxKeys: 10000"), nil},
		{"missing degrade alone", rule("key: cookie:session", "missing: degrade"), nil},
		{"no key", rule("visitThreshold: 3"), []string{`8:9: perKey[0] of point "p" has no key: write where a request's key is, such as key: header:X-Api-Key`}},
		{"empty key", rule(`key: ""`, "visitThreshold: 3"), []string{`8:14: perKey[0].key is empty; write where a request's key is`}},
		{"bad kind", rule("key: Header:X", "visitThreshold: 3"), []string{`8:14: perKey[0].key: key "Header:X": write header:X (the kind is case-sensitive)`}},
		{"client-written header", rule("key: header:X-Forwarded-For", "visitThreshold: 3"), []string{"8:14: perKey[0].key: key \"header:X-Forwarded-For\": a client writes what it likes in X-Forwarded-For; write forwardedFor:N"}},
		{"no threshold", rule("key: clientIP"), []string{`8:9: perKey[0] of point "p" has no threshold, so it never degrades a key`}},
		{"zero visits", rule("key: clientIP", "visitThreshold: 0"), []string{"9:25: perKey[0].visitThreshold: 0 would degrade every request that has a key"}},
		{"size without rate", rule("key: clientIP", "visitThreshold: 3", "tokenBucketSize: 5"), []string{"10:9: perKey[0].tokenBucketSize is set but perKey[0].tokenBucketGeneratedTokensInSecond is not"}},
		{"visits past 32 bits", rule("key: clientIP", "visitThreshold: 5000000000"), []string{"9:25: perKey[0].visitThreshold: 5000000000 is more than 4294967295"}},
		{"maxKeys 0", rule("key: clientIP", "visitThreshold: 3", "maxKeys: 0"), []string{"10:18: perKey[0].maxKeys: 0 is not a count from 1 to 1000000"}},
		{"bad missing", rule("key: clientIP", "visitThreshold: 3", "missing: block"), []string{`10:18: missing: want pass, degrade or shared, got "block"`}},
		{"unknown key", rule("key: clientIP", "visitThreshold: 3", "visits: 3"), []string{`10:9: unknown key "visits" in perKey[0] of point "p"`}},
		{"one key twice", withPoint("perKey:\n  - {key: header:x-api-key, visitThreshold: 3}\n  - {key: header:X-API-KEY, concurrentThreshold: 3}"),
			[]string{"9:15: perKey[1].key: header:X-Api-Key is the key of perKey[0] too"}},
		{"not a mapping", withPoint("perKey:\n  - clientIP"), []string{`8:9: perKey[0] of point "p": want a mapping with key: and its settings, got the string "clientIP"`}},
		{"not a list", withPoint("perKey: {key: clientIP}"), []string{`7:13: perKey of point "p": want a list of per-key rules such as - key: header:X-Api-Key`}},
		{"too many", withPoint("visitThreshold: 9\nperKey:\n  - {key: clientIP, visitThreshold: 3}\n  - {key: query:a, visitThreshold: 3}\n  - {key: query:b, visitThreshold: 3}\n  - {key: query:c, visitThreshold: 3}\n  - {key: query:d, visitThreshold: 3}"),
			[]string{`9:7: perKey of point "p": 5 items; a point holds at most 4`}},
	})
}

// TestPerKeyDecodes: a rule's keys land in its perkey.Settings, and
// KeySettings puts it in the file's window.
func TestPerKeyDecodes(t *testing.T) {
	src := "window: 20s\nbuckets: 40\n" + withPoint("perKey:\n  - key: header:x-api-key\n    visitThreshold: 300\n    tokenBucketGeneratedTokensInSecond: 10\n    tokenBucketSize: 20\n    concurrentThreshold: -1\n    missing: shared\n    maxKeys: 500\n  - {key: forwardedFor:2, concurrentThreshold: 4}")
	f, err := Parse("sds.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rules := f.Points[0].PerKey
	want := PerKey{Key: "header:x-api-key", Missing: "shared", Settings: perkey.Settings{
		VisitThreshold: limiter.At(300), TokensPerSecond: limiter.At(10), TokenBucketSize: limiter.At(20), MaxKeys: 500}}
	if len(rules) != 2 || rules[0] != want {
		t.Fatalf("perKey decodes to %+v, want %+v first", rules, want)
	}
	if src, err := rules[0].Source(); err != nil || src.String() != "header:X-Api-Key" {
		t.Errorf("Source() = %v, %v, want header:X-Api-Key", src, err)
	}
	s := f.KeySettings(rules[1])
	if s.Window != 20*time.Second || s.Buckets != 40 || s.ConcurrentThreshold != limiter.At(4) || s.MaxKeys != 0 {
		t.Errorf("KeySettings = %+v, want the file's window of 20s in 40 buckets, concurrency 4, MaxKeys left to the default", s)
	}
	if _, err := perkey.New(s); err != nil {
		t.Errorf("perkey.New(KeySettings) = %v, want it accepted", err)
	}
}

// TestPerKeyExplained: a reload that changes a rule names perKey with
// both lists.
func TestPerKeyExplained(t *testing.T) {
	from := mustParse(t, withPoint("perKey:\n  - {key: clientIP, visitThreshold: 300}"))
	to := mustParse(t, withPoint("perKey:\n  - {key: clientIP, visitThreshold: 200, missing: degrade}"))
	if c := Diff(from, to); !slices.Equal(c.Changed, []string{"p"}) {
		t.Errorf("Diff names changed points %q, want [p]", c.Changed)
	}
	got := PointSettings(&from.Points[0], &to.Points[0])
	want := []Setting{{Key: "perKey",
		From: `[key="clientIP" visitThreshold=300 tokenBucketGeneratedTokensInSecond=off tokenBucketSize=off concurrentThreshold=off missing=default maxKeys=0]`,
		To:   `[key="clientIP" visitThreshold=200 tokenBucketGeneratedTokensInSecond=off tokenBucketSize=off concurrentThreshold=off missing="degrade" maxKeys=0]`}}
	if !slices.Equal(got, want) {
		t.Errorf("PointSettings = %q, want %q", got, want)
	}
}

// TestPerKeyMemory: a config whose per-key rules hold more memory than a
// sidecar should is warned of, and past 2 GiB rejected, at the heaviest
// rule.
func TestPerKeyMemory(t *testing.T) {
	config := func(points, maxKeys int) string {
		var b strings.Builder
		b.WriteString("upstream: http://127.0.0.1:9000\nroutes:\n")
		for i := range points {
			fmt.Fprintf(&b, "  - point: p%d\n    match: {path: /p%d}\n", i, i)
		}
		b.WriteString("points:\n")
		for i := range points {
			fmt.Fprintf(&b, "  p%d:\n    perKey:\n      - {key: clientIP, visitThreshold: 3, maxKeys: %d}\n", i, maxKeys)
		}
		return b.String()
	}
	f, err := Parse("sds.yaml", []byte(config(1, perkey.DefaultMaxKeys)), Options{})
	if err != nil || len(f.Warnings) > 0 {
		t.Errorf("one rule at the default maxKeys: %v, warnings %v; want neither", err, f.Warnings)
	}
	f, err = Parse("sds.yaml", []byte(config(2, 100_000)), Options{})
	if err != nil || len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].Msg, "the per-key rules hold 39 MiB of memory from the start") {
		t.Errorf("two rules of 100,000 keys: %v, warnings %v; want a warning of 39 MiB", err, f.Warnings)
	}
	_, err = Parse("sds.yaml", []byte(config(13, 1_000_000)), Options{})
	if err == nil || !strings.Contains(err.Error(), "the per-key rules would hold 2239 MiB of memory from the start, more than 2048 MiB") {
		t.Errorf("13 rules of a million keys: %v, want it rejected for 2239 MiB", err)
	}
}
