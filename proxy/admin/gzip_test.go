package admin

import (
	"compress/gzip"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// pointless is a request path with no point.
type pointless struct{}

func (pointless) Snapshots(time.Time) iter.Seq[limiter.Snapshot] {
	return limiterPoints(nil).Snapshots(time.Time{})
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                             false,
		"gzip":                         true,
		"GZIP":                         true,
		"deflate, gzip;q=0.5":          true,
		"gzip;q=0":                     false,
		"gzip; q=0.0, identity":        false,
		"br":                           false,
		"*":                            true,
		"identity, *;q=0":              false,
		"gzipx":                        false,
		"deflate;q=1, gzip ; q = 0.01": true,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

// TestMetricsGzip scrapes /metrics with and without gzip and compares the
// bodies once decompressed.
func TestMetricsGzip(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sds_test_total", Help: "A counter."})
	reg.MustRegister(c)
	c.Add(7)
	srv := httptest.NewServer(New(Options{Points: pointless{}, Gatherer: reg}))
	defer srv.Close()
	get := func(accept string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatalf("Accept-Encoding %q: %v", accept, err)
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	plainResp, plain := get("")
	zippedResp, zipped := get("gzip")
	if plainResp.Header.Get("Content-Encoding") != "" || zippedResp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("Content-Encoding: %q without gzip, %q with; want none and gzip",
			plainResp.Header.Get("Content-Encoding"), zippedResp.Header.Get("Content-Encoding"))
	}
	if !strings.Contains(plain, "sds_test_total 7") || plain != zipped {
		t.Errorf("bodies differ or lack the counter:\nplain:\n%s\ngzipped:\n%s", plain, zipped)
	}
}
