package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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
	pollEvery    = 50 * time.Millisecond // readiness and idleness polls
	idleTimeout  = 10 * time.Second      // for the upstream to empty between rungs
	askTimeout   = 2 * time.Second       // one admin or control request
	maxBody      = 4 << 20               // bytes read of an admin or control answer
	modulePath   = "github.com/sds-proxy/sds-proxy"
	queuePath    = "/api/queue"
	logTailBytes = 600 // of a process's log, in an error
	logTailLines = 3
)

// binaries builds sds-upstream and sds-proxy into e.dir, or finds them in
// -bin. A proxy that does not build leaves e.proxyBuildErr for the proxied
// setups to report; an upstream that does not build is an error.
func (e *env) binaries(ctx context.Context) error {
	if e.o.binDir != "" {
		e.upstreamBin = filepath.Join(e.o.binDir, "sds-upstream")
		e.proxyBin = filepath.Join(e.o.binDir, "sds-proxy")
		return nil
	}
	var err error
	fmt.Fprintln(e.log, "building sds-upstream and sds-proxy ...")
	if e.upstreamBin, err = build(ctx, e.dir, "sds-upstream"); err != nil {
		return err
	}
	e.proxyBin, e.proxyBuildErr = build(ctx, e.dir, "sds-proxy")
	return nil
}

// build runs go build for the command name of this module.
func build(ctx context.Context, dir, name string) (string, error) {
	out := filepath.Join(dir, name)
	b, err := exec.CommandContext(ctx, "go", "build", "-o", out, modulePath+"/cmd/"+name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", name, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// proc is a child process, its stdout and stderr in a log file. stop ends
// it with SIGTERM, and a kill stopGrace later.
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

// logTail returns the last lines of the process's log but its info
// lines (at most logTailLines, logTailBytes), joined by " | ".
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(l, `{"level":"info"`) {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines[max(len(lines)-logTailLines, 0):], " | ")
	if len(s) > logTailBytes {
		s = "..." + s[len(s)-logTailBytes:]
	}
	return s
}

// firstLine passes writes on and sends the first line of them, once, on
// line (buffered 1). exec's copying goroutine is its only caller.
type firstLine struct {
	buf  []byte
	done bool
	line chan string
}

func (l *firstLine) Write(p []byte) (int, error) {
	if !l.done {
		l.buf = append(l.buf, p...)
		if i := bytes.IndexByte(l.buf, '\n'); i >= 0 || len(l.buf) > 4096 {
			l.line <- string(l.buf[:max(i, 0)])
			l.done, l.buf = true, nil
		}
	}
	return len(p), nil
}

// startUpstream starts sds-upstream on 127.0.0.1 port 0 and makes its
// /api/queue o.workers workers of o.service each. It returns the process
// and its address.
func startUpstream(ctx context.Context, bin, dir string, o options) (*proc, string, error) {
	fl := &firstLine{line: make(chan string, 1)}
	p, err := startProc(bin, []string{"-listen", "127.0.0.1:0"}, filepath.Join(dir, "upstream.log"), fl)
	if err != nil {
		return nil, "", err
	}
	addr, err := upstreamAddr(ctx, p, fl.line)
	if err == nil {
		err = setCapacity(ctx, addr, o)
	}
	if err != nil {
		p.stop()
		return nil, "", err
	}
	return p, addr, nil
}

// upstreamAddr waits for sds-upstream's "listening ADDR" and checks that
// ADDR is on loopback.
func upstreamAddr(ctx context.Context, p *proc, line <-chan string) (string, error) {
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(l, "listening ")
		host, _, err := net.SplitHostPort(addr)
		if !ok || err != nil || !net.ParseIP(host).IsLoopback() {
			return "", fmt.Errorf("sds-upstream said %q, want \"listening 127.0.0.1:PORT\"", l)
		}
		return addr, nil
	case <-p.exited:
		return "", fmt.Errorf("sds-upstream exited: %s", p.logTail())
	case <-t.C:
		return "", fmt.Errorf("sds-upstream did not print its address within %v", startTimeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// upstreamStats is the part of sds-upstream's /_control answer read here.
type upstreamStats struct {
	InFlight int64 `json:"inFlight"`
	Queue    struct {
		Capacity int    `json:"capacity"`
		Service  string `json:"service"`
		Busy     int    `json:"busy"`
		Waiting  int    `json:"waiting"`
	} `json:"queue"`
}

// control asks sds-upstream's /_control with query q.
func control(ctx context.Context, c *http.Client, addr string, q url.Values) (upstreamStats, error) {
	var st upstreamStats
	b, err := get(ctx, c, "http://"+addr+"/_control?"+q.Encode())
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st, err
}

// setCapacity sets /api/queue's workers and service time, and checks them.
func setCapacity(ctx context.Context, addr string, o options) error {
	q := url.Values{"queueCapacity": {strconv.Itoa(o.workers)}, "queueService": {o.service.String()}}
	st, err := control(ctx, http.DefaultClient, addr, q)
	if err != nil {
		return fmt.Errorf("sds-upstream /_control: %w", err)
	}
	if st.Queue.Capacity != o.workers || st.Queue.Service != o.service.String() {
		return fmt.Errorf("sds-upstream /_control: capacity %d × %s, want %d × %v", st.Queue.Capacity, st.Queue.Service, o.workers, o.service)
	}
	return nil
}

// waitIdle waits up to idleTimeout for the upstream to have nothing in
// flight, so that a rung does not start with the last one's leftovers.
func waitIdle(ctx context.Context, c *http.Client, addr string) error {
	deadline := time.Now().Add(idleTimeout)
	for {
		st, err := control(ctx, c, addr, nil)
		if err == nil && st.InFlight == 0 && st.Queue.Busy == 0 && st.Queue.Waiting == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("upstream not idle before the rung: %+v (%v)", st, err)
		}
		sleep(ctx, pollEvery)
	}
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
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
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
