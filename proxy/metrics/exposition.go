package metrics

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// Handler serves GET /metrics: the families of reg, which must be the
// registry NewSet was given, in the format the request's Accept header
// negotiates (text, OpenMetrics or protobuf, as promhttp.HandlerFor with
// EnableOpenMetrics does), with the same bytes promhttp would write.
//
// The registry's Gather builds a dto.Metric for every series it reports,
// over a dozen per point, so that a large config's scrape would allocate
// far more than the proxy holds (docs/benchmarks.md, "Figures behind the
// code's choices").
// So Handler gathers reg without the per-point families (Set.exposing)
// and writes those itself, family by family in name order among the
// others: chunks of at most chunkSeries series are filled from the
// points' own counters into dto.Metric values that are reused from chunk
// to chunk and from scrape to scrape, and each chunk is encoded by the
// client library's own encoder (text and OpenMetrics: its family header
// is written once; protobuf: the chunks' repeated metric fields are
// concatenated into one family). A scrape then holds one chunk at a time,
// whatever the number of points; the protobuf family of the upstream
// times is held whole, since its length precedes it.
//
// It does not compress: the admin port gzips. A request may narrow the
// families with name[] query parameters, as promhttp's may. A scrape
// running while another caller gathers reg makes that caller miss the
// per-point families: the proxy gathers reg only here.
func (m *Set) Handler(reg prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.exposing.Add(1)
		others, err := reg.Gather()
		m.exposing.Add(-1)
		if err != nil {
			// What promhttp answers (HTTPErrorOnError).
			w.Header().Del("Content-Encoding")
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultOpenMetricsAcceptedFormats()...)
		w.Header().Add("Vary", "Accept")
		w.Header().Set("Content-Type", string(format))

		var only map[string]bool // name[]: the families asked for; nil for all
		if r.URL != nil {
			if names := r.URL.Query()["name[]"]; len(names) > 0 {
				only = make(map[string]bool, len(names))
				for _, n := range names {
					only[n] = true
				}
			}
		}
		wanted := func(name string) bool { return only == nil || only[name] }

		s, _ := m.scrapes.Get().(*scrape)
		if s == nil {
			s = newScrape()
		}
		defer func() {
			if cap(s.body) > maxKeptBody {
				s.body = nil // not kept between scrapes: a large config's upstream times are megabytes (docs/benchmarks.md)
			}
			m.scrapes.Put(s)
		}()
		s.start(m, format, w)
		defer s.out.Reset(nil) // the pooled scrape keeps no ResponseWriter

		enc := expfmt.NewEncoder(s.out, format)
		next := 0 // pointFamilies written or passed
		writePoints := func(before string) error {
			for ; next < len(pointFamilies) && (before == "" || pointFamilies[next].f.name < before); next++ {
				pf := pointFamilies[next]
				if !wanted(pf.f.name) {
					continue
				}
				s.begin(pf.f, &m.familyBytes[next])
				pf.write(s)
				if err := s.end(); err != nil {
					return err
				}
			}
			return nil
		}
		for _, mf := range others {
			if err := writePoints(mf.GetName()); err != nil {
				return
			}
			if !wanted(mf.GetName()) {
				continue
			}
			if enc.Encode(mf) != nil {
				return
			}
		}
		if writePoints("") != nil {
			return
		}
		if closer, ok := enc.(expfmt.Closer); ok && closer.Close() != nil {
			return
		}
		s.out.Flush()
	})
}

// maxKeptBody is the largest protobuf family buffer, in bytes, a scrape
// leaves to the next one; within a scrape the buffer is reused from
// family to family.
const maxKeptBody = 1 << 20

// chunkSeries is the most series a scrape holds as dto.Metric values at
// once (in the formats Handler writes in chunks: text, OpenMetrics 1.0.0
// and 0.0.1, delimited protobuf): memory bounded whatever the config's
// size (a dto.Metric's bytes: docs/benchmarks.md).
const chunkSeries = 512

// scrape is one scrape's state, recycled from scrape to scrape: the
// points sorted by name with what was read of them once, the chunk of
// series being filled, and the buffers of the encoding.
type scrape struct {
	now   time.Time
	proto bool // the protobuf format; else a text one
	// direct: counters and gauges are written by hand (direct.go), past
	// each family's first series, which the library writes with the
	// family's header; in the text format, OpenMetrics 1.0.0 and 0.0.1,
	// and protobuf. Other formats go through the library alone.
	direct      bool
	openMetrics bool   // direct in OpenMetrics: its float format
	num         []byte // a number being formatted
	out         *bufio.Writer
	points      []*Point // every point with series, by name
	// live holds, for each of points, what the scrape read once of it.
	live    []pointRead
	inForce map[string]*Source

	// The family being written, and its series not yet encoded.
	fam     *family
	n       int  // slots in use
	started bool // a chunk of fam was encoded: its header is out
	header  int  // text formats: the length of fam's HELP and TYPE lines
	slots   [chunkSeries]slot
	metrics []*dto.Metric    // &slots[i].metric, then a whole family's more
	family  dto.MetricFamily // the chunk as the encoder reads it
	enc     expfmt.Encoder   // text formats: encodes into chunk
	chunk   bytes.Buffer     // text formats: a chunk encoded
	body    []byte           // protobuf: fam's message so far
	marshal proto.MarshalOptions
	// famBytes is the length of fam's protobuf message at the last scrape
	// (Set.familyBytes).
	famBytes *atomic.Int64
	// A histogram written by hand (direct.go): an idle point's values, or
	// a busy point's as the library writes them.
	idle dto.Histogram
	busy dto.Metric
	err  error // the family's first error of encoding
}

// pointRead is what a scrape reads of a point once: its source when in
// force (nil otherwise), its state at the scrape's instant and the
// strategies whose degraded series it reports from 0 (judged).
type pointRead struct {
	src    *Source
	state  limiter.State
	judged uint64
}

// slot is one series of a chunk: a dto.Metric and the values it points
// to.
type slot struct {
	metric    dto.Metric
	counter   dto.Counter
	gauge     dto.Gauge
	histogram dto.Histogram // an idle point's (Point.emptyDuration)
	value     float64
	labels    [2]*dto.LabelPair
}

func newScrape() *scrape {
	s := &scrape{inForce: make(map[string]*Source), out: bufio.NewWriterSize(nil, 64<<10)}
	s.metrics = make([]*dto.Metric, chunkSeries)
	for i := range s.slots {
		s.metrics[i] = &s.slots[i].metric
	}
	return s
}

// start readies s for a scrape of m's points in format, written to w.
func (s *scrape) start(m *Set, format expfmt.Format, w http.ResponseWriter) {
	s.now = time.Now()
	if clock := m.collector.now.Load(); clock != nil {
		s.now = (*clock)()
	}
	s.out.Reset(w)
	s.proto = format.FormatType() == expfmt.TypeProtoDelim
	s.openMetrics = format.FormatType() == expfmt.TypeOpenMetrics
	s.direct = s.proto || format.FormatType() == expfmt.TypeTextPlain ||
		s.openMetrics && !strings.Contains(string(format), "version="+expfmt.OpenMetricsVersion_2_0_0)
	s.chunk.Reset()
	s.enc = nil
	if !s.proto {
		s.enc = expfmt.NewEncoder(&s.chunk, format)
	}

	live := m.live()
	clear(s.inForce)
	for i := range live {
		s.inForce[live[i].Limiter.Name()] = &live[i]
	}
	s.points = append(s.points[:0], m.everyPoint()...)
	if !slices.IsSortedFunc(s.points, comparePoints) {
		slices.SortFunc(s.points, comparePoints)
	}
	s.live = s.live[:0]
	for _, pm := range s.points {
		p := s.inForce[pm.name]
		read := pointRead{src: p, judged: judged(p)}
		if p != nil {
			read.state = p.Limiter.State(s.now)
		}
		s.live = append(s.live, read)
	}
}

func comparePoints(a, b *Point) int { return strings.Compare(a.name, b.name) }

// begin starts family f, whose protobuf message was size bytes long at
// the last scrape in that format (0 before it).
func (s *scrape) begin(f *family, size *atomic.Int64) {
	s.fam, s.n, s.started, s.err, s.famBytes = f, 0, false, nil, size
}

// next returns the next slot of the chunk, cleared.
func (s *scrape) next() *slot {
	var sl *slot
	switch {
	case s.n < chunkSeries:
		sl = &s.slots[s.n]
	case s.direct:
		s.flush()
		sl = &s.slots[0]
	default:
		// A format whose families cannot be written in chunks: the
		// family whole, in slots of its own.
		sl = new(slot)
		s.metrics = append(s.metrics, &sl.metric)
	}
	s.n++
	m := &sl.metric
	m.Label, m.Gauge, m.Counter, m.Summary, m.Untyped, m.Histogram, m.TimestampMs = nil, nil, nil, nil, nil, nil, nil
	return sl
}

// labels sets sl's label pairs: the point's and label (when not nil),
// sorted by name.
func (sl *slot) setLabels(point, label *dto.LabelPair) {
	if label == nil {
		sl.labels[0] = point
		sl.metric.Label = sl.labels[:1]
		return
	}
	if label.GetName() < pointLabelName {
		sl.labels[0], sl.labels[1] = label, point
	} else {
		sl.labels[0], sl.labels[1] = point, label
	}
	sl.metric.Label = sl.labels[:2]
}

// counter adds a series of the family: pm's counter of value v with
// label besides point (nil for none).
func (s *scrape) counter(pm *Point, label *dto.LabelPair, v float64) { s.series(pm, label, v, true) }

// gauge adds a gauge series of the family.
func (s *scrape) gauge(pm *Point, label *dto.LabelPair, v float64) { s.series(pm, label, v, false) }

// series adds a counter or gauge series: written by hand once the
// family's header is out (direct), else as a slot of the chunk.
func (s *scrape) series(pm *Point, label *dto.LabelPair, v float64, counter bool) {
	if s.direct && s.started {
		s.directSeries(pm, label, v, counter)
		return
	}
	sl := s.next()
	sl.setLabels(pm.pointLabel, label)
	sl.value = v
	if counter {
		sl.counter = dto.Counter{}
		sl.counter.Value, sl.counter.CreatedTimestamp = &sl.value, pm.created
		sl.metric.Counter = &sl.counter
	} else {
		sl.gauge.Value = &sl.value
		sl.metric.Gauge = &sl.gauge
	}
	if s.direct {
		s.flush() // the family's header and first series, by the library
	}
}

// histogram adds pm's upstream time histogram, as the client library
// writes it. In the text formats, past the family's first series (the
// library's, with the header), its lines are written by hand
// (textHistogram); otherwise it goes into the chunk. An idle point's
// histogram is filled in the scrape's own values, with no allocation.
func (s *scrape) histogram(pm *Point) {
	if s.direct && s.started && !s.proto {
		h := &s.idle
		if pm.duration.Load() == nil {
			pm.emptyDuration(h)
		} else {
			s.busy = dto.Metric{}
			if pm.writeDuration(&s.busy) != nil {
				return // cannot happen: a histogram's Write returns no error
			}
			h = s.busy.Histogram
		}
		if s.textHistogram(pm, h) {
			return
		}
		// A float histogram, which the library refuses in OpenMetrics:
		// through the library, which says so.
	}
	sl := s.next()
	if pm.duration.Load() == nil {
		sl.setLabels(pm.pointLabel, nil)
		pm.emptyDuration(&sl.histogram)
		sl.metric.Histogram = &sl.histogram
	} else if pm.writeDuration(&sl.metric) != nil {
		s.n-- // cannot happen: a histogram's Write returns no error
		return
	}
	if s.direct && !s.proto {
		s.flush() // the family's header and first series, by the library
	}
}

// errBadChunk is a text chunk that does not start with its family's
// header: it cannot happen, the encoder writes the header first.
var errBadChunk = errors.New("metrics: an encoded chunk lacks its family's header")

// flush encodes the chunk's series and empties it. An error is kept for
// end (s.err).
func (s *scrape) flush() {
	if s.n == 0 {
		return
	}
	f := &s.family
	f.Metric = s.metrics[:s.n]
	s.n = 0
	defer func() {
		if len(s.metrics) > chunkSeries { // a whole family's slots: dropped
			clear(s.metrics[chunkSeries:])
			s.metrics = s.metrics[:chunkSeries]
		}
	}()
	if s.proto {
		if !s.started {
			// The family's fields, then its metrics: the order in which
			// proto.Marshal writes a whole family.
			header := dto.MetricFamily{Name: &s.fam.name, Help: &s.fam.help, Type: &s.fam.typ}
			if last := int(s.famBytes.Load()); cap(s.body) < last {
				// Sized at once from the last scrape's message, a sixteenth
				// more: grown by doubling, the largest family cost twice
				// its size again in copies, and held more than its size
				// during the last one (docs/benchmarks.md, "10,000 points
				// in 128 MiB").
				s.body = make([]byte, 0, last+last/16)
			}
			s.body, _ = s.marshal.MarshalAppend(s.body[:0], &header) // dto messages always marshal
			s.started = true
		}
		f.Name, f.Help, f.Type = nil, nil, nil
		s.body, _ = s.marshal.MarshalAppend(s.body, f)
		f.Metric = nil
		return
	}
	f.Name, f.Help, f.Type = &s.fam.name, &s.fam.help, &s.fam.typ
	s.chunk.Reset()
	err := s.enc.Encode(f)
	f.Metric = nil
	if err != nil {
		s.err = cmp.Or(s.err, err)
		return
	}
	b := s.chunk.Bytes()
	if !s.started {
		s.header = headerLength(b)
		s.started = true
		s.out.Write(b)
		return
	}
	if s.header > len(b) {
		s.err = cmp.Or(s.err, errBadChunk)
		return
	}
	s.out.Write(b[s.header:])
}

// headerLength is the length of a text family's HELP and TYPE lines at
// the start of b: through its second newline; len(b)+1 when b has fewer
// than two.
func headerLength(b []byte) int {
	first := bytes.IndexByte(b, '\n')
	second := bytes.IndexByte(b[first+1:], '\n')
	if first < 0 || second < 0 {
		return len(b) + 1
	}
	return first + 1 + second + 1
}

// end encodes the rest of the family and writes it out; it returns the
// first error of writing.
func (s *scrape) end() error {
	s.flush()
	if s.proto && s.started {
		s.famBytes.Store(int64(len(s.body)))
		var size [binary.MaxVarintLen64]byte
		s.out.Write(size[:binary.PutUvarint(size[:], uint64(len(s.body)))])
		s.out.Write(s.body)
	}
	s.fam = nil
	if s.err != nil {
		return s.err
	}
	_, err := s.out.Write(nil) // the writer's first error, kept by bufio
	return err
}

// pointFamilies are the per-point families in name order, each with the
// function that adds its series, in the order the registry sorts them
// (by label value, in the order of the label names).
var pointFamilies = func() []struct {
	f     *family
	write func(*scrape)
} {
	counters := func(f *family) func(*scrape) {
		var keys []int
		for _, k := range countOrder {
			if countSeries[k].desc == f.desc {
				keys = append(keys, k)
			}
		}
		return func(s *scrape) {
			for i, pm := range s.points {
				judged := s.live[i].judged
				for _, k := range keys {
					v := pm.counts[k].value()
					if v == 0 && judged&(1<<countStrategyOf(k)) == 0 {
						continue // a strategy the point does not have: no series until it counts
					}
					s.counter(pm, countSeries[k].label, v)
				}
			}
		}
	}
	gauges := func(value func(s *scrape, p *Source, state limiter.State) (float64, bool)) func(*scrape) {
		return func(s *scrape) {
			for i, pm := range s.points {
				if p := s.live[i].src; p != nil {
					if v, ok := value(s, p, s.live[i].state); ok {
						s.gauge(pm, nil, v)
					}
				}
			}
		}
	}
	families := []struct {
		f     *family
		write func(*scrape)
	}{
		{requestsFamily, counters(requestsFamily)},
		{degradedFamily, counters(degradedFamily)},
		{shadowDegradedFamily, counters(shadowDegradedFamily)},
		{timeoutsFamily, counters(timeoutsFamily)},
		{errorsFamily, func(s *scrape) {
			// Its labels sort kind before point.
			for _, k := range errorOrder {
				for _, pm := range s.points {
					s.counter(pm, countSeries[k].label, pm.counts[k].value())
				}
			}
		}},
		{durationFamily, func(s *scrape) {
			for _, pm := range s.points {
				s.histogram(pm)
			}
		}},
		{inflightFamily, gauges(func(_ *scrape, p *Source, _ limiter.State) (float64, bool) {
			return float64(p.Limiter.InFlight()), true
		})},
		{trippedFamily, gauges(func(_ *scrape, _ *Source, state limiter.State) (float64, bool) {
			return gaugeBool(state == limiter.Open || state == limiter.Delay), true
		})},
		{stateFamily, func(s *scrape) {
			for i, pm := range s.points {
				if s.live[i].src == nil {
					continue
				}
				for _, k := range stateOrder {
					s.gauge(pm, stateLabels[k], gaugeBool(s.live[i].state == pointStates[k]))
				}
			}
		}},
		{adaptiveLimitFamily, gauges(func(_ *scrape, p *Source, _ limiter.State) (float64, bool) {
			limit, on := p.Limiter.AdaptiveLimit()
			return float64(limit), on
		})},
		{queueLengthFamily, gauges(queueLength)},
		{perKeyKeysFamily, gauges(perKeyKeys)},
		{queueWaitFamily, (*scrape).waits},
		{recoveryRatioFamily, gauges(func(s *scrape, p *Source, _ limiter.State) (float64, bool) {
			share, on := p.Limiter.RecoveryShare(s.now)
			return float64(share) / limiter.RecoveryShareWhole, on
		})},
	}
	slices.SortFunc(families, func(a, b struct {
		f     *family
		write func(*scrape)
	}) int {
		return strings.Compare(a.f.name, b.f.name)
	})
	return families
}()
