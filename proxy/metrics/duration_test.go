package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// TestDurationBeforeFirstCall: a point's upstream time histogram is not
// created before its first call, and until then it is written exactly as a
// histogram the client library had just created would be (created with
// the point); from its first call on, exactly as the library's histogram
// with the same observations.
func TestDurationBeforeFirstCall(t *testing.T) {
	m := NewSet(prometheus.NewRegistry(), func() []Source { return nil })
	pm := m.ForPoint(`a "point"`)
	library := newDurationVec().WithLabelValues(`a "point"`).(durationChild)

	check := func(when string) {
		t.Helper()
		var got, want dto.Metric
		if err := pm.writeDuration(&got); err != nil {
			t.Fatal(err)
		}
		if err := library.Write(&want); err != nil {
			t.Fatal(err)
		}
		if pm.duration.Load() == nil {
			// The library's was created a moment after the point.
			want.Histogram.CreatedTimestamp = pm.created
		} else {
			want.Histogram.CreatedTimestamp = got.Histogram.CreatedTimestamp
		}
		if !proto.Equal(&got, &want) {
			t.Errorf("%s: got\n%v\nwant\n%v", when, &got, &want)
		}
	}

	check("before the first call")
	m.Sample(time.Now())
	check("after a Sample")
	if pm.duration.Load() != nil {
		t.Fatal("writing and sampling an idle point created its histogram")
	}
	for _, seconds := range []float64{0.01, 0, 0.25, 3} {
		pm.ObserveDuration(seconds, "", time.Now())
		library.Observe(seconds)
	}
	if pm.duration.Load() == nil {
		t.Fatal("a call observed, and no histogram")
	}
	check("after four calls")
}

// TestDurationFirstCallsRace: calls observed at once on a point's first
// calls all land in one histogram.
func TestDurationFirstCallsRace(t *testing.T) {
	for range 20 {
		m := NewSet(prometheus.NewRegistry(), func() []Source { return nil })
		pm := m.ForPoint("p")
		const callers, calls = 4, 50
		done := make(chan struct{})
		for range callers {
			go func() {
				defer func() { done <- struct{}{} }()
				for range calls {
					pm.ObserveDuration(0.01, "", time.Now())
				}
			}()
		}
		for range callers {
			<-done
		}
		var out dto.Metric
		if err := pm.writeDuration(&out); err != nil {
			t.Fatal(err)
		}
		if got := out.GetHistogram().GetSampleCount(); got != callers*calls {
			t.Fatalf("got %d observations, want %d", got, callers*calls)
		}
	}
}

// TestMemoryPerIdlePoint: the series of a point that never forwarded a
// call hold at most 1 KiB, scraped and sampled or not: 886 bytes when
// written, where a histogram made with the point made it 2,892.
func TestMemoryPerIdlePoint(t *testing.T) {
	const n = 5000
	var live []Source
	for i := range n {
		lim, err := limiter.NewPoint(pointName(i), limiter.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, Source{Limiter: lim})
	}
	reg := prometheus.NewRegistry()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := NewSet(reg, func() []Source { return live })
	for i := range n {
		m.ForPoint(pointName(i))
	}
	m.Sample(time.Now())
	for _, accept := range []string{scrapeAccepts[1], scrapeAccepts[6]} {
		if code, _, _ := scrapeBody(t, m.Handler(reg), accept, ""); code != http.StatusOK {
			t.Fatalf("scrape: status %d", code)
		}
	}
	// Two collections empty the pool of the scrapes' buffers, which are
	// not the points'.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per idle point's series", per)
	if per > 1024 {
		t.Errorf("got %.0f bytes per idle point's series, want <= 1024", per)
	}
}

func pointName(i int) string { return "point-" + strconv.Itoa(i) }
