package proxy_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestUnaskedSwitchClosed: a 101 to a request that asked for no upgrade is
// answered 502, and the upstream connection it came on is closed, on the
// fast path (GET) and through http.Transport (POST), whose 101 body is the
// connection itself.
func TestUnaskedSwitchClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{}, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				r, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, r.Body)
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n")
				io.Copy(io.Discard, br) // until the proxy closes its side
				closed <- struct{}{}
			}()
		}
	}()
	h, _ := rpHandler(t, rpConfig(rpURL("http://"+ln.Addr().String()), rpPoint(t, "p", nil, proxy.PointOptions{})), proxy.Options{})
	front := httptest.NewServer(h)
	defer front.Close()
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(method, front.URL+"/x", strings.NewReader(""))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %d, want 502", method, resp.StatusCode)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the upstream connection of the refused 101 was still open after 5s", method)
		}
	}
}
