package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics or hangs, and that what it
// returns keeps its promises: a config or an error, never both; every
// problem has a position inside the file; a valid config is normalized.
func FuzzParse(f *testing.F) {
	root, err := os.ReadFile("../sds.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(root)
	broken, _ := filepath.Glob("testdata/broken/*.yaml")
	for _, path := range broken {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		valid,
		withPoint("timeoutThreshold: 250\ntimeoutCountThreshold: 5\nfallback: {status: 503, headers: {A: [b, c]}, body: x}"),
		strings.Replace(string(root), "visitThreshold: 20", "visitThreshold: [20", 1),
		strings.Replace(string(root), "window: 10s", "window: 10s\n---\n", 1),
		"a: &a [*a, *a]\npoints: *a\nroutes: *a\n",
		"points: &p {x: *p}\n",
		"routes: [&r {point: p, match: {methods: &m [GET, GET, GET]}}, *r, *r, *r]\npoints: {p: {}}\n",
		"upstream: h2c://[::1]:0\nlisten: '[::1'\n",
		"\xef\xbb\xbfupstream: http://a:1\n",
		"? [a]\n: b\n",
		"!!binary upstream: x\n",
		" \r\r00", // found by the fuzzer: CR alone ends a line in YAML
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang fails the run with its input (the fuzzer has no time limit per input).
		hang := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Parse runs for more than 10s on %q", data)) })
		defer hang.Stop()
		file, err := Parse("sds.yaml", data, Options{})
		if (file == nil) == (err == nil) {
			t.Fatalf("got config %v and error %v, want exactly one", file != nil, err)
		}
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %T is not a non-empty Errors: %v", err, err)
			}
			lines := len(lineEnds(data))
			for _, e := range errs {
				if e.Line < 0 || e.Line > lines+1 || e.Col < 0 || e.Msg == "" {
					t.Fatalf("problem out of the file (%d lines): %+v", lines, e)
				}
			}
			return
		}
		for _, r := range file.Routes {
			if file.Point(r.Point) == nil {
				t.Fatalf("route to unknown point %q", r.Point)
			}
		}
		for _, p := range file.Points {
			if err := file.Settings(&p).Check(); err != nil {
				t.Fatalf("point %s: the limiter refuses what validate accepted: %v", p.Name, err)
			}
			if p.TimeoutThreshold < 0 || p.ExceptionRateStart < 0 || p.UpstreamTimeout < 0 {
				t.Fatalf("point %s not normalized: %+v", p.Name, p)
			}
		}
		if file.Window <= 0 || file.Buckets <= 0 || file.Window%time.Duration(file.Buckets) != 0 {
			t.Fatalf("window %v in %d buckets", file.Window, file.Buckets)
		}
		again, err := Parse("sds.yaml", data, Options{})
		if err != nil || !Diff(file, again).Empty() {
			t.Fatalf("a second parse differs: %v %v", err, Diff(file, again))
		}
	})
}
