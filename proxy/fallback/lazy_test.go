package fallback

import (
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// TestFallbackBuiltOnFirstUse: a new fallback holds no answer; goroutines
// that ask for the same new answer at once all get one answer, equal to
// the one built for that reason; the caller's Response may change after
// without changing the answers.
func TestFallbackBuiltOnFirstUse(t *testing.T) {
	f := Response{Header: http.Header{"X-Fallback": {"1"}}, Body: []byte("busy"), BodySet: true}
	settings := limiter.Settings{Policy: limiter.Policy{DelayTime: 3 * time.Second}}
	fh := New("orders", f, settings)
	if fh.answers.Load() != nil {
		t.Fatal("answers made before their first use")
	}
	f.Header.Set("X-Fallback", "changed")
	f.Body[0] = 'B'

	for _, why := range []Reason{{}, {Strategy: limiter.Visit}, {Strategy: limiter.Visit, Delay: true}, {Strategy: limiter.ExceptionRate, Delay: true}, {Strategy: limiter.Visit, Sheddable: true}} {
		const n = 8
		got := make([]*answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i] = fh.answer(why) })
		}
		wg.Wait()
		for i := range n {
			if got[i] != got[0] {
				t.Fatalf("%+v: goroutine %d got another answer than goroutine 0", why, i)
			}
		}
		want := buildAnswer("orders", Response{Header: http.Header{"X-Fallback": {"1"}}, Body: []byte("busy"), BodySet: true}, newRetryAfter(settings), why)
		if !reflect.DeepEqual(*got[0], want) {
			t.Errorf("%+v: got %+v, want %+v", why, *got[0], want)
		}
	}
	if a, b := fh.answer(Reason{Delay: true}), fh.answer(Reason{}); a != b {
		t.Error("upstream_error with delay set: got another answer than upstream_error")
	}
}

// TestFallbackSize: a fallback that has not answered yet, with no header
// or body of its own, is one allocation of at most 144 bytes, as every
// point of a large config has one (what it was when it held the point's
// settings and its answers' slots: docs/benchmarks.md).
func TestFallbackSize(t *testing.T) {
	var fh *Handler
	allocs := testing.AllocsPerRun(10, func() { fh = New("orders", Response{}, limiter.Settings{}) })
	if size := unsafe.Sizeof(*fh); allocs != 1 || size > 144 {
		t.Errorf("got %.0f allocations of %d bytes, want 1 of at most 144", allocs, size)
	}
}
