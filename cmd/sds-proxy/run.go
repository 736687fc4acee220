package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sds-proxy/sds-proxy/cmd/internal/certs"
	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/cmd/internal/memlimit"
	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/config/watch"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// Proxy-port hardening. There is deliberately no server-wide read or write
// timeout on the proxy port: it would cut streams (SSE, WebSocket, gRPC).
const (
	readHeaderTimeout = 10 * time.Second
	maxHeaderBytes    = 64 << 10
	idleTimeout       = 2 * time.Minute
)

// The admin port's connection limit (docs/admin.md; not configurable). It
// serves probes, scrapers, dashboards and operators, a few connections at
// a time, and a flood of connections (silent ones held open, say) must
// cost it goroutines and memory for no more than adminMaxConnections. At
// the limit a newcomer gets in by closing a connection that has sent
// nothing for adminFirstRequestGrace, or has been idle for a second
// (connlimit, as maxConnections does on the proxy port); the rest wait in
// the kernel's accept queue. The grace is short because the admin port's
// clients send their request as soon as they connect, and a probe behind
// a flood waits about flood / adminMaxConnections graces for its turn. A
// connection that sends no complete header within readHeaderTimeout is
// closed whatever the count.
const (
	adminMaxConnections    = 256
	adminFirstRequestGrace = 100 * time.Millisecond
)

// serving is called once the proxy listens, with the bound addresses.
type serving func(proxyAddr, adminAddr string)

// runFlags are run's command line.
type runFlags struct {
	path        string // the config file
	configGiven bool   // -config was on the command line
	opts        config.Options
}

// runProxy runs the proxy until ctx is done or SIGTERM/SIGINT, then drains
// (docs/operations.md, Signals).
func runProxy(ctx context.Context, args []string, stderr io.Writer, onServing serving) error {
	sigs := notifySignals() // first: SIGHUP's default action kills
	defer sigs.close()
	flags, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	log := newLogger(stderr)
	defer log.Sync()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sigs.handle(log, stop)
	log.Info("starting", zap.String("version", versionString()))
	if err := memlimit.Apply(log); err != nil {
		return err
	}

	file, watched, err := loadConfig(flags.path, flags.configGiven, flags.opts)
	if err != nil {
		return err
	}
	logWarnings(log, file)
	in, err := newInstance(file, log)
	if err != nil {
		return err
	}
	if err := in.listen(ctx, file); err != nil {
		return err
	}
	defer in.closeListeners()
	in.serve(file)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	in.wg.Go(func() { in.handler.Run(watchCtx) }) // settles the points once a second
	if in.cluster != nil {
		in.wg.Go(func() { in.cluster.Run(watchCtx) }) // leases the shared buckets' tokens
		defer in.cluster.Close()
	}
	if watched {
		w, err := in.watch(watchCtx, file, flags.opts)
		if err != nil {
			return err
		}
		sigs.serving(w.Reload)
	} else {
		sigs.serving(nil) // no config file to reload
	}

	in.ready.Store(ctx.Err() == nil) // a SIGTERM during start-up drains at once
	in.announce(file, onServing)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-in.serveErr:
	}
	sigs.draining()
	in.drain()
	stopWatch()
	in.wg.Wait()
	log.Info("stopped")
	return runErr
}

// parseRunFlags parses run's command line.
func parseRunFlags(args []string, stderr io.Writer) (runFlags, error) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.path, "config", "sds.yaml", "config file (hot-reloaded)")
	fs.StringVar(&f.opts.Listen, "listen", "", "proxy address, overrides the file's listen")
	fs.StringVar(&f.opts.Upstream, "upstream", "", "upstream URL, overrides the file's upstream")
	fs.StringVar(&f.opts.Admin, "admin", "", "admin address, overrides the file's admin")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, cli.Usagef("run: unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(fl *flag.Flag) { f.configGiven = f.configGiven || fl.Name == "config" })
	return f, nil
}

// loadConfig reads the config file. Without one, a given -upstream runs a
// plain proxy with no points and nothing to watch; otherwise a missing
// file is an error that says what to do instead (errNoConfig), and still
// matches fs.ErrNotExist.
func loadConfig(path string, given bool, opts config.Options) (*config.File, bool, error) {
	file, err := config.Load(path, opts)
	if err == nil {
		return file, true, nil
	}
	if !given && opts.Upstream != "" && errors.Is(err, os.ErrNotExist) {
		file, err = config.Default(opts)
		return file, false, err
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, errNoConfig(path, given, err)
	}
	return nil, false, err
}

// errNoConfig is the error of a run whose config file at path does not
// exist (err, which it wraps): what to run instead, one command a line.
// given tells whether -config named the file, or run looked for sds.yaml
// by default.
func errNoConfig(path string, given bool, err error) error {
	return missingConfig(path, given, err,
		"  sds-proxy -config FILE    run the proxy on the config file FILE\n"+
			"  sds-proxy -upstream URL   run a plain proxy in front of URL, with no points\n"+
			"  sds-proxy demo            run the built-in example in front of a demo service")
}

// missingConfig is the error of a command whose config file at path does
// not exist (err, which it wraps), followed by next: the commands to run
// instead, one a line. given tells whether -config named the file, or the
// command looked for sds.yaml by default.
func missingConfig(path string, given bool, err error, next string) error {
	what := "no " + path + " in this directory"
	if given {
		what = "no config file " + path
	}
	return fmt.Errorf("%s (%w). Next, one of:\n%s", what, err, next)
}

// instance is one running proxy: what runProxy builds, serves and drains.
type instance struct {
	log     *zap.Logger
	reg     *prometheus.Registry
	metrics *metrics.Set
	reloads *reloadMetrics
	handler *proxy.Handler
	// hasher numbers and labels the keys of per-key rules, for the
	// request path and /status alike.
	hasher *clientkey.Hasher
	// stale keeps the points' last good answers (stale:), across reloads.
	stale  *stale.Cache
	conns  *connlimit.Limiter // maxConnections, under TLS
	status *reloadStatus
	events *events.Log // trips, delays, probes, recoveries and reloads, for /status
	ready  atomic.Bool // /readyz, with certReady
	// certReady is nil, or with ACME reports whether the certificates
	// are there (/readyz waits for them).
	certReady func() bool
	// token is the admin port's bearer token of the config in force
	// (adminTokenFile); nil or empty: the runtime switches are off.
	token atomic.Pointer[[]byte]

	// cluster is the client of the shared token buckets' Redis; nil
	// without cluster:.
	cluster *cluster.Client

	// adminConns bounds the admin port's connections (adminMaxConnections).
	adminConns *connlimit.Limiter

	proxyLn, adminLn   net.Listener
	proxySrv, adminSrv *http.Server
	wg                 sync.WaitGroup // the servers, the watcher
	serveErr           chan error     // a server that stopped on its own
}

// newInstance builds the request path of file: its metrics, handler,
// connection limit and reload status.
func newInstance(file *config.File, log *zap.Logger) (*instance, error) {
	in := &instance{log: log, reg: prometheus.NewRegistry(), serveErr: make(chan error, 2),
		events: events.New(admin.MaxEvents, admin.MaxPointEvents)}
	in.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	in.metrics = metrics.NewSet(in.reg, func() []metrics.Source { return in.handler.Sources() })
	in.reloads = newReloadMetrics(in.reg)
	registerBuildInfo(in.reg, versionString())
	var err error
	if in.cluster, err = newClusterClient(file.Cluster, log, in.reg); err != nil {
		return nil, err
	}
	shared, buckets := sharedBuckets(in.cluster, file)
	cfg, err := translateShared(file, nil, shared)
	if err != nil {
		return nil, err
	}
	in.hasher = clientkey.NewHasher()
	in.stale = stale.New(file.StaleCache.MaxBytes)
	registerStaleCache(in.reg, in.stale)
	in.handler = proxy.New(cfg, proxy.Options{Logger: log, AccessLog: log.Named("access"), Metrics: in.metrics, Events: in.events, Hasher: in.hasher, Stale: in.stale})
	if in.cluster != nil {
		in.cluster.Use(buckets)
	}
	in.token.Store(&file.AdminToken)
	in.conns = connlimit.New(connlimit.Options{Max: file.MaxConnections})
	in.adminConns = connlimit.New(connlimit.Options{Max: adminMaxConnections, FirstRequestGrace: adminFirstRequestGrace})
	registerConnections(in.reg, in.conns.Stats)
	now := time.Now()
	in.status = &reloadStatus{drain: file.DrainTimeout, raw: file.Raw,
		st: admin.ReloadStatus{Path: file.Path, Hash: file.Hash, LoadedAt: now, LastAttempt: now, LastOK: true}}
	return in, nil
}

// listen opens the proxy port (under the connection limit, then TLS when
// file asks for it) and the admin port (under its own).
func (in *instance) listen(ctx context.Context, file *config.File) error {
	ln, err := net.Listen("tcp", file.Listen)
	if err != nil {
		return fmt.Errorf("proxy listen: %w", err)
	}
	in.proxyLn = in.conns.Listener(ln)
	if file.TLS.Enabled() {
		tlsConfig, certReady, err := certs.TLSConfig(ctx, file.TLS, ln.Addr(), in.log)
		if err != nil {
			in.proxyLn.Close()
			return err
		}
		in.proxyLn = tls.NewListener(in.proxyLn, tlsConfig)
		in.certReady = certReady
	}
	adminLn, err := net.Listen("tcp", file.Admin)
	if err != nil {
		in.proxyLn.Close()
		return fmt.Errorf("admin listen: %w", err)
	}
	in.adminLn = in.adminConns.Listener(adminLn)
	return nil
}

// closeListeners closes both ports' listeners (already closed by a drain).
func (in *instance) closeListeners() {
	in.proxyLn.Close()
	in.adminLn.Close()
}

// serve starts the proxy and admin servers on their listeners.
func (in *instance) serve(file *config.File) {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(file.TLS.Enabled())
	protocols.SetUnencryptedHTTP2(file.H2C)
	in.proxySrv = &http.Server{
		Handler:           in.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       idleTimeout,
		ConnState:         in.conns.ConnState,
		Protocols:         &protocols,
		ErrorLog:          zap.NewStdLog(in.log.Named("http")),
	}
	in.adminSrv = &http.Server{
		Handler: admin.New(admin.Options{Points: in.handler, Gatherer: in.reg, Metrics: in.metrics, Ready: in.isReady, Status: in.status.get,
			Events: in.events, Traffic: in.metrics.Traffic, Version: versionString(), Config: in.status.config,
			Switches: in.handler, Token: func() []byte { return *in.token.Load() }, Cluster: in.clusterStatus(), Sources: in.handler.Sources, KeyLabel: in.hasher.Label, Stale: in.stale}),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         in.adminConns.ConnState,
		ErrorLog:          zap.NewStdLog(in.log.Named("admin")),
	}
	for _, s := range []struct {
		srv *http.Server
		ln  net.Listener
	}{{in.proxySrv, in.proxyLn}, {in.adminSrv, in.adminLn}} {
		in.wg.Go(func() {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				in.serveErr <- err
			}
		})
	}
}

// watch hot-reloads the config file until ctx is done: each file the
// request path accepts is applied (apply), and every attempt reported.
// The parse of a changed file and the request path's build of it hold a
// second config beside the one in force, so both run with the GC
// collecting more often (lowGCDuring).
func (in *instance) watch(ctx context.Context, file *config.File, opts config.Options) (*watch.Watcher, error) {
	w, err := watch.New(file.Path, opts, file)
	if err != nil {
		return nil, err
	}
	w.Parse = func(path string, data []byte) (f *config.File, err error) {
		lowGCDuring(func() { f, err = config.Parse(path, data, opts) })
		return f, err
	}
	w.Accept = func(f *config.File) (err error) {
		lowGCDuring(func() { err = apply(in.handler, in.conns, in.stale, in.cluster, f) })
		if err != nil {
			return err
		}
		in.token.Store(&f.AdminToken)
		return nil
	}
	// Run returns once ctx is done; inotify failing makes it poll, which
	// reportReloads reports.
	in.wg.Go(func() { w.Run(ctx) })
	in.wg.Go(func() { reportReloads(ctx, w, in.reloads, in.status, in.events, in.log) })
	return w, nil
}

// announce logs that the proxy serves, and tells onServing (nil: no one)
// the bound addresses.
func (in *instance) announce(file *config.File, onServing serving) {
	proxyAddr, adminAddr := in.proxyLn.Addr().String(), in.adminLn.Addr().String()
	in.log.Info("serving", zap.String("proxy_addr", proxyAddr), zap.String("admin_addr", adminAddr),
		zap.String("upstream", file.Upstream), zap.String("config", file.Path), zap.Int("points", len(file.Points)),
		zap.String("version", versionString()))
	if onServing != nil {
		onServing(proxyAddr, adminAddr)
	}
}

// drain stops the proxy in the README's order (Signals): stop accepting,
// fail /readyz, let the requests in flight finish for up to the drain
// timeout, then close what remains, and the admin port last.
func (in *instance) drain() {
	// Shutdown closes the listener first and then runs its OnShutdown
	// hooks.
	in.proxySrv.RegisterOnShutdown(func() { in.ready.Store(false) })
	timeout := in.status.drainTimeout()
	in.log.Info("draining", zap.Duration("drain_timeout", timeout))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := in.proxySrv.Shutdown(ctx); err != nil {
		in.log.Warn("drain timed out; closing the remaining connections", zap.Error(err))
		in.proxySrv.Close()
	}
	in.adminSrv.Close()
}

// newLogger returns a JSON logger on w. It is never sampled: it logs state
// changes, not requests, and the access log must keep every line.
func newLogger(w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeDuration = zapcore.StringDurationEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zap.InfoLevel)
	return zap.New(core)
}
