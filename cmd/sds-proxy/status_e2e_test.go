package main_test

// End-to-end tests of `sds-proxy status` and `sds-proxy validate -diff`:
// the built binary run as a subprocess against a running proxy, its output
// compared with golden files under testdata/ (go test -run ... -update
// rewrites them) after the columns that change from run to run (rates,
// latencies, ages, addresses, paths and hashes) are normalised.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// statusE2EConfig has a point of each state once the test's requests went
// through: busy trips on visits (open), slow holds a call in flight, watch
// is a shadow point that would trip, held is in a long delay, calm stays
// closed. The 5m window keeps every trip in it for the test's length.
const statusE2EConfig = `routes:
  - {point: busy, match: {path: /busy}}
  - {point: slow, match: {path: /slow}}
  - {point: watch, match: {path: /watch}}
  - {point: held, match: {path: /held}}
  - {point: calm, match: {}}
points:
  busy: {visitThreshold: 3, fallback: {status: 503, bodyFile: busy.json}}
  slow: {concurrentThreshold: 5}
  watch: {visitThreshold: 1, mode: shadow}
  held: {visitThreshold: 1, delayTime: 10m, retryInterval: 5m}
  calm: {visitThreshold: 1000}
`

// runCLI runs the built sds-proxy with args and returns its stdout, its
// stderr and its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIInput(t, nil, args...)
}

// runCLIInput is runCLI with stdin (nil: none).
func runCLIInput(t *testing.T, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := command("sds-proxy", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(wait, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	kill.Stop()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("sds-proxy %q: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// goldenUpdate reports whether -update (registered by the package's unit
// tests, in the same test binary) asks to rewrite the golden files.
func goldenUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// checkGolden compares got with testdata/NAME, or rewrites it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if goldenUpdate() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}

// durationText matches a Go duration as the table prints ages and times
// to come ("2.5s", "4m59s", "850µs").
var durationText = regexp.MustCompile(`\d+(\.\d+)?(h|ms|µs|m|s)(\d+(\.\d+)?(h|ms|µs|m|s))*`)

// normalizeStatus rewrites a status table so that it compares across runs:
// in the header line the config's directory, its hash prefix and the ages;
// in the rows the RPS, ERR%, P50 and P99 columns (measured) and the
// durations in REASON and LAST TRIP. Everything else (point, mode, state,
// reason, figures, in-flight calls) is kept as printed, and the table is
// aligned again.
func normalizeStatus(t *testing.T, out, dir, hash string) string {
	t.Helper()
	header, table, ok := strings.Cut(out, "\n\n")
	if !ok {
		t.Fatalf("no blank line between the header and the table:\n%s", out)
	}
	if !strings.Contains(header, "(sha256 "+hash[:12]+")") {
		t.Errorf("header %q: want the hash prefix %s", header, hash[:12])
	}
	header = strings.ReplaceAll(header, dir+string(filepath.Separator), "DIR/")
	header = strings.ReplaceAll(header, hash[:12], "HASH")
	header = durationText.ReplaceAllString(header, "T")
	var b strings.Builder
	b.WriteString(header + "\n\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	cellSep := regexp.MustCompile(` {2,}`)
	for i, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		cells := cellSep.Split(strings.TrimRight(line, " "), -1)
		if len(cells) != 10 {
			t.Fatalf("row %d: got %d cells %q, want 10", i, len(cells), cells)
		}
		if i > 0 {
			for _, c := range []int{4, 5, 6, 7} { // RPS ERR% P50 P99
				cells[c] = "~"
			}
			cells[3] = durationText.ReplaceAllString(cells[3], "T")
			cells[9] = durationText.ReplaceAllString(cells[9], "T")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	return b.String()
}

// driveStatusPoints sends the requests that put statusE2EConfig's busy,
// watch, held and calm points in their states.
func driveStatusPoints(t *testing.T, e *env) {
	if got := e.countDegraded(5, "/busy", "visit; point=busy", 503); got != 2 {
		t.Fatalf("busy: got %d of 5 degraded, want 2", got)
	}
	for range 3 {
		if r := e.get("/watch"); r.status != 200 {
			t.Fatalf("watch (shadow): got %v, want the upstream's answer", r)
		}
	}
	if got := e.countDegraded(2, "/held", "visit; point=held", 429); got != 1 {
		t.Fatalf("held: got %d of 2 degraded, want 1", got)
	}
	for range 2 {
		if r := e.get("/calm"); r.status != 200 {
			t.Fatalf("calm: got %v", r)
		}
	}
}

// checkStatusJSON checks the output of status -o json, stdout: each point's
// mode, state and calls in flight, and the config's hash.
func checkStatusJSON(t *testing.T, stdout, hash string) {
	var got struct {
		Config struct{ Hash string }
		Points []struct {
			Name, Mode, State string
			Window            struct{ InFlight int64 }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("status -o json: %v:\n%s", err, stdout)
	}
	want := []string{"busy enforce open 0", "slow enforce closed 1", "watch shadow shadow 0", "held enforce delay 0", "calm enforce closed 0"}
	var gotPoints []string
	for _, p := range got.Points {
		gotPoints = append(gotPoints, fmt.Sprintf("%s %s %s %d", p.Name, p.Mode, p.State, p.Window.InFlight))
	}
	if strings.Join(gotPoints, ", ") != strings.Join(want, ", ") || got.Config.Hash != hash {
		t.Errorf("status -o json: got points %q hash %s, want %q hash %s", gotPoints, got.Config.Hash, want, hash)
	}
}

// checkStatusUnreachable: status against an admin port that is gone or is
// not one, and with an unknown -o, fails saying why.
func checkStatusUnreachable(t *testing.T, e *env) {
	// Nothing listens (port 1 needs root to bind): exit 1, the address
	// and the cause on stderr.
	const gone = "127.0.0.1:1"
	stdout, stderr, code := runCLI(t, "status", "-admin", gone)
	wantErr := "sds-proxy: admin port at http://" + gone + " cannot be reached: GET /status: "
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, wantErr) || !strings.Contains(stderr, "connection refused") {
		t.Errorf("unreachable: exit %d, stdout %q, stderr %q, want 1, nothing, %q...connection refused", code, stdout, stderr, wantErr)
	}
	// The proxy port is not an admin port: it answers, but not /status.
	stdout, stderr, code = runCLI(t, "status", "-admin", e.proxy.url)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "admin port at "+e.proxy.url+": GET /status") {
		t.Errorf("proxy port as admin: exit %d, stdout %q, stderr %q, want 1 and the address", code, stdout, stderr)
	}
	if _, stderr, code = runCLI(t, "status", "-o", "yaml"); code != 2 || !strings.Contains(stderr, "want table or json") {
		t.Errorf("-o yaml: exit %d, stderr %q, want 2 and the reason", code, stderr)
	}
}

// TestStatusE2E runs `sds-proxy status` against a proxy whose points are
// closed, open, in a delay, shadow and busy with a call in flight: the
// table (golden), -o json, and the errors of an admin port that is gone.
func TestStatusE2E(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(filepath.Join(e.dir, "busy.json"), `{"busy":true}`)
	e.write(e.config, configHeader(e.upstream, "5m", 10)+statusE2EConfig)
	e.proxy = startProxy(t, e.config)

	driveStatusPoints(t, e)
	// One call on slow stays in flight until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hung := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.proxy.url+"/slow?hang=1", nil)
		resp, err := e.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	if !eventually(wait, func() bool { return e.point("slow").Window.InFlight == 1 }) {
		t.Fatalf("slow: the call never showed in flight: %+v", e.point("slow"))
	}

	admin := strings.TrimPrefix(e.proxy.admin, "http://")
	stdout, stderr, code := runCLI(t, "status", "-admin", admin)
	if code != 0 || stderr != "" {
		t.Fatalf("status: exit %d, stderr %q, want 0 and nothing", code, stderr)
	}
	doc := e.status()
	checkGolden(t, "status/e2e.golden", normalizeStatus(t, stdout, e.dir, doc.Config.Hash))

	// A URL names the admin port as well; -o json is the document.
	stdout, stderr, code = runCLI(t, "status", "-admin", e.proxy.admin, "-o", "json")
	if code != 0 || stderr != "" {
		t.Fatalf("status -o json: exit %d, stderr %q", code, stderr)
	}
	checkStatusJSON(t, stdout, doc.Config.Hash)
	cancel()
	<-hung

	checkStatusUnreachable(t, e)
}

// TestValidateDiffE2E runs `sds-proxy validate -diff` against a running
// proxy: with an edited copy of its config (elsewhere, with its own
// bodyFile) it prints what would change (golden); with the same file, "no
// changes"; an invalid file fails before asking; a gone admin port fails,
// with nothing on stdout.
func TestValidateDiffE2E(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(filepath.Join(e.dir, "busy.json"), `{"busy":true}`)
	running := configHeader(e.upstream, "5m", 10) + statusE2EConfig
	e.write(e.config, running)
	e.proxy = startProxy(t, e.config)
	doc := e.status()

	stdout, stderr, code := runCLI(t, "validate", "-config", e.config, "-diff", e.proxy.admin)
	wantHeader := fmt.Sprintf("OK\nagainst the config in force at %s (%s, sha256 %s):\n", e.proxy.admin, e.config, doc.Config.Hash[:12])
	if code != 0 || stderr != "" || stdout != wantHeader+"no changes\n" {
		t.Errorf("same file: exit %d, stderr %q, stdout\n%s\nwant 0 and\n%sno changes", code, stderr, stdout, wantHeader)
	}

	// The edited copy lives in a directory of its own, with a bodyFile of
	// its own: the running config's busy.json is not read from there.
	editedDir := filepath.Join(e.dir, "edited")
	if err := os.Mkdir(editedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.write(filepath.Join(editedDir, "busy-v2.json"), `{"busy":2}`)
	edited := strings.NewReplacer(
		"window: 5m\n", "window: 1m\nlisten: 127.0.0.1:18080\n",
		"busy: {visitThreshold: 3, fallback: {status: 503, bodyFile: busy.json}}",
		"busy: {visitThreshold: 5, fallback: {status: 429, bodyFile: busy-v2.json}}",
		"  watch: {visitThreshold: 1, mode: shadow}\n", "  watch: {visitThreshold: 1}\n  search: {concurrentThreshold: 8}\n",
		"  held: {visitThreshold: 1, delayTime: 10m, retryInterval: 5m}\n", "",
		"  - {point: held, match: {path: /held}}\n", "  - {point: search, match: {pathPrefix: /search, methods: [GET]}}\n",
	).Replace(running)
	editedPath := filepath.Join(editedDir, "sds.yaml")
	e.write(editedPath, edited)
	stdout, stderr, code = runCLI(t, "validate", "-config", editedPath, "-diff", strings.TrimPrefix(e.proxy.admin, "http://"))
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, wantHeader) {
		t.Fatalf("edited: exit %d, stderr %q, stdout\n%s\nwant 0 and it to start with\n%s", code, stderr, stdout, wantHeader)
	}
	checkGolden(t, "validate-diff/e2e.golden", strings.TrimPrefix(stdout, wantHeader))

	// An invalid file: its problems, exit 1, and the admin port is not
	// needed to say so.
	e.write(editedPath, strings.Replace(edited, "visitThreshold: 5", "visitThreshold: five", 1))
	stdout, _, code = runCLI(t, "validate", "-config", editedPath, "-diff", "127.0.0.1:1")
	if code != 1 || !strings.Contains(stdout, "visitThreshold") || strings.Contains(stdout, "against") {
		t.Errorf("invalid file: exit %d, stdout %q, want 1 and its problem only", code, stdout)
	}

	// The admin port is gone: exit 1, naming it, and no OK before it.
	e.proxy.stop(wait)
	stdout, stderr, code = runCLI(t, "validate", "-config", e.config, "-diff", e.proxy.admin)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "admin port at "+e.proxy.admin+" cannot be reached: GET /config") {
		t.Errorf("admin port gone: exit %d, stdout %q, stderr %q, want 1, nothing on stdout, and the address", code, stdout, stderr)
	}
}

// TestStatusWithoutConfigFileE2E: a proxy run from -upstream alone has no
// point and no file: status says so, GET /config answers 404, and
// validate -diff fails naming the address and that answer.
func TestStatusWithoutConfigFileE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	upstream := "http://" + startUpstream(t)
	cmd := command("sds-proxy", "run", "-upstream", upstream, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	cmd.Dir = t.TempDir() // no sds.yaml there
	started, err := start(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	p := serving(t, started)

	stdout, stderr, code := runCLI(t, "status", "-admin", p.admin)
	want := "config: none (run from -upstream alone)\n\n" +
		"POINT  MODE  STATE  REASON  RPS  ERR%  P50  P99  INFLIGHT  LAST TRIP\n(no points)\n"
	// A first load counts as a successful reload attempt: its age varies.
	stdout = regexp.MustCompile(`; last reload ok \S+ ago`).ReplaceAllString(stdout, "")
	if code != 0 || stderr != "" || stdout != want {
		t.Errorf("status: exit %d, stderr %q, stdout\n%s\nwant 0 and\n%s", code, stderr, stdout, want)
	}

	dir := t.TempDir()
	local := filepath.Join(dir, "sds.yaml")
	if err := os.WriteFile(local, []byte(configHeader(upstream, "10s", 10)+statusE2EConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busy.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCLI(t, "validate", "-config", local, "-diff", p.admin)
	wantErr := "sds-proxy: admin port at " + p.admin + ": GET /config answered 404 Not Found: no config file"
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, wantErr) {
		t.Errorf("validate -diff: exit %d, stdout %q, stderr %q, want 1, nothing on stdout, %q...", code, stdout, stderr, wantErr)
	}
}

// TestStatusConfigE2E: a proxy whose config moved its admin port is found
// by status -config FILE, which reads the admin address from the file; an
// explicit -admin still wins, and a file whose admin port is 0 says to
// give -admin.
func TestStatusConfigE2E(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := freePort(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, configHeader(e.upstream, "10s", 10)+"admin: "+admin+"\n"+pointRoute+"    visitThreshold: 100\n")
	e.proxy = serving(t, startProcess(t, "sds-proxy", "run", "-config", e.config, "-listen", "127.0.0.1:0"))
	if e.proxy.admin != "http://"+admin {
		t.Fatalf("the proxy serves its admin port on %s, want the file's %s", e.proxy.admin, admin)
	}

	stdout, stderr, code := runCLI(t, "status", "-config", e.config)
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "config: "+e.config+" (sha256 ") || !strings.Contains(stdout, "\np ") {
		t.Errorf("status -config: exit %d, stderr %q, stdout\n%s\nwant 0 and the table of %s", code, stderr, stdout, e.config)
	}

	gone := freePort(t)
	_, stderr, code = runCLI(t, "status", "-config", e.config, "-admin", gone)
	if code != 1 || !strings.Contains(stderr, "admin port at http://"+gone+" cannot be reached") {
		t.Errorf("status -config -admin %s: exit %d, stderr %q, want 1 and the -admin address", gone, code, stderr)
	}

	zero := filepath.Join(e.dir, "zero.yaml")
	e.write(zero, configHeader(e.upstream, "10s", 10)+"admin: 127.0.0.1:0\n")
	_, stderr, code = runCLI(t, "status", "-config", zero)
	want := "sds-proxy: -config " + zero + ": admin \"127.0.0.1:0\" has no fixed port to reach; give -admin ADDR\n"
	if code != 1 || stderr != want {
		t.Errorf("status -config with admin port 0: exit %d, stderr %q, want 1 and %q", code, stderr, want)
	}
}

// TestStatusTokenBucketE2E: a token bucket's trip is shown as the tokens
// used of its capacity (docs/semantics.md, state model), in LAST TRIP as
// in REASON and in /status's lastTrip: 5/5 for an emptied bucket of 5,
// not 0/5.
func TestStatusTokenBucketE2E(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, pointRoute+"    tokenBucketGeneratedTokensInSecond: 1\n    tokenBucketSize: 5\n    fallback: {status: 429}\n")
	// 5 tokens, 1 more a second: a few more calls than that empty it,
	// however slow the machine.
	tripped := false
	for i := 0; i < 100 && !tripped; i++ {
		tripped = e.get("/").degraded() == "token_bucket; point=p"
	}
	if !tripped {
		t.Fatal("100 calls did not empty a bucket of 5 tokens filled at 1 a second")
	}
	stdout, stderr, code := runCLI(t, "status", "-admin", e.proxy.admin)
	lastTrip := regexp.MustCompile(`token_bucket (\d+)/(\d+) \S+ ago`).FindStringSubmatch(stdout)
	if code != 0 || lastTrip == nil || lastTrip[1] != "5" || lastTrip[2] != "5" {
		t.Errorf("status: exit %d, stderr %q, stdout\n%s\nwant LAST TRIP token_bucket 5/5 (the tokens used of 5)", code, stderr, stdout)
	}
	if p := e.point("p"); p.LastTrip == nil || p.LastTrip.Count != 5 || p.LastTrip.Threshold != 5 {
		t.Errorf("/status lastTrip: got %+v, want token_bucket count 5, threshold 5", p.LastTrip)
	}
}
