package metrics

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Traffic figures are read from the points' own Prometheus series: Sample
// records their cumulative values (requests by result, upstream errors,
// the native buckets of the upstream time) once a second, and Traffic
// turns the difference between two samples into rates, an error
// percentage and latency quantiles. The request path counts nothing twice.
//
//	samples of a point, oldest first (at most trafficSamples):
//	  t-12s  t-11s | t-10s ... t-1s  t      now = t
//	               | oldest          newest
//	               '-- Span = newest - oldest (at most trafficWindow)
const (
	// trafficWindow is how far back Traffic looks: the oldest sample it
	// uses is at most this old.
	trafficWindow = 10 * time.Second
	// trafficSamples is how many samples a point keeps: one a second
	// over trafficWindow, both ends included.
	trafficSamples = 11
)

// Traffic is a point's traffic over the last Span, measured between two of
// Sample's samples. Rates are per second of Span.
type Traffic struct {
	// Span is the time between the two samples the figures come from:
	// more than 0 and at most 10 s.
	Span time.Duration
	// RequestsPerSecond counts every request on the point: proxied,
	// degraded and shadow-degraded.
	RequestsPerSecond float64
	// DegradedPerSecond counts the requests answered by the fallback.
	DegradedPerSecond float64
	// ShadowDegradedPerSecond counts the requests a shadow point forwarded
	// that it would have degraded.
	ShadowDegradedPerSecond float64
	// Calls is the number of forwarded calls that ended in the span (the
	// observations of sds_upstream_duration_seconds). ErrorPercent, P50
	// and P99 are measured over these calls and are absent, 0, when Calls
	// is 0. If the histogram was reset or lowered its resolution within
	// Span, they cover the part of Span since then.
	Calls uint64
	// ErrorPercent is upstream errors (sds_upstream_errors_total, every
	// kind) * 100 / Calls, at most 100.
	ErrorPercent float64
	// P50 and P99 are the median and 99th percentile of the calls'
	// upstream time in seconds, from the native buckets' counts (each
	// bucket at most 9.05% wide) with log-linear interpolation within a
	// bucket, as Prometheus' histogram_quantile does for native
	// histograms.
	P50, P99 float64
}

// traffic holds the samples of every point in force. Its zero value is
// empty and ready.
type traffic struct {
	mu sync.Mutex
	// instants are the instants of Sample's last trafficSamples calls, a
	// ring whose next slot is next: every point in force is sampled at
	// each, so a point's samples are at the last of them.
	instants [trafficSamples]time.Time
	next     int
	calls    uint64                 // Sample's calls: the latest marks the rings it sampled
	rings    map[string]*sampleRing // by point name
}

// sampleRing is one point's last n samples (up to trafficSamples), taken
// at traffic's last n instants, as runs of equal samples: an idle point,
// most of a large config's, holds one run where it held trafficSamples
// samples (docs/benchmarks.md, "Figures behind the code's choices").
type sampleRing struct {
	runs []sampleRun // oldest first; their counts sum to n
	n    int
	call uint64 // the Sample call that sampled it last
}

// sampleRun is count consecutive samples of equal values (their at is
// left zero: the instants are traffic's).
type sampleRun struct {
	count  int
	sample pointSample
}

// pointSample is the cumulative values of one point's series at an
// instant.
type pointSample struct {
	at                                time.Time
	proxied, degraded, shadowDegraded float64 // sds_requests_total by result
	errors                            float64 // sds_upstream_errors_total, every kind
	hist                              nativeHistogram
}

// nativeHistogram is the native part of a sds_upstream_duration_seconds
// series: its observation count, zero bucket and positive buckets
// (upstream times are never negative).
type nativeHistogram struct {
	epoch     histogramEpoch
	count     uint64 // every observation
	zeroCount uint64 // observations at or below epoch.zeroThreshold
	// buckets are the populated positive buckets in ascending index,
	// with absolute (not delta-encoded) counts.
	buckets []nativeBucket
}

// histogramEpoch identifies a stretch of a histogram's life whose bucket
// counts only grow: the client library resets a histogram (a new created
// time) or lowers its schema when it exceeds its bucket limit, and counts
// from different epochs cannot be subtracted.
type histogramEpoch struct {
	created       time.Time
	schema        int32
	zeroThreshold float64
}

// nativeBucket is the count of native bucket index: the observations v
// with 2^((index-1)/2^schema) < v <= 2^(index/2^schema).
type nativeBucket struct {
	index int32
	count uint64
}

// Sample records the cumulative values of every point in force (the
// points NewSet was given) at now, for Traffic. The samples of points
// no longer in force are dropped. It is meant to be called about once a
// second (a point keeps its last 11 samples), from one goroutine; it is
// safe to call concurrently with Traffic and with requests.
func (m *Set) Sample(now time.Time) {
	points := m.live()
	t := &m.traffic
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls++
	t.instants[t.next] = now
	t.next = (t.next + 1) % trafficSamples
	if t.rings == nil {
		t.rings = make(map[string]*sampleRing, len(points))
	}
	for _, p := range points {
		name := p.Limiter.Name()
		r := t.rings[name]
		if r == nil {
			r = &sampleRing{}
			t.rings[name] = r
		}
		if r.call == t.calls {
			continue // a name twice among the points: sampled once
		}
		r.call = t.calls
		r.add(m.ForPoint(name).sample(now))
	}
	for name, r := range t.rings {
		if r.call != t.calls {
			delete(t.rings, name)
		}
	}
}

// Traffic returns the traffic of the point named point over the span from
// the oldest sample taken within trafficWindow (10 s) before now to the
// newest one. ok is false when the point has fewer than two such samples
// (it is not in force, or was sampled less than twice in the last 10 s).
// It has no side effects and is safe for concurrent use.
func (m *Set) Traffic(point string, now time.Time) (tr Traffic, ok bool) {
	t := &m.traffic
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rings[point]
	if r == nil {
		return Traffic{}, false
	}
	first := -1 // the oldest sample within the window, counted from the oldest held
	for i := range r.n {
		if !t.instant(r, i).Before(now.Add(-trafficWindow)) {
			first = i
			break
		}
	}
	if first < 0 || first == r.n-1 {
		return Traffic{}, false
	}
	oldest, newest := r.at(first), r.at(r.n-1)
	tr.Span = t.instant(r, r.n-1).Sub(t.instant(r, first))
	if tr.Span <= 0 {
		return Traffic{}, false
	}
	seconds := tr.Span.Seconds()
	degraded := newest.degraded - oldest.degraded
	shadow := newest.shadowDegraded - oldest.shadowDegraded
	tr.RequestsPerSecond = (newest.proxied - oldest.proxied + degraded + shadow) / seconds
	tr.DegradedPerSecond = degraded / seconds
	tr.ShadowDegradedPerSecond = shadow / seconds

	// The latency figures' baseline: the oldest sample in the span from
	// the newest one's histogram epoch, or an empty histogram just before
	// it, whose epoch does not matter: it has no bucket to subtract. (A
	// point's histogram is created at its first call, and is read as an
	// empty one created with the point until then.)
	base := newest
	for i := r.n - 2; i >= first; i-- {
		s := r.at(i)
		if s.hist.epoch != newest.hist.epoch {
			if s.hist.count == 0 {
				base = s
			}
			break
		}
		base = s
	}
	tr.Calls = newest.hist.count - base.hist.count
	if tr.Calls == 0 {
		return tr, true
	}
	tr.ErrorPercent = min(100, (newest.errors-base.errors)*100/float64(tr.Calls))
	tr.P50 = quantile(0.5, &base.hist, &newest.hist)
	tr.P99 = quantile(0.99, &base.hist, &newest.hist)
	return tr, true
}

// add appends s, dropping the oldest sample when the ring is full.
func (r *sampleRing) add(s pointSample) {
	s.at = time.Time{}
	if last := len(r.runs) - 1; last >= 0 && sameSample(&r.runs[last].sample, &s) {
		r.runs[last].count++
	} else {
		if len(r.runs) == cap(r.runs) {
			// Grown by hand: at most trafficSamples runs, never more room.
			grown := make([]sampleRun, len(r.runs), min(max(2*cap(r.runs), 1), trafficSamples))
			copy(grown, r.runs)
			r.runs = grown
		}
		r.runs = append(r.runs, sampleRun{count: 1, sample: s})
	}
	r.n++
	if r.n > trafficSamples {
		r.n--
		if r.runs[0].count--; r.runs[0].count == 0 {
			r.runs = append(r.runs[:0], r.runs[1:]...)
		}
	}
}

// sameSample reports whether a and b hold the same values, at aside.
func sameSample(a, b *pointSample) bool {
	return a.proxied == b.proxied && a.degraded == b.degraded && a.shadowDegraded == b.shadowDegraded &&
		a.errors == b.errors && a.hist.epoch == b.hist.epoch && a.hist.count == b.hist.count &&
		a.hist.zeroCount == b.hist.zeroCount && slices.Equal(a.hist.buckets, b.hist.buckets)
}

// at returns the values of the i-th sample held, 0 being the oldest (its
// at is zero: traffic.instant has it).
func (r *sampleRing) at(i int) *pointSample {
	for k := range r.runs {
		if i < r.runs[k].count {
			return &r.runs[k].sample
		}
		i -= r.runs[k].count
	}
	panic("metrics: sample index past the ring") // cannot happen: i < r.n
}

// instant returns when r's i-th sample held was taken, 0 being the
// oldest: the instant of Sample's call r.n-i calls ago.
func (t *traffic) instant(r *sampleRing, i int) time.Time {
	return t.instants[(t.next-r.n+i+2*trafficSamples)%trafficSamples]
}

// sample reads the point's series at now. A histogram that fails to write
// is read as empty. The histogram is read again only when it may have
// changed: when a call was observed since the last reading, or when it is
// not at its full resolution (a histogram whose resolution was lowered has
// a reset scheduled, which happens with no observation). Writing one
// allocates, which 10,000 idle points would pay every second
// (BenchmarkSample). It is called from Sample's goroutine only.
func (pm *Point) sample(now time.Time) pointSample {
	s := pointSample{
		at:             now,
		proxied:        pm.Proxied.value(),
		degraded:       pm.Degraded.value(),
		shadowDegraded: pm.ShadowDegraded.value(),
		errors:         pm.TransportErrors.value() + pm.TimeoutErrors.value() + pm.StatusErrors.value() + pm.BodyErrors.value(),
	}
	last := &pm.sampled
	observed := pm.observed.n.Load()
	full := last.hist.epoch.schema == durationSchema && last.hist.epoch.zeroThreshold == prometheus.DefNativeHistogramZeroThreshold
	if !last.ok || observed != last.observed || !full {
		var d dto.Metric
		last.hist = nativeHistogram{}
		if pm.writeDuration(&d) == nil {
			last.hist = readNativeHistogram(d.GetHistogram())
		}
		last.observed, last.ok = observed, true
	}
	s.hist = last.hist
	return s
}

// readNativeHistogram decodes h's native part: its spans and deltas into
// absolute bucket counts by index.
func readNativeHistogram(h *dto.Histogram) nativeHistogram {
	n := nativeHistogram{
		epoch: histogramEpoch{
			created:       h.GetCreatedTimestamp().AsTime(),
			schema:        h.GetSchema(),
			zeroThreshold: h.GetZeroThreshold(),
		},
		count:     h.GetSampleCount(),
		zeroCount: h.GetZeroCount(),
	}
	deltas := h.GetPositiveDelta()
	var index int32
	var count int64
	for _, span := range h.GetPositiveSpan() {
		// The first span's offset is the first index; the others' the gap
		// after the previous span.
		index += span.GetOffset()
		for range span.GetLength() {
			if len(deltas) == 0 {
				return n // malformed: more buckets than deltas
			}
			count += deltas[0]
			deltas = deltas[1:]
			if count > 0 {
				n.buckets = append(n.buckets, nativeBucket{index: index, count: uint64(count)})
			}
			index++
		}
	}
	return n
}

// quantile returns the q-quantile (0 < q <= 1) of the observations that
// last holds and base, an earlier reading of the same epoch, does not, in
// seconds. The observation of rank q*count is placed in its bucket by
// log-linear interpolation (Prometheus' histogram_quantile for native
// histograms); in the zero bucket, linearly between 0 and its threshold.
// It returns 0 when there is no observation between the two.
func quantile(q float64, base, last *nativeHistogram) float64 {
	total := last.count - base.count
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	zero := float64(last.zeroCount - base.zeroCount)
	if rank <= zero {
		return last.epoch.zeroThreshold * rank / zero
	}
	cumulative := zero
	old := base.buckets
	var lastIndex int32
	for _, b := range last.buckets {
		for len(old) > 0 && old[0].index < b.index {
			old = old[1:] // a bucket only base has: not reached, counts only grow
		}
		n := b.count
		if len(old) > 0 && old[0].index == b.index {
			n -= old[0].count
		}
		if n == 0 {
			continue
		}
		lastIndex = b.index
		if cumulative+float64(n) >= rank {
			fraction := (rank - cumulative) / float64(n)
			return bucketBound(float64(b.index)-1+fraction, last.epoch.schema)
		}
		cumulative += float64(n)
	}
	// Rounding left the rank past the last bucket: its upper bound.
	return bucketBound(float64(lastIndex), last.epoch.schema)
}

// bucketBound returns 2^(x/2^schema): for a whole x, the upper bound of
// native bucket x; between two whole numbers, the log-linear point
// between two bounds.
func bucketBound(x float64, schema int32) float64 {
	return math.Exp2(x * math.Exp2(-float64(schema)))
}
