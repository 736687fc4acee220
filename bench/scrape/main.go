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

func main() {
	bin := flag.String("bin", "sds-proxy", "the sds-proxy binary")
	points := flag.Int("points", 10_000, "points, and routes (points-1 exact and a catch-all)")
	size := flag.Int("size", 1<<20, "the config file stays under this many bytes")
	requests := flag.Int("requests", 20_000, "requests sent before the scrapes")
	busy := flag.Int("busy", 2_000, "the requests go to the first busy points")
	scrapes := flag.Int("scrapes", 10, "GET /metrics this many times")
	statuses := flag.Int("statuses", 3, "GET /status this many times")
	reloads := flag.Int("reloads", 2, "rewrite the config this many times, one threshold changed, and wait for each to apply")
	reloadTarget := flag.Bool("reload-target", false, "hold the peak after the reloads to -max-rss too")
	format := flag.String("format", "openmetrics", "the Accept header: openmetrics (Prometheus' default), protobuf (native histograms on) or text")
	maxRSS := flag.Float64("max-rss", 128, "target: peak RSS in MiB")
	maxScrape := flag.Duration("max-scrape", 250*time.Millisecond, "target: median scrape time")
	env := flag.String("env", "", "extra environment for the proxy, NAME=VALUE[,NAME=VALUE]")
	flag.Parse()
	accept, ok := accepts[*format]
	if !ok {
		fail("-format %q: want openmetrics, protobuf or text", *format)
	}
	if *busy > *points || *points < 2 {
		fail("-busy %d, -points %d: want 2 <= points and busy <= points", *busy, *points)
	}

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
	path := filepath.Join(dir, "sds.yaml")
	body, padding := config("http://"+upstream.Addr().String(), *points, *size)
	if err := os.WriteFile(path, body, 0o600); err != nil {
		fail("%v", err)
	}

	cmd := exec.Command(*bin, "run", "-config", path, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	cmd.Env = os.Environ()
	if *env != "" {
		cmd.Env = append(cmd.Env, strings.Split(*env, ",")...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		fail("%v", err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fail("start %s: %v", *bin, err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	proxyAddr, adminAddr := serving(stderr)
	if proxyAddr == "" {
		cmd.Process.Kill()
		fail("the proxy exited or never logged serving")
	}
	ready := time.Since(start)
	pid := cmd.Process.Pid
	fmt.Printf("config: %d points, %d routes (%d exact and a catch-all), %d bytes\n", *points, *points, *points-1, len(body))
	fmt.Printf("serving after %v: %s\n", ready.Round(time.Millisecond), memory(pid))

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, DisableCompression: true}}
	traffic(client, "http://"+proxyAddr, padding, *requests, *busy)
	fmt.Printf("after %d requests over %d points: %s\n", *requests, *busy, memory(pid))

	var took []time.Duration
	var size0 int
	for range *scrapes {
		b, d := get(client, "http://"+adminAddr+"/metrics", accept)
		took = append(took, d)
		size0 = len(b)
	}
	fmt.Printf("after %d scrapes (%s, gzip, %d bytes unzipped): %s\n", *scrapes, *format, size0, memory(pid))

	var statusTook []time.Duration
	for range *statuses {
		b, d := get(client, "http://"+adminAddr+"/status", "application/json")
		statusTook = append(statusTook, d)
		var doc struct{ Points []json.RawMessage }
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Points) != *points {
			fail("/status: %d points, %v; want %d", len(doc.Points), err, *points)
		}
		size0 = len(b)
	}
	fmt.Printf("after %d /status (%d bytes): %s\n", *statuses, size0, memory(pid))
	hwm := mib(status(pid, "VmHWM"))

	var reloadTook []time.Duration
	for k := range *reloads {
		edited := bytes.Replace(body, []byte("p0: {visitThreshold: 100000,"), fmt.Appendf(nil, "p0: {visitThreshold: %d,", 100001+k), 1)
		reloadTook = append(reloadTook, reload(client, adminAddr, path, edited, k+1))
	}
	reloadHWM := mib(status(pid, "VmHWM"))
	if *reloads > 0 {
		fmt.Printf("after %d reloads (%s): %s\n", *reloads, durations(reloadTook), memory(pid))
	}

	median := medianOf(took)
	fmt.Printf("scrapes: %s\n", durations(took))
	fmt.Printf("/status: %s\n", durations(statusTook))
	fmt.Printf("peak RSS (VmHWM) %.1f MiB, target <= %.0f MiB: %s\n", hwm, *maxRSS, verdict(hwm <= *maxRSS))
	fmt.Printf("median scrape %v, target <= %v: %s\n", median.Round(time.Millisecond), *maxScrape, verdict(median <= *maxScrape))
	missed := hwm > *maxRSS || median > *maxScrape
	if *reloads > 0 {
		held := "not held to a target (-reload-target)"
		if *reloadTarget {
			held = fmt.Sprintf("target <= %.0f MiB: %s", *maxRSS, verdict(reloadHWM <= *maxRSS))
			missed = missed || reloadHWM > *maxRSS
		}
		fmt.Printf("peak RSS with the reloads %.1f MiB, %s\n", reloadHWM, held)
	}
	if missed {
		cmd.Process.Kill()
		cmd.Wait()
		os.Exit(1)
	}
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
