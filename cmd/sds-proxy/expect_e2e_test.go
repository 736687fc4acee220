package main_test

// End-to-end tests of uploads the upstream answers before it reads them:
// a request with Expect: 100-continue and a slow upload, on a routed point
// and unrouted, over HTTP/1.1 and HTTP/2. Through the proxy they must go
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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
// with no 100 before it, on a routed point as unrouted. A proxy that asks
// for the body anyway (it used to, on a point: its wrapper hid the
// server's own Expect body, so the server sent 100 and drained up to
// 256 KiB before the answer) leaves this client waiting.
func TestExpectContinueRefused(t *testing.T) {
	t.Parallel()
	e := startUploadEnv(t)
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	for _, tc := range uploadPaths {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(wait))
			head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", tc.path, uploadSize)
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			// The head alone: this client sends its body only after a 100.
			status, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for the answer to the head: %v (a proxy that wants the body first never answers)", err)
			}
			if got := strings.TrimSpace(status); got != "HTTP/1.1 401 Unauthorized" {
				t.Errorf("first line: got %q, want %q (the upstream's refusal, and no 100 Continue)", got, "HTTP/1.1 401 Unauthorized")
			}
		})
	}
}

// TestExpectContinueClients: Go's own clients, over HTTP/1.1 and HTTP/2,
// and curl, each offering 1 MiB with Expect: 100-continue to an upstream
// that refuses it, get the 401 without sending a byte of the body.
func TestExpectContinueClients(t *testing.T) {
	t.Parallel()
	e := startUploadEnv(t)

	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	clients := []struct {
		name      string
		protocols *http.Protocols
		proto     string // the answer's Proto
	}{{"HTTP/1.1", nil, "HTTP/1.1"}, {"HTTP/2", &h2c, "HTTP/2.0"}}
	for _, cl := range clients {
		for _, tc := range uploadPaths {
			t.Run(cl.name+"/"+tc.name, func(t *testing.T) {
				// ExpectContinueTimeout is past the test's deadline: the
				// body goes only after a 100, as with a patient client.
				tr := &http.Transport{Proxy: nil, Protocols: cl.protocols, ExpectContinueTimeout: 2 * wait}
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
				if resp.StatusCode != http.StatusUnauthorized || resp.Proto != cl.proto {
					t.Errorf("answer: got %d over %s, want 401 over %s", resp.StatusCode, resp.Proto, cl.proto)
				}
				if n := body.n.Load(); n != 0 {
					t.Errorf("body bytes the client sent: got %d, want 0 (the upstream refused it before a 100)", n)
				}
			})
		}
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
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	for _, tc := range uploadPaths {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(wait))
			head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: svc\r\nContent-Length: %d\r\n\r\n", tc.path, uploadSize)
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
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
