package main_test

// The harness of the end-to-end tests: the real sds-proxy binary in front
// of the real sds-upstream binary (package cmd/internal/upstream), both as
// processes on 127.0.0.1, driven through HTTP only (and signals). Each test
// writes its own sds.yaml into its own directory and starts its own
// processes on ports the kernel picks; every process is stopped (SIGTERM,
// then Kill after a deadline) and waited for.
//
// Nothing sleeps to let time pass: a test polls with a generous deadline
// (eventually), waits on a process's output, or lets the upstream's ?sleep
// knob make a call slow. Where a test compares durations, the two sides are
// several times apart, so that a loaded machine cannot swap them.
//
// The binaries are built once, on the first test that needs them, into a
// temporary directory that TestMain removes. -short skips every test that
// needs them.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// wait is the deadline of every wait for something that must happen: a
// process's start or exit, a log line, a condition polled, a request. It is
// generous, as a loaded machine may be slow; it never measures how fast
// something happened (a test that promises a duration checks that apart).
const wait = 15 * time.Second

var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The end-to-end tests spend their time waiting on processes, sockets
	// and timers, not computing: unless -parallel is given, run up to 4 at
	// once even where it defaults to fewer (GOMAXPROCS, 2 on a 2-core
	// machine). Their margins hold under that load.
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && runtime.GOMAXPROCS(0) < 4 {
		flag.Set("test.parallel", "4")
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// needBinaries skips in -short mode, and otherwise builds sds-proxy and
// sds-upstream once per test binary.
func needBinaries(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sds-e2e-")
		if buildErr != nil {
			return
		}
		for _, name := range []string{"sds-proxy", "sds-upstream"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), "github.com/sds-proxy/sds-proxy/cmd/"+name)
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// lineLog collects a process's output line by line and lets a test wait
// for a line.
type lineLog struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	changed chan struct{} // closed and replaced on every new line
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(b), nil
}

// mark returns the number of lines so far, for waiting on later ones.
func (l *lineLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + string(l.partial)
}

// find returns the first line at index from or later for which match
// holds, waiting until timeout or until exited is closed.
func (l *lineLog) find(from int, timeout time.Duration, exited <-chan struct{}, match func(string) bool) (string, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for last := false; ; {
		l.mu.Lock()
		for ; from < len(l.lines); from++ {
			if match(l.lines[from]) {
				line := l.lines[from]
				l.mu.Unlock()
				return line, true
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if last {
			return "", false
		}
		select {
		case <-changed:
		case <-exited:
			last = true // look once more at what the process wrote last
		case <-deadline.C:
			return "", false
		}
	}
}

// after returns the index just past the last line that matches, now; 0
// when none does.
func (l *lineLog) after(match func(string) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.lines) - 1; i >= 0; i-- {
		if match(l.lines[i]) {
			return i + 1
		}
	}
	return 0
}

// count returns how many lines at index from or later match, now.
func (l *lineLog) count(from int, match func(string) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines[min(from, len(l.lines)):] {
		if match(line) {
			n++
		}
	}
	return n
}

type process struct {
	name   string
	cmd    *exec.Cmd
	stdout *lineLog
	stderr *lineLog
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, once exited is closed
}

// command returns the command that runs one of the built binaries.
func command(name string, args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(binDir, name), args...)
}

// start starts cmd, collecting its output. t.Cleanup stops it: SIGTERM,
// Kill after 10s, Wait; and logs its output if the test failed.
func start(t *testing.T, cmd *exec.Cmd) (*process, error) {
	t.Helper()
	p := &process{name: filepath.Base(cmd.Path), cmd: cmd, stdout: newLineLog(), stderr: newLineLog(), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(10 * time.Second)
		if t.Failed() {
			t.Logf("%s %q output:\n%s\n%s", p.name, cmd.Args[1:], p.stdout, p.stderr)
		}
	})
	return p, nil
}

// runWithin runs cmd to its end and returns its output (stdout and
// stderr together) and Run's error; one still running after timeout is
// killed, and ended is then false.
func runWithin(cmd *exec.Cmd, timeout time.Duration) (out []byte, ended bool, err error) {
	done := make(chan struct{})
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return out, true, err
	case <-timer.C:
		cmd.Process.Kill()
		<-done
		return out, false, err
	}
}

// startProcess starts a built binary with args; see start.
func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	p, err := start(t, command(name, args...))
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return p
}

// stop sends SIGTERM and waits up to grace for the exit, then kills.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// signal sends sig to the process.
func (p *process) signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// waitExit waits up to timeout for the process to exit by itself and
// checks that it exited 0.
func (p *process) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		t.Fatalf("%s did not exit within %v", p.name, timeout)
	}
	if p.err != nil {
		t.Errorf("%s exit: got %v, want exit code 0", p.name, p.err)
	}
}

// startUpstream runs sds-upstream on a free port and returns its address
// (host:port). args are extra flags, such as -h2c.
func startUpstream(t *testing.T, args ...string) string {
	t.Helper()
	p := startProcess(t, "sds-upstream", append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	line, ok := p.stdout.find(0, wait, p.exited, func(s string) bool { return strings.HasPrefix(s, "listening ") })
	if !ok {
		t.Fatalf("sds-upstream did not print its address: %s %s", p.stdout, p.stderr)
	}
	return strings.TrimPrefix(line, "listening ")
}

// proxyProcess is a running sds-proxy.
type proxyProcess struct {
	*process
	url   string // http://127.0.0.1:PORT of the proxy port
	admin string // http://127.0.0.1:PORT of the admin port
}

// proxyArgs runs sds-proxy with the config file at path on free ports.
func proxyArgs(path string) []string {
	return []string{"run", "-config", path, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}
}

// startProxy runs sds-proxy on free ports with the config file at path, and
// waits until it serves.
func startProxy(t *testing.T, path string) *proxyProcess {
	t.Helper()
	return serving(t, startProcess(t, "sds-proxy", proxyArgs(path)...))
}

// serving waits for a started sds-proxy's "serving" line and reads its
// addresses from it.
func serving(t *testing.T, p *process) *proxyProcess {
	t.Helper()
	pp := &proxyProcess{process: p}
	e := pp.waitLog(t, 0, wait, msgIs("serving"))
	pp.url = "http://" + fmt.Sprint(e["proxy_addr"])
	pp.admin = "http://" + fmt.Sprint(e["admin_addr"])
	return pp
}

// logEntry is one JSON line of sds-proxy's log.
type logEntry map[string]any

func parseLog(line string) logEntry {
	var e logEntry
	if json.Unmarshal([]byte(line), &e) != nil {
		return nil
	}
	return e
}

// logLine turns a match on log entries into one on lines.
func logLine(match func(logEntry) bool) func(string) bool {
	return func(s string) bool {
		e := parseLog(s)
		return e != nil && match(e)
	}
}

func msgIs(msg string) func(logEntry) bool {
	return func(e logEntry) bool { return e["msg"] == msg }
}

// msgStarts matches a message that starts with prefix ("config rejected"
// is followed by an explanation).
func msgStarts(prefix string) func(logEntry) bool {
	return func(e logEntry) bool { s, _ := e["msg"].(string); return strings.HasPrefix(s, prefix) }
}

// pointLog matches a log line with msg about point.
func pointLog(msg, point string) func(logEntry) bool {
	return func(e logEntry) bool { return e["msg"] == msg && e["point"] == point }
}

// waitLog waits for a JSON log line on stderr, at index from or later.
func (p *proxyProcess) waitLog(t *testing.T, from int, timeout time.Duration, match func(logEntry) bool) logEntry {
	t.Helper()
	line, ok := p.stderr.find(from, timeout, p.exited, logLine(match))
	if !ok {
		t.Fatalf("no matching log line within %v (exited: %v)", timeout, p.hasExited())
	}
	return parseLog(line)
}

// countLog counts the log lines at index from or later that match, now.
func (p *proxyProcess) countLog(from int, match func(logEntry) bool) int {
	return p.stderr.count(from, logLine(match))
}

// env is one test's upstream, config file, proxy and client.
type env struct {
	t        *testing.T
	upstream string // base URL of sds-upstream
	dir      string
	config   string // path of sds.yaml
	proxy    *proxyProcess
	client   *http.Client
}

// configHeader is the top of every test config: the upstream and window,
// and a short drain so that a failing test does not wait 25s to stop.
func configHeader(upstream, window string, buckets int) string {
	return fmt.Sprintf("upstream: %s\nwindow: %s\nbuckets: %d\ndrainTimeout: 5s\n", upstream, window, buckets)
}

// pointRoute is a config body with one catch-all route to point p, whose
// settings follow (indented by four spaces).
const pointRoute = "routes:\n  - point: p\n    match: {}\npoints:\n  p:\n"

// newEnv starts an upstream for a test that writes its config and starts
// its proxy itself (startProxy).
func newEnv(t *testing.T) *env {
	t.Helper()
	needBinaries(t)
	return &env{t: t, dir: t.TempDir(), upstream: "http://" + startUpstream(t), client: newClient(t)}
}

// setup starts an upstream, writes the config (configHeader plus body) and
// starts the proxy on it.
func setup(t *testing.T, window string, buckets int, body string) *env {
	t.Helper()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, configHeader(e.upstream, window, buckets)+body)
	e.proxy = startProxy(t, e.config)
	return e
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// write replaces path's content the way editors do: a temporary file in the
// same directory, renamed over it.
func (e *env) write(path, content string) {
	e.t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		e.t.Fatal(err)
	}
}

// reply is a response read whole.
type reply struct {
	status int
	header http.Header
	body   string
	took   time.Duration
}

func (r reply) degraded() string { return r.header.Get("Sds-Degraded") }

func (r reply) String() string {
	return fmt.Sprintf("%d (Sds-Degraded %q, Sds-Shadow-Degraded %q) %.60q", r.status, r.degraded(), r.header.Get("Sds-Shadow-Degraded"), r.body)
}

func (e *env) do(req *http.Request) (reply, error) {
	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(body), took: time.Since(start)}, err
}

// get sends GET path to the proxy; a transport error fails the test.
func (e *env) get(path string) reply {
	e.t.Helper()
	return e.getURL(e.proxy.url + path)
}

// getURL sends GET to any URL (admin, upstream).
func (e *env) getURL(url string) reply {
	e.t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", url, err)
	}
	return r
}

// rawGet sends one GET with exactly the request-target and Host given,
// over a new connection, as a hostile client writes it (Go's client would
// clean the path), and reads the response.
func rawGet(t *testing.T, addr, target, host string) reply {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", target, host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s (Host %s): body: %v", target, host, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// freePort returns a loopback port nothing listens on right now. Another
// process may take it before the caller binds it: only a test that runs
// alone (not parallel) may use it.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// countDegraded sends n sequential GETs of path and counts the degraded
// answers; every degraded answer must carry want as Sds-Degraded and
// wantStatus as status, every other one must come from the upstream.
func (e *env) countDegraded(n int, path, want string, wantStatus int) (degraded int) {
	e.t.Helper()
	for i := range n {
		r := e.get(path)
		switch {
		case r.degraded() == "":
			if !strings.HasPrefix(r.body, "upstream") {
				e.t.Errorf("call %d: got %v, want an upstream answer or a degraded one", i+1, r)
			}
		case r.degraded() != want || r.status != wantStatus:
			e.t.Errorf("call %d: got %v, want status %d and Sds-Degraded %q", i+1, r, wantStatus, want)
		default:
			degraded++
		}
	}
	return degraded
}

// eventually polls cond every few milliseconds until it holds or timeout
// passes, and reports whether it held.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

// median returns the median of ds, which it sorts.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// upstreamStats reads sds-upstream's /_control counters.
func (e *env) upstreamStats() (requests, inFlight int64) {
	e.t.Helper()
	var st struct{ Requests, InFlight int64 }
	r := e.getURL(e.upstream + "/_control")
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		e.t.Fatalf("upstream /_control: %v: %q", err, r.body)
	}
	return st.Requests, st.InFlight
}

// metrics is a scrape of an admin port's /metrics, by family name.
type metrics map[string]*dto.MetricFamily

// scrape reads the admin port's /metrics in the Prometheus text format; it
// is safe to call from any goroutine.
func scrape(admin string) (metrics, error) {
	cl := http.Client{Timeout: wait}
	resp, err := cl.Get(admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: got status %d, want 200", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// value returns the sample name{labels}, and whether it is there. labels
// alternate name and value and must name every label of the series. name is
// a counter's, a gauge's, or a histogram's or summary's with _sum or _count.
func (ms metrics) value(name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	family, suffix := name, ""
	if ms[name] == nil {
		for _, s := range []string{"_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, s); ok && ms[base] != nil {
				family, suffix = base, s
			}
		}
	}
	mf := ms[family]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if !labelsAre(m.GetLabel(), want) {
			continue
		}
		switch {
		case suffix == "_sum" && m.Histogram != nil:
			return m.GetHistogram().GetSampleSum(), true
		case suffix == "_count" && m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case suffix == "_sum" && m.Summary != nil:
			return m.GetSummary().GetSampleSum(), true
		case suffix == "_count" && m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		case suffix != "":
			return 0, false
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// sum adds up every series of the gauge name, and reports whether there
// is any.
func (ms metrics) sum(name string) (float64, bool) {
	mf := ms[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0, false
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum, true
}

func labelsAre(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

// metric returns the value of the sample name{labels} on the admin port's
// /metrics, and whether it is there. labels alternate name and value.
func (e *env) metric(name string, labels ...string) (float64, bool) {
	e.t.Helper()
	ms, err := scrape(e.proxy.admin)
	if err != nil {
		e.t.Fatal(err)
	}
	return ms.value(name, labels...)
}

// metricIs checks a sample's value; an absent counter counts as 0.
func (e *env) metricIs(want float64, name string, labels ...string) {
	e.t.Helper()
	got, ok := e.metric(name, labels...)
	if got != want {
		e.t.Errorf("%s%q: got %v (present: %v), want %v", name, labels, got, ok, want)
	}
}

// status reads the proxy's /status into admin.Status, the document's one
// definition.
func (e *env) status() admin.Status {
	e.t.Helper()
	r := e.getURL(e.proxy.admin + "/status")
	var doc admin.Status
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		e.t.Fatalf("/status: %v: %v", err, r)
	}
	return doc
}

func (e *env) point(name string) admin.PointStatus {
	e.t.Helper()
	for _, p := range e.status().Points {
		if p.Name == name {
			return p
		}
	}
	e.t.Fatalf("/status has no point %q", name)
	return admin.PointStatus{}
}
