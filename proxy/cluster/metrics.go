package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sds_cluster_* series (README, "Fleet-wide budgets").
type metrics struct {
	up       prometheus.Gauge
	calls    *prometheus.CounterVec // result: ok, error
	errors   *prometheus.CounterVec // kind: timeout, refused, auth, other
	duration prometheus.Histogram
	level    *prometheus.GaugeVec   // point
	share    *prometheus.GaugeVec   // point
	granted  *prometheus.CounterVec // point
	shared   *prometheus.GaugeVec   // point
}

// callBuckets are sds_cluster_call_duration_seconds' buckets: a call is
// bounded by the timeout, tens of milliseconds by default.
var callBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sds_cluster_up", Help: "1 while Redis answers every shared token bucket's lease calls; 0 before the first answer and while any point counts on its local share (tokensPerSecond / replicas): sds_cluster_bucket_shared says which.",
		}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_cluster_calls_total", Help: "Round trips to Redis by result (ok, error: one of its calls failed); one round trip leases for every shared bucket that needs tokens.",
		}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_cluster_errors_total", Help: "Failed calls to Redis (a bucket's lease call, or a PING with no bucket in use) by kind: timeout (no answer within the timeout), refused, auth (wrong or missing password), other.",
		}, []string{"kind"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sds_cluster_call_duration_seconds", Help: "Time of each round trip to Redis, failed ones included. Never on a request's path.",
			Buckets: callBuckets,
		}),
		level: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sds_cluster_bucket_tokens", Help: "The shared token bucket's level at Redis's last answer, as this proxy saw it (below 0 by tokens spent on credit and not yet refilled).",
		}, []string{"point"}),
		share: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sds_cluster_share_tokens_per_second", Help: "This proxy's fair share of the point's shared tokensPerSecond at Redis's last answer: max-min fair over the recent demand of the proxies Redis heard from in the last 3 s.",
		}, []string{"point"}),
		granted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_cluster_granted_tokens_total", Help: "Tokens Redis granted this proxy from the point's shared bucket.",
		}, []string{"point"}),
		shared: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sds_cluster_bucket_shared", Help: "1 while the point spends its shared bucket (Redis answered its last lease call), 0 while it counts on its local share (before the first answer, or after a failed call: on a Redis Cluster, the node holding its key).",
		}, []string{"point"}),
	}
	for _, r := range []string{"ok", "error"} {
		m.calls.WithLabelValues(r)
	}
	for _, k := range []string{"timeout", "refused", "auth", "other"} {
		m.errors.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.up, m.calls, m.errors, m.duration, m.level, m.share, m.granted, m.shared)
	}
	return m
}

// round counts one round trip that took took; ok: none of its calls
// failed.
func (m *metrics) round(took time.Duration, ok bool) {
	m.duration.Observe(took.Seconds())
	if ok {
		m.calls.WithLabelValues("ok").Inc()
	} else {
		m.calls.WithLabelValues("error").Inc()
	}
}

// failed counts one failed call by err's kind.
func (m *metrics) failed(err error) { m.errors.WithLabelValues(errorKind(err)).Inc() }

// bucketShared sets whether point spends its shared bucket.
func (m *metrics) bucketShared(point string, shared bool) {
	v := 0.0
	if shared {
		v = 1
	}
	m.shared.WithLabelValues(point).Set(v)
}

// lease records one bucket's answer.
func (m *metrics) lease(point string, a answer) {
	m.level.WithLabelValues(point).Set(float64(a.level))
	m.share.WithLabelValues(point).Set(float64(a.shareMilli) / 1000)
	if a.granted > 0 {
		m.granted.WithLabelValues(point).Add(float64(a.granted))
	}
}

// use creates the series of a point with a shared bucket, at 0 until Redis
// grants it tokens (the level gauge waits for an answer).
func (m *metrics) use(point string) {
	m.granted.WithLabelValues(point)
	m.shared.WithLabelValues(point)
}

// forget removes the series of a point whose bucket is no longer used.
func (m *metrics) forget(point string) {
	m.level.DeleteLabelValues(point)
	m.share.DeleteLabelValues(point)
	m.granted.DeleteLabelValues(point)
	m.shared.DeleteLabelValues(point)
}
