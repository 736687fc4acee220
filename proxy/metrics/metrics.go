package metrics

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
)

// Set is the request path's metrics (docs/metrics.md), registered on the
// registry passed to NewSet. Labels carry point names, never paths.
type Set struct {
	// vecs make the points' histograms; they are not registered:
	// perPoint and Handler report them.
	vecs *histogramVecs
	// Unrouted counts the requests no route names.
	Unrouted prometheus.Counter
	// RejectedPath counts the requests refused for their path (400).
	RejectedPath prometheus.Counter
	// RejectedMethod counts the requests refused for their method: CONNECT,
	// answered 405.
	RejectedMethod prometheus.Counter
	rejected       *prometheus.CounterVec // reason

	// live returns the points in force (NewSet's points): the
	// collector's gauges and Sample read it.
	live func() []Source
	// collector reports the points' counters and the gauges read from
	// the limiter.
	collector *pointCollector

	mu     sync.Mutex // guards points and order
	points map[string]*Point
	order  []*Point // the values of points, oldest first: the collector reads them

	traffic traffic // Sample's recent figures per point (traffic.go)

	// Forces are the operators' switches' metrics.
	Forces Forces
	// staleServed is sds_stale_served_total, whose series StaleServed
	// makes for the points with stale: only.
	staleServed *prometheus.CounterVec

	// exposing counts the scrapes of Handler gathering the registry now:
	// while it is above 0, the registry's Gather leaves out the per-point
	// families, which Handler writes itself (exposition.go).
	exposing atomic.Int32
	// scrapes recycles the buffers of Handler's scrapes.
	scrapes sync.Pool
	// familyBytes holds, for each of pointFamilies, the length of its
	// protobuf message at the last scrape in that format, so that the next
	// one sizes its buffer at once.
	familyBytes []atomic.Int64
}

// Upstream error kinds of sds_upstream_errors_total.
const (
	errorTransport       = "transport"        // refused, reset, EOF
	errorUpstreamTimeout = "upstream_timeout" // upstreamTimeout passed
	errorStatus          = "status_5xx"       // the service answered 5xx (or a gRPC error)
	errorBody            = "body"             // the response body broke off mid-copy
)

// Indexes of a point's counters in Point.counts, and the series
// they are reported as.
const (
	countProxied = iota // sds_requests_total{result="proxied"}
	countDegraded
	countShadowDegraded
	countCanceled
	countTransport // sds_upstream_errors_total{kind="transport"}
	countUpstreamTimeout
	countStatus
	countBody
	countTimeouts // sds_timeouts_total
	// countStrategy + s is sds_degraded_total{strategy=s}, for the
	// strategies 1 to limiter.LastStrategy.
	countStrategy = countTimeouts
	// countShadowStrategy + s is sds_shadow_degraded_total{strategy=s}.
	countShadowStrategy = countStrategy + int(limiter.LastStrategy)
	// pointCounts is the number of a point's counters.
	pointCounts = countShadowStrategy + int(limiter.LastStrategy) + 1
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
	// durationSchema is the schema durationBucketFactor gives.
	durationSchema = 3
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

// Point is one point's series, resolved once so the request path
// does no label lookups. Its counters are plain atomic counts that the
// collector reports at scrape time with label pairs shared by every point
// (a few bytes a series, where a client library counter child holds
// hundreds: BenchmarkScaleMemory), in the same families, label sets and
// values as counters of the client library would have.
type Point struct {
	name string
	// pointLabel is the label pair point=name, shared by every series of
	// the point at every scrape.
	pointLabel *dto.LabelPair
	// created is when the point's series were created, reported as
	// every counter's created timestamp.
	created *timestamppb.Timestamp
	counts  [pointCounts]Counter

	// vecs make the point's histograms, at their first observation:
	// the Set's.
	vecs *histogramVecs
	// waits are the point's queue wait histograms; nil until its first
	// wait, so that a point without a queue holds none.
	waits atomic.Pointer[queueWaits]
	// duration is the upstream time histogram; nil until the point's
	// first call is observed. A point that never forwards a call then
	// holds no histogram, the largest part of a point's series once a
	// scrape has read it (TestMemoryPerIdlePoint; docs/benchmarks.md,
	// "10,000 points in 128 MiB"), and is exposed as an empty one
	// (writeDuration).
	duration atomic.Pointer[durationHistogram]

	// nextExemplar is the Unix time in nanoseconds before which a traced
	// call is observed without its exemplar (exemplarEvery).
	nextExemplar atomic.Int64
	// observed counts the observations of duration, each counted once
	// it is in the histogram.
	observed Counter
	// sampled is Sample's last reading of duration (traffic.go): it
	// reads the histogram again only when observed has changed.
	sampled struct {
		observed uint64
		hist     nativeHistogram
		ok       bool // read at least once
	}

	// The counters the request path increments, by name: each points
	// into counts.
	Proxied, Degraded, ShadowDegraded *Counter
	// Canceled counts the requests let through whose client went away
	// before the upstream was sent them.
	Canceled                       *Counter
	TransportErrors, TimeoutErrors *Counter
	StatusErrors, BodyErrors       *Counter
	Timeouts                       *Counter
}

// Counter is a count that only grows, from 0. Its zero value is ready; it
// is safe for concurrent use.
type Counter struct{ n atomic.Uint64 }

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// value is the count.
func (c *Counter) value() float64 { return float64(c.n.Load()) }

// Source is a point in force, as the metrics read it.
type Source struct {
	Limiter *limiter.Point
	// Gated: the point has a fleet-wide bucket (limiter.Request.Gate), so
	// its cluster_token_bucket series are reported from the start.
	Gated bool
	// Queue is the point's queue at its limit, read at scrape time for
	// sds_queue_length; nil when the point has none.
	Queue *queue.Queue
	// Keys are the point's per-key rules, in judging order, read at
	// scrape time for sds_perkey_keys; nil when it has none.
	Keys []KeySource
	// StaleMaxAge is the point's stale: maxAge, for the admin port; 0
	// without stale:.
	StaleMaxAge time.Duration
}

// perKeyKeys is sds_perkey_keys of p: the keys its per-key rules track
// exactly, over all its rules; not on without perKey.
func perKeyKeys(_ *scrape, p *Source, _ limiter.State) (float64, bool) {
	if len(p.Keys) == 0 {
		return 0, false
	}
	n := 0
	for _, k := range p.Keys {
		n += k.Table.Len()
	}
	return float64(n), true
}

// KeySource is a per-key rule of a point as the metrics and the admin
// port read it.
type KeySource struct {
	// Source is where the rule's key is, as sds.yaml writes it
	// (header:X-Api-Key).
	Source string
	Table  *perkey.Table
}

// NewSet registers the request path's metrics on reg. points returns the
// points in force; it is read at scrape time for the in-flight and state
// gauges, and by Sample.
func NewSet(reg prometheus.Registerer, points func() []Source) *Set {
	m := &Set{
		vecs: &histogramVecs{duration: newDurationVec(), waits: newWaitVec()},
		Unrouted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sds_unrouted_requests_total", Help: "Requests that matched no route: forwarded to the upstream unprotected, counted on no point.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sds_rejected_requests_total", Help: "Requests refused before routing, by reason: path (a path the proxy does not route, such as an encoded slash or a bad escape, answered 400), method (CONNECT, answered 405: a reverse proxy opens no tunnels). They reach neither a point nor the upstream.",
		}, []string{"reason"}),
		live:        points,
		points:      make(map[string]*Point),
		familyBytes: make([]atomic.Int64, len(pointFamilies)),
	}
	m.RejectedPath = m.rejected.WithLabelValues("path")
	m.RejectedMethod = m.rejected.WithLabelValues("method")
	m.collector = &pointCollector{points: points, metrics: m}
	m.Forces = newForces(reg)
	m.staleServed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sds_stale_served_total", Help: "Degraded GET and HEAD requests answered with the point's last good answer (stale:) instead of its fallback; they count as degraded too. Only points with stale:.",
	}, []string{"point"})
	reg.MustRegister(m.Unrouted, m.rejected, m.staleServed, perPoint{m})
	return m
}

// histogramVecs make the points' histograms: each point's are children
// of the vecs, created at their first observation.
type histogramVecs struct {
	// duration makes the upstream time histograms (Point.makeDuration).
	duration *prometheus.HistogramVec
	// waits makes the queue wait histograms (Point.makeWaits).
	waits *prometheus.HistogramVec
}

// newDurationVec returns the family of the points' upstream time
// histograms. Its children are created by Point.makeDuration and exposed
// by perPoint and Handler, never collected from the vec itself.
func newDurationVec() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: durationFamily.name, Help: durationFamily.help,
		Buckets:                         durationBuckets,
		NativeHistogramBucketFactor:     durationBucketFactor,
		NativeHistogramMaxBucketNumber:  durationMaxBuckets,
		NativeHistogramMinResetDuration: durationMinReset,
	}, []string{"point"})
}

// newWaitVec returns the family of the points' queue wait histograms.
// Its children are created by Point.makeWaits and exposed by perPoint and
// Handler, never collected from the vec itself.
func newWaitVec() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: queueWaitFamily.name, Help: queueWaitFamily.help, Buckets: waitBuckets,
	}, []string{"point", "outcome"})
}

// SetClock makes now the clock the point states are evaluated at on a
// scrape: the request path's.
func (m *Set) SetClock(now func() time.Time) { m.collector.now.Store(&now) }

// ForPoint returns the series of point name, creating them once. They are
// kept, and reported, after the point leaves the config.
func (m *Set) ForPoint(name string) *Point {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pm, ok := m.points[name]; ok {
		return pm
	}
	pm := &Point{name: name, created: timestamppb.Now(), vecs: m.vecs}
	pm.pointLabel = &dto.LabelPair{Name: &pointLabelName, Value: &pm.name}
	pm.Proxied, pm.Degraded, pm.ShadowDegraded = &pm.counts[countProxied], &pm.counts[countDegraded], &pm.counts[countShadowDegraded]
	pm.Canceled = &pm.counts[countCanceled]
	pm.TransportErrors, pm.TimeoutErrors = &pm.counts[countTransport], &pm.counts[countUpstreamTimeout]
	pm.StatusErrors, pm.BodyErrors = &pm.counts[countStatus], &pm.counts[countBody]
	pm.Timeouts = &pm.counts[countTimeouts]
	m.points[name] = pm
	m.order = append(m.order, pm)
	return pm
}

// StaleServed returns the sds_stale_served_total series of point name,
// making it (from 0) on its first call: call it for the points with
// stale: only, so that the others have no series.
func (m *Set) StaleServed(name string) prometheus.Counter {
	return m.staleServed.WithLabelValues(name)
}

// everyPoint returns the series of every point ForPoint created, oldest
// first.
func (m *Set) everyPoint() []*Point {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order[:len(m.order):len(m.order)]
}

// perPoint is the per-point families as a collector of the registry:
// the upstream time histograms and pointCollector's series. A Gather of
// the registry reports them through the client library's own path, which
// builds a dto.Metric per series; Handler, which writes them itself, has
// the registry leave them out of its own Gather (Set.exposing).
type perPoint struct{ m *Set }

func (c perPoint) Describe(ch chan<- *prometheus.Desc) {
	ch <- durationFamily.desc
	ch <- queueWaitFamily.desc
	c.m.collector.Describe(ch)
}

func (c perPoint) Collect(ch chan<- prometheus.Metric) {
	if c.m.exposing.Load() > 0 {
		return
	}
	for _, pm := range c.m.everyPoint() {
		ch <- durationSeries{pm}
		if w := pm.waits.Load(); w != nil {
			for _, h := range w {
				ch <- h
			}
		}
	}
	c.m.collector.Collect(ch)
}

// durationSeries is a point's upstream time histogram as a
// prometheus.Metric (writeDuration).
type durationSeries struct{ pm *Point }

func (d durationSeries) Desc() *prometheus.Desc { return durationFamily.desc }

func (d durationSeries) Write(out *dto.Metric) error { return d.pm.writeDuration(out) }

// pointCollector reports every point's counters (Point.counts) and
// the gauges read from the limiter, at scrape time. It builds each series
// from label pairs made once (the point's, and one per label value shared
// by every point) and allocates one batch of series per point and scrape,
// so that a scrape of 10,000 points costs about what the client library's
// own encoding of their series does. It serves a Gather of the registry
// (tests, and any other reader); the admin port's scrapes go through
// Handler (exposition.go), which writes the same series without it.
type pointCollector struct {
	points  func() []Source
	metrics *Set // its everyPoint
	// now is the clock the states are evaluated at: the Handler's (New
	// sets it before serving), time.Now until then.
	now atomic.Pointer[func() time.Time]
}

var (
	durationFamily = newFamily(dto.MetricType_HISTOGRAM, "sds_upstream_duration_seconds",
		"Upstream time of forwarded calls, to the end of the response (to the headers for streams), without the time spent waiting on the client. Native histogram (schema 3) with classic buckets; exemplars carry the W3C traceparent trace_id.",
		[]string{"point"})
	requestsFamily       = newFamily(dto.MetricType_COUNTER, "sds_requests_total", "Requests on protected points, by result: proxied (sent to the upstream), degraded (answered by the fallback), shadow_degraded (forwarded by a shadow point that would have degraded it), canceled (let through, but its client went away before the upstream was sent it).", []string{"point", "result"})
	degradedFamily       = newFamily(dto.MetricType_COUNTER, "sds_degraded_total", "Requests answered by the point's fallback, by the strategy that degraded them. Shadow points never count here (sds_shadow_degraded_total).", []string{"point", "strategy"})
	shadowDegradedFamily = newFamily(dto.MetricType_COUNTER, "sds_shadow_degraded_total", "Requests a shadow point forwarded that it would have degraded, by the strategy that would have degraded them.", []string{"point", "strategy"})
	errorsFamily         = newFamily(dto.MetricType_COUNTER, "sds_upstream_errors_total", "Upstream calls that ended in an exception, by kind (transport, upstream_timeout, status_5xx, body).", []string{"point", "kind"})
	timeoutsFamily       = newFamily(dto.MetricType_COUNTER, "sds_timeouts_total", "Upstream calls that passed the point's timeoutThreshold.", []string{"point"})
	inflightFamily       = newFamily(dto.MetricType_GAUGE, "sds_inflight", "Upstream calls in flight on the point.", []string{"point"})
	trippedFamily        = newFamily(dto.MetricType_GAUGE, "sds_point_tripped", "1 while the point's next plain request would be degraded (state open or delay), evaluated at scrape time; 0 otherwise. A shadow point is never tripped.", []string{"point"})
	adaptiveLimitFamily  = newFamily(dto.MetricType_GAUGE, "sds_adaptive_concurrency_limit", "The point's adaptive concurrency limit in force: upstream calls in flight above it are degraded (adaptive_concurrency). Only points with adaptiveConcurrency.", []string{"point"})
	perKeyKeysFamily     = newFamily(dto.MetricType_GAUGE, "sds_perkey_keys", "Keys the point's per-key rules track exactly now, over all its rules (at most the sum of their maxKeys; the others share each rule's fixed-size sketch), read at scrape time. Only points with perKey. No series names a key.", []string{"point"})
	queueLengthFamily    = newFamily(dto.MetricType_GAUGE, "sds_queue_length", "Requests waiting now in the point's queue at its limit, read at scrape time. Only points with queue.", []string{"point"})
	queueWaitFamily      = newFamily(dto.MetricType_HISTOGRAM, "sds_queue_wait_seconds", "Time requests waited in the point's queue at its limit, one observation per request that waited, by how the wait ended: admitted (its turn came and it was judged again), shed (waited past the target while the queue stood, or pushed out of a full queue as its lowest priority's oldest), full (found the queue full and pushed no one out: never waited, observed as 0), timeout (waited maxWait, or its token was due later than that), canceled (its client went away). A request that leaves the queue unadmitted is judged once more without waiting. Time in the queue is never upstream time.", []string{"point", "outcome"})
	recoveryRatioFamily  = newFamily(dto.MetricType_GAUGE, "sds_recovery_admitted_ratio", "The share of requests the point's recovery ramp admits now, from recoveryStart/100 to 1; 1 while no ramp runs. Only points with recoveryTime.", []string{"point"})
	stateFamily          = newFamily(dto.MetricType_GAUGE, "sds_point_state", "1 for the point's state at scrape time, 0 for the others: closed (every strategy passes), open (a strategy would degrade the next request), delay (inside its delay: degraded but for probes), shadow (a shadow point whose next request would be degraded were it enforcing), recovering (every strategy passes, and the recovery ramp admits a growing share: sds_recovery_admitted_ratio).", []string{"point", "state"})
)

// The families' Descs, for the collector.
var (
	requestsDesc       = requestsFamily.desc
	degradedDesc       = degradedFamily.desc
	shadowDegradedDesc = shadowDegradedFamily.desc
	errorsDesc         = errorsFamily.desc
	timeoutsDesc       = timeoutsFamily.desc
	inflightDesc       = inflightFamily.desc
	trippedDesc        = trippedFamily.desc
	adaptiveLimitDesc  = adaptiveLimitFamily.desc
	recoveryRatioDesc  = recoveryRatioFamily.desc
	queueLengthDesc    = queueLengthFamily.desc
	perKeyKeysDesc     = perKeyKeysFamily.desc
	stateDesc          = stateFamily.desc
)

// family is one per-point metric family: its name, help and type, as
// written by Handler, and its Desc, as the collector reports it.
type family struct {
	name, help string
	typ        dto.MetricType
	desc       *prometheus.Desc
}

func newFamily(typ dto.MetricType, name, help string, labels []string) *family {
	return &family{name: name, help: help, typ: typ, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// pointStates are the states of sds_point_state, one series each.
var pointStates = [...]limiter.State{limiter.Closed, limiter.Open, limiter.Delay, limiter.Shadow, limiter.Recovering}

// pointLabelName is the name of every point label pair.
var pointLabelName = "point"

// countSeries is, for each of a point's counters (Point.counts),
// the series it is reported as: its family and its label pair besides
// point (nil for none). A label pair is shared by every point's series and
// never changed.
var countSeries = func() (series [pointCounts]struct {
	desc  *prometheus.Desc
	label *dto.LabelPair
}) {
	pair := func(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }
	set := func(i int, desc *prometheus.Desc, label *dto.LabelPair) {
		series[i].desc, series[i].label = desc, label
	}
	set(countProxied, requestsDesc, pair("result", "proxied"))
	set(countDegraded, requestsDesc, pair("result", "degraded"))
	set(countShadowDegraded, requestsDesc, pair("result", "shadow_degraded"))
	set(countCanceled, requestsDesc, pair("result", "canceled"))
	set(countTransport, errorsDesc, pair("kind", errorTransport))
	set(countUpstreamTimeout, errorsDesc, pair("kind", errorUpstreamTimeout))
	set(countStatus, errorsDesc, pair("kind", errorStatus))
	set(countBody, errorsDesc, pair("kind", errorBody))
	set(countTimeouts, timeoutsDesc, nil)
	for s := limiter.Strategy(1); s <= limiter.LastStrategy; s++ {
		set(countStrategy+int(s), degradedDesc, pair("strategy", s.String()))
		set(countShadowStrategy+int(s), shadowDegradedDesc, pair("strategy", s.String()))
	}
	return series
}()

// stateLabels are the label pairs state=closed, open, delay, shadow and
// recovering, in
// the order of pointStates.
var stateLabels = func() (pairs [len(pointStates)]*dto.LabelPair) {
	name := "state"
	for i, s := range pointStates {
		value := s.String()
		pairs[i] = &dto.LabelPair{Name: &name, Value: &value}
	}
	return pairs
}()

// series is one series at one scrape: a counter, or a gauge when gauge is
// set. It is a prometheus.Metric whose Write shares its labels, its value
// and, for a counter, its dto.Counter and created timestamp with the
// dto.Metric it fills, as the client library's own constant metrics share
// their labels: nothing may change them. A counter's Write allocates
// nothing.
type series struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair // sorted by name
	value   float64
	gauge   bool
	counter dto.Counter // a counter's, filled by Write
}

func (s *series) Desc() *prometheus.Desc { return s.desc }

func (s *series) Write(out *dto.Metric) error {
	out.Label = s.labels
	if s.gauge {
		out.Gauge = &dto.Gauge{Value: &s.value}
		return nil
	}
	s.counter.Value = &s.value
	out.Counter = &s.counter
	return nil
}

// seriesBatch holds the series of one point at one scrape, allocated at
// once: its counters, then its gauges.
type seriesBatch struct {
	series [batchSeries]series
	labels [2 * batchSeries]*dto.LabelPair
	n      int // series used
}

// batchSeries is the number of series of a point: its counters, then
// sds_inflight, sds_point_tripped, sds_point_state's,
// sds_adaptive_concurrency_limit, sds_recovery_admitted_ratio,
// sds_queue_length and sds_perkey_keys.
const batchSeries = pointCounts + 2 + len(pointStates) + 4

// add appends a series of desc with the point's label and label (when not
// nil), sorted by name, and returns it.
func (b *seriesBatch) add(desc *prometheus.Desc, point, label *dto.LabelPair, value float64) *series {
	i := b.n
	b.n++
	labels := b.labels[2*i : 2*i+1 : 2*i+1]
	labels[0] = point
	if label != nil {
		labels = b.labels[2*i : 2*i+2 : 2*i+2]
		if label.GetName() < pointLabelName {
			labels[0], labels[1] = label, point
		} else {
			labels[1] = label
		}
	}
	s := &b.series[i]
	s.desc, s.labels, s.value = desc, labels, value
	return s
}

func (c *pointCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{requestsDesc, degradedDesc, shadowDegradedDesc, errorsDesc, timeoutsDesc, inflightDesc, trippedDesc, stateDesc, adaptiveLimitDesc, recoveryRatioDesc, queueLengthDesc, perKeyKeysDesc} {
		ch <- d
	}
}

// Collect reports the counters of every point the Metrics have created
// series for, including points no longer in force (as counter children of
// the client library would stay), and the gauges of the points in force.
//
// Each family's series are sent in the order the registry sorts them in
// (by label values, in the order of the label names), so that its sort
// finds them sorted: at 10,000 points that sort cost a quarter of the
// scrape when the series came in config order.
func (c *pointCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	if clock := c.now.Load(); clock != nil {
		now = (*clock)()
	}
	live := c.points()
	inForce := make(map[string]*Source, len(live))
	for i := range live {
		inForce[live[i].Limiter.Name()] = &live[i]
	}
	points := slices.Clone(c.metrics.everyPoint())
	slices.SortFunc(points, func(a, b *Point) int { return strings.Compare(a.name, b.name) })
	batches := make([]seriesBatch, len(points))
	for i, pm := range points {
		b := &batches[i]
		p := inForce[pm.name]
		judged := judged(p)
		for _, k := range countOrder {
			v := pm.counts[k].value()
			if v == 0 && judged&(1<<countStrategyOf(k)) == 0 {
				continue // a strategy the point does not have: no series until it counts
			}
			s := b.add(countSeries[k].desc, pm.pointLabel, countSeries[k].label, v)
			s.counter.CreatedTimestamp = pm.created
			ch <- s
		}
		if p == nil {
			continue
		}
		state := p.Limiter.State(now)
		for _, s := range []*series{
			b.add(inflightDesc, pm.pointLabel, nil, float64(p.Limiter.InFlight())),
			b.add(trippedDesc, pm.pointLabel, nil, gaugeBool(state == limiter.Open || state == limiter.Delay)),
		} {
			s.gauge = true
			ch <- s
		}
		for _, k := range stateOrder {
			s := b.add(stateDesc, pm.pointLabel, stateLabels[k], gaugeBool(state == pointStates[k]))
			s.gauge = true
			ch <- s
		}
		if limit, on := p.Limiter.AdaptiveLimit(); on {
			s := b.add(adaptiveLimitDesc, pm.pointLabel, nil, float64(limit))
			s.gauge = true
			ch <- s
		}
		if share, on := p.Limiter.RecoveryShare(now); on {
			s := b.add(recoveryRatioDesc, pm.pointLabel, nil, float64(share)/limiter.RecoveryShareWhole)
			s.gauge = true
			ch <- s
		}
		if p.Queue != nil {
			s := b.add(queueLengthDesc, pm.pointLabel, nil, float64(p.Queue.Len()))
			s.gauge = true
			ch <- s
		}
		if n, on := perKeyKeys(nil, p, state); on {
			s := b.add(perKeyKeysDesc, pm.pointLabel, nil, n)
			s.gauge = true
			ch <- s
		}
	}
	// sds_upstream_errors_total's labels sort kind before point.
	for _, k := range errorOrder {
		for i, pm := range points {
			s := batches[i].add(countSeries[k].desc, pm.pointLabel, countSeries[k].label, pm.counts[k].value())
			s.counter.CreatedTimestamp = pm.created
			ch <- s
		}
	}
}

// countStrategyOf returns the strategy of counter k when k is one of
// sds_degraded_total's or sds_shadow_degraded_total's, else 0.
func countStrategyOf(k int) limiter.Strategy {
	switch {
	case k > countStrategy && k <= countStrategy+int(limiter.LastStrategy):
		return limiter.Strategy(k - countStrategy)
	case k > countShadowStrategy && k <= countShadowStrategy+int(limiter.LastStrategy):
		return limiter.Strategy(k - countShadowStrategy)
	}
	return 0
}

// judged returns the set of strategies whose degraded series are reported
// for p while they are 0, as a bit mask by Strategy, with bit 0 (a counter
// that is no strategy's) always set: a strategy's bit is set only when p
// is in force (p != nil) and has the strategy on. A strategy's series
// appears once it counts and stays, so that a reload that turns the
// strategy off does not reset it; at 10,000 points with one strategy each
// this reports 2 degraded series per point instead of 2 × every strategy.
func judged(p *Source) uint64 {
	mask := uint64(1)
	if p == nil {
		return mask
	}
	policy := p.Limiter.Settings().Policy
	for s := limiter.Strategy(1); s <= limiter.LastStrategy; s++ {
		if policy.Judges(s) || s == limiter.ClusterTokenBucket && p.Gated {
			mask |= 1 << s
		}
	}
	for _, k := range p.Keys {
		ks := k.Table.Settings()
		for s, t := range [...]limiter.Threshold{limiter.KeyVisit: ks.VisitThreshold, limiter.KeyTokenBucket: ks.TokensPerSecond, limiter.KeyConcurrent: ks.ConcurrentThreshold} {
			if t != (limiter.Threshold{}) {
				mask |= 1 << s
			}
		}
	}
	return mask
}

// countOrder lists the indexes of a point's counters other than its
// upstream errors, and errorOrder those of its upstream errors, each
// family's in ascending order of its label value: the order Collect sends
// them in.
var countOrder, errorOrder = func() (counts, errors []int) {
	order := make([]int, pointCounts)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return strings.Compare(countSeries[a].label.GetValue(), countSeries[b].label.GetValue())
	})
	for _, k := range order {
		if countSeries[k].desc == errorsDesc {
			errors = append(errors, k)
		} else {
			counts = append(counts, k)
		}
	}
	return counts, errors
}()

// stateOrder lists the indexes of pointStates in ascending order of their
// names: the order Collect sends sds_point_state's series in.
var stateOrder = func() []int {
	order := make([]int, len(pointStates))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(pointStates[a].String(), pointStates[b].String()) })
	return order
}()

// gaugeBool is 1 for true and 0 for false.
func gaugeBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Strategy returns the sds_degraded_total series of strategy s.
func (pm *Point) Strategy(s limiter.Strategy) *Counter {
	return &pm.counts[countStrategy+int(s)]
}

// ShadowStrategy returns the sds_shadow_degraded_total series of
// strategy s.
func (pm *Point) ShadowStrategy(s limiter.Strategy) *Counter {
	return &pm.counts[countShadowStrategy+int(s)]
}

// exemplarEvery is the least time between two exemplars of one point's
// upstream time. The client library keeps only the latest exemplars (one
// per classic bucket, a few for the native histogram) and a scrape reads
// them every few seconds, so more would be overwritten unseen; building one
// allocates (docs/benchmarks.md, "Figures behind the code's choices"),
// which a fully traced service would pay on every request.
const exemplarEvery = 100 * time.Millisecond

// ObserveDuration records a forwarded call's upstream time in seconds,
// ending at now, with traceID (a W3C trace id) as the
// exemplar's trace_id when it is not "" and the point's last exemplar is
// exemplarEvery old. Without an exemplar it allocates nothing, but for the
// point's histogram at its first call.
func (pm *Point) ObserveDuration(seconds float64, traceID string, now time.Time) {
	// Counted after the observation: a histogram read after observed
	// holds at least that many.
	defer pm.observed.Inc()
	h := pm.duration.Load()
	if h == nil {
		h = pm.makeDuration()
	}
	if traceID == "" {
		h.histogram.Observe(seconds)
		return
	}
	next, t := pm.nextExemplar.Load(), now.UnixNano()
	if t < next || !pm.nextExemplar.CompareAndSwap(next, t+int64(exemplarEvery)) {
		h.histogram.Observe(seconds)
		return
	}
	h.histogram.ObserveWithExemplar(seconds, prometheus.Labels{"trace_id": traceID})
}

// durationHistogram is a point's upstream time histogram: a child of
// Set's HistogramVec, which the client library makes an Observer, an
// ExemplarObserver and a Metric.
type durationHistogram struct{ histogram durationChild }

// durationChild is what the client library's histogram child is.
type durationChild interface {
	prometheus.Observer
	prometheus.ExemplarObserver
	prometheus.Metric
}

// makeDuration creates the point's histogram, once: callers racing on a
// point's first calls all get the one that was stored first.
func (pm *Point) makeDuration() *durationHistogram {
	h := &durationHistogram{histogram: pm.vecs.duration.WithLabelValues(pm.name).(durationChild)}
	pm.duration.CompareAndSwap(nil, h)
	return pm.duration.Load()
}

// writeDuration writes the point's upstream time histogram into out, as
// the client library writes it; a point with no call observed yet writes
// what a histogram the library had just created would write, created at
// the point's creation (emptyDuration). Its fields are shared with every
// such point's: nothing may change them.
func (pm *Point) writeDuration(out *dto.Metric) error {
	if h := pm.duration.Load(); h != nil {
		return h.histogram.Write(out)
	}
	out.Label = []*dto.LabelPair{pm.pointLabel}
	out.Histogram = new(dto.Histogram)
	pm.emptyDuration(out.Histogram)
	return nil
}

// emptyDuration sets h to the point's histogram before its first call:
// emptyDuration's, created at the point's creation.
func (pm *Point) emptyDuration(h *dto.Histogram) {
	e := &emptyDuration
	*h = dto.Histogram{
		SampleCount: e.SampleCount, SampleSum: e.SampleSum, Bucket: e.Bucket,
		CreatedTimestamp: pm.created,
		Schema:           e.Schema, ZeroThreshold: e.ZeroThreshold, ZeroCount: e.ZeroCount,
		NegativeSpan: e.NegativeSpan, NegativeDelta: e.NegativeDelta,
		PositiveSpan: e.PositiveSpan, PositiveDelta: e.PositiveDelta,
	}
}

// emptyDuration is what a sds_upstream_duration_seconds histogram writes
// before its first observation, as the client library writes it; its
// labels and created timestamp are left out (a point's own are
// writeDuration's).
var emptyDuration = func() dto.Histogram {
	var out dto.Metric
	if err := newDurationVec().WithLabelValues("").(prometheus.Metric).Write(&out); err != nil {
		panic(err) // cannot happen: a histogram's Write returns no error
	}
	h := out.GetHistogram()
	return dto.Histogram{
		SampleCount: h.SampleCount, SampleSum: h.SampleSum, Bucket: h.Bucket,
		Schema: h.Schema, ZeroThreshold: h.ZeroThreshold, ZeroCount: h.ZeroCount,
		NegativeSpan: h.NegativeSpan, NegativeDelta: h.NegativeDelta,
		PositiveSpan: h.PositiveSpan, PositiveDelta: h.PositiveDelta,
	}
}()
