package main

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/config/watch"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/cluster"
	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
)

// apply translates f and swaps it in, with its connection limit, its
// stale cache's size and its shared token buckets (cl is nil without
// cluster:): the watcher's Accept, so that a file the request path refuses
// is never recorded as in force.
func apply(h *proxy.Handler, conns *connlimit.Limiter, sc *stale.Cache, cl *cluster.Client, f *config.File) error {
	shared, buckets := sharedBuckets(cl, f)
	cfg, err := translateShared(f, h.Config(), shared)
	if err != nil {
		return err
	}
	h.Swap(cfg)
	conns.SetMax(f.MaxConnections)
	useStale(sc, f)
	if cl != nil {
		cl.Use(buckets)
	}
	return nil
}

// useStale sizes the stale cache as f says and drops the kept answers of
// the points that no longer have stale: (those that do keep theirs).
func useStale(sc *stale.Cache, f *config.File) {
	sc.SetMaxBytes(f.StaleCache.MaxBytes)
	keep := make(map[string]bool)
	for i := range f.Points {
		if f.Points[i].Stale.On {
			keep[f.Points[i].Name] = true
		}
	}
	sc.Retain(func(point string) bool { return keep[point] })
}

// reportReloads reports every reload attempt of the watcher, which has
// applied each config it accepted (apply): one log line each, and the
// reload metrics. It also reports each change of the watch mode: one log
// line (a warning with the reason when inotify failed and the file is
// polled) and sds_config_watch_mode. Applied and rejected reloads go into
// the event history too.
func reportReloads(ctx context.Context, w *watch.Watcher, m *reloadMetrics, status *reloadStatus, history *events.Log, log *zap.Logger) {
	for {
		var res watch.Result
		select {
		case <-ctx.Done():
			return
		case c := <-w.ModeChanges():
			// Readiness does not change: a polled file still reloads.
			m.SetWatchMode(c.Mode.String())
			if c.Mode == watch.Polling {
				log.Warn("config watch falls back to polling", zap.Duration("interval", watch.PollInterval), zap.Error(c.Reason))
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
			// Recorded before the log line, so that whoever reads the line
			// finds the event too.
			m.Reloaded(false, now)
			status.failed(now, res.Err)
			history.Add(events.Event{At: now, Kind: events.ReloadRejected, Detail: res.Err.Error()})
			log.Error("config rejected; the last good config keeps serving", zap.Error(res.Err), zap.Bool("forced", res.Forced))
			continue
		}
		m.Reloaded(true, now)
		status.applied(now, res.File, res.Change.String())
		history.Add(events.Event{At: now, Kind: events.Reload, Detail: res.Change.String()})
		history.Keep(pointNames(res.File))
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
	raw   []byte        // the bytes of the config file in force; nil without a file
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
	r.raw = f.Raw
}

// config returns the path and bytes of the config file in force (GET
// /config); raw is nil without a file.
func (r *reloadStatus) config() (path string, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Path, r.raw
}

// recovered marks an attempt that found the config in force, which
// changed nothing; it reports whether the previous attempt had failed.
func (r *reloadStatus) recovered(at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	wasFailed := !r.st.LastOK
	r.st.LastAttempt, r.st.LastOK, r.st.LastError, r.st.LastChange = at, true, "", ""
	return wasFailed
}

// failed marks a rejected attempt: it changed nothing, so the change of
// the reload before it is no longer the last attempt's.
func (r *reloadStatus) failed(at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.LastAttempt, r.st.LastOK, r.st.LastError, r.st.LastChange = at, false, err.Error(), ""
}

// drainTimeout returns the drain timeout of the config in force.
func (r *reloadStatus) drainTimeout() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drain
}

// pointNames returns the names of f's points.
func pointNames(f *config.File) []string {
	names := make([]string, len(f.Points))
	for i, p := range f.Points {
		names[i] = p.Name
	}
	return names
}
