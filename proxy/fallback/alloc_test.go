package fallback

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// discardWriter is a ResponseWriter that keeps one header map, cleared
// before each answer, so that only the fallback's own allocations count.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// TestFallbackAllocs: serving a prebuilt answer allocates nothing, for
// every Reason (a strategy, its delay, upstream_error) and every form
// (HTTP, HEAD, gRPC), a delay's own Retry-After included.
func TestFallbackAllocs(t *testing.T) {
	fh := New("orders", Response{}, limiter.Settings{})
	get := httptest.NewRequest(http.MethodGet, "/api/orders", nil)
	head := httptest.NewRequest(http.MethodHead, "/api/orders", nil)
	grpc := httptest.NewRequest(http.MethodPost, "/orders.v1.Orders/Create", nil)
	grpc.Header.Set("Content-Type", "application/grpc")
	grpc.ProtoMajor = 2
	w := &discardWriter{h: make(http.Header)}
	for _, why := range []Reason{{}, {Strategy: limiter.Visit}, {Strategy: limiter.Exception, Delay: true}, {Strategy: limiter.Visit, Sheddable: true},
		{Strategy: limiter.Exception, Delay: true, Reopens: 1500 * time.Millisecond}, {Strategy: limiter.Exception, Delay: true, Reopens: maxSharedRetryAfter * time.Second}} {
		for _, r := range []*http.Request{get, head, grpc} {
			allocs := testing.AllocsPerRun(100, func() {
				clear(w.h)
				fh.Serve(w, r, why)
			})
			if allocs != 0 {
				t.Errorf("%+v, %s %s: got %v allocs, want 0", why, r.Method, r.Header.Get("Content-Type"), allocs)
			}
		}
	}
}

// TestRetryAfterNotKept: a delay's Retry-After is the request's own: the
// answer kept for the Reason holds none, each request gets its own value,
// and changing one response's headers changes no other's.
func TestRetryAfterNotKept(t *testing.T) {
	fh := New("orders", Response{}, limiter.Settings{})
	get := httptest.NewRequest(http.MethodGet, "/api/orders", nil)
	for _, tt := range []struct {
		reopens time.Duration
		want    string
	}{{0, "1"}, {1500 * time.Millisecond, "2"}, {time.Second, "1"}, {maxSharedRetryAfter * time.Second, "600"}, {maxSharedRetryAfter*time.Second + 1, "601"}} {
		w := &discardWriter{h: make(http.Header)}
		fh.Serve(w, get, Reason{Strategy: limiter.Exception, Delay: true, Reopens: tt.reopens})
		if got := w.h.Values("Retry-After"); len(got) != 1 || got[0] != tt.want {
			t.Errorf("reopens %v: Retry-After got %q, want %q", tt.reopens, got, tt.want)
		}
		w.h["Retry-After"] = append(w.h["Retry-After"], "x") // a handler after us adding a value
	}
	if got := fh.answer(Reason{Strategy: limiter.Exception, Delay: true}).header.Values("Retry-After"); len(got) != 0 {
		t.Errorf("the kept answer: Retry-After got %q, want none", got)
	}
	if got := retryAfterValue(time.Second); len(got) != 1 || got[0] != "1" || cap(got) != 1 {
		t.Errorf("retryAfterValue(1s): got %q (cap %d), want [\"1\"] (cap 1)", got, cap(got))
	}
}
