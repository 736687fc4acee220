// Package benchproc is what the load harnesses of bench/ share to run the
// real binaries: build them as the Dockerfile does, start and stop them
// with their output in a log file, ask their admin port, and read their
// CPU time and memory from /proc. It imports nothing of this module.
package benchproc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Bounds of a process's lifecycle and of an admin request.
const (
	// StopGrace is the time from SIGTERM to a kill.
	StopGrace = 5 * time.Second
	// AskTimeout bounds one request of Get.
	AskTimeout = 2 * time.Second
	// MaxAnswer is the most bytes Get reads of an answer.
	MaxAnswer = 4 << 20
	// modulePath is the module whose commands Build builds.
	modulePath = "github.com/sds-proxy/sds-proxy"
	// logTailBytes is how much of a process's log LogTail returns.
	logTailBytes = 600
)

// Build runs go build for the command name of this module into dir, as
// the Dockerfile builds the image's binary (static, no symbol table, no
// -race), and returns the binary's path.
func Build(ctx context.Context, dir, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, modulePath+"/cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", name, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// Proc is a child process, its stdout and stderr in a log file.
type Proc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once Wait returned
}

// Start starts path with args, its output (stdout and stderr) into
// logPath, and into watch too when it is not nil (a LineMatch). On Linux
// the child gets SIGTERM if the harness dies without stopping it.
func Start(path string, args []string, logPath string, watch io.Writer) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	var out io.Writer = f
	if watch != nil {
		out = io.MultiWriter(f, watch)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &Proc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Stop sends SIGTERM, waits up to StopGrace, then kills. It returns once
// the process has exited; it is safe to call more than once.
func (p *Proc) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(StopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// LogTail returns the end of the process's log, on one line.
func (p *Proc) LogTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// FreePort returns a free 127.0.0.1:PORT (free a moment ago: another
// process may take it first, and the process given it then fails to
// start, which its error says).
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Get fetches url within AskTimeout and returns the body of a 200 (at
// most MaxAnswer bytes); another status is an error.
func Get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, AskTimeout)
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
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
