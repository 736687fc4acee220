package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Bounds of the processes' lifecycle.
const (
	stopGrace    = 5 * time.Second       // from SIGTERM to a kill
	startTimeout = 15 * time.Second      // until "listening" or /readyz
	pollEvery    = 50 * time.Millisecond // readiness polls
	askTimeout   = 2 * time.Second       // one admin request
	maxAnswer    = 4 << 20               // bytes read of an admin answer
	modulePath   = "github.com/sds-proxy/sds-proxy"
	logTailBytes = 600 // of a process's log, in an error
)

// binaries builds sds-upstream and sds-proxy into e.dir, or finds them in
// -bin.
func (e *env) binaries(ctx context.Context) error {
	if e.o.binDir != "" {
		e.upstreamBin = filepath.Join(e.o.binDir, "sds-upstream")
		e.proxyBin = filepath.Join(e.o.binDir, "sds-proxy")
		return nil
	}
	fmt.Fprintln(e.log, "building sds-upstream and sds-proxy (no -race) ...")
	var err error
	if e.upstreamBin, err = build(ctx, e.dir, "sds-upstream"); err != nil {
		return err
	}
	e.proxyBin, err = build(ctx, e.dir, "sds-proxy")
	return err
}

// build runs go build for the command name of this module, as the
// Dockerfile builds the image's binary: static, no symbol table.
func build(ctx context.Context, dir, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, modulePath+"/cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", name, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// proc is a child process, its stdout and stderr in a log file.
type proc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once Wait returned
}

// startProc starts path with args, its output into logPath (and stdout, if
// not nil, also into it).
func startProc(path string, args []string, logPath string, stdout io.Writer) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if stdout != nil {
		cmd.Stdout = io.MultiWriter(f, stdout)
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM, waits up to stopGrace, then kills. It returns once
// the process has exited; it is safe to call more than once.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// logTail returns the end of the process's log, on one line.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// firstLine passes on the first line written to it.
type firstLine struct {
	buf  []byte
	line chan string // buffered, 1
	sent bool
}

func (f *firstLine) Write(b []byte) (int, error) {
	if !f.sent {
		f.buf = append(f.buf, b...)
		if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
			f.line <- string(f.buf[:i])
			f.sent, f.buf = true, nil
		}
	}
	return len(b), nil
}

// startUpstream starts sds-upstream on 127.0.0.1 port 0 and returns the
// process and its address, checked to be on loopback.
func startUpstream(ctx context.Context, bin, dir string) (*proc, string, error) {
	fl := &firstLine{line: make(chan string, 1)}
	p, err := startProc(bin, []string{"-listen", "127.0.0.1:0"}, filepath.Join(dir, "upstream.log"), fl)
	if err != nil {
		return nil, "", err
	}
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case l := <-fl.line:
		addr, ok := strings.CutPrefix(l, "listening ")
		host, _, err := net.SplitHostPort(addr)
		if !ok || err != nil || !net.ParseIP(host).IsLoopback() {
			p.stop()
			return nil, "", fmt.Errorf("sds-upstream said %q, want \"listening 127.0.0.1:PORT\"", l)
		}
		return p, addr, nil
	case <-p.exited:
		return nil, "", fmt.Errorf("sds-upstream exited: %s", p.logTail())
	case <-t.C:
		err = fmt.Errorf("sds-upstream did not print its address within %v", startTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.stop()
	return nil, "", err
}

// proxyProc is a running sds-proxy.
type proxyProc struct {
	*proc
	listen string // host:port of the proxy port
	admin  string // host:port of the admin port
}

// startProxy writes an sds.yaml named name and starts sds-proxy on it,
// and returns once its /readyz answers 200. Its error carries the end of
// the proxy's log (a config the proxy rejects, say).
func (e *env) startProxy(ctx context.Context, name string, stale bool) (*proxyProc, error) {
	listen, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(e.dir, name)
	if err := os.WriteFile(base+".yaml", proxyConfig(listen, admin, e.upstream, e.o.maxBytes, stale), 0o600); err != nil {
		return nil, err
	}
	p, err := startProc(e.proxyBin, []string{"run", "-config", base + ".yaml"}, base+".log", nil)
	if err != nil {
		return nil, err
	}
	px := &proxyProc{proc: p, listen: listen, admin: admin}
	if err := px.waitReady(ctx, e.client); err != nil {
		px.stop()
		return nil, err
	}
	return px, nil
}

// proxyConfig is the sds.yaml of a proxy: one point, api, on every path,
// under a visitThreshold that no sitting reaches, with stale: or without.
// drainTimeout is 0 so that a stop is quick (nothing is in flight by
// then).
func proxyConfig(listen, admin, upstream, maxBytes string, stale bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "listen: %s\nadmin: %s\nupstream: http://%s\ndrainTimeout: 0s\n", listen, admin, upstream)
	fmt.Fprintf(&b, "staleCache: {maxBytes: %s}\n", maxBytes)
	b.WriteString("routes:\n  - point: api\n    match: {}\npoints:\n  api:\n    visitThreshold: 1000000000\n")
	if stale {
		b.WriteString("    stale: {maxAge: 10m}\n")
	}
	return b.Bytes()
}

// waitReady polls /readyz until it answers 200, the proxy exits, or
// startTimeout passes.
func (px *proxyProc) waitReady(ctx context.Context, c *http.Client) error {
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-px.exited:
			return fmt.Errorf("sds-proxy exited: %s", px.logTail())
		default:
		}
		if _, err := get(ctx, c, "http://"+px.admin+"/readyz"); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sds-proxy not ready within %v: %s", startTimeout, px.logTail())
		}
		sleep(ctx, pollEvery)
	}
}

// freePort returns a free 127.0.0.1:PORT (free a moment ago: another
// process may take it before the proxy does, and the proxy then fails to
// start, which the error says).
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// metric returns the value of the unlabelled sample name on the proxy's
// /metrics.
func (px *proxyProc) metric(ctx context.Context, c *http.Client, name string) (float64, error) {
	b, err := get(ctx, c, "http://"+px.admin+"/metrics")
	if err != nil {
		return 0, err
	}
	return sampleValue(b, name)
}

// sampleValue finds the unlabelled sample name in a Prometheus text exposition.
func sampleValue(exposition []byte, name string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no sample %s", name)
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's utime and stime: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuTime returns the CPU time process pid has used so far, user and
// system, from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

// parseStat reads utime + stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name, field 2, is in parentheses and may hold spaces
// and parentheses: fields are counted after the last ')'.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields after the name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/PID/stat: %w", err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// memory returns VmHWM (the peak resident set) and VmRSS of process pid,
// in bytes, from /proc/PID/status.
func memory(pid int) (hwm, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(b)
}

// parseStatus reads VmHWM and VmRSS, in kB, of a /proc/PID/status.
func parseStatus(b []byte) (hwm, rss int64, err error) {
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || name != "VmHWM" && name != "VmRSS" {
			continue
		}
		kb, perr := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("/proc/PID/status: %s: %w", name, perr)
		}
		if name == "VmHWM" {
			hwm = kb << 10
		} else {
			rss = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("/proc/PID/status: no VmHWM and VmRSS")
	}
	return hwm, rss, nil
}

// get fetches url within askTimeout and returns the body of a 200.
func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
