package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
)

// ExampleHandler_Force switches a point to degrade every request for ten
// minutes of the Handler's clock, then clears the switch.
func ExampleHandler_Force() {
	lim, err := limiter.NewPoint("orders.read", limiter.Settings{})
	if err != nil {
		panic(err)
	}
	point := proxy.NewPoint(lim, proxy.PointOptions{})
	cfg := &proxy.Config{Upstream: rpFakeUpstream, Routes: []proxy.Route{{Point: point}}, Points: []*proxy.Point{point}}
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var h *proxy.Handler
	ms := metrics.NewSet(prometheus.NewRegistry(), func() []metrics.Source { return h.Sources() })
	h = proxy.New(cfg, proxy.Options{Logger: zap.NewNop(), Metrics: ms, Now: func() time.Time { return now }})

	sw, err := h.Force("orders.read", proxy.ForceDegrade, 10*time.Minute, "INC-7: orders DB failover")
	if err != nil {
		panic(err)
	}
	fmt.Println(sw.Action, "until", sw.Until.Format(time.Kitchen))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/orders/1", nil))
	fmt.Println(w.Code, w.Header().Get("Sds-Degraded"))

	_, cleared := h.Unforce("orders.read")
	fmt.Println("cleared:", cleared, "switches left:", len(h.Forces(now)))
	// Output:
	// degrade until 8:10AM
	// 503 forced; point=orders.read
	// cleared: true switches left: 0
}
