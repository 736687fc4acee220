package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// valid is the smallest valid file; point p's settings start at line 7,
// column 5.
const valid = `upstream: http://127.0.0.1:9000
routes:
  - point: p
    match: {}
points:
  p:
`

// withPoint returns valid with the lines of point p's settings appended,
// indented under p.
func withPoint(lines string) string {
	var b strings.Builder
	b.WriteString(valid)
	for line := range strings.SplitSeq(strings.TrimSuffix(lines, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// problemsOf parses src and returns its problems as "LINE:COL: message".
func problemsOf(t *testing.T, src string, opts Options) []string {
	t.Helper()
	f, err := Parse("sds.yaml", []byte(src), opts)
	if err == nil {
		return nil
	}
	if f != nil {
		t.Errorf("Parse returned a config with its error")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error %T is not an Errors: %v", err, err)
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = strings.TrimPrefix(e.Error(), "sds.yaml:")
	}
	return out
}

// checkProblems compares problems with wants, each "LINE:COL: " followed by
// a part of the message.
func checkProblems(t *testing.T, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		at, msg, _ := strings.Cut(want[i], ": ")
		ok = strings.HasPrefix(got[i], at+": ") && strings.Contains(got[i], msg)
	}
	if !ok {
		t.Errorf("got problems:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func TestParseRootExample(t *testing.T) {
	f, err := Load("../sds.yaml", Options{})
	if err != nil {
		t.Fatalf("the root sds.yaml does not validate:\n%v", err)
	}
	var names []string
	for _, p := range f.Points {
		names = append(names, p.Name)
	}
	if got, want := strings.Join(names, " "), "orders.read orders.create slow flaky everything-else"; got != want {
		t.Errorf("points: got %s, want %s", got, want)
	}
	if f.Upstream != "http://127.0.0.1:9000" || f.Admin != "0.0.0.0:9901" || f.Listen != "0.0.0.0:8080" {
		t.Errorf("addresses: got listen %s upstream %s admin %s", f.Listen, f.Upstream, f.Admin)
	}
	if p := f.Point("slow"); p.TimeoutThreshold != 300*time.Millisecond || p.TimeoutCountThreshold != limiter.At(3) || p.DelayTime != 10*time.Second || p.RetryInterval != 2*time.Second {
		t.Errorf("slow: got %+v", p)
	}
	if p := f.Point("orders.read"); p.VisitThreshold != limiter.At(20) || !p.PressureTestDowngrade || p.Fallback.Status != 429 || !p.Fallback.BodySet {
		t.Errorf("orders.read: got %+v", p)
	}
	if p := f.Point("flaky"); p.ExceptionThreshold != limiter.At(5) || p.ExceptionRateThreshold != limiter.At(50) || p.DowngradeRate != limiter.At(80) {
		t.Errorf("flaky: got %+v", p)
	}
	if p := f.Point("everything-else"); !p.Shadow {
		t.Errorf("everything-else: got mode enforce, want shadow")
	}
	if last := f.Routes[len(f.Routes)-1]; fmt.Sprint(last) != fmt.Sprint(Route{Point: "everything-else"}) {
		t.Errorf("last route: got %+v, want the catch-all", last)
	}
}

func TestParseDefaults(t *testing.T) {
	src := withPoint("visitThreshold: 10")
	f, err := Parse("sds.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := File{
		Path:             "sds.yaml",
		Hash:             f.Hash,
		Raw:              []byte(src),
		Listen:           "0.0.0.0:8080",
		Upstream:         "http://127.0.0.1:9000",
		Admin:            "0.0.0.0:9901",
		ForwardedHeaders: true,
		Window:           10 * time.Second,
		Buckets:          10,
		DrainTimeout:     25 * time.Second,
		MaxConnections:   1024,
		StaleCache:       StaleCache{MaxBytes: 64 << 20},
		Routes:           []Route{{Point: "p"}},
		Points:           []Point{{Name: "p", Policy: limiter.Policy{VisitThreshold: limiter.At(10)}}},
	}
	if got := fmt.Sprintf("%+v", *f); got != fmt.Sprintf("%+v", want) {
		t.Errorf("got\n%s\nwant\n%s", got, fmt.Sprintf("%+v", want))
	}
	if len(f.Hash) != 64 {
		t.Errorf("hash: got %q, want 64 hex digits", f.Hash)
	}
}

func TestParseValues(t *testing.T) {
	f, err := Parse("sds.yaml", []byte(withPoint(`timeoutThreshold: 250
timeoutCountThreshold: 5
visitThreshold: 0
concurrentThreshold: -7
exceptionThreshold: -1
exceptionRateThreshold: 40
exceptionRateStart: -3
tokenBucketGeneratedTokensInSecond: 100
tokenBucketSize: 200
downgradeRate: 0
delayTime: 1m30s
retryInterval: 2000
mode: shadow
upstreamTimeout: -1
fallbackOnError: true
fallback:
  status: 503
  headers: {Content-Type: application/json, Retry-After: 5, Set-Cookie: [a=1, b=2]}
  body: ""`)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := f.Points[0]
	want := Point{
		Name: "p",
		Policy: limiter.Policy{
			TimeoutThreshold: 250 * time.Millisecond, TimeoutCountThreshold: limiter.At(5), VisitThreshold: limiter.At(0),
			ConcurrentThreshold: limiter.Threshold{}, ExceptionThreshold: limiter.Threshold{}, ExceptionRateThreshold: limiter.At(40), ExceptionRateStart: 0,
			TokensPerSecond: limiter.At(100), TokenBucketSize: limiter.At(200), DowngradeRate: limiter.At(0),
			DelayTime: 90 * time.Second, RetryInterval: 2 * time.Second, Shadow: true,
		},
		FallbackOnError: true,
		Fallback: Fallback{
			Status:  503,
			Headers: [][2]string{{"Content-Type", "application/json"}, {"Retry-After", "5"}, {"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}},
			Body:    []byte{}, BodySet: true,
		},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseOptions(t *testing.T) {
	src := strings.Replace(valid, "upstream: http://127.0.0.1:9000\n", "listen: bad\n", 1) + "    visitThreshold: 1\n"
	f, err := Parse("sds.yaml", []byte(src), Options{Listen: "127.0.0.1:18080", Upstream: "h2c://svc:50051", Admin: ":19901"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Listen != "127.0.0.1:18080" || f.Upstream != "h2c://svc:50051" || f.Admin != ":19901" {
		t.Errorf("got listen %s upstream %s admin %s, want the flags' values", f.Listen, f.Upstream, f.Admin)
	}
	_, err = Parse("sds.yaml", []byte(withPoint("visitThreshold: 1")), Options{Upstream: "ftp://x", Listen: "nope"})
	if got, want := fmt.Sprint(err), "-listen: \"nope\" is not a host:port address; write it as 0.0.0.0:8080\n-upstream: scheme \"ftp\" is not supported; write http://, https:// or h2c:// (cleartext HTTP/2)"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	_, err = Parse("sds.yaml", []byte(strings.Replace(withPoint("visitThreshold: 1"), "upstream: http://127.0.0.1:9000\n", "", 1)), Options{})
	checkProblems(t, problemsOf(t, strings.Replace(withPoint("visitThreshold: 1"), "upstream: http://127.0.0.1:9000\n", "", 1), Options{}),
		[]string{"1:1: upstream is required: add upstream: http://127.0.0.1:9000"})
	if err == nil {
		t.Errorf("a file without upstream parsed without -upstream")
	}
}

func TestDefault(t *testing.T) {
	f, err := Default(Options{Upstream: "http://127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Listen != DefaultListen || f.Admin != DefaultAdmin || len(f.Points) != 0 || f.Window != DefaultWindow {
		t.Errorf("got %+v", f)
	}
	if _, err := Default(Options{}); err == nil || !strings.HasPrefix(err.Error(), "upstream is required") {
		t.Errorf("without upstream: got %v, want upstream is required", err)
	}
	if _, err := Default(Options{Upstream: "http://x:1", Listen: ":1", Admin: "0.0.0.0:1"}); err == nil || !strings.HasPrefix(err.Error(), "-admin: ") {
		t.Errorf("-admin on -listen's port: got %v", err)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "sds.yaml"), Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
}

func TestParseBodyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "body.json"), []byte(`{"degraded":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := withPoint("visitThreshold: 1\nfallback:\n  bodyFile: body.json")
	f, err := Parse(filepath.Join(dir, "sds.yaml"), []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fb := f.Points[0].Fallback; string(fb.Body) != `{"degraded":true}` || !fb.BodySet {
		t.Errorf("got body %q set %v, want the file's content", fb.Body, fb.BodySet)
	}
	got := problemsOf(t, strings.Replace(src, "body.json", "missing.json", 1), Options{})
	checkProblems(t, got, []string{"9:17: fallback.bodyFile: missing.json does not exist (a relative path starts at the config file's directory)"})
}

// TestBrokenFiles parses each testdata/broken/*.yaml and compares the
// problems with the .golden file beside it: what `sds-proxy validate`
// prints.
func TestBrokenFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/broken/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no broken files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, err := Load(path, Options{})
			if err == nil {
				t.Fatalf("%s validates", path)
			}
			golden := strings.TrimSuffix(path, ".yaml") + ".golden"
			want, readErr := os.ReadFile(golden)
			if readErr != nil {
				t.Fatal(readErr)
			}
			if got := err.Error() + "\n"; got != string(want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestParseLetsGoOfDecodedNodes: the points' and routes' nodes are let go
// as they are decoded (releasable), and anchors and aliases still read as
// written out: a point's settings reused by an alias, and nodes of the
// points or routes aliased from a key decoded after them, which only
// report their problems.
func TestParseLetsGoOfDecodedNodes(t *testing.T) {
	const (
		head     = "upstream: http://127.0.0.1:9000\n"
		oneRoute = "routes:\n  - {point: p, match: {path: /p}}\n"
		routes   = oneRoute + "  - {point: q, match: {}}\n"
	)
	aliased, err := Parse("sds.yaml", []byte(head+"points:\n  p: &s {visitThreshold: 1, concurrentThreshold: 2}\n  q: *s\n"+routes), Options{})
	if err != nil {
		t.Fatal(err)
	}
	written, err := Parse("sds.yaml", []byte(head+"points:\n  p: {visitThreshold: 1, concurrentThreshold: 2}\n  q: {visitThreshold: 1, concurrentThreshold: 2}\n"+routes), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(aliased.Points, written.Points) || !reflect.DeepEqual(aliased.Routes, written.Routes) {
		t.Errorf("aliased settings: got %+v, want %+v", aliased.Points, written.Points)
	}
	for _, tc := range []struct{ name, src, problem string }{
		{"a point's settings aliased after", head + "points:\n  p: &v {visitThreshold: 1}\n" + oneRoute + "tls: *v\n", `unknown key "visitThreshold"`},
		{"the points aliased after", head + "points: &all\n  p: {visitThreshold: 1}\n" + oneRoute + "tls: *all\n", `unknown key "p"`},
		{"a route aliased after", head + "points:\n  p: {visitThreshold: 1}\nroutes:\n  - &r {point: p, match: {path: /p}}\ntls: *r\n", `unknown key "point"`},
		{"the routes aliased after", head + "points:\n  p: {visitThreshold: 1}\nroutes: &rs\n  - {point: p, match: {path: /p}}\ntls: *rs\n", "want a mapping"},
	} {
		_, err := Parse("sds.yaml", []byte(tc.src), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.problem) {
			t.Errorf("%s: got %v, want a problem with %q", tc.name, err, tc.problem)
		}
	}
}
