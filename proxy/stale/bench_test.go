package stale

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkRecord: what the request path pays per relayed answer.
// kept-2KiB records a 2 KiB answer (Record, two Writes, Done: one lock);
// the rejected ones are answers the header rules out, which must cost no
// allocation before Cache-Control is parsed.
func BenchmarkRecord(b *testing.B) {
	body := make([]byte, 2048)
	rows := []struct {
		name string
		resp *http.Response
	}{
		{"kept-2KiB", answer(200, "Content-Type", "application/json", "Cache-Control", "max-age=60", "Date", httpDate(t0), "Content-Length", "2048")},
		{"rejected-set-cookie", answer(200, "Content-Type", "text/html", "Cache-Control", "max-age=60", "Set-Cookie", "sid=1")},
		{"rejected-status", answer(503, "Content-Type", "text/html")},
		{"rejected-vary", answer(200, "Content-Type", "text/html", "Vary", "Accept-Encoding, X-Forwarded-For")},
		{"rejected-private", answer(200, "Content-Type", "text/html", "Cache-Control", "private, max-age=60")},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			c := New(64 << 20)
			req := get("/api/items", "Accept", "application/json", "User-Agent", "bench", "Accept-Encoding", "gzip")
			b.ReportAllocs()
			for b.Loop() {
				r := c.Record(req, row.resp, t0)
				_, _ = r.Write(body[:1024])
				_, _ = r.Write(body[1024:])
				r.Done(true, t0)
			}
		})
	}
}

// BenchmarkLookup serves a degraded request from 1,000 kept answers, in
// parallel (one mutex).
func BenchmarkLookup(b *testing.B) {
	c := New(64 << 20)
	reqs := make([]Request, 1000)
	for i := range reqs {
		reqs[i] = get(fmt.Sprint("/api/items/", i), "X-User", "u", "Accept", "application/json")
		keep(c, reqs[i], answer(200, "Vary", "X-User"), "body", t0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.Lookup(reqs[i%len(reqs)], time.Minute, t0); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}
