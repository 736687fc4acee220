package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// discardWriter is a ResponseWriter that keeps one header map, cleared
// before each answer, so that only the fallback's own allocations count.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// TestFallbackAllocs: serving a prebuilt answer allocates nothing, for
// every reason (a strategy, its delay, upstream_error) and every form
// (HTTP, HEAD, gRPC).
func TestFallbackAllocs(t *testing.T) {
	fh := newFallbackHandler("orders", Fallback{}, limiter.Settings{})
	get := httptest.NewRequest(http.MethodGet, "/api/orders", nil)
	head := httptest.NewRequest(http.MethodHead, "/api/orders", nil)
	grpc := httptest.NewRequest(http.MethodPost, "/orders.v1.Orders/Create", nil)
	grpc.Header.Set("Content-Type", "application/grpc")
	grpc.ProtoMajor = 2
	w := &discardWriter{h: make(http.Header)}
	for _, why := range []reason{{}, {strategy: limiter.Visit}, {strategy: limiter.Exception, delay: true}, {strategy: limiter.Visit, sheddable: true}} {
		for _, r := range []*http.Request{get, head, grpc} {
			allocs := testing.AllocsPerRun(100, func() {
				clear(w.h)
				fh.serve(w, r, why)
			})
			if allocs != 0 {
				t.Errorf("%+v, %s %s: got %v allocs, want 0", why, r.Method, r.Header.Get("Content-Type"), allocs)
			}
		}
	}
}
