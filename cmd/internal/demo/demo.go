package demo

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/cmd/internal/upstream"
	"github.com/sds-proxy/sds-proxy/config"
)

// exampleConfig is the repository's example sds.yaml, built into the
// binary so that demo runs from any directory, and from a binary that go
// install built. example.yaml is a copy of ../../../sds.yaml (go:embed
// cannot reach outside the package's directory); TestExampleIsEmbedded
// keeps the two equal, and go generate ./cmd/internal/demo copies it.
//
//go:generate cp ../../../sds.yaml example.yaml
//go:embed example.yaml
var exampleConfig []byte

// Proxy runs the proxy on run's command line (args) until ctx is done,
// and calls onServing with the bound addresses once it serves: the run
// command, which this package does not import.
type Proxy func(ctx context.Context, args []string, onServing func(proxyAddr, adminAddr string)) error

// readHeaderTimeout bounds how long the demo service waits for a request's
// header, as the proxy port does.
const readHeaderTimeout = 10 * time.Second

// demoAddrs are where the demo listens, from its flags or else from the
// config with wildcard hosts made loopback.
type demoAddrs struct {
	proxy, admin, service string
}

// Run is `sds-proxy demo`: it runs the proxy in front of a built-in demo
// service (package cmd/internal/upstream) on the example config, or on
// the file -config names, and prints to stdout a walk-through that makes
// each point of the example trip and recover with curl. The proxy, admin
// and service addresses are the config's (listen, admin, and the
// upstream's host:port) on 127.0.0.1 unless -listen, -admin or
// -upstream-listen moves them; a busy port is reported with the flag that
// moves it. The config is hot-reloaded as in run: the built-in example is
// written to a temporary directory first, so that it can be edited there,
// and removed on exit. fs is the command's flag set, which main made;
// runProxy runs the proxy.
func Run(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer, runProxy Proxy) error {
	path := fs.String("config", "", "a config file to run instead of the built-in example (the repository's sds.yaml)")
	var flags demoAddrs
	fs.StringVar(&flags.proxy, "listen", "", "proxy address (default: the config's listen on 127.0.0.1: 127.0.0.1:8080)")
	fs.StringVar(&flags.admin, "admin", "", "admin address: dashboard, /status, /metrics (default: the config's admin on 127.0.0.1: 127.0.0.1:9901)")
	fs.StringVar(&flags.service, "upstream-listen", "", "the demo service's address (default: the config's upstream host:port: 127.0.0.1:9000)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("demo: unexpected arguments %q", fs.Args())
	}
	configPath := *path
	if configPath == "" {
		dir, err := os.MkdirTemp("", "sds-demo-")
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(dir)
		configPath = filepath.Join(dir, "sds.yaml")
		if err := os.WriteFile(configPath, exampleConfig, 0o644); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	file, err := config.Load(configPath, config.Options{})
	if err != nil {
		return fmt.Errorf("demo: the config does not load:\n%w", err)
	}
	addrs, err := demoAddresses(file, flags)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", addrs.service)
	if err != nil {
		return busyPort(err, addrs, "demo service")
	}
	service := upstream.New(upstream.Options{})
	srv := &http.Server{Handler: service, ReadHeaderTimeout: readHeaderTimeout}
	go srv.Serve(ln)
	defer func() {
		service.Close()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdownCtx)
	}()

	onServing := func(proxyAddr, adminAddr string) {
		walk := newWalkThrough(file, "http://"+ln.Addr().String(), "http://"+cli.Loopback(proxyAddr), "http://"+cli.Loopback(adminAddr), configPath, *path == "")
		io.WriteString(stdout, walk.text())
	}
	runArgs := []string{"-config", configPath, "-listen", addrs.proxy, "-admin", addrs.admin, "-upstream", "http://" + ln.Addr().String()}
	err = runProxy(ctx, runArgs, onServing)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return busyPort(err, addrs, "")
}

// demoAddresses returns where the demo listens: each flag given, else the
// config's address with a wildcard host made 127.0.0.1.
func demoAddresses(file *config.File, flags demoAddrs) (demoAddrs, error) {
	a := demoAddrs{proxy: cli.Loopback(file.Listen), admin: cli.Loopback(file.Admin)}
	u, err := url.Parse(file.Upstream)
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		return a, fmt.Errorf("demo: the config's upstream %q is not an http://HOST:PORT address for the demo service", file.Upstream)
	}
	a.service = cli.Loopback(u.Host)
	if flags.proxy != "" {
		a.proxy = flags.proxy
	}
	if flags.admin != "" {
		a.admin = flags.admin
	}
	if flags.service != "" {
		a.service = flags.service
	}
	return a, nil
}

// busyPort turns a listen error on a port in use into a message that
// names the port, what it is for and the flag that moves it; any other
// error is returned as it is. what names the listener when the caller
// knows it ("" to find it from the error's address).
func busyPort(err error, a demoAddrs, what string) error {
	var op *net.OpError
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &op) {
		return err
	}
	addr := a.service
	if op.Addr != nil {
		addr = op.Addr.String()
	}
	flagName := "-upstream-listen"
	switch {
	case what != "":
	case sameHostPort(addr, a.proxy):
		what, flagName = "proxy port", "-listen"
	case sameHostPort(addr, a.admin):
		what, flagName = "admin port", "-admin"
	default:
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	return fmt.Errorf("demo: the %s %s is in use by another program; move it with %s %s (or %s %s for any free port)",
		what, addr, flagName, net.JoinHostPort(host, "PORT"), flagName, net.JoinHostPort(host, "0"))
}

// sameHostPort reports whether the listen address got (as the kernel
// reports it) is the address want (as given).
func sameHostPort(got, want string) bool {
	gh, gp, err1 := net.SplitHostPort(got)
	wh, wp, err2 := net.SplitHostPort(want)
	if err1 != nil || err2 != nil || gp != wp {
		return false
	}
	gip, wip := net.ParseIP(gh), net.ParseIP(wh)
	return gh == wh || gip != nil && wip != nil && gip.Equal(wip)
}
