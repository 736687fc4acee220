package clientkey_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// benchRequest is an ordinary request behind two proxies, with an API key
// in a header, the query and a cookie among others.
func benchRequest() *http.Request {
	return &http.Request{
		Method:     "GET",
		URL:        &url.URL{Path: "/search", RawQuery: "q=shoes&page=2&api_key=sk_live_0123456789&sort=price"},
		RemoteAddr: "10.1.2.3:51234",
		Header: http.Header{
			"Accept":          {"application/json"},
			"User-Agent":      {"bench/1.0"},
			"X-Api-Key":       {"sk_live_0123456789"},
			"Cookie":          {"theme=dark; sid=7f3a9c2e5b1d4f60; lang=en"},
			"X-Forwarded-For": {"198.51.100.7, 203.0.113.9"},
		},
	}
}

// BenchmarkKey is Key per kind on an ordinary request, from every core at
// once; the target is 0 allocs/op for every kind.
func BenchmarkKey(b *testing.B) {
	for _, spec := range []string{"header:X-Api-Key", "query:api_key", "cookie:sid", "clientIP", "forwardedFor:1", "forwardedFor:2"} {
		src, err := clientkey.ParseSource(spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(spec, func(b *testing.B) {
			r := benchRequest()
			if _, ok := src.Key(r); !ok {
				b.Fatalf("%s: no key", spec)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					src.Key(r)
				}
			})
		})
	}
}

// BenchmarkKeyHostile is Key on what an attacker sends: 10,000
// X-Forwarded-For elements, and the same key header 1,000 times.
func BenchmarkKeyHostile(b *testing.B) {
	xff := make([]byte, 0, 90000)
	for range 10000 {
		xff = append(xff, "6.6.6.6, "...)
	}
	xff = append(xff, "203.0.113.9"...)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "sk_live_0123456789"
	}
	r := &http.Request{Header: http.Header{"X-Forwarded-For": {string(xff)}, "X-Api-Key": keys}}
	for _, spec := range []string{"forwardedFor:1", "forwardedFor:32", "header:X-Api-Key"} {
		src, _ := clientkey.ParseSource(spec)
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				src.Key(r)
			}
		})
	}
}

func BenchmarkHasher(b *testing.B) {
	h := clientkey.NewHasher()
	key := "sk_live_0123456789"
	b.Run("Sum64", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Sum64(key)
			}
		})
	})
	b.Run("Label", func(b *testing.B) {
		sum := h.Sum64(key)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Label(sum)
			}
		})
	})
}
