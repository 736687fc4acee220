package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// TestStatusTableGolden renders each testdata/status/NAME.json as the
// table and compares it with NAME.txt; -update rewrites them.
func TestStatusTableGolden(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("testdata/status/*.json")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no fixtures under testdata/status: %v", err)
	}
	for _, in := range docs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var doc admin.Status
			if err := decodeStatus(body, &doc); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := writeStatusTable(&out, &doc); err != nil {
				t.Fatal(err)
			}
			compareGolden(t, strings.TrimSuffix(in, ".json")+".txt", out.String())
		})
	}
}

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// testFlags returns a flag set for the command name as main makes one:
// problems and the usage, "usage: sds-proxy NAME", go to stderr.
func testFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "usage: sds-proxy %s\n", name) }
	return fs
}

// compareGolden compares got with the golden file at path, or rewrites it
// under -update.
func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}

// TestStatusCommand runs the command against admin ports that answer
// well and badly: its output, and its error naming the address and the
// cause.
func TestStatusCommand(t *testing.T) {
	t.Parallel()
	mixed, err := os.ReadFile("testdata/status/mixed.json")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(status int, contentType, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/status" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	good := serve(200, "application/json", string(mixed))
	tests := []struct {
		name    string
		args    []string
		wantOut string // prefix of stdout
		wantErr string // substring of the error; "" for none
	}{
		{"table", []string{"-admin", good}, "config: /etc/sds/sds.yaml (sha256 1a2b3c4d5e6f)", ""},
		{"host:port", []string{"-admin", strings.TrimPrefix(good, "http://")}, "config: /etc/sds/sds.yaml", ""},
		{"trailing slash", []string{"-admin", good + "/"}, "config: /etc/sds/sds.yaml", ""},
		{"json", []string{"-admin", good, "-o", "json"}, "{\n  \"now\": \"2026-12-01T04:30:00Z\",\n", ""},
		{"500", []string{"-admin", serve(500, "text/plain", "boom\nsecond line")}, "",
			"GET /status answered 500 Internal Server Error: boom"},
		{"404", []string{"-admin", serve(404, "text/plain", "")}, "", "GET /status answered 404 Not Found"},
		{"not JSON", []string{"-admin", serve(200, "text/html", "<html>")}, "", "the answer is not a /status document"},
		{"other JSON", []string{"-admin", serve(200, "application/json", `{"status":"ok"}`)}, "", `no "now" or no "points"`},
		{"two values", []string{"-admin", serve(200, "application/json", `{"now":"2026-12-01T04:30:00Z","points":[]} {}`)}, "",
			"more than one JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Status(context.Background(), testFlags("status", &stderr), tt.args, &stdout)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want no error; stderr %q", err, stderr.String())
				}
				if !strings.HasPrefix(stdout.String(), tt.wantOut) {
					t.Errorf("got\n%s\nwant it to start with\n%s", stdout.String(), tt.wantOut)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "admin port at http://127.0.0.1:") {
				t.Errorf("got error %v, want one naming the address and %q", err, tt.wantErr)
			}
			if errors.Is(err, cli.ErrUsage) || errors.Is(err, cli.ErrInvalid) {
				t.Errorf("got %v, want a plain error (exit 1 with its message)", err)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: got %q, want nothing on failure", stdout.String())
			}
		})
	}
}

// TestStatusJSONAsReceived: -o json prints the document's values as the
// admin port sent them, fields it does not know included.
func TestStatusJSONAsReceived(t *testing.T) {
	t.Parallel()
	body := `{"now":"2026-12-01T04:30:00Z","future":{"x":[1,2.50,"é"]},"points":[]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
	defer srv.Close()
	var stdout bytes.Buffer
	if err := Status(context.Background(), testFlags("status", &bytes.Buffer{}), []string{"-admin", srv.URL, "-o", "json"}, &stdout); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, stdout.Bytes()); err != nil {
		t.Fatal(err)
	}
	if compact.String() != body {
		t.Errorf("got %s, want %s", compact.String(), body)
	}
}

// TestAdminUnreachable: nothing listens, or the admin port never answers:
// status fails with an error naming the address and the cause (exit 1),
// and prints nothing.
func TestAdminUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	tests := []struct {
		name, addr string
		want       []string
	}{
		{"refused", closed, []string{"admin port at http://" + closed + " cannot be reached: GET /status:", "connection refused"}},
		{"silent", hang.URL, []string{"admin port at " + hang.URL + " cannot be reached: GET /status: no answer within 50ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout bytes.Buffer
			err := Status(context.Background(), testFlags("status", &bytes.Buffer{}), []string{"-admin", tt.addr, "-timeout", "50ms"}, &stdout)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want an error with %q", err, w)
				}
			}
			if errors.Is(err, cli.ErrUsage) || errors.Is(err, cli.ErrInvalid) {
				t.Errorf("got %v, want a failure (exit 1, printed by main), not cli.ErrUsage or cli.ErrInvalid", err)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestStatusUsage: a wrong command line is cli.ErrUsage (exit 2), with the
// reason and the usage on stderr; -h is not an error.
func TestStatusUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		wantErr error
		stderr  string
	}{
		{[]string{"-o", "yaml"}, cli.ErrUsage, `-o "yaml": want table or json`},
		{[]string{"extra"}, cli.ErrUsage, `unexpected arguments ["extra"]`},
		{[]string{"-admin", "ftp://x:1"}, cli.ErrUsage, `want host:port or http://host:port`},
		{[]string{"-admin", "http://"}, cli.ErrUsage, `want host:port or http://host:port`},
		{[]string{"-timeout", "0s"}, cli.ErrUsage, `want a positive duration`},
		{[]string{"-bogus"}, cli.ErrUsage, "flag provided but not defined: -bogus"},
		{[]string{"-h"}, nil, "usage: sds-proxy status"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		err := Status(context.Background(), testFlags("status", &stderr), tt.args, &bytes.Buffer{})
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("%q: got %v, want %v", tt.args, err, tt.wantErr)
		}
		if !strings.Contains(stderr.String(), tt.stderr) || !strings.Contains(stderr.String(), "usage: sds-proxy status") {
			t.Errorf("%q: stderr %q, want %q and the usage", tt.args, stderr.String(), tt.stderr)
		}
	}
}

func TestAdminURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"127.0.0.1:9901", "http://127.0.0.1:9901"},
		{"[::1]:9901", "http://[::1]:9901"},
		{"http://127.0.0.1:9901", "http://127.0.0.1:9901"},
		{"http://127.0.0.1:9901/", "http://127.0.0.1:9901"},
		{"https://admin.internal:8443/sds", "https://admin.internal:8443/sds"},
		{"localhost:9901", "http://localhost:9901"},
	}
	for _, tt := range tests {
		if got, err := URL(tt.in); got != tt.want || err != nil {
			t.Errorf("%q: got %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "ftp://h:1", "http://h:1/?q=1", "http://%zz"} {
		if got, err := URL(bad); err == nil {
			t.Errorf("%q: got %q, want an error", bad, got)
		}
	}
}

// TestStatusCells: what the admin port sends cannot break the table or
// reach the terminal as control characters.
func TestStatusCells(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "-", "orders.read": "orders.read", "a\tb\nc\x1b[31m\u009bd": "a?b?c?[31m?d"} {
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q): got %q, want %q", in, got, want)
		}
	}
	now := time.Date(2026, 12, 1, 4, 30, 0, 0, time.UTC)
	for _, tt := range []struct {
		t          time.Time
		age, until string
	}{
		{now.Add(-1500 * time.Millisecond), "2s", "0s"},
		{now.Add(-3*time.Minute - 12*time.Second), "3m12s", "0s"},
		{now.Add(2500 * time.Millisecond), "0s", "2.5s"},
		{now.Add(28*time.Second + 400*time.Millisecond), "0s", "28s"},
	} {
		if got := age(now, tt.t); got != tt.age {
			t.Errorf("age of %v: got %s, want %s", now.Sub(tt.t), got, tt.age)
		}
		if got := until(now, tt.t); got != tt.until {
			t.Errorf("until %v: got %s, want %s", tt.t.Sub(now), got, tt.until)
		}
	}
}

// TestStatusAdminFromConfig: status -config reaches the admin address of
// the file, a wildcard host as 127.0.0.1, the default when the file has
// none; an explicit -admin wins; a file that cannot tell is an error that
// says to give -admin.
func TestStatusAdminFromConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const points = "routes: [{point: p, match: {}}]\npoints:\n  p: {visitThreshold: 5, fallback: {bodyFile: missing.json}}\n"
	for _, tc := range []struct {
		name, file string
		args       []string // after -config FILE
		want       string   // the base URL; "" for an error
		wantErr    string   // in the error
	}{
		{name: "wildcard", file: "admin: 0.0.0.0:9902\nupstream: http://127.0.0.1:9000\n" + points, want: "http://127.0.0.1:9902"},
		{name: "no host", file: "admin: :9903\n" + points, want: "http://127.0.0.1:9903"},
		{name: "IPv6 wildcard", file: "admin: '[::]:9904'\n" + points, want: "http://127.0.0.1:9904"},
		{name: "an address", file: "admin: 10.0.0.7:9905\n" + points, want: "http://10.0.0.7:9905"},
		{name: "default", file: "upstream: http://127.0.0.1:9000\n", want: "http://127.0.0.1:9901"},
		{name: "-admin wins", file: "admin: 0.0.0.0:9902\n", args: []string{"-admin", "127.0.0.1:7000"}, want: "http://127.0.0.1:7000"},
		{name: "port 0", file: "admin: 127.0.0.1:0\n", wantErr: `admin "127.0.0.1:0" has no fixed port to reach; give -admin ADDR`},
		{name: "invalid", file: "admin: 0.0.0.0:9902\nwindow: soon\n", wantErr: "does not parse, so its admin address is unknown; give -admin ADDR:\n"},
		{name: "missing", wantErr: "-config: open "},
	} {
		path := filepath.Join(dir, "missing.yaml")
		if tc.file != "" {
			path = write(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.file)
		}
		var stderr bytes.Buffer
		got, err := parseStatusFlags(testFlags("status", &stderr), append([]string{"-config", path}, tc.args...))
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %+v, %v; want an error with %q", tc.name, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got.base != tc.want):
			t.Errorf("%s: got %q, %v (%s); want %q", tc.name, got.base, err, stderr.String(), tc.want)
		}
	}
}

// TestKeyLines: a point without per-key rules has no line; what a rule's
// key and labels hold reaches the terminal as Cell makes it.
func TestKeyLines(t *testing.T) {
	t.Parallel()
	if got := keyLines(&admin.PointStatus{Name: "plain"}); got != nil {
		t.Errorf("a point without perKey: got %q, want no line", got)
	}
	p := &admin.PointStatus{Name: "api", PerKey: []admin.KeyRule{{Key: "header:X\x1b[2J", Tracked: 1, MaxKeys: 10,
		Heaviest: []admin.KeyFigures{{Label: "ab\ncd", Visits: 3}}}}}
	want := []string{"perKey api header:X?[2J: 1/10 tracked; heaviest ab?cd (3 visits)"}
	if got := keyLines(p); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestStaleCacheLine: the stale cache's line at the boundaries of its
// units and counts; none without a cache; a point without stale: has no
// line, and what a point's name and maxAge hold reaches the terminal as
// Cell makes it.
func TestStaleCacheLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cache *admin.StaleCache
		want  string
	}{
		{nil, ""},
		{&admin.StaleCache{}, "stale cache: off (maxBytes 0): no answer is kept"},
		{&admin.StaleCache{MaxBytes: 1023, Bytes: 0, Entries: 0}, "stale cache: 0B of 1023B, 0 answers"},
		{&admin.StaleCache{MaxBytes: 1024, Bytes: 1023, Entries: 1}, "stale cache: 1023B of 1KiB, 1 answer"},
		{&admin.StaleCache{MaxBytes: 64 << 20, Bytes: 1258291, Entries: 2}, "stale cache: 1.2MiB of 64MiB, 2 answers"},
		{&admin.StaleCache{MaxBytes: 4 << 30, Bytes: 150 << 20, Entries: 1500}, "stale cache: 150MiB of 4GiB, 1500 answers"},
		{&admin.StaleCache{MaxBytes: 1 << 20, Bytes: 99*1024 + 1000, Entries: 9}, "stale cache: 100KiB of 1MiB, 9 answers"},
	} {
		if got := staleCacheLine(&admin.Status{StaleCache: tt.cache}); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.cache, got, tt.want)
		}
	}
	if got := staleLine(&admin.PointStatus{Name: "plain"}); got != "" {
		t.Errorf("a point without stale: got %q, want no line", got)
	}
	p := &admin.PointStatus{Name: "api\x1b[2J", Stale: &admin.Stale{MaxAge: "10m\n0s"}}
	if got, want := staleLine(p), "stale api?[2J: degraded GET and HEAD get the last good answer, at most 10m?0s old"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
