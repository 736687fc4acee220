package metrics

import "github.com/prometheus/client_golang/prometheus"

// Forces are the operators' switches' metrics.
type Forces struct {
	// Requests counts the requests answered under a switch, by point and
	// action.
	Requests *prometheus.CounterVec
	// Active is 1 for each switch on, by point and action.
	Active *prometheus.GaugeVec
	// Changes counts the switches set and ended, by action (degrade,
	// pass, end).
	Changes *prometheus.CounterVec
}

// newForces registers the switches' metrics on reg.
func newForces(reg prometheus.Registerer) Forces {
	m := Forces{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_forced_requests_total",
			Help: "Requests answered under an operator's switch, by action: degrade (answered by the fallback; also in sds_requests_total{result=\"degraded\"}, not in sds_degraded_total, which counts strategies) or pass (forwarded unjudged; also in sds_requests_total{result=\"proxied\"}).",
		}, []string{"point", "action"}),
		Active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sds_point_forced",
			Help: "1 while an operator's switch (degrade or pass) is on for the point; absent otherwise.",
		}, []string{"point", "action"}),
		Changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_force_changes_total",
			Help: "Operator switches set, by action (degrade, pass), and ended (end: cleared, expired or the point left the config).",
		}, []string{"action"}),
	}
	for _, a := range []string{"degrade", "pass", "end"} {
		m.Changes.WithLabelValues(a)
	}
	reg.MustRegister(m.Requests, m.Active, m.Changes)
	return m
}
