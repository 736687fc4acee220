package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/events"
)

// limiterPoints are points in force as the admin port reads them.
type limiterPoints []*limiter.Point

func (ps limiterPoints) Snapshots(now time.Time) iter.Seq[limiter.Snapshot] {
	return func(yield func(limiter.Snapshot) bool) {
		for _, p := range ps {
			if !yield(p.Snapshot(now)) {
				return
			}
		}
	}
}

// TestStatusStreamsMarshal: /status, written point by point, is the bytes
// json.Marshal writes for the whole document it decodes to, and a newline:
// with no point, one, and many, some tripped, with events.
func TestStatusStreamsMarshal(t *testing.T) {
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, 300} {
		var ps limiterPoints
		log := events.New(MaxEvents, MaxPointEvents)
		for i := range n {
			p, err := limiter.NewPoint(fmt.Sprintf("p<%d>&\"", i), limiter.Settings{Policy: limiter.Policy{VisitThreshold: limiter.At(int64(i % 3))}})
			if err != nil {
				t.Fatal(err)
			}
			for range i % 4 {
				var c limiter.Call
				p.Enter(&c, now.Add(-time.Second), limiter.Request{})
			}
			ps = append(ps, p)
		}
		h := New(Options{Points: ps, Events: log, Now: func() time.Time { return now }, Version: "v1"})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
		body, _ := io.ReadAll(rec.Result().Body)
		var doc Status
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%d points: %v in %q", n, err, body)
		}
		if len(doc.Points) != n {
			t.Fatalf("%d points: got %d in the document", n, len(doc.Points))
		}
		want, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if want = append(want, '\n'); !bytes.Equal(body, want) {
			t.Errorf("%d points: got\n%s\nwant\n%s", n, body, want)
		}
	}
}

// BenchmarkStatus measures one GET /status of 10,000 idle points, each
// with a visit and a concurrency threshold: what a read allocates, which
// is garbage once each point is written (the document is streamed).
func BenchmarkStatus(b *testing.B) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	var ps limiterPoints
	for i := range 10_000 {
		p, err := limiter.NewPoint(fmt.Sprintf("p%d", i), limiter.Settings{Policy: limiter.Policy{VisitThreshold: limiter.At(100_000), ConcurrentThreshold: limiter.At(1_000)}})
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	h := New(Options{Points: ps, Events: events.New(MaxEvents, MaxPointEvents), Now: func() time.Time { return now }, Version: "v1"})
	req := httptest.NewRequest(http.MethodGet, "/status", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := countingWriter{header: make(http.Header)}
		h.ServeHTTP(&w, req)
		if w.size == 0 {
			b.Fatal("/status wrote nothing")
		}
	}
}

// countingWriter is a ResponseWriter that counts the body's bytes and
// drops them.
type countingWriter struct {
	header http.Header
	size   int
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(int) {}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.size += len(p)
	return len(p), nil
}
