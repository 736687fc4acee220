package benchproc

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds of a process's start.
const (
	// StartTimeout bounds the wait for a process's line (Await) or for
	// its /readyz (WaitReady).
	StartTimeout = 15 * time.Second
	// PollEvery is how often WaitReady asks.
	PollEvery = 50 * time.Millisecond
	// maxLine is the most of one output line a LineMatch keeps.
	maxLine = 1 << 20
)

// ErrUsage marks a wrong command line: Main exits 2 for it.
var ErrUsage = errors.New("usage")

// Main runs a harness's run with the command line and a context that
// SIGINT and SIGTERM cancel, and exits: 0, 2 for -h or an error wrapping
// ErrUsage, 1 for another error, which it prints after name.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// LineMatch is a writer that passes on, on Line, the first whole line
// written to it for which its match holds. Make it with NewLineMatch or
// NewFirstLine. It is safe for concurrent writes (a process's stdout and
// stderr).
type LineMatch struct {
	match func(string) bool
	line  chan string // buffered, 1

	mu   sync.Mutex
	buf  []byte
	sent bool
	skip bool // the line being written passed maxLine: dropped to its end
}

// NewLineMatch returns a LineMatch of match.
func NewLineMatch(match func(string) bool) *LineMatch {
	return &LineMatch{match: match, line: make(chan string, 1)}
}

// NewFirstLine returns a LineMatch of the first line.
func NewFirstLine() *LineMatch { return NewLineMatch(func(string) bool { return true }) }

// Line gives the matching line, without its line end, once.
func (m *LineMatch) Line() <-chan string { return m.line }

func (m *LineMatch) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sent {
		return len(b), nil
	}
	m.buf = append(m.buf, b...)
	for {
		i := bytes.IndexByte(m.buf, '\n')
		if i < 0 {
			if len(m.buf) > maxLine { // a line too long to be the one
				m.buf, m.skip = m.buf[:0], true
			}
			return len(b), nil
		}
		l := string(m.buf[:i])
		m.buf = m.buf[i+1:]
		if m.skip {
			m.skip = false
			continue
		}
		if m.match(l) {
			m.line <- l
			m.sent, m.buf = true, nil
			return len(b), nil
		}
	}
}

// Await returns the line lines carries, or an error (naming the process
// what, with the end of its log) once the process exits, StartTimeout
// passes or ctx ends.
func (p *Proc) Await(ctx context.Context, lines <-chan string, what string) (string, error) {
	t := time.NewTimer(StartTimeout)
	defer t.Stop()
	select {
	case l := <-lines:
		return l, nil
	case <-p.exited:
		return "", fmt.Errorf("%s exited: %s", what, p.LogTail())
	case <-t.C:
		return "", fmt.Errorf("%s did not start within %v: %s", what, StartTimeout, p.LogTail())
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// WaitReady polls the sds-proxy's /readyz at admin (host:port) until it
// answers 200, the process exits, StartTimeout passes or ctx ends.
func (p *Proc) WaitReady(ctx context.Context, c *http.Client, admin string) error {
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("sds-proxy exited: %s", p.LogTail())
		default:
		}
		if _, err := Get(ctx, c, "http://"+admin+"/readyz"); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sds-proxy not ready within %v: %s", StartTimeout, p.LogTail())
		}
		Sleep(ctx, PollEvery)
	}
}

// Loopback checks that addr is host:port on a loopback address: the only
// addresses the harnesses send load to.
func Loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("address %q, want 127.0.0.1:PORT", addr)
	}
	return nil
}

// StartUpstream starts sds-upstream (bin) on 127.0.0.1 port 0, its log in
// dir, and returns the process and the address it printed, checked to be
// on loopback.
func StartUpstream(ctx context.Context, bin, dir string) (*Proc, string, error) {
	fl := NewFirstLine()
	p, err := Start(bin, []string{"-listen", "127.0.0.1:0"}, filepath.Join(dir, "upstream.log"), fl)
	if err != nil {
		return nil, "", err
	}
	l, err := p.Await(ctx, fl.Line(), "sds-upstream")
	if err == nil {
		addr, ok := strings.CutPrefix(l, "listening ")
		if err = Loopback(addr); err == nil && ok {
			return p, addr, nil
		}
		err = fmt.Errorf("sds-upstream said %q, want \"listening 127.0.0.1:PORT\"", l)
	}
	p.Stop()
	return nil, "", err
}
