package metrics

import (
	"bufio"
	"bytes"
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
)

// The hand-written encoding of a scrape's counters and gauges: what the
// client library's encoders write for a series of one or two label pairs
// and a value (expfmt's writeSample and writeOpenMetricsSample; a
// dto.Metric's protobuf wire format), without a dto.Metric. Handler's
// differential test (TestHandlerMatchesPromhttp) holds it to the
// library's bytes. Family and label names are the proxy's own, all valid
// legacy names, so that none is quoted; label values are escaped.

// directSeries writes pm's counter (or gauge) of value v, with label
// besides point (nil for none), as the next series of the family.
func (s *scrape) directSeries(pm *Point, label *dto.LabelPair, v float64, counter bool) {
	if s.proto {
		s.protoSeries(pm, label, v, counter)
		return
	}
	s.textSeries(pm, label, v)
}

// textSeries writes a sample line: name{labels} value, the labels sorted
// by name.
func (s *scrape) textSeries(pm *Point, label *dto.LabelPair, v float64) {
	out := s.out
	out.WriteString(s.fam.name)
	sep := byte('{')
	after := label != nil && label.GetName() > pointLabelName
	if label != nil && !after {
		writeTextLabel(out, sep, label.GetName(), label.GetValue())
		sep = ','
	}
	writeTextLabel(out, sep, pointLabelName, pm.name)
	if after {
		writeTextLabel(out, ',', label.GetName(), label.GetValue())
	}
	out.WriteString("} ")
	s.num = appendSampleFloat(s.num[:0], v, s.openMetrics)
	s.num = append(s.num, '\n')
	out.Write(s.num)
}

// textHistogram writes the sample lines of pm's histogram h, as expfmt's
// text and OpenMetrics encoders write a histogram: a _bucket line per
// classic bucket, with a +Inf one when the buckets end below it, then _sum
// and _count; in OpenMetrics the counts as integers, the bounds as
// OpenMetrics floats and each bucket's exemplar. It writes nothing and
// returns false for a histogram of float counts (which OpenMetrics 1.0
// cannot carry, and the library refuses).
func (s *scrape) textHistogram(pm *Point, h *dto.Histogram) bool {
	if h.GetSampleCountFloat() > 0 {
		return false
	}
	for _, b := range h.Bucket {
		if b.GetCumulativeCountFloat() > 0 {
			return false
		}
	}
	inf := false
	for _, b := range h.Bucket {
		s.histogramLine("_bucket", pm, b.GetUpperBound(), true, float64(b.GetCumulativeCount()), b.GetCumulativeCount(), b.Exemplar)
		inf = inf || math.IsInf(b.GetUpperBound(), +1)
	}
	if !inf {
		s.histogramLine("_bucket", pm, math.Inf(+1), true, float64(h.GetSampleCount()), h.GetSampleCount(), nil)
	}
	s.histogramLine("_sum", pm, 0, false, h.GetSampleSum(), 0, nil)
	s.histogramLine("_count", pm, 0, false, float64(h.GetSampleCount()), h.GetSampleCount(), nil)
	return true
}

// histogramLine writes one sample line of a histogram: the family's name
// and suffix, the point's label and, with le, the bucket's bound; then the
// value: in OpenMetrics a count (every suffix but _sum) as an integer and
// the exemplar when it has labels, in the text format everything as a
// float and no exemplar.
func (s *scrape) histogramLine(suffix string, pm *Point, bound float64, le bool, value float64, count uint64, exemplar *dto.Exemplar) {
	out := s.out
	out.WriteString(s.fam.name)
	out.WriteString(suffix)
	writeTextLabel(out, '{', pointLabelName, pm.name)
	if le {
		out.WriteString(`,le="`)
		s.num = appendSampleFloat(s.num[:0], bound, s.openMetrics)
		out.Write(s.num)
		out.WriteByte('"')
	}
	out.WriteString("} ")
	switch {
	case s.openMetrics && suffix != "_sum":
		s.num = strconv.AppendUint(s.num[:0], count, 10)
	default:
		s.num = appendSampleFloat(s.num[:0], value, s.openMetrics)
	}
	out.Write(s.num)
	if s.openMetrics && exemplar != nil && len(exemplar.Label) > 0 {
		out.WriteString(" # ")
		sep := byte('{')
		for _, l := range exemplar.Label {
			writeTextLabel(out, sep, l.GetName(), l.GetValue())
			sep = ','
		}
		out.WriteString("} ")
		s.num = appendSampleFloat(s.num[:0], exemplar.GetValue(), true)
		if ts := exemplar.Timestamp; ts != nil {
			s.num = append(s.num, ' ')
			s.num = appendSampleFloat(s.num, float64(ts.AsTime().UnixNano())/1e9, true)
		}
		out.Write(s.num)
	}
	out.WriteByte('\n')
}

// writeTextLabel writes sep name="value", the value escaped as the text
// formats escape it: backslash, newline and double quote.
func writeTextLabel(out *bufio.Writer, sep byte, name, value string) {
	out.WriteByte(sep)
	out.WriteString(name)
	out.WriteString(`="`)
	if strings.ContainsAny(value, "\\\n\"") {
		labelEscaper.WriteString(out, value)
	} else {
		out.WriteString(value)
	}
	out.WriteByte('"')
}

// labelEscaper escapes a label value, as expfmt does.
var labelEscaper = strings.NewReplacer("\\", `\\`, "\n", `\n`, "\"", `\"`)

// appendSampleFloat appends v as the text format writes a sample's value,
// or as OpenMetrics does when openMetrics is set (a whole number gets
// ".0"). -0 is written as 0.
func appendSampleFloat(b []byte, v float64, openMetrics bool) []byte {
	switch {
	case v == 0:
		v = 0 // -0 too, as the library writes it
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	if openMetrics && !bytes.ContainsAny(b[start:], "e.") {
		b = append(b, '.', '0')
	}
	return b
}

// Field numbers of the client_model messages (metrics.proto).
const (
	fieldFamilyMetric  = 4 // MetricFamily.metric
	fieldMetricLabel   = 1 // Metric.label
	fieldMetricGauge   = 2 // Metric.gauge
	fieldMetricCounter = 3 // Metric.counter
	fieldLabelName     = 1 // LabelPair.name
	fieldLabelValue    = 2 // LabelPair.value
	fieldValue         = 1 // Counter.value, Gauge.value
	fieldCreated       = 3 // Counter.created_timestamp
	fieldSeconds       = 1 // Timestamp.seconds
	fieldNanos         = 2 // Timestamp.nanos
)

// protoSeries appends a Metric to the family's message: its label pairs
// sorted by name, then its counter (value and created timestamp, the
// point's) or its gauge.
func (s *scrape) protoSeries(pm *Point, label *dto.LabelPair, v float64, counter bool) {
	first, second := [2]string{pointLabelName, pm.name}, [2]string{}
	if label != nil {
		second = [2]string{label.GetName(), label.GetValue()}
		if second[0] < pointLabelName {
			first, second = second, first
		}
	}
	size := labelSize(first)
	if second[0] != "" {
		size += labelSize(second)
	}
	valueSize := protowire.SizeTag(fieldValue) + 8
	var secs, nanos uint64
	field := fieldMetricGauge
	if counter {
		field = fieldMetricCounter
		if pm.created != nil {
			secs, nanos = uint64(pm.created.GetSeconds()), uint64(int64(pm.created.GetNanos()))
			valueSize += protowire.SizeTag(fieldCreated) + protowire.SizeBytes(timestampSize(secs, nanos))
		}
	}
	size += protowire.SizeTag(protowire.Number(field)) + protowire.SizeBytes(valueSize)

	b := protowire.AppendTag(s.body, fieldFamilyMetric, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = appendLabel(b, first)
	if second[0] != "" {
		b = appendLabel(b, second)
	}
	b = protowire.AppendTag(b, protowire.Number(field), protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(valueSize))
	b = protowire.AppendTag(b, fieldValue, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(v))
	if counter && pm.created != nil {
		b = protowire.AppendTag(b, fieldCreated, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(timestampSize(secs, nanos)))
		if secs != 0 {
			b = protowire.AppendTag(b, fieldSeconds, protowire.VarintType)
			b = protowire.AppendVarint(b, secs)
		}
		if nanos != 0 {
			b = protowire.AppendTag(b, fieldNanos, protowire.VarintType)
			b = protowire.AppendVarint(b, nanos)
		}
	}
	s.body = b
}

// labelSize is the size of a Metric's label field holding pair (name,
// value), its tag included.
func labelSize(pair [2]string) int {
	inner := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(pair[0])) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(pair[1]))
	return protowire.SizeTag(fieldMetricLabel) + protowire.SizeBytes(inner)
}

// appendLabel appends a Metric's label field holding pair.
func appendLabel(b []byte, pair [2]string) []byte {
	inner := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(pair[0])) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(pair[1]))
	b = protowire.AppendTag(b, fieldMetricLabel, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	b = protowire.AppendTag(b, fieldLabelName, protowire.BytesType)
	b = protowire.AppendString(b, pair[0])
	b = protowire.AppendTag(b, fieldLabelValue, protowire.BytesType)
	return protowire.AppendString(b, pair[1])
}

// timestampSize is the size of a Timestamp message of secs and nanos
// (each varint-encoded, left out at 0).
func timestampSize(secs, nanos uint64) int {
	n := 0
	if secs != 0 {
		n += protowire.SizeTag(fieldSeconds) + protowire.SizeVarint(secs)
	}
	if nanos != 0 {
		n += protowire.SizeTag(fieldNanos) + protowire.SizeVarint(nanos)
	}
	return n
}
