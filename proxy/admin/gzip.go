package admin

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// fastGzip serves h's answer gzipped at gzip.BestSpeed to a client that
// accepts gzip, as Prometheus does, and as it is to one that does not.
// promhttp compresses at the default level, which took a large share of
// a scrape of 10,000 points; the fastest level takes a fraction of that
// for a body a little larger (docs/benchmarks.md, "Figures behind the
// code's choices"). h must not compress itself.
func fastGzip(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.ServeHTTP(w, r)
			return
		}
		gz := gzipWriters.Get().(*gzip.Writer)
		gz.Reset(w)
		defer gzipWriters.Put(gz)
		w.Header().Set("Content-Encoding", "gzip")
		h.ServeHTTP(&gzipResponse{ResponseWriter: w, gz: gz}, r)
		gz.Close()
	})
}

// gzipWriters recycles the writers: each holds about a megabyte of state.
var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return gz
}}

// gzipResponse is a ResponseWriter whose body goes through gz.
type gzipResponse struct {
	http.ResponseWriter
	gz *gzip.Writer
}

func (g *gzipResponse) WriteHeader(status int) {
	g.Header().Del("Content-Length") // the length of what h wrote, not of what goes out
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipResponse) Write(p []byte) (int, error) { return g.gz.Write(p) }

// acceptsGzip reports whether an Accept-Encoding header value accepts
// gzip: a "gzip" (or "*") coding whose q is not 0 (RFC 9110 §12.5.3).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.TrimSpace(coding)
		if !strings.EqualFold(coding, "gzip") && coding != "*" {
			continue
		}
		q := 1.0
		for param := range strings.SplitSeq(params, ";") {
			name, value, _ := strings.Cut(strings.TrimSpace(param), "=")
			if strings.EqualFold(strings.TrimSpace(name), "q") {
				if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
					q = v
				}
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}
