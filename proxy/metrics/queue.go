package metrics

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
)

// waitBuckets are sds_queue_wait_seconds' buckets, in seconds: those of
// sds_upstream_duration_seconds, so that a wait and an upstream time read
// against the same bounds, then up to queue.maxWait's highest, a minute.
//
// Classic buckets, where the upstream time has native ones: a wait is
// bounded by maxWait and judged against it and the target, both of which
// the operator chose, so the question is the share of waits above a bound
// (which a classic bucket answers exactly, in every scraper), not a
// quantile within 9% whatever the service's speed. A native histogram per
// point and outcome would also hold up to 160 buckets each, five times
// per queued point.
var waitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// waitOutcomes are the outcomes of a wait, one series each, in the order
// of queueWaits.
var waitOutcomes = [...]queue.Outcome{queue.Admitted, queue.Shed, queue.Full, queue.TimedOut, queue.Canceled}

// queueWaits are a point's queue wait histograms, one per outcome, in the
// order of waitOutcomes. Each is a child of Set's wait HistogramVec, which
// the client library makes an Observer and a Metric.
type queueWaits [len(waitOutcomes)]prometheus.Histogram

// ObserveWait records that a request waited d in the point's queue, its
// wait ended by o (sds_queue_wait_seconds). The point's five series are
// created together at its first wait, so that each outcome's count is
// there from 0 once the queue has been used; then it allocates nothing.
// An outcome that is not one of the queue's is not recorded. It is safe
// for concurrent use.
func (pm *Point) ObserveWait(o queue.Outcome, d time.Duration) {
	i := slices.Index(waitOutcomes[:], o)
	if i < 0 {
		return
	}
	w := pm.waits.Load()
	if w == nil {
		w = pm.makeWaits()
	}
	w[i].Observe(d.Seconds())
}

// makeWaits creates the point's wait histograms, once: callers racing on
// a point's first waits all get the ones that were stored first (the
// same children: the vec keeps one per label values).
func (pm *Point) makeWaits() *queueWaits {
	w := new(queueWaits)
	for i, o := range waitOutcomes {
		w[i] = pm.vecs.waits.WithLabelValues(pm.name, o.String()).(prometheus.Histogram)
	}
	pm.waits.CompareAndSwap(nil, w)
	return pm.waits.Load()
}

// waitOrder lists the indexes of waitOutcomes in ascending order of their
// names: the order sds_queue_wait_seconds' series are written in, its
// labels sorting outcome before point.
var waitOrder = func() []int {
	order := make([]int, len(waitOutcomes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(waitOutcomes[a].String(), waitOutcomes[b].String()) })
	return order
}()

// queueLength is sds_queue_length of p, a point in force: the requests
// waiting in its queue now; not ok when p has none.
func queueLength(_ *scrape, p *Source, _ limiter.State) (float64, bool) {
	if p.Queue == nil {
		return 0, false
	}
	return float64(p.Queue.Len()), true
}

// waits adds every point's wait histograms (sds_queue_wait_seconds) to
// the scrape, as the client library writes them: by outcome, then by
// point, the order the registry sorts them in. A point that never waited
// has none.
func (s *scrape) waits() {
	for _, k := range waitOrder {
		for _, pm := range s.points {
			w := pm.waits.Load()
			if w == nil {
				continue
			}
			sl := s.next()
			if w[k].Write(&sl.metric) != nil {
				s.n-- // cannot happen: a histogram's Write returns no error
			}
		}
	}
}
