package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptedIdle is how long a scripted upstream waits for a connection's
// next request before it closes the connection, as a server's keep-alive
// timeout does. It only ends a client's wait for an answer the script left
// incomplete: what a client receives does not depend on it. A new
// connection's first request is waited for up to scriptedFirst: a client
// sends it right after dialling, but on a loaded machine it may take
// longer than scriptedIdle to be written, and closing the connection
// before it would fail the client for a reason that is not the script's.
const (
	scriptedIdle  = 5 * time.Millisecond
	scriptedFirst = 10 * time.Second
)

// maxScripted bounds each scripted answer, to keep a fuzz run's inputs
// small.
const maxScripted = 4 << 10

// scriptedUpstream answers a request for /i with answers[i], byte for byte,
// on whatever connection it comes. It records which connection (numbered
// from 1) carried each request.
func scriptedUpstream(t *testing.T, answers [][]byte) (addr string, connOf func(i int) int32) {
	got := make([]chan int32, len(answers))
	for i := range got {
		got[i] = make(chan int32, 4)
	}
	u := newRawUpstream(t, func(c net.Conn, n int32) {
		br := bufio.NewReader(c)
		for idle := scriptedFirst; ; idle = scriptedIdle {
			c.SetReadDeadline(time.Now().Add(idle))
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
			if err != nil || i < 0 || i >= len(answers) {
				return
			}
			select {
			case got[i] <- n:
			default:
			}
			if _, err := c.Write(answers[i]); err != nil {
				return
			}
		}
	})
	return u.ln.Addr().String(), func(i int) int32 {
		select {
		case n := <-got[i]:
			return n
		default:
			return 0
		}
	}
}

// received is what a client got for one request.
type received struct {
	status int // 0 when RoundTrip failed
	body   string
	failed bool // RoundTrip or the body's read failed
}

func (r received) String() string {
	return fmt.Sprintf("status %d, failed %v, body %q", r.status, r.failed, r.body)
}

// roundTrip sends method /i to addr through rt and reads the whole answer.
func roundTrip(rt http.RoundTripper, addr, method string, i int) received {
	req, _ := http.NewRequest(method, fmt.Sprintf("http://%s/%d", addr, i), nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return received{failed: true}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// http.Transport hands over the connection itself as the body
		// of a protocol switch; the fast path never asks for one.
		return received{status: resp.StatusCode}
	}
	body, err := io.ReadAll(resp.Body)
	return received{status: resp.StatusCode, body: string(body), failed: err != nil}
}

// clean reports whether answer, parsed by the standard library as the
// answer to method, leaves its connection fit for another request: one
// final answer (after any 1xx), framed, read whole without error, no close
// asked and not a byte after it.
func clean(answer []byte, method string) bool {
	br := bufio.NewReader(bytes.NewReader(answer))
	req, _ := http.NewRequest(method, "http://upstream/", nil)
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || !reusable(req, resp) {
			return false
		}
		_, err = br.Peek(1)
		return err == io.EOF
	}
}

// FuzzAgainstTransport feeds the same scripted answers to the fast path
// and to http.Transport. Three requests go in turn through one fast-path
// Transport; each must receive exactly what a fresh http.Transport
// receives for the same answer on a new connection (so nothing of one
// answer leaks into the next), and the fast path may have carried a
// request on the connection of the one before only when that answer left
// the connection clean.
func FuzzAgainstTransport(f *testing.F) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for _, seed := range [][3]string{
		{ok, ok, ok},
		{ok + ok, ok, ok},
		{"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc", ok, ok},
		{"HTTP/1.1 304 Not Modified\r\n\r\n" + ok, ok, ok},
		{"HTTP/1.1 200 OK\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + ok, ok, ok},
		{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", ok, ok},
		{"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n" + ok, ok, ok},
		{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok, ok, ok},
		{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok" + ok, ok, ok},
		{"HTTP/1.0 200 OK\r\n\r\nbody", ok, ok},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n", ok, ok},
		{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", ok, ok},
		{ok, "", ok},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]), []byte(seed[2]), uint8(0))
		f.Add([]byte(seed[0]), []byte(seed[1]), []byte(seed[2]), uint8(1))
	}
	f.Fuzz(func(t *testing.T, a0, a1, a2 []byte, heads uint8) {
		if !peekSupported {
			t.Skip("no fast path on this system")
		}
		answers := [][]byte{a0, a1, a2}
		for i := range answers {
			answers[i] = answers[i][:min(len(answers[i]), maxScripted)]
		}
		method := func(i int) string {
			if heads&(1<<i) != 0 {
				return http.MethodHead
			}
			return http.MethodGet
		}
		addr, connOf := scriptedUpstream(t, answers)
		fast := newTestH1(t, nil)
		for i := range answers {
			got := roundTrip(fast, addr, method(i), i)
			ref := &http.Transport{DisableCompression: true}
			want := roundTrip(ref, addr, method(i), i)
			ref.CloseIdleConnections()
			if got != want {
				t.Errorf("answer %d %q to %s: fast path got %v, http.Transport %v", i, answers[i], method(i), got, want)
			}
		}
		// connOf now yields, per answer, the connection of the fast path's
		// request (each request was sent by the fast path first).
		prev := connOf(0)
		for i := 1; i < len(answers); i++ {
			cur := connOf(i)
			if cur != 0 && cur == prev && !clean(answers[i-1], method(i-1)) {
				t.Errorf("request %d went on the connection of answer %d %q, which left it unfit", i, i-1, answers[i-1])
			}
			prev = cur
		}
	})
}
