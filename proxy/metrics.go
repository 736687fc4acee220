package proxy

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// Metrics are the proxy's Prometheus metrics (README, Admin port),
// registered on the
// registry passed to NewMetrics. Labels carry point names, never paths.
type Metrics struct {
	requests       *prometheus.CounterVec   // point, result
	degraded       *prometheus.CounterVec   // point, strategy
	shadowDegraded *prometheus.CounterVec   // point, strategy
	duration       *prometheus.HistogramVec // point
	errors         *prometheus.CounterVec   // point, kind
	timeouts       *prometheus.CounterVec   // point
	unrouted       prometheus.Counter
	rejected       *prometheus.CounterVec // reason
	rejectedPath   prometheus.Counter     // rejected{reason="path"}
	reloads        *prometheus.CounterVec // result
	lastOK         prometheus.Gauge
	lastOKTime     prometheus.Gauge
	watchMode      *prometheus.GaugeVec // mode

	// live returns the points in force (NewMetrics' points): the
	// collector's gauges and Sample read it.
	live func() []*Point
	// collector reports the gauges read from the limiter.
	collector *pointCollector

	mu         sync.Mutex // guards points and watchModes
	points     map[string]*pointMetrics
	watchModes []string // the mode labels of watchMode

	traffic traffic // Sample's recent figures per point (traffic.go)
}

// Upstream error kinds of sds_upstream_errors_total.
const (
	errorTransport       = "transport"        // refused, reset, EOF
	errorUpstreamTimeout = "upstream_timeout" // upstreamTimeout passed
	errorStatus          = "status_5xx"       // the service answered 5xx (or a gRPC error)
	errorBody            = "body"             // the response body broke off mid-copy
)

// durationBuckets are sds_upstream_duration_seconds' classic buckets in
// seconds, kept beside the native ones for scrapers that do not read
// native histograms.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// The native buckets of sds_upstream_duration_seconds.
const (
	// durationBucketFactor 1.1 gives schema 3: 8 native buckets per
	// power of two, each at most 9.05% wider than the one below, so a
	// quantile is within 9% of the truth whatever timeoutThreshold the
	// user set, where the classic buckets can be 150% wide.
	durationBucketFactor = 1.1
	// durationMaxBuckets bounds a point's populated native buckets: 160
	// covers 100µs (2^-13 s) to 128 s (2^7) at full resolution, wider
	// than any real spread of upstream times; past it the client halves
	// the resolution (schema 2, then 1...) instead of growing, so a
	// hostile upstream's spread of times cannot grow memory.
	durationMaxBuckets = 160
	// durationMinReset is how long a histogram whose resolution was
	// halved keeps the coarser schema before it is reset to schema 3
	// (a reset restarts every bucket, classic ones included, which
	// rate() reads as a counter reset). One hour keeps such resets rare.
	durationMinReset = time.Hour
)

// pointMetrics are one point's series, resolved once so the request path
// does no label lookups.
type pointMetrics struct {
	proxied, degraded, shadowDegraded prometheus.Counter
	byStrategy                        [limiter.LastStrategy + 1]prometheus.Counter // sds_degraded_total; index 0 unused
	shadowByStrategy                  [limiter.LastStrategy + 1]prometheus.Counter // sds_shadow_degraded_total; index 0 unused
	duration                          prometheus.Observer
	durationExemplar                  prometheus.ExemplarObserver // the same series as duration
	durationMetric                    prometheus.Metric           // the same again, for Sample's Write
	transportErrors, timeoutErrors    prometheus.Counter
	statusErrors, bodyErrors          prometheus.Counter
	timeouts                          prometheus.Counter

	// nextExemplar is the Unix time in nanoseconds before which a traced
	// call is observed without its exemplar (exemplarEvery).
	nextExemplar atomic.Int64
}

// NewMetrics registers the proxy's metrics on reg. points returns the
// points in force; it is read at scrape time for the in-flight and state
// gauges, and by Sample.
func NewMetrics(reg prometheus.Registerer, points func() []*Point) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_requests_total", Help: "Requests on protected points, by result: proxied (forwarded), degraded (answered by the fallback), shadow_degraded (forwarded by a shadow point that would have degraded it).",
		}, []string{"point", "result"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_degraded_total", Help: "Requests answered by the point's fallback, by the strategy that degraded them. Shadow points never count here (sds_shadow_degraded_total).",
		}, []string{"point", "strategy"}),
		shadowDegraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_shadow_degraded_total", Help: "Requests a shadow point forwarded that it would have degraded, by the strategy that would have degraded them.",
		}, []string{"point", "strategy"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sds_upstream_duration_seconds", Help: "Upstream time of forwarded calls, to the end of the response (to the headers for streams), without the time spent waiting on the client. Native histogram (schema 3) with classic buckets; exemplars carry the W3C traceparent trace_id.",
			Buckets:                         durationBuckets,
			NativeHistogramBucketFactor:     durationBucketFactor,
			NativeHistogramMaxBucketNumber:  durationMaxBuckets,
			NativeHistogramMinResetDuration: durationMinReset,
		}, []string{"point"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_upstream_errors_total", Help: "Upstream calls that ended in an exception, by kind (transport, upstream_timeout, status_5xx, body).",
		}, []string{"point", "kind"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_timeouts_total", Help: "Upstream calls that passed the point's timeoutThreshold.",
		}, []string{"point"}),
		unrouted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sds_unrouted_requests_total", Help: "Requests that matched no route: forwarded to the upstream unprotected, counted on no point.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_rejected_requests_total", Help: "Requests refused before routing, by reason: path (a path the proxy does not route, such as an encoded slash or a bad escape, answered 400). They reach neither a point nor the upstream.",
		}, []string{"reason"}),
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
		live:       points,
		points:     make(map[string]*pointMetrics),
		watchModes: []string{"inotify", "polling"},
	}
	for _, mode := range m.watchModes {
		m.watchMode.WithLabelValues(mode)
	}
	m.rejectedPath = m.rejected.WithLabelValues("path")
	m.collector = &pointCollector{points: points}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	m.lastOK.Set(1)
	m.lastOKTime.SetToCurrentTime()
	reg.MustRegister(m.requests, m.degraded, m.shadowDegraded, m.duration, m.errors, m.timeouts, m.unrouted, m.rejected,
		m.reloads, m.lastOK, m.lastOKTime, m.watchMode, m.collector)
	return m
}

// setClock makes now the clock the point states are evaluated at on a
// scrape: the Handler's.
func (m *Metrics) setClock(now func() time.Time) { m.collector.now.Store(&now) }

// RegisterBuildInfo registers sds_build_info{version,goversion} on reg, a
// gauge of 1: version is the binary's (as "sds-proxy version" prints it),
// goversion the Go release it was built with (runtime.Version).
func RegisterBuildInfo(reg prometheus.Registerer, version string) {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sds_build_info",
		Help:        "1, labelled with the sds-proxy version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	info.Set(1)
	reg.MustRegister(info)
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
	duration := m.duration.WithLabelValues(name)
	pm := &pointMetrics{
		proxied:          m.requests.WithLabelValues(name, "proxied"),
		degraded:         m.requests.WithLabelValues(name, "degraded"),
		shadowDegraded:   m.requests.WithLabelValues(name, "shadow_degraded"),
		duration:         duration,
		durationExemplar: duration.(prometheus.ExemplarObserver),
		durationMetric:   duration.(prometheus.Metric),
		transportErrors:  m.errors.WithLabelValues(name, errorTransport),
		timeoutErrors:    m.errors.WithLabelValues(name, errorUpstreamTimeout),
		statusErrors:     m.errors.WithLabelValues(name, errorStatus),
		bodyErrors:       m.errors.WithLabelValues(name, errorBody),
		timeouts:         m.timeouts.WithLabelValues(name),
	}
	for s := limiter.Strategy(1); s <= limiter.LastStrategy; s++ {
		pm.byStrategy[s] = m.degraded.WithLabelValues(name, s.String())
		pm.shadowByStrategy[s] = m.shadowDegraded.WithLabelValues(name, s.String())
	}
	m.points[name] = pm
	return pm
}

// pointCollector reports the gauges read from the limiter at scrape time.
type pointCollector struct {
	points func() []*Point
	// now is the clock the states are evaluated at: the Handler's (New
	// sets it before serving), time.Now until then.
	now atomic.Pointer[func() time.Time]
}

var (
	inflightDesc = prometheus.NewDesc("sds_inflight", "Upstream calls in flight on the point.", []string{"point"}, nil)
	trippedDesc  = prometheus.NewDesc("sds_point_tripped",
		"1 while the point's next plain request would be degraded (state open or delay), evaluated at scrape time; 0 otherwise. A shadow point is never tripped.",
		[]string{"point"}, nil)
	stateDesc = prometheus.NewDesc("sds_point_state",
		"1 for the point's state at scrape time, 0 for the others: closed (every strategy passes), open (a strategy would degrade the next request), delay (inside its delay: degraded but for probes), shadow (a shadow point whose next request would be degraded were it enforcing).",
		[]string{"point", "state"}, nil)
)

// pointStates are the states of sds_point_state, one series each.
var pointStates = [...]limiter.State{limiter.Closed, limiter.Open, limiter.Delay, limiter.Shadow}

func (c *pointCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- trippedDesc
	ch <- stateDesc
}

func (c *pointCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	if clock := c.now.Load(); clock != nil {
		now = (*clock)()
	}
	for _, p := range c.points() {
		state := p.lim.State(now)
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(p.lim.InFlight()), p.name)
		ch <- prometheus.MustNewConstMetric(trippedDesc, prometheus.GaugeValue, gaugeBool(state == limiter.Open || state == limiter.Delay), p.name)
		for _, s := range pointStates {
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, gaugeBool(state == s), p.name, s.String())
		}
	}
}

// gaugeBool is 1 for true and 0 for false.
func gaugeBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// strategyCounter returns the sds_degraded_total series of strategy s.
func (pm *pointMetrics) strategyCounter(s limiter.Strategy) prometheus.Counter {
	return pm.byStrategy[s]
}

// shadowStrategyCounter returns the sds_shadow_degraded_total series of
// strategy s.
func (pm *pointMetrics) shadowStrategyCounter(s limiter.Strategy) prometheus.Counter {
	return pm.shadowByStrategy[s]
}

// exemplarEvery is the least time between two exemplars of one point's
// upstream time. The client library keeps only the latest exemplars (one
// per classic bucket, a few for the native histogram) and a scrape reads
// them every few seconds, so more would be overwritten unseen; building one
// costs about 10 allocations, which a fully traced service would pay on
// every request.
const exemplarEvery = 100 * time.Millisecond

// observeDuration records a forwarded call's upstream time in seconds,
// ending at now, with traceID (a W3C trace id, traceparent.go) as the
// exemplar's trace_id when it is not "" and the point's last exemplar is
// exemplarEvery old. Without an exemplar it allocates nothing.
func (pm *pointMetrics) observeDuration(seconds float64, traceID string, now time.Time) {
	if traceID == "" {
		pm.duration.Observe(seconds)
		return
	}
	next, t := pm.nextExemplar.Load(), now.UnixNano()
	if t < next || !pm.nextExemplar.CompareAndSwap(next, t+int64(exemplarEvery)) {
		pm.duration.Observe(seconds)
		return
	}
	pm.durationExemplar.ObserveWithExemplar(seconds, prometheus.Labels{"trace_id": traceID})
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
