package proxy

import (
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// TestFallbackBuiltOnFirstUse: a new fallback holds no answer; goroutines
// that ask for the same new answer at once all get one answer, equal to
// the one built for that reason; the caller's Fallback may change after
// without changing the answers.
func TestFallbackBuiltOnFirstUse(t *testing.T) {
	f := Fallback{Header: http.Header{"X-Fallback": {"1"}}, Body: []byte("busy"), BodySet: true}
	settings := limiter.Settings{Policy: limiter.Policy{DelayTime: 3 * time.Second}}
	fh := newFallbackHandler("orders", f, settings)
	for strategy := range fh.answers {
		for delay := range fh.answers[strategy] {
			if fh.answers[strategy][delay].Load() != nil {
				t.Fatalf("answer [%d][%d] built before its first use", strategy, delay)
			}
		}
	}
	f.Header.Set("X-Fallback", "changed")
	f.Body[0] = 'B'

	for _, why := range []reason{{}, {strategy: limiter.Visit}, {strategy: limiter.Visit, delay: true}, {strategy: limiter.ExceptionRate, delay: true}, {strategy: limiter.Visit, sheddable: true}} {
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
		want := buildAnswer("orders", Fallback{Header: http.Header{"X-Fallback": {"1"}}, Body: []byte("busy"), BodySet: true}, settings, why)
		if !reflect.DeepEqual(*got[0], want) {
			t.Errorf("%+v: got %+v, want %+v", why, *got[0], want)
		}
	}
	if a, b := fh.answer(reason{delay: true}), fh.answer(reason{}); a != b {
		t.Error("upstream_error with delay set: got another answer than upstream_error")
	}
}
