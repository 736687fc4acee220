package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sds-proxy/sds-proxy/bench/internal/benchproc"
)

// Bounds of the processes' lifecycle.
const (
	stopGrace    = 5 * time.Second  // from SIGTERM to a kill
	startTimeout = 15 * time.Second // until "listening" or "serving"
	logTailLines = 3
)

// binaries returns the paths of sds-upstream and sds-proxy: in binDir,
// or built into dir.
func binaries(ctx context.Context, binDir, dir string, log io.Writer) (upstream, proxy string, err error) {
	if binDir != "" {
		return filepath.Join(binDir, "sds-upstream"), filepath.Join(binDir, "sds-proxy"), nil
	}
	fmt.Fprintln(log, "building sds-upstream and sds-proxy ...")
	if upstream, err = benchproc.Build(ctx, dir, "sds-upstream"); err != nil {
		return "", "", err
	}
	proxy, err = benchproc.Build(ctx, dir, "sds-proxy")
	return upstream, proxy, err
}

// proc is a child process, its stdout and stderr in a log file, and its
// first line matching a pattern sent on found.
type proc struct {
	cmd     *exec.Cmd
	logPath string
	found   chan string   // buffered 1: the first line match accepted
	exited  chan struct{} // closed once Wait returned
}

// startProc starts path with args, its output into logPath; the first
// line for which match holds is sent on p.found.
func startProc(path string, args []string, logPath string, match func(string) bool) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, logPath: logPath, found: make(chan string, 1), exited: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			fmt.Fprintln(f, sc.Text())
			if !sent && match(sc.Text()) {
				p.found <- sc.Text()
				sent = true
			}
		}
		io.Copy(f, r) // a line too long for the scanner: keep the rest
	}()
	go func() {
		cmd.Wait()
		w.Close()
		<-scanned
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// wait returns the line p.found carries, or an error once the process
// exited or startTimeout passed.
func (p *proc) wait(ctx context.Context, what string) (string, error) {
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case l := <-p.found:
		return l, nil
	case <-p.exited:
		return "", fmt.Errorf("%s exited: %s", what, p.logTail())
	case <-t.C:
		return "", fmt.Errorf("%s did not start within %v: %s", what, startTimeout, p.logTail())
	case <-ctx.Done():
		return "", ctx.Err()
	}
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

// logTail returns the last lines of the process's log, joined by " | ".
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-logTailLines, 0):], " | ")
}

// startUpstream starts sds-upstream on 127.0.0.1 port 0 and returns the
// process and its address, checked to be on loopback.
func startUpstream(ctx context.Context, bin, dir string) (*proc, string, error) {
	p, err := startProc(bin, []string{"-listen", "127.0.0.1:0"}, filepath.Join(dir, "upstream.log"),
		func(l string) bool { return strings.HasPrefix(l, "listening ") })
	if err != nil {
		return nil, "", err
	}
	line, err := p.wait(ctx, "sds-upstream")
	if err != nil {
		p.stop()
		return nil, "", err
	}
	addr := strings.TrimPrefix(line, "listening ")
	if err := loopback(addr); err != nil {
		p.stop()
		return nil, "", fmt.Errorf("sds-upstream: %v", err)
	}
	return p, addr, nil
}

// proxyProc is a running sds-proxy and the addresses it serves on.
type proxyProc struct {
	*proc
	listen, admin string // host:port, on loopback
}

// startProxy writes setup's sds.yaml and starts sds-proxy on it, on
// 127.0.0.1 ports the kernel picks, and returns once it logs "serving".
func startProxy(ctx context.Context, bin, dir, setup, upstream string, o options) (*proxyProc, error) {
	base := filepath.Join(dir, setup)
	if err := os.WriteFile(base+".yaml", proxyConfig(setup, upstream, o), 0o600); err != nil {
		return nil, err
	}
	args := []string{"run", "-config", base + ".yaml", "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}
	p, err := startProc(bin, args, base+".log", func(l string) bool { return strings.Contains(l, `"msg":"serving"`) })
	if err != nil {
		return nil, err
	}
	px := &proxyProc{proc: p}
	line, err := p.wait(ctx, "sds-proxy")
	if err == nil {
		var e struct {
			Proxy string `json:"proxy_addr"`
			Admin string `json:"admin_addr"`
		}
		if err = json.Unmarshal([]byte(line), &e); err == nil {
			px.listen, px.admin = e.Proxy, e.Admin
			if err = loopback(px.listen); err == nil {
				err = loopback(px.admin)
			}
		}
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("sds-proxy: %v", err)
	}
	return px, nil
}

// loopback checks that addr is host:port on a loopback address.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("address %q, want 127.0.0.1:PORT", addr)
	}
	return nil
}
