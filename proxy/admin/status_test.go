package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
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
		var doc statusDoc
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
