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

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// Proxy-port hardening. There is deliberately no server-wide read or write
// timeout on the proxy port: it would cut streams (SSE, WebSocket, gRPC).
const (
	readHeaderTimeout = 10 * time.Second
	maxHeaderBytes    = 64 << 10
	idleTimeout       = 2 * time.Minute
)

// serving is called once the proxy listens, with the bound addresses.
type serving func(proxyAddr, adminAddr string)

// runProxy runs the proxy until ctx is done or SIGTERM/SIGINT, then drains.
func runProxy(ctx context.Context, args []string, stderr io.Writer, onServing serving) error {
	sigs := notifySignals() // first: SIGHUP's default action kills
	defer sigs.close()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "sds.yaml", "config file (hot-reloaded)")
	var opts config.Options
	fs.StringVar(&opts.Listen, "listen", "", "proxy address, overrides the file's listen")
	fs.StringVar(&opts.Upstream, "upstream", "", "upstream URL, overrides the file's upstream")
	fs.StringVar(&opts.Admin, "admin", "", "admin address, overrides the file's admin")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected arguments %q", fs.Args())
	}
	configGiven := false
	fs.Visit(func(f *flag.Flag) { configGiven = configGiven || f.Name == "config" })

	log := newLogger(stderr)
	defer log.Sync()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sigs.handle(log, stop)
	log.Info("starting", zap.String("version", version))

	file, watched, err := loadConfig(*path, configGiven, opts)
	if err != nil {
		return err
	}
	logWarnings(log, file)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var handler *proxy.Handler
	metrics := proxy.NewMetrics(reg, func() []*proxy.Point { return handler.Points() })
	cfg, err := translate(file, nil)
	if err != nil {
		return err
	}
	handler = proxy.New(cfg, proxy.Options{Logger: log, AccessLog: log.Named("access"), Metrics: metrics})

	status := &reloadStatus{drain: file.DrainTimeout,
		st: admin.ReloadStatus{Path: file.Path, Hash: file.Hash, LoadedAt: time.Now(), LastAttempt: time.Now(), LastOK: true}}
	var ready atomic.Bool
	adminHandler := admin.New(admin.Options{Points: handler, Gatherer: reg, Ready: ready.Load, Status: status.get})

	proxyLn, err := net.Listen("tcp", file.Listen)
	if err != nil {
		return fmt.Errorf("proxy listen: %w", err)
	}
	defer proxyLn.Close()
	// maxConnections counts raw TCP connections, so it sits under TLS.
	conns := connlimit.New(connlimit.Options{Max: file.MaxConnections})
	proxy.RegisterConnections(reg, conns.Stats)
	proxyLn = conns.Listener(proxyLn)
	if file.TLS.Enabled() {
		tlsConfig, err := newTLSConfig(ctx, file.TLS, log)
		if err != nil {
			return err
		}
		proxyLn = tls.NewListener(proxyLn, tlsConfig)
	}
	adminLn, err := net.Listen("tcp", file.Admin)
	if err != nil {
		return fmt.Errorf("admin listen: %w", err)
	}
	defer adminLn.Close()

	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(file.TLS.Enabled())
	protocols.SetUnencryptedHTTP2(file.H2C)
	proxySrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       idleTimeout,
		ConnState:         conns.ConnState,
		Protocols:         &protocols,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	adminSrv := &http.Server{
		Handler:           adminHandler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(log.Named("admin")),
	}

	var wg sync.WaitGroup
	serveErr := make(chan error, 2)
	for _, s := range []struct {
		srv *http.Server
		ln  net.Listener
	}{{proxySrv, proxyLn}, {adminSrv, adminLn}} {
		wg.Go(func() {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		})
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if watched {
		w, err := config.NewWatcher(file.Path, opts, file)
		if err != nil {
			return err
		}
		w.Accept = func(f *config.File) error { return apply(handler, conns, f) }
		// Run returns once watchCtx is done; inotify failing makes it
		// poll, which reportReloads reports.
		wg.Go(func() { w.Run(watchCtx) })
		wg.Go(func() { reportReloads(watchCtx, w, metrics, status, log) })
		sigs.serving(w.Reload)
	} else {
		sigs.serving(nil)
	}

	ready.Store(ctx.Err() == nil) // a SIGTERM during start-up drains at once
	log.Info("serving", zap.String("proxy_addr", proxyLn.Addr().String()), zap.String("admin_addr", adminLn.Addr().String()),
		zap.String("upstream", file.Upstream), zap.String("config", file.Path), zap.Int("points", len(file.Points)),
		zap.String("version", version))
	if onServing != nil {
		onServing(proxyLn.Addr().String(), adminLn.Addr().String())
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	sigs.draining()
	// SPEC §2's order: stop accepting, fail /readyz, drain. Shutdown
	// closes the listener first and then runs its OnShutdown hooks.
	proxySrv.RegisterOnShutdown(func() { ready.Store(false) })
	drain := status.drainTimeout()
	log.Info("draining", zap.Duration("drain_timeout", drain))
	drainCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := proxySrv.Shutdown(drainCtx); err != nil {
		log.Warn("drain timed out; closing the remaining connections", zap.Error(err))
		proxySrv.Close()
	}
	adminSrv.Close()
	stopWatch()
	wg.Wait()
	log.Info("stopped")
	return runErr
}

// loadConfig reads the config file. Without one, a given -upstream runs a
// plain proxy with no points and nothing to watch.
func loadConfig(path string, given bool, opts config.Options) (*config.File, bool, error) {
	file, err := config.Load(path, opts)
	if err == nil {
		return file, true, nil
	}
	if !given && opts.Upstream != "" && errors.Is(err, os.ErrNotExist) {
		file, err = config.Default(opts)
		return file, false, err
	}
	return nil, false, err
}

// apply translates f and swaps it in, with its connection limit: the
// watcher's Accept, so that a file the request path refuses is never
// recorded as in force.
func apply(h *proxy.Handler, conns *connlimit.Limiter, f *config.File) error {
	cfg, err := translate(f, h.Config())
	if err != nil {
		return err
	}
	h.Swap(cfg)
	conns.SetMax(f.MaxConnections)
	return nil
}

// reportReloads reports every reload attempt of the watcher, which has
// applied each config it accepted (apply): one log line each, and the
// reload metrics. It also reports each change of the watch mode: one log
// line (a warning with the reason when inotify failed and the file is
// polled) and sds_config_watch_mode.
func reportReloads(ctx context.Context, w *config.Watcher, m *proxy.Metrics, status *reloadStatus, log *zap.Logger) {
	for {
		var res config.Result
		select {
		case <-ctx.Done():
			return
		case c := <-w.ModeChanges():
			// Readiness does not change: a polled file still reloads.
			m.SetWatchMode(c.Mode.String())
			if c.Mode == config.WatchPolling {
				log.Warn("config watch falls back to polling", zap.Duration("interval", config.PollInterval), zap.Error(c.Reason))
			} else {
				log.Info("config watch mode", zap.String("mode", c.Mode.String()))
			}
			continue
		case res = <-w.Results():
		}
		now := time.Now()
		if res.Unchanged {
			// The file holds the config in force again: after a rejected
			// edit was undone, the last attempt is a success.
			if status.recovered(now) {
				m.Reloaded(true, now)
			}
			log.Info("config unchanged", zap.Bool("forced", res.Forced))
			continue
		}
		if res.Err != nil {
			log.Error("config rejected; the last good config keeps serving", zap.Error(res.Err), zap.Bool("forced", res.Forced))
			m.Reloaded(false, now)
			status.failed(now, res.Err)
			continue
		}
		m.Reloaded(true, now)
		status.applied(now, res.File, res.Change.String())
		log.Info("config reloaded", zap.String("change", res.Change.String()), zap.String("hash", res.File.Hash),
			zap.Bool("forced", res.Forced))
		logWarnings(log, res.File)
		if len(res.Change.NeedsRestart) > 0 {
			log.Warn("config change needs a restart to apply", zap.Strings("settings", res.Change.NeedsRestart))
		}
	}
}

// reloadStatus is the config state shown on the admin port.
type reloadStatus struct {
	mu    sync.Mutex
	st    admin.ReloadStatus
	drain time.Duration // drain timeout of the config in force
}

func (r *reloadStatus) get() admin.ReloadStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

func (r *reloadStatus) applied(at time.Time, f *config.File, change string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st = admin.ReloadStatus{Path: f.Path, Hash: f.Hash, LoadedAt: at, LastAttempt: at, LastOK: true, LastChange: change}
	r.drain = f.DrainTimeout
}

// recovered marks an attempt that found the config in force; it reports
// whether the previous attempt had failed.
func (r *reloadStatus) recovered(at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	wasFailed := !r.st.LastOK
	r.st.LastAttempt, r.st.LastOK, r.st.LastError = at, true, ""
	return wasFailed
}

func (r *reloadStatus) failed(at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.LastAttempt, r.st.LastOK, r.st.LastError = at, false, err.Error()
}

// drainTimeout returns the drain timeout of the config in force.
func (r *reloadStatus) drainTimeout() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drain
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
