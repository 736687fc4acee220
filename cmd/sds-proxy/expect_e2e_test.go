package main_test

// End-to-end tests of uploads the upstream answers before it reads them:
// a request with Expect: 100-continue (over HTTP/1.1 and HTTP/2) and a
// slow upload, on a routed point and unrouted. Through the proxy they must go
// as they go without it: the early answer reaches the client when the
// upstream gives it, and a body the upstream refused is never asked for.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// uploadSize is the body every upload test offers: 1 MiB, four times what
// the server would drain before an early answer (256 KiB).
const uploadSize = 1 << 20

// startUploadEnv starts an upstream and a proxy whose config routes
// /upload to a point and leaves /plain unrouted, so that both ways through
// the proxy are tried; h2c accepts cleartext HTTP/2 from clients too.
func startUploadEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, configHeader(e.upstream, "10s", 10)+"h2c: true\n"+
		"routes:\n  - point: upload\n    match: {pathPrefix: /upload}\n"+
		"points:\n  upload:\n    visitThreshold: 1000\n")
	e.proxy = startProxy(t, e.config)
	return e
}

// uploadPaths are the two ways through the proxy, each refused by the
// upstream with a 401 before it reads a byte of the body.
var uploadPaths = []struct{ name, path string }{
	{"point", "/upload?status=401"},
	{"unrouted", "/plain?status=401"},
}

// TestExpectContinueRefused: a client that sends Expect: 100-continue and
// waits for the 100 before its 1 MiB body gets the upstream's 401 at once,
// with no 100 before it, on a routed point as unrouted, over HTTP/1.1 and
// HTTP/2 (cleartext). A proxy that asks for the body anyway (it used to,
// on a point: its wrapper hid the server's own Expect body, so the server
// sent 100 and drained up to 256 KiB before the answer) leaves this client
// waiting. Both clients are written by hand so that what the proxy sends
// is seen as it is sent: Go's HTTP/2 client reads a body that it is about
// to drop, which cannot be told from one it sends.
func TestExpectContinueRefused(t *testing.T) {
	t.Parallel()
	e := startUploadEnv(t)
	for _, tc := range uploadPaths {
		t.Run("HTTP/1.1/"+tc.name, func(t *testing.T) {
			conn := sendUploadHead(t, e, tc.path, "Expect: 100-continue\r\n")
			// The head alone: this client sends its body only after a 100.
			status, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for the answer to the head: %v (a proxy that wants the body first never answers)", err)
			}
			if got := strings.TrimSpace(status); got != "HTTP/1.1 401 Unauthorized" {
				t.Errorf("first line: got %q, want %q (the upstream's refusal, and no 100 Continue)", got, "HTTP/1.1 401 Unauthorized")
			}
		})
		t.Run("HTTP/2/"+tc.name, func(t *testing.T) {
			if got := h2ExpectStatuses(t, e, tc.path); !slices.Equal(got, []string{"401"}) {
				t.Errorf("statuses the proxy sent on the stream: got %q, want only the upstream's 401 (no 100)", got)
			}
		})
	}
}

// h2ExpectStatuses opens a cleartext HTTP/2 connection to e's proxy, sends
// the HEADERS of a POST of path offering uploadSize bytes with Expect:
// 100-continue, and nothing of the body, then returns the :status of every
// response head the proxy sends on that stream, up to its final one.
func h2ExpectStatuses(t *testing.T, e *env, path string) []string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "svc"}, {":path", path},
		{"content-length", strconv.Itoa(uploadSize)}, {"expect", "100-continue"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the proxy's frames after %q: %v", statuses, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			status := f.PseudoValue("status")
			statuses = append(statuses, status)
			if !strings.HasPrefix(status, "1") {
				return statuses
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset (%v) after %q, before a final answer", f.ErrCode, statuses)
		}
	}
}

// TestExpectContinueClients: Go's HTTP/1.1 client and curl, each offering
// 1 MiB with Expect: 100-continue to an upstream that refuses it, get the
// 401 without sending a byte of the body.
func TestExpectContinueClients(t *testing.T) {
	t.Parallel()
	e := startUploadEnv(t)
	for _, tc := range uploadPaths {
		t.Run("Go/"+tc.name, func(t *testing.T) {
			// ExpectContinueTimeout is past the test's deadline: the body
			// goes only after a 100, as with a patient client.
			tr := &http.Transport{Proxy: nil, ExpectContinueTimeout: 2 * wait}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: wait}
			body := &countingReader{r: bytes.NewReader(make([]byte, uploadSize))}
			req, err := http.NewRequest(http.MethodPost, e.proxy.url+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = uploadSize
			req.Header.Set("Expect", "100-continue")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("upload: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("answer: got %d, want 401", resp.StatusCode)
			}
			if n := body.n.Load(); n != 0 {
				t.Errorf("body bytes the client sent: got %d, want 0 (the upstream refused it before a 100)", n)
			}
		})
	}

	t.Run("curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("missing tool: curl (apt-get install curl)")
		}
		file := filepath.Join(e.dir, "upload.bin")
		e.write(file, string(make([]byte, uploadSize)))
		for _, tc := range uploadPaths {
			// curl waits up to --expect100-timeout (1 s by default) for the
			// 100, then sends the body anyway; here the 401 comes first.
			out, err := exec.Command(curl, "-sS", "-o", "/dev/null", "--max-time", strconv.Itoa(int(wait/time.Second)),
				"-H", "Expect: 100-continue", "--data-binary", "@"+file,
				"-w", "%{http_code} %{size_upload}", e.proxy.url+tc.path).CombinedOutput()
			if err != nil {
				t.Fatalf("curl %s: %v: %s", tc.path, err, out)
			}
			if got := string(out); got != "401 0" {
				t.Errorf("curl %s: got status and bytes uploaded %q, want %q", tc.path, got, "401 0")
			}
		}
	})
}

// TestSlowUploadEarlyAnswer: a client uploading 1 MiB slowly, with no
// Expect, to an upstream that refuses it at once gets the refusal while
// its upload is still at its start: never only after the server has read
// 256 KiB of it.
func TestSlowUploadEarlyAnswer(t *testing.T) {
	t.Parallel()
	e := startUploadEnv(t)
	for _, tc := range uploadPaths {
		t.Run(tc.name, func(t *testing.T) {
			conn := sendUploadHead(t, e, tc.path, "")
			// 1 KiB every 10 ms (100 KiB/s) until the answer comes, or
			// the whole body has gone.
			var sent atomic.Int64
			done := make(chan struct{})
			defer close(done)
			go func() {
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				chunk := make([]byte, 1024)
				for sent.Load() < uploadSize {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					if _, err := conn.Write(chunk); err != nil {
						return
					}
					sent.Add(int64(len(chunk)))
				}
			}()
			status, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for the early answer: %v", err)
			}
			if got := strings.TrimSpace(status); got != "HTTP/1.1 401 Unauthorized" {
				t.Errorf("first line: got %q, want the upstream's 401", got)
			}
			// 64 KiB is a quarter of what a server drains before an early
			// answer: an answer held for that drain arrives far later.
			t.Logf("body bytes sent before the 401: %d of %d", sent.Load(), uploadSize)
			if n := sent.Load(); n >= 64<<10 {
				t.Errorf("body bytes sent before the 401: got %d, want fewer than %d (the answer was held for the body)", n, 64<<10)
			}
		})
	}
}

// sendUploadHead opens a connection to e's proxy and writes the head of
// a POST of path offering uploadSize bytes, with the extra header lines
// given (each ending in CRLF), and nothing of its body. The connection is
// closed when the test ends.
func sendUploadHead(t *testing.T, e *env, path, extra string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.proxy.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(wait))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\n%s\r\n", path, uploadSize, extra)
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

// countingReader counts the bytes read from r: what a client sent.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
