package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/route"
)

// ExampleNew puts one point in front of a service: POST /api/orders may
// reach it twice in the window; the third call gets the fallback.
func ExampleNew() {
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "order created\n")
	}))
	defer service.Close()
	upstream, _ := url.Parse(service.URL)

	var s limiter.Settings // every strategy off
	s.VisitThreshold = limiter.At(2)
	lim, err := limiter.NewPoint("orders.create", s)
	if err != nil {
		panic(err)
	}
	create := proxy.NewPoint(lim, proxy.PointOptions{
		Fallback: proxy.Fallback{
			Status:  http.StatusServiceUnavailable,
			Header:  http.Header{"Content-Type": {"application/json"}},
			Body:    []byte(`{"error":"busy, try later"}` + "\n"),
			BodySet: true,
		},
	})
	cfg := &proxy.Config{
		Upstream:         upstream,
		ForwardedHeaders: true,
		Routes:           []proxy.Route{{Point: create, Rule: route.Rule{Methods: []string{"POST"}, Path: "/api/orders"}}},
		Points:           []*proxy.Point{create},
	}

	reg := prometheus.NewRegistry()
	var h *proxy.Handler
	ms := metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	h = proxy.New(cfg, proxy.Options{Logger: zap.NewNop(), Metrics: ms})

	front := httptest.NewServer(h)
	defer front.Close()
	for range 3 {
		resp, err := http.Post(front.URL+"/api/orders", "application/json", nil)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %q %s", resp.StatusCode, resp.Header.Get("Sds-Degraded"), body)
	}
	// Output:
	// 200 "" order created
	// 200 "" order created
	// 503 "visit; point=orders.create" {"error":"busy, try later"}
}
