package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueueLatency: /api/queue serves queueCapacity requests at a time in
// arrival order, each taking queueService; past the capacity a request's
// latency grows with the requests ahead of it. Time is synctest's.
func TestQueueLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		if rec := serve(h, "POST", "/_control?queueCapacity=2&queueService=100ms"); rec.Code != 200 {
			t.Fatalf("control: %d %s", rec.Code, rec.Body)
		}
		start := time.Now()
		took := make([]time.Duration, 5)
		var wg sync.WaitGroup
		for i := range took {
			wg.Go(func() {
				if rec := serve(h, "GET", "/api/queue"); rec.Code != 200 {
					t.Errorf("request %d: %d", i, rec.Code)
				}
				took[i] = time.Since(start)
			})
			synctest.Wait() // each request queues before the next arrives
		}
		wg.Wait()
		want := []time.Duration{100, 100, 200, 200, 300}
		for i := range took {
			if took[i] != want[i]*time.Millisecond {
				t.Errorf("request %d took %v, want %v", i, took[i], want[i]*time.Millisecond)
			}
		}
		// Capacity raised while requests wait: they start at once.
		serve(h, "POST", "/_control?queueCapacity=1")
		wg.Go(func() { serve(h, "GET", "/api/queue") })
		synctest.Wait()
		start = time.Now()
		done := make(chan struct{})
		go func() { serve(h, "GET", "/api/queue"); close(done) }()
		synctest.Wait()
		if st := h.Stats().Queue; st.Busy != 1 || st.Waiting != 1 {
			t.Errorf("stats %+v, want 1 busy, 1 waiting", st)
		}
		serve(h, "POST", "/_control?queueCapacity=2")
		<-done
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("waiting request took %v after the capacity rose, want 100ms", d)
		}
		wg.Wait()
	})
}

// TestQueueGivesUp: a request that goes away while it waits leaves the
// queue, and one granted a worker as it goes away hands the worker on.
func TestQueueGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		serve(h, "POST", "/_control?queueCapacity=1&queueService=100ms")
		go serve(h, "GET", "/api/queue")
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/queue", nil).WithContext(ctx))
		}()
		synctest.Wait()
		cancel()
		synctest.Wait()
		if st := h.Stats().Queue; st.Waiting != 0 || st.Busy != 1 {
			t.Errorf("stats %+v, want the canceled request gone", st)
		}
		time.Sleep(100 * time.Millisecond) // fake time: the first request ends
		synctest.Wait()
		if st := h.Stats().Queue; st.Busy != 0 {
			t.Errorf("stats %+v, want no worker busy", st)
		}
		for _, bad := range []string{"queueCapacity=0", "queueCapacity=x", "queueService=-1s"} {
			if rec := serve(h, "POST", "/_control?"+bad); rec.Code != http.StatusBadRequest {
				t.Errorf("%s: %d, want 400", bad, rec.Code)
			}
		}
	})
}
