package stale_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/stale"
)

// The request path records an answer while relaying it, and serves it
// back when the point degrades the same request later.
func Example() {
	cache := stale.New(64 << 20)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	req := stale.Request{
		Point: "catalog", Method: http.MethodGet, Scheme: "https", Host: "shop.example",
		Path: "/items", RawQuery: "page=1", Header: http.Header{"Accept": {"application/json"}},
	}

	// Relaying the upstream's answer: tee its body into the recorder.
	resp := &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"max-age=60"}},
		Body:          io.NopCloser(strings.NewReader(`{"items":[]}`)),
		ContentLength: -1,
	}
	rec := cache.Record(req, resp, t0) // nil if it may not be kept; methods of nil do nothing
	_, err := io.Copy(io.Discard, io.TeeReader(resp.Body, rec))
	rec.Done(err == nil, t0)

	// Three minutes later the point sheds the same request.
	now := t0.Add(3 * time.Minute)
	if a, ok := cache.Lookup(req, 10*time.Minute, now); ok {
		w := httptest.NewRecorder()
		a.Serve(w, false, "shed; point=catalog; stale", now)
		fmt.Println(w.Code, w.Header().Get("Age"), w.Header().Get("Sds-Degraded"), w.Body)
	}
	bytes, entries := cache.Stats()
	fmt.Println(entries, bytes > 0)
	// Output:
	// 200 180 shed; point=catalog; stale {"items":[]}
	// 1 true
}

// An answer meant for one user is never kept, so never served to another.
func ExampleCache_Record() {
	cache := stale.New(64 << 20)
	req := stale.Request{
		Point: "account", Method: http.MethodGet, Scheme: "https", Host: "shop.example", Path: "/me",
		Header: http.Header{"Cookie": {"sid=ann"}},
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, cc := range []string{"private, max-age=60", "max-age=60", "public, max-age=60"} {
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Cache-Control": {cc}}, ContentLength: -1}
		fmt.Printf("%s: kept %v\n", cc, cache.Record(req, resp, t0) != nil)
	}
	// Output:
	// private, max-age=60: kept false
	// max-age=60: kept false
	// public, max-age=60: kept true
}
