package main_test

// End-to-end tests of what sds_requests_total tells: a request counts as
// proxied when the upstream was sent it, not when the proxy let it
// through, and CONNECT never reaches a point or the upstream.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestResetStreamsCounted: one client opens 2,000 HTTP/2 streams and
// resets each at once. Every one is let through (no threshold), so each
// that reaches the proxy's handler counts once, as proxied or canceled;
// proxied must be what the upstream saw, not what the proxy admitted (it counted about half the streams
// proxied while the upstream saw a few, when it counted at admission).
func TestResetStreamsCounted(t *testing.T) {
	t.Parallel()
	const streams = 2000
	e := setup(t, "60s", 60, "h2c: true\n"+pointRoute+"    visitThreshold: 1000000\n")
	before, _ := e.upstreamStats() // its own /_control reads are requests too

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	go io.Copy(io.Discard, conn) // the server's frames: read, never looked at
	w := bufio.NewWriter(conn)
	if _, err := io.WriteString(w, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(w, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "svc"}, {Name: ":path", Value: "/reset"}} {
		enc.WriteField(f)
	}
	for i := range streams {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	// The server runs a handler for the streams not reset before their
	// turn (net/http drops the others): each such visit of the point
	// counts once, as proxied or canceled, once its handler is over.
	var proxied, canceled float64
	var visits int64
	counted := eventually(wait, func() bool {
		proxied, _ = e.metric("sds_requests_total", "point", "p", "result", "proxied")
		canceled, _ = e.metric("sds_requests_total", "point", "p", "result", "canceled")
		st := e.point("p")
		visits = st.Window.Visits
		return visits > 0 && st.Window.InFlight == 0 && proxied+canceled == float64(visits)
	})
	if !counted {
		t.Fatalf("proxied %v + canceled %v: want the point's %d visits, each counted once", proxied, canceled, visits)
	}
	after, _ := e.upstreamStats()
	seen := float64(after - before)
	t.Logf("%d streams reset: %d visits of the point, proxied %v, canceled %v, the upstream saw %v", streams, visits, proxied, canceled, seen)
	// The upstream may miss a request the proxy wrote just before the
	// client's reset cut the connection: proxied may exceed seen, by a few.
	if proxied < seen || proxied > seen+max(10, seen/10) {
		t.Errorf("proxied: got %v, want what the upstream saw (%v), give or take the requests cut in flight", proxied, seen)
	}
	if canceled == 0 {
		t.Errorf("canceled: got 0, want the streams reset before the upstream was sent them")
	}
}

// TestConnectRefused: CONNECT is answered 405 with Allow, over a routed
// host as any other, and never reaches the upstream or a point.
func TestConnectRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, pointRoute+"    visitThreshold: 100\n")
	before, _ := e.upstreamStats()
	for _, target := range []string{"evil.example:443", "127.0.0.1:22"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(wait))
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("CONNECT %s: %v", target, err)
		}
		if allow := resp.Header.Get("Allow"); resp.StatusCode != 405 || allow == "" || strings.Contains(allow, "CONNECT") {
			t.Errorf("CONNECT %s: got %d, Allow %q; want 405 with an Allow that lists the methods forwarded, CONNECT not among them", target, resp.StatusCode, allow)
		}
	}
	after, _ := e.upstreamStats()
	if seen := after - before; seen != 0 {
		t.Errorf("requests the upstream saw: got %d, want 0", seen)
	}
	e.metricIs(2, "sds_rejected_requests_total", "reason", "method")
	e.metricIs(0, "sds_requests_total", "point", "p", "result", "proxied")
}
