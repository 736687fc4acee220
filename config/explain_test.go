package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/limiter"
)

func TestPointSettings(t *testing.T) {
	base := mustParse(t, diffBase)
	tests := []struct {
		name string
		edit func(string) string
		want []string // Setting.String of each, in order
	}{
		{"same", func(s string) string { return s }, nil},
		{
			"threshold raised", func(s string) string {
				return strings.Replace(s, "a: {visitThreshold: 10}", "a: {visitThreshold: 11}", 1)
			},
			[]string{"visitThreshold: 10 -> 11"},
		},
		{
			"threshold off, delay and mode", func(s string) string {
				return strings.Replace(s, "a: {visitThreshold: 10}", "a: {visitThreshold: -1, exceptionThreshold: 3, delayTime: 30s, mode: shadow}", 1)
			},
			[]string{"visitThreshold: 10 -> off", "exceptionThreshold: off -> 3", "delayTime: off -> 30s", "mode: enforce -> shadow"},
		},
		{
			"fallback", func(s string) string {
				return strings.Replace(s, "fallback: {status: 503, body: x}", `fallback: {status: 429, body: "`+strings.Repeat("y", 50)+`", headers: {Retry-After: "5"}, grpcStatus: 8}`, 1)
			},
			[]string{
				"fallback.status: 503 -> 429",
				`fallback.headers: none -> Retry-After: "5"`,
				`fallback.body: 1 bytes "x" -> 50 bytes "` + strings.Repeat("y", 40) + `"...`,
				"fallback.grpcStatus: default -> 8",
			},
		},
		{
			"fallback removed", func(s string) string {
				return strings.Replace(s, ", fallback: {status: 503, body: x}", "", 1)
			},
			[]string{"fallback.status: 503 -> default", `fallback.body: 1 bytes "x" -> default`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := mustParse(t, tt.edit(diffBase))
			var got []string
			for _, p := range base.Points {
				for _, s := range PointSettings(&p, next.Point(p.Name)) {
					got = append(got, s.String())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPointSettingsComplete changes each field of a point in turn, on a
// copy: every change that Diff sees, PointSettings names.
func TestPointSettingsComplete(t *testing.T) {
	base := mustParse(t, diffBase).Points[2] // c, with a fallback
	n := 0
	for i := range reflect.TypeFor[Point]().NumField() {
		if reflect.TypeFor[Point]().Field(i).Name != "Name" {
			walkLeaves(t, base, i, &n)
		}
	}
	if n < 24 {
		t.Errorf("changed %d fields, want every field of Point (24 or more)", n)
	}
}

// walkLeaves changes each leaf field under field i of p, one at a time on
// a copy, and checks that PointSettings names the change; n counts them.
func walkLeaves(t *testing.T, p Point, i int, n *int) {
	t.Helper()
	var leaves [][]int
	var collect func(typ reflect.Type, idx []int)
	collect = func(typ reflect.Type, idx []int) {
		if typ.Kind() == reflect.Struct && typ != reflect.TypeFor[limiter.Threshold]() {
			for j := range typ.NumField() {
				collect(typ.Field(j).Type, append(slices.Clone(idx), j))
			}
			return
		}
		leaves = append(leaves, idx)
	}
	collect(reflect.TypeFor[Point]().Field(i).Type, []int{i})
	for _, idx := range leaves {
		next := p
		next.Fallback.Headers = slices.Clone(p.Fallback.Headers)
		next.Fallback.Body = slices.Clone(p.Fallback.Body)
		v := reflect.ValueOf(&next).Elem().FieldByIndex(idx)
		name := reflect.TypeFor[Point]().FieldByIndex(idx).Name
		switch {
		case v.Type() == reflect.TypeFor[limiter.Threshold]():
			v.Set(reflect.ValueOf(limiter.At(7)))
		case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
			v.SetInt(v.Int() + 1)
		case v.Kind() == reflect.Bool:
			v.SetBool(!v.Bool())
		case v.Kind() == reflect.String:
			v.SetString(v.String() + "x")
		case v.Kind() == reflect.Slice:
			v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
		default:
			t.Fatalf("%s: kind %s not covered", name, v.Kind())
		}
		*n++
		check(t, name, p, next)
	}
}

func check(t *testing.T, field string, from, to Point) {
	t.Helper()
	if reflect.DeepEqual(from, to) {
		t.Fatalf("%s: the change left the point equal", field)
	}
	if got := PointSettings(&from, &to); len(got) == 0 {
		t.Errorf("%s changed: PointSettings names nothing", field)
	}
}

func TestFileSettings(t *testing.T) {
	base := mustParse(t, diffBase)
	next := mustParse(t, "window: 20s\nbuckets: 20\nlisten: 127.0.0.1:8081\nh2c: true\naccessLog: true\nmaxConnections: 10\n"+
		strings.Replace(diffBase, "http://127.0.0.1:9000", "http://127.0.0.1:9001", 1))
	reload, restart := FileSettings(base, next)
	wantReload := []string{`upstream: "http://127.0.0.1:9000" -> "http://127.0.0.1:9001"`, "window: 10s -> 20s", "buckets: 10 -> 20",
		"accessLog: false -> true", "maxConnections: 1024 -> 10"}
	wantRestart := []string{`listen: "0.0.0.0:8080" -> "127.0.0.1:8081"`, "h2c: false -> true"}
	if got := settingStrings(reload); !slices.Equal(got, wantReload) {
		t.Errorf("reload: got %q, want %q", got, wantReload)
	}
	if got := settingStrings(restart); !slices.Equal(got, wantRestart) {
		t.Errorf("restart: got %q, want %q", got, wantRestart)
	}
	c := Diff(base, next)
	for _, s := range reload {
		if !slices.Contains(c.Settings, s.Key) {
			t.Errorf("%s: not in Change.Settings %q", s.Key, c.Settings)
		}
	}
	for _, s := range restart {
		if !slices.Contains(c.NeedsRestart, s.Key) {
			t.Errorf("%s: not in Change.NeedsRestart %q", s.Key, c.NeedsRestart)
		}
	}
}

func TestFileSettingsTLS(t *testing.T) {
	acme := func(fields string) *File {
		return mustParseText(t, "tls:\n  acme:\n    domains: [a.example]\n"+fields+diffBase)
	}
	plain := mustParseText(t, diffBase)
	tests := []struct {
		name     string
		from, to *File
		want     []string
	}{
		{"acme on", plain, acme(""), []string{"tls.acme: off -> domains a.example"}},
		{"acme fields", acme(""), acme("    email: ops@a.example\n    caRoot: root.pem\n"),
			[]string{`tls.acme.email: default -> "ops@a.example"`, `tls.acme.caRoot: default -> "root.pem"`}},
		{"cert files as written", plain, mustParseText(t, "tls: {certFile: tls/cert.pem, keyFile: tls/key.pem}\n"+diffBase),
			[]string{`tls.certFile: default -> "tls/cert.pem"`, `tls.keyFile: default -> "tls/key.pem"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reload, restart := FileSettings(tt.from, tt.to)
			if len(reload) > 0 {
				t.Errorf("reload: got %q, want none", settingStrings(reload))
			}
			if got := settingStrings(restart); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRoutesDiff(t *testing.T) {
	a := Route{Point: "a", Path: "/a"}
	b := Route{Point: "b", Methods: []string{"GET", "HEAD"}, Host: "api.example", PathPrefix: "/b"}
	c := Route{Point: "c"}
	d := Route{Point: "d", Path: "/d"}
	tests := []struct {
		name     string
		from, to []Route
		want     []string
	}{
		{"equal", []Route{a, b, c}, []Route{a, b, c}, nil},
		{"none to some", nil, []Route{a}, []string{"+1 path /a -> a"}},
		{"inserted", []Route{a, c}, []Route{a, d, c}, []string{"+2 path /d -> d"}},
		{"removed", []Route{a, b, c}, []Route{a, c}, []string{"-2 methods GET,HEAD host api.example pathPrefix /b -> b"}},
		{"replaced", []Route{a, b, c}, []Route{a, d, c}, []string{
			"-2 methods GET,HEAD host api.example pathPrefix /b -> b", "+2 path /d -> d"}},
		{"swapped", []Route{a, b}, []Route{b, a}, []string{"-1 path /a -> a", "+2 path /a -> a"}},
		{"catch-all", []Route{c}, []Route{{Point: "c", Methods: []string{"POST"}}}, []string{
			"-1 every request -> c", "+1 methods POST -> c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range RoutesDiff(tt.from, tt.to) {
				sign := "-"
				if e.Added {
					sign = "+"
				}
				got = append(got, fmt.Sprintf("%s%d %s", sign, e.Index, e.Route))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if equal := reflect.DeepEqual(tt.from, tt.to); equal != (got == nil) {
				t.Errorf("edits %q for lists that are equal: %v", got, equal)
			}
		})
	}
}

// TestParseText: a config whose bodyFile and TLS files do not exist here
// parses, keeping the paths as written; Parse rejects it.
func TestParseText(t *testing.T) {
	src := "tls: {certFile: tls/cert.pem, keyFile: tls/key.pem}\n" +
		strings.Replace(diffBase, "fallback: {status: 503, body: x}", "fallback: {status: 503, bodyFile: bodies/c.json}", 1)
	path := t.TempDir() + "/sds.yaml"
	if _, err := Parse(path, []byte(src), Options{}); err == nil {
		t.Fatal("Parse accepted a config whose files are missing")
	}
	f, err := ParseText(path, []byte(src), Options{})
	if err != nil {
		t.Fatalf("ParseText: %v", err)
	}
	fb := f.Point("c").Fallback
	if fb.BodyFile != "bodies/c.json" || fb.Body != nil || !fb.BodySet {
		t.Errorf("fallback: got bodyFile %q body %q set %v, want bodies/c.json, nil, true", fb.BodyFile, fb.Body, fb.BodySet)
	}
	if f.TLS.CertFile != "tls/cert.pem" || f.TLS.KeyFile != "tls/key.pem" {
		t.Errorf("tls: got %q %q, want the paths as written", f.TLS.CertFile, f.TLS.KeyFile)
	}
	if string(f.Raw) != src {
		t.Errorf("Raw: got %q, want the file's bytes", f.Raw)
	}
	moved, err := ParseText(path, []byte(strings.Replace(src, "bodies/c.json", "bodies/c2.json", 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := Diff(f, moved); !slices.Equal(c.Changed, []string{"c"}) {
		t.Errorf("bodyFile moved: got %v, want point c changed", c)
	}
	if got := settingStrings(PointSettings(f.Point("c"), moved.Point("c"))); !slices.Equal(got, []string{`fallback.bodyFile: "bodies/c.json" -> "bodies/c2.json"`}) {
		t.Errorf("got %q", got)
	}
	if _, err := ParseText(path, []byte(strings.Replace(src, "bodies/c.json", `""`, 1)), Options{}); err == nil ||
		!strings.Contains(err.Error(), "fallback.bodyFile is empty") {
		t.Errorf("empty bodyFile: got %v, want it reported", err)
	}
}

// TestParseKeepsBodyFile: Parse reads the bodyFile and keeps its name.
func TestParseKeepsBodyFile(t *testing.T) {
	f := mustParse(t, strings.Replace(diffBase, "body: x", "bodyFile: explain_test.go", 1))
	fb := f.Point("c").Fallback
	if fb.BodyFile != "explain_test.go" || !strings.HasPrefix(string(fb.Body), "package config") {
		t.Errorf("got bodyFile %q and a body of %d bytes, want explain_test.go and its content", fb.BodyFile, len(fb.Body))
	}
}

func mustParseText(t *testing.T, src string) *File {
	t.Helper()
	f, err := ParseText("sds.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatalf("ParseText:\n%v", err)
	}
	return f
}

func settingStrings(ss []Setting) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.String())
	}
	return out
}
