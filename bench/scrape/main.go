// Command scrape measures what a proxy of many points costs once
// Prometheus scrapes it (issue 24). It writes a config of -points points
// (each with a visit and a concurrency threshold) and as many routes:
// -points-1 exact ones and a catch-all, the file padded to just under
// -size bytes (1 MiB, a ConfigMap's most); starts the sds-proxy binary
// given by -bin on it, in front of an upstream of its own on 127.0.0.1;
// sends -requests requests spread over the first -busy points (one in ten
// with a traceparent, so that exemplars are kept); then GETs /metrics
// -scrapes times with Prometheus' Accept and Accept-Encoding headers and
// /status -statuses times; then, as an operator's edit of the ConfigMap
// would, rewrites the file -reloads times with one threshold changed and
// waits for each to apply. It prints the proxy's peak RSS (VmHWM, from
// /proc) after each phase and the median scrape time, against the targets
// (-max-rss, -max-scrape: issue 24's, for the phases before the reloads),
// and exits 1 when one is missed; the peak after the reloads is reported
// beside them, and held to -max-rss too with -reload-target.
//
//	go build -o /tmp/sds-proxy ./cmd/sds-proxy
//	go run ./bench/scrape -bin /tmp/sds-proxy [-format openmetrics|protobuf|text]
//
// Everything runs on 127.0.0.1, bounded by the counts above; the proxy is
// stopped before the program exits.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// accepts are the Accept headers Prometheus 3 sends: its default
// scrape_protocols (openmetrics), and with native histograms on (protobuf
// first).
var accepts = map[string]string{
	"openmetrics": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
	"protobuf":    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.2,text/plain;version=0.0.4;q=0.1,*/*;q=0.05",
	"text":        "text/plain;version=0.0.4;q=1,*/*;q=0.1",
}

// options are the command's flags, checked by parseFlags.
type options struct {
	bin, format, accept, env                                 string
	points, size, requests, busy, scrapes, statuses, reloads int
	reloadTarget                                             bool
	maxRSS                                                   float64 // MiB
	maxScrape                                                time.Duration
}

func main() {
	o := parseFlags()
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("upstream: %v", err)
	}
	go http.Serve(upstream, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))

	dir, err := os.MkdirTemp("", "sds-scrape-")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(dir)
	p := startProxy(o, filepath.Join(dir, "sds.yaml"), "http://"+upstream.Addr().String())
	defer p.stop()

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, DisableCompression: true}}
	traffic(client, "http://"+p.proxy, p.padding, o.requests, o.busy)
	fmt.Printf("after %d requests over %d points: %s\n", o.requests, o.busy, memory(p.pid()))
	if !report(o, measure(o, p, client)) {
		p.stop()
		os.Exit(1)
	}
}

// parseFlags reads the command line, and fails on a run it cannot make.
func parseFlags() options {
	var o options
	flag.StringVar(&o.bin, "bin", "sds-proxy", "the sds-proxy binary")
	flag.IntVar(&o.points, "points", 10_000, "points, and routes (points-1 exact and a catch-all)")
	flag.IntVar(&o.size, "size", 1<<20, "the config file stays under this many bytes")
	flag.IntVar(&o.requests, "requests", 20_000, "requests sent before the scrapes")
	flag.IntVar(&o.busy, "busy", 2_000, "the requests go to the first busy points")
	flag.IntVar(&o.scrapes, "scrapes", 10, "GET /metrics this many times")
	flag.IntVar(&o.statuses, "statuses", 3, "GET /status this many times")
	flag.IntVar(&o.reloads, "reloads", 2, "rewrite the config this many times, one threshold changed, and wait for each to apply")
	flag.BoolVar(&o.reloadTarget, "reload-target", false, "hold the peak after the reloads to -max-rss too")
	flag.StringVar(&o.format, "format", "openmetrics", "the Accept header: openmetrics (Prometheus' default), protobuf (native histograms on) or text")
	flag.Float64Var(&o.maxRSS, "max-rss", 128, "target: peak RSS in MiB")
	flag.DurationVar(&o.maxScrape, "max-scrape", 250*time.Millisecond, "target: median scrape time")
	flag.StringVar(&o.env, "env", "", "extra environment for the proxy, NAME=VALUE[,NAME=VALUE]")
	flag.Parse()
	accept, ok := accepts[o.format]
	if !ok {
		fail("-format %q: want openmetrics, protobuf or text", o.format)
	}
	o.accept = accept
	if o.busy > o.points || o.points < 2 {
		fail("-busy %d, -points %d: want 2 <= points and busy <= points", o.busy, o.points)
	}
	return o
}

// proxyProcess is the sds-proxy under measure and the config file it
// serves.
type proxyProcess struct {
	cmd          *exec.Cmd
	proxy, admin string // the addresses it serves
	path         string // its config file
	body         []byte // the config as first written
	padding      string // the routes' path padding (config)
}

// startProxy writes the config of o's points in front of upstream to
// path, starts the proxy on it and waits until it serves; it fails when
// the proxy exits first. The caller stops it.
func startProxy(o options, path, upstream string) *proxyProcess {
	p := &proxyProcess{path: path}
	p.body, p.padding = config(upstream, o.points, o.size)
	if err := os.WriteFile(path, p.body, 0o600); err != nil {
		fail("%v", err)
	}
	p.cmd = exec.Command(o.bin, "run", "-config", path, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	p.cmd.Env = os.Environ()
	if o.env != "" {
		p.cmd.Env = append(p.cmd.Env, strings.Split(o.env, ",")...)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		fail("%v", err)
	}
	start := time.Now()
	if err := p.cmd.Start(); err != nil {
		fail("start %s: %v", o.bin, err)
	}
	p.proxy, p.admin = serving(stderr)
	if p.proxy == "" {
		p.stop()
		fail("the proxy exited or never logged serving")
	}
	ready := time.Since(start)
	fmt.Printf("config: %d points, %d routes (%d exact and a catch-all), %d bytes\n", o.points, o.points, o.points-1, len(p.body))
	fmt.Printf("serving after %v: %s\n", ready.Round(time.Millisecond), memory(p.pid()))
	return p
}

func (p *proxyProcess) pid() int { return p.cmd.Process.Pid }

// stop kills the proxy and waits for it; a second stop does nothing more.
func (p *proxyProcess) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// results are what measure measured: each scrape's, /status read's and
// reload's time, and the proxy's peak RSS in MiB before the reloads and
// after them.
type results struct {
	scrapes, statuses, reloads []time.Duration
	hwm, reloadHWM             float64
}

// measure scrapes /metrics and reads /status as o says, then reloads the
// config o.reloads times, waiting for each, and prints the proxy's memory
// after each phase.
func measure(o options, p *proxyProcess, client *http.Client) results {
	var r results
	var size int
	for range o.scrapes {
		b, d := get(client, "http://"+p.admin+"/metrics", o.accept)
		r.scrapes = append(r.scrapes, d)
		size = len(b)
	}
	fmt.Printf("after %d scrapes (%s, gzip, %d bytes unzipped): %s\n", o.scrapes, o.format, size, memory(p.pid()))

	for range o.statuses {
		b, d := get(client, "http://"+p.admin+"/status", "application/json")
		r.statuses = append(r.statuses, d)
		var doc struct{ Points []json.RawMessage }
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Points) != o.points {
			fail("/status: %d points, %v; want %d", len(doc.Points), err, o.points)
		}
		size = len(b)
	}
	fmt.Printf("after %d /status (%d bytes): %s\n", o.statuses, size, memory(p.pid()))
	r.hwm = mib(status(p.pid(), "VmHWM"))

	for k := range o.reloads {
		edited := bytes.Replace(p.body, []byte("p0: {visitThreshold: 100000,"), fmt.Appendf(nil, "p0: {visitThreshold: %d,", 100001+k), 1)
		r.reloads = append(r.reloads, reload(client, p.admin, p.path, edited, k+1))
	}
	r.reloadHWM = mib(status(p.pid(), "VmHWM"))
	if o.reloads > 0 {
		fmt.Printf("after %d reloads (%s): %s\n", o.reloads, durations(r.reloads), memory(p.pid()))
	}
	return r
}

// report prints the times and the peaks against o's targets, and reports
// whether every target held.
func report(o options, r results) bool {
	median := medianOf(r.scrapes)
	fmt.Printf("scrapes: %s\n", durations(r.scrapes))
	fmt.Printf("/status: %s\n", durations(r.statuses))
	fmt.Printf("peak RSS (VmHWM) %.1f MiB, target <= %.0f MiB: %s\n", r.hwm, o.maxRSS, verdict(r.hwm <= o.maxRSS))
	fmt.Printf("median scrape %v, target <= %v: %s\n", median.Round(time.Millisecond), o.maxScrape, verdict(median <= o.maxScrape))
	missed := r.hwm > o.maxRSS || median > o.maxScrape
	if o.reloads > 0 {
		held := "not held to a target (-reload-target)"
		if o.reloadTarget {
			held = fmt.Sprintf("target <= %.0f MiB: %s", o.maxRSS, verdict(r.reloadHWM <= o.maxRSS))
			missed = missed || r.reloadHWM > o.maxRSS
		}
		fmt.Printf("peak RSS with the reloads %.1f MiB, %s\n", r.reloadHWM, held)
	}
	return !missed
}

// config is a config of n points and n routes whose paths are padded so
// that the file is as long as it can be under size bytes (when the points
// alone fit).
func config(upstream string, n, size int) (body []byte, padding string) {
	build := func(pad int) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "upstream: %s\nwindow: 10s\nbuckets: 10\n", upstream)
		b.WriteString("points:\n")
		for i := range n {
			fmt.Fprintf(&b, "  p%d: {visitThreshold: 100000, concurrentThreshold: 1000}\n", i)
		}
		b.WriteString("routes:\n")
		padding := strings.Repeat("x", pad)
		for i := range n - 1 {
			fmt.Fprintf(&b, "- {point: p%d, match: {path: /%sr%d}}\n", i, padding, i)
		}
		fmt.Fprintf(&b, "- {point: p%d, match: {}}\n", n-1)
		return b.Bytes()
	}
	if len(build(0)) >= size {
		fail("%d points and routes do not fit in %d bytes", n, size)
	}
	best := 0
	for pad := 1; len(build(pad)) < size; pad++ {
		best = pad
	}
	return build(best), strings.Repeat("x", best)
}

// serving reads the proxy's log until its "serving" line and returns the
// addresses in it, then drains the rest in the background. It returns ""
// when the log ends first.
func serving(r io.Reader) (proxy, admin string) {
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		if !bytes.HasPrefix(lines.Bytes(), []byte("{")) || bytes.Contains(lines.Bytes(), []byte(`"level":"error"`)) {
			fmt.Fprintf(os.Stderr, "%s\n", lines.Bytes()) // the proxy's complaint
		}
		var e struct {
			Msg   string `json:"msg"`
			Proxy string `json:"proxy_addr"`
			Admin string `json:"admin_addr"`
		}
		if json.Unmarshal(lines.Bytes(), &e) == nil && e.Msg == "serving" {
			go io.Copy(io.Discard, r)
			return e.Proxy, e.Admin
		}
	}
	return "", ""
}

// traffic sends n requests from 16 clients, round-robin over the exact
// routes of the first busy points (their paths padded with padding); one
// in ten carries a traceparent.
func traffic(client *http.Client, base, padding string, n, busy int) {
	var wg sync.WaitGroup
	const clients = 16
	for c := range clients {
		wg.Go(func() {
			for i := c; i < n; i += clients {
				p := i % busy
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/%sr%d", base, padding, p), nil)
				if i%10 == 0 {
					req.Header.Set("Traceparent", fmt.Sprintf("00-%032x-%016x-01", i+1, i+1))
				}
				resp, err := client.Do(req)
				if err != nil {
					fail("request: %v", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// get GETs url with accept and gzip as Prometheus asks, reads the whole
// body unzipped and returns it with the time to its end.
func get(client *http.Client, url, accept string) ([]byte, time.Duration) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", "gzip")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		fail("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if body, err = gzip.NewReader(resp.Body); err != nil {
			fail("GET %s: %v", url, err)
		}
	}
	b, err := io.ReadAll(body)
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		fail("GET %s: %s, %v", url, resp.Status, err)
	}
	return b, took
}

// reload writes body to the config at path, as a new file renamed over
// it (as an editor or the kubelet replaces it), and waits up to 30 s for
// the proxy's successful reloads to reach n; it returns how long that took.
func reload(client *http.Client, admin, path string, body []byte, n int) time.Duration {
	start := time.Now()
	if err := os.WriteFile(path+".new", body, 0o600); err != nil {
		fail("%v", err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		fail("%v", err)
	}
	want := fmt.Sprintf(`sds_config_reloads_total{result="success"} %d`, n)
	for time.Since(start) < 30*time.Second {
		b, _ := get(client, "http://"+admin+"/metrics?name[]=sds_config_reloads_total", accepts["text"])
		if bytes.Contains(b, []byte(want)) {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fail("reload %d did not apply within 30 s", n)
	return 0
}

// status reads field (such as VmHWM) of process pid from /proc, in bytes.
func status(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		fail("%v", err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				fail("%s: %v", field, err)
			}
			return kb << 10
		}
	}
	fail("no %s in /proc/%d/status", field, pid)
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// memory is process pid's resident size now (VmRSS, and its anonymous
// and file-backed parts: the binary's pages are file-backed, and a
// container's limit reclaims them before it kills) and its peak (VmHWM).
func memory(pid int) string {
	return fmt.Sprintf("VmRSS %.1f MiB (RssAnon %.1f, RssFile %.1f), VmHWM %.1f MiB",
		mib(status(pid, "VmRSS")), mib(status(pid, "RssAnon")), mib(status(pid, "RssFile")), mib(status(pid, "VmHWM")))
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func durations(ds []time.Duration) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Round(time.Millisecond).String())
	}
	return strings.Join(out, " ")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/scrape: "+format+"\n", args...)
	os.Exit(1)
}
