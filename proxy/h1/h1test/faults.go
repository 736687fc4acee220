// Package h1test is a catalogue of the ways an HTTP/1.1 upstream breaks
// the framing of its answers, and a raw connection loop that serves them:
// the faulty upstream of proxy/h1's differential tests and of
// sds-upstream's /api/wire route, which the end-to-end tests put behind
// the real proxy.
//
// Each answer names the path of the request it was written for, in its
// body ("@" then the path), an X-Path header and a session cookie, and so
// does every extra answer a fault sends along. A client that receives an
// answer naming a path other than its own (Misdirected) got a response
// meant for another request: the failure a proxy's connection pool must
// never allow.
package h1test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// FaultyQuery is the query parameter that marks a request the upstream
// answers with its fault (FaultyQuery=1); it answers the others correctly.
const FaultyQuery = "f"

// Answer is the correct answer to a request for path.
func Answer(path string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Path: %s\r\nSet-Cookie: session=%s\r\n\r\n@%s", len(path)+1, path, path, path)
}

// Stray is an answer nobody asked for, sent along with the one to path.
func Stray(path string) string {
	body := "stray@" + path
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Path: %s\r\nSet-Cookie: session=%s\r\n\r\n%s", len(body), path, path, body)
}

// Fault is one way of answering a request wrongly.
type Fault struct {
	// Name is a short identifier, usable in a URL.
	Name string
	// Doc says what the upstream does.
	Doc string
	// Method is the method a faulty request must have for the fault to
	// mean anything (HEAD for a body on HEAD); "" is any.
	Method string
	// Expensive marks a fault that sends megabytes per request: drive it
	// with few requests.
	Expensive bool
	// Stalls says the answer's body stops after its marker and never
	// ends: a client reads the marker and gives up.
	Stalls bool

	write func(c net.Conn, br *bufio.Reader, path string) bool
}

// Write writes f's answer to a request for path on c (br is c's reader,
// which a stall drains until the client goes away) and reports whether
// the connection may go on serving.
func (f Fault) Write(c net.Conn, br *bufio.Reader, path string) bool {
	return f.write(c, br, path)
}

// writeAll writes the parts in one write and reports whether it worked.
func writeAll(c net.Conn, parts ...string) bool {
	_, err := io.WriteString(c, strings.Join(parts, ""))
	return err == nil
}

// Faults returns the catalogue, in a fixed order.
func Faults() []Fault {
	return []Fault{
		{Name: "after-length", Doc: "a second response after a Content-Length body", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, Answer(p), Stray(p))
		}},
		{Name: "length-and-chunked", Doc: "Content-Length and chunked, the length hiding a response", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			hidden := Stray(p)
			return writeAll(c, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 5+len(hidden)), hidden)
		}},
		{Name: "duplicate-length", Doc: "two different Content-Length headers", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\nok", Stray(p))
		}},
		{Name: "malformed-length", Doc: "a Content-Length that is not a number", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok", Stray(p))
		}},
		{Name: "head-body", Doc: "a body on an answer to HEAD", Method: http.MethodHead, write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, Answer(p), Stray(p)) // Answer's body is the one HEAD must not have
		}},
		{Name: "204-body", Doc: "a body on a 204", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", Stray(p))
		}},
		{Name: "304-body", Doc: "a body on a 304", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, "HTTP/1.1 304 Not Modified\r\n\r\n", Stray(p))
		}},
		{Name: "twice", Doc: "the same response twice in one write", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, Answer(p)+Answer(p))
		}},
		{Name: "unasked-101", Doc: "a 101 to a request that asked for no upgrade, then a response", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n", Stray(p))
		}},
		{Name: "1xx-flood", Doc: "a thousand 103 Early Hints before the answer", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n", 1000), Answer(p))
		}},
		{Name: "endless-header", Doc: "11 MiB of headers, past the 10 MiB a client reads", Expensive: true, write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			w := bufio.NewWriter(c)
			w.WriteString("HTTP/1.1 200 OK\r\n")
			line := "X-Filler: " + strings.Repeat("f", 1000) + "\r\n"
			for range 11 << 10 {
				if _, err := w.WriteString(line); err != nil {
					return false
				}
			}
			return false
		}},
		{Name: "close-mid-body", Doc: "a close 10 bytes into a 100-byte body", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n@"+p)
			return false
		}},
		{Name: "stall-mid-body", Doc: "a body that stops after its marker until the client goes away", Stalls: true, write: func(c net.Conn, br *bufio.Reader, p string) bool {
			writeAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n@"+p)
			io.Copy(io.Discard, br)
			return false
		}},
		{Name: "close-left-open", Doc: "Connection: close with the socket left open, then a response", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			return writeAll(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", Stray(p))
		}},
		{Name: "http10-unframed", Doc: "an HTTP/1.0 answer without a length, ended by a close", write: func(c net.Conn, _ *bufio.Reader, p string) bool {
			writeAll(c, "HTTP/1.0 200 OK\r\n\r\n@"+p)
			return false
		}},
	}
}

// Lookup returns the fault named name.
func Lookup(name string) (Fault, bool) {
	for _, f := range Faults() {
		if f.Name == name {
			return f, true
		}
	}
	return Fault{}, false
}

// Serve answers the requests on c, read through br, until c fails, the
// client goes away or f ends the connection: those whose query has
// FaultyQuery=1 with f, the others with Answer.
func Serve(c net.Conn, br *bufio.Reader, f Fault) {
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, r.Body)
		if !Respond(c, br, r, f) {
			return
		}
	}
}

// Respond answers r on c as Serve does and reports whether c may go on.
func Respond(c net.Conn, br *bufio.Reader, r *http.Request, f Fault) bool {
	if r.URL.Query().Get(FaultyQuery) != "1" {
		return writeAll(c, Answer(r.URL.Path))
	}
	return f.Write(c, br, r.URL.Path)
}

// Misdirected says what in an answer (resp and its body) names a path
// other than own, or "" when nothing does.
func Misdirected(resp *http.Response, body []byte, own string) string {
	if p := resp.Header.Get("X-Path"); p != "" && p != own {
		return "X-Path " + p
	}
	for _, c := range resp.Cookies() {
		if c.Name == "session" && c.Value != own {
			return "Set-Cookie " + c.Value
		}
	}
	if i := strings.IndexByte(string(body), '@'); i >= 0 && string(body[i+1:]) != own {
		return "body " + string(body)
	}
	return ""
}
