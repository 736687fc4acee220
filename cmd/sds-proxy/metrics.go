package main

import (
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
)

// reloadMetrics are the config file's metrics: reload attempts, the last
// one's result and time, and how the file is watched.
type reloadMetrics struct {
	reloads    *prometheus.CounterVec // result
	lastOK     prometheus.Gauge
	lastOKTime prometheus.Gauge
	watchMode  *prometheus.GaugeVec // mode

	mu         sync.Mutex // guards watchModes
	watchModes []string   // the mode labels of watchMode
}

// newReloadMetrics registers the config file's metrics on reg, as of a
// successful load now.
func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_config_reloads_total", Help: "Config reload attempts by result (success, failure).",
		}, []string{"result"}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sds_config_last_reload_successful", Help: "1 if the last config reload succeeded, 0 if it was rejected.",
		}),
		lastOKTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sds_config_last_reload_success_timestamp_seconds", Help: "Unix time of the last successful config load.",
		}),
		watchMode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sds_config_watch_mode", Help: "1 for how the config file is watched now (inotify; polling while inotify is unavailable), 0 for the other; all 0 while no file is watched.",
		}, []string{"mode"}),
		watchModes: []string{"inotify", "polling"},
	}
	for _, mode := range m.watchModes {
		m.watchMode.WithLabelValues(mode)
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	m.lastOK.Set(1)
	m.lastOKTime.SetToCurrentTime()
	reg.MustRegister(m.reloads, m.lastOK, m.lastOKTime, m.watchMode)
	return m
}

// Reloaded records a reload attempt.
func (m *reloadMetrics) Reloaded(ok bool, at time.Time) {
	if !ok {
		m.reloads.WithLabelValues("failure").Inc()
		m.lastOK.Set(0)
		return
	}
	m.reloads.WithLabelValues("success").Inc()
	m.lastOK.Set(1)
	m.lastOKTime.Set(float64(at.UnixNano()) / 1e9)
}

// SetWatchMode records how the config file is watched now, "inotify" or
// "polling": that series of sds_config_watch_mode turns 1 and the others
// 0. Another name adds a series. Safe for concurrent use.
func (m *reloadMetrics) SetWatchMode(mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.watchModes, mode) {
		m.watchModes = append(m.watchModes, mode)
	}
	for _, other := range m.watchModes {
		if other != mode {
			m.watchMode.WithLabelValues(other).Set(0)
		}
	}
	m.watchMode.WithLabelValues(mode).Set(1)
}

// registerBuildInfo registers sds_build_info{version,goversion} on reg, a
// gauge of 1: version is the binary's (as "sds-proxy version" prints it),
// goversion the Go release it was built with (runtime.Version).
func registerBuildInfo(reg prometheus.Registerer, version string) {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sds_build_info",
		Help:        "1, labelled with the sds-proxy version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	info.Set(1)
	reg.MustRegister(info)
}

// The proxy port's connection metrics, read from its connlimit.Limiter.
var (
	connectionsDesc = prometheus.NewDesc("sds_connections",
		"Client connections open on the proxy port, by state: new (no request yet), idle (between requests), active (serving one; HTTP/2: any stream), hijacked (upgraded, such as WebSocket).",
		[]string{"state"}, nil)
	connectionsMaxDesc = prometheus.NewDesc("sds_connections_max",
		"The maxConnections limit in force on the proxy port.", nil, nil)
	connectionsShedDesc = prometheus.NewDesc("sds_connections_shed_total",
		"Client connections closed to keep within maxConnections, by reason: evicted (to admit a new one, the waiting one that has waited longest among those idle or silent for a second with no request arrived), refused (a new one that waited 2 s for a place in vain), soft_idle (waiting for the short timeout while over 3/4 of the limit).",
		[]string{"reason"}, nil)
	connectionsQueuedDesc = prometheus.NewDesc("sds_connections_queued_total",
		"New client connections that found the proxy port at maxConnections with no connection to evict, and waited for a place (admitted once one showed, or refused).",
		nil, nil)
)

// registerStaleCache registers the stale cache's gauges, read at scrape
// time: sds_stale_cache_bytes, sds_stale_cache_entries and
// sds_stale_cache_max_bytes.
func registerStaleCache(reg prometheus.Registerer, sc *stale.Cache) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sds_stale_cache_bytes", Help: "The memory the kept answers of points with stale: count for, in bytes (bodies, headers, keys and a fixed overhead each), at most sds_stale_cache_max_bytes."},
			func() float64 { n, _ := sc.Stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sds_stale_cache_entries", Help: "The answers kept for points with stale:."},
			func() float64 { _, n := sc.Stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sds_stale_cache_max_bytes", Help: "staleCache.maxBytes in force: the most memory the kept answers hold, least recently used evicted first."},
			func() float64 { return float64(sc.MaxBytes()) }),
	)
}

// registerConnections registers sds_connections{state}, sds_connections_max,
// sds_connections_shed_total{reason} and sds_connections_queued_total on
// reg; stats is read at scrape time.
func registerConnections(reg prometheus.Registerer, stats func() connlimit.Stats) {
	reg.MustRegister(connCollector(stats))
}

type connCollector func() connlimit.Stats

func (c connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connectionsDesc
	ch <- connectionsMaxDesc
	ch <- connectionsShedDesc
	ch <- connectionsQueuedDesc
}

func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	st := c()
	for _, s := range []struct {
		state string
		n     int
	}{{"new", st.New}, {"idle", st.Idle}, {"active", st.Active}, {"hijacked", st.Hijacked}} {
		ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(s.n), s.state)
	}
	ch <- prometheus.MustNewConstMetric(connectionsMaxDesc, prometheus.GaugeValue, float64(st.Max))
	for _, r := range []struct {
		reason string
		n      uint64
	}{{"evicted", st.Evicted}, {"refused", st.Refused}, {"soft_idle", st.SoftClosed}} {
		ch <- prometheus.MustNewConstMetric(connectionsShedDesc, prometheus.CounterValue, float64(r.n), r.reason)
	}
	ch <- prometheus.MustNewConstMetric(connectionsQueuedDesc, prometheus.CounterValue, float64(st.Queued))
}
