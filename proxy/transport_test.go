package proxy_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sds-proxy/sds-proxy/proxy"
)

// TestTransportRelaysEncoding checks that the proxy neither asks the
// upstream for gzip on a client's behalf nor decompresses what it relays:
// the upstream sees the client's Accept-Encoding, and the client gets the
// upstream's bytes and Content-Encoding as they were.
func TestTransportRelaysEncoding(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write([]byte("hello, hello, hello"))
	zw.Close()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Seen-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(zipped.Bytes())
	}))
	defer upstream.Close()
	h, _ := rpHandler(t, rpConfig(rpURL(upstream.URL), rpPoint(t, "p", nil, proxy.PointOptions{})), proxy.Options{Transport: proxy.NewTransport(false)})
	front := httptest.NewServer(h)
	defer front.Close()

	for _, accept := range []string{"", "gzip", "br"} {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/x", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		// A client that does not decompress either, so that the bytes are compared as sent.
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("Seen-Accept-Encoding"); got != accept {
			t.Errorf("client Accept-Encoding %q: the upstream saw %q", accept, got)
		}
		if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, zipped.Bytes()) {
			t.Errorf("client Accept-Encoding %q: got Content-Encoding %q and %d bytes, want the upstream's gzip bytes as they were",
				accept, resp.Header.Get("Content-Encoding"), len(body))
		}
	}
}
