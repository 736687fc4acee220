package proxy

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// Metrics are the proxy's Prometheus metrics (README, Admin port),
// registered on the
// registry passed to NewMetrics. Labels carry point names, never paths.
type Metrics struct {
	requests   *prometheus.CounterVec   // point, result
	degraded   *prometheus.CounterVec   // point, strategy
	duration   *prometheus.HistogramVec // point
	errors     *prometheus.CounterVec   // point, kind
	timeouts   *prometheus.CounterVec   // point
	reloads    *prometheus.CounterVec   // result
	lastOK     prometheus.Gauge
	lastOKTime prometheus.Gauge
	watchMode  *prometheus.GaugeVec // mode

	mu         sync.Mutex // guards points and watchModes
	points     map[string]*pointMetrics
	watchModes []string // the mode labels of watchMode
}

// Upstream error kinds of sds_upstream_errors_total.
const (
	errorTransport       = "transport"        // refused, reset, EOF
	errorUpstreamTimeout = "upstream_timeout" // upstreamTimeout passed
	errorStatus          = "status_5xx"       // the service answered 5xx (or a gRPC error)
	errorBody            = "body"             // the response body broke off mid-copy
)

// pointMetrics are one point's series, resolved once so the request path
// does no label lookups.
type pointMetrics struct {
	proxied, degraded, shadowDegraded prometheus.Counter
	byStrategy                        [limiter.LastStrategy + 1]prometheus.Counter // index 0 unused
	duration                          prometheus.Observer
	transportErrors, timeoutErrors    prometheus.Counter
	statusErrors, bodyErrors          prometheus.Counter
	timeouts                          prometheus.Counter
}

// NewMetrics registers the proxy's metrics on reg. points is read at
// scrape time for the in-flight and tripped gauges.
func NewMetrics(reg prometheus.Registerer, points func() []*Point) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_requests_total", Help: "Requests on protected points, by result (proxied, degraded, shadow_degraded).",
		}, []string{"point", "result"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_degraded_total", Help: "Degraded (or, in shadow mode, would-be degraded) requests by strategy.",
		}, []string{"point", "strategy"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sds_upstream_duration_seconds", Help: "Upstream time of forwarded calls, to the end of the response (to the headers for streams), without the time spent waiting on the client.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"point"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_upstream_errors_total", Help: "Upstream calls that ended in an exception, by kind (transport, upstream_timeout, status_5xx, body).",
		}, []string{"point", "kind"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_timeouts_total", Help: "Upstream calls that passed the point's timeoutThreshold.",
		}, []string{"point"}),
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
		points:     make(map[string]*pointMetrics),
		watchModes: []string{"inotify", "polling"},
	}
	for _, mode := range m.watchModes {
		m.watchMode.WithLabelValues(mode)
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	m.lastOK.Set(1)
	m.lastOKTime.SetToCurrentTime()
	reg.MustRegister(m.requests, m.degraded, m.duration, m.errors, m.timeouts, m.reloads, m.lastOK, m.lastOKTime, m.watchMode,
		&pointCollector{points: points})
	return m
}

// Reloaded records a reload attempt.
func (m *Metrics) Reloaded(ok bool, at time.Time) {
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
func (m *Metrics) SetWatchMode(mode string) {
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

// forPoint returns the series of point name, creating them once.
func (m *Metrics) forPoint(name string) *pointMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pm, ok := m.points[name]; ok {
		return pm
	}
	pm := &pointMetrics{
		proxied:         m.requests.WithLabelValues(name, "proxied"),
		degraded:        m.requests.WithLabelValues(name, "degraded"),
		shadowDegraded:  m.requests.WithLabelValues(name, "shadow_degraded"),
		duration:        m.duration.WithLabelValues(name),
		transportErrors: m.errors.WithLabelValues(name, errorTransport),
		timeoutErrors:   m.errors.WithLabelValues(name, errorUpstreamTimeout),
		statusErrors:    m.errors.WithLabelValues(name, errorStatus),
		bodyErrors:      m.errors.WithLabelValues(name, errorBody),
		timeouts:        m.timeouts.WithLabelValues(name),
	}
	for s := limiter.Strategy(1); s <= limiter.LastStrategy; s++ {
		pm.byStrategy[s] = m.degraded.WithLabelValues(name, s.String())
	}
	m.points[name] = pm
	return pm
}

// pointCollector reports the gauges read from the limiter at scrape time.
type pointCollector struct {
	points func() []*Point
}

var (
	inflightDesc = prometheus.NewDesc("sds_inflight", "Upstream calls in flight on the point.", []string{"point"}, nil)
	trippedDesc  = prometheus.NewDesc("sds_point_tripped", "1 while the point is tripped or in its delay.", []string{"point"}, nil)
)

func (c *pointCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- trippedDesc
}

func (c *pointCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, p := range c.points() {
		tripped := 0.0
		if s := p.lim.State(now); s == limiter.Open || s == limiter.Delay {
			tripped = 1
		}
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(p.lim.InFlight()), p.name)
		ch <- prometheus.MustNewConstMetric(trippedDesc, prometheus.GaugeValue, tripped, p.name)
	}
}

// strategyCounter returns the sds_degraded_total series of strategy s.
func (pm *pointMetrics) strategyCounter(s limiter.Strategy) prometheus.Counter {
	return pm.byStrategy[s]
}

// The proxy port's connection metrics, read from its connlimit.Limiter.
var (
	connectionsDesc = prometheus.NewDesc("sds_connections",
		"Client connections open on the proxy port, by state: new (no request yet), idle (between requests), active (serving one; HTTP/2: any stream), hijacked (upgraded, such as WebSocket).",
		[]string{"state"}, nil)
	connectionsMaxDesc = prometheus.NewDesc("sds_connections_max",
		"The maxConnections limit in force on the proxy port.", nil, nil)
	connectionsShedDesc = prometheus.NewDesc("sds_connections_shed_total",
		"Client connections closed to keep within maxConnections, by reason: evicted (the oldest idle one, to admit a new one), refused (a new one, every one being busy), soft_idle (idle for the short timeout while over 3/4 of the limit).",
		[]string{"reason"}, nil)
)

// RegisterConnections registers sds_connections{state}, sds_connections_max
// and sds_connections_shed_total{reason} on reg; stats is read at scrape
// time.
func RegisterConnections(reg prometheus.Registerer, stats func() connlimit.Stats) {
	reg.MustRegister(connCollector(stats))
}

type connCollector func() connlimit.Stats

func (c connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connectionsDesc
	ch <- connectionsMaxDesc
	ch <- connectionsShedDesc
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
}
