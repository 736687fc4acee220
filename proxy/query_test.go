package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route"
)

// TestUpstreamGetsRawQuery: the upstream is sent the query byte for byte
// as the client sent it, on a point and unprotected: a ';', an invalid
// escape, '+' and escapes are kept, parameters keep their order, and a
// bare '?' stays. An upstream URL with a query of its own (possible in a
// Config built in code) puts it first, joined by '&'.
func TestUpstreamGetsRawQuery(t *testing.T) {
	var got []string // the request-targets the upstream was sent
	record := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.URL.RequestURI())
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	queries := []struct{ query, withUpstreamQuery string }{
		{"a=1;b=2", "k=v&a=1;b=2"},
		{"x=%zz&y=2", "k=v&x=%zz&y=2"},
		{"q=a+b&r=%2F", "k=v&q=a+b&r=%2F"},
		{"b=2&a=1;c", "k=v&b=2&a=1;c"}, // cleaning would also sort: a=1&b=2
		{"%", "k=v&%"},
		{"a=%2", "k=v&a=%2"},
		{";", "k=v&;"},
		{"a=1&a=2&&=x", "k=v&a=1&a=2&&=x"},
		{"", "k=v"},
	}
	for _, upstream := range []string{"http://upstream.test", "http://upstream.test/?k=v"} {
		open := rpPoint(t, "open", nil, proxy.PointOptions{})
		rt, err := proxy.NewRoute(proxy.Route{Point: open, Rule: route.Rule{PathPrefix: "/open"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := &proxy.Config{Upstream: rpURL(upstream), Routes: []proxy.Route{rt}, Points: []*proxy.Point{open}}
		h, _ := rpHandler(t, cfg, proxy.Options{Transport: record})
		for _, path := range []string{"/open/x", "/other"} {
			for _, q := range queries {
				want := path + "?" + q.query
				if cfg.Upstream.RawQuery != "" {
					want = path + "?" + q.withUpstreamQuery
				}
				got = got[:0]
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, routeRequest(t, "GET", "a.example", path+"?"+q.query))
				if rec.Code != http.StatusOK || len(got) != 1 || got[0] != want {
					t.Errorf("upstream %s, GET %s?%s: got %d, upstream saw %q; want 200 and %q", upstream, path, q.query, rec.Code, got, want)
				}
			}
			// No query at all: none is sent (or only the upstream's).
			want := path
			if cfg.Upstream.RawQuery != "" {
				want += "?k=v"
			}
			got = got[:0]
			h.ServeHTTP(httptest.NewRecorder(), routeRequest(t, "GET", "a.example", path))
			if len(got) != 1 || got[0] != want {
				t.Errorf("upstream %s, GET %s: upstream saw %q; want %q", upstream, path, got, want)
			}
		}
	}
}
