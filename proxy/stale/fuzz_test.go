package stale

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/cachecontrol/cacheobject"
)

// FuzzRecordLookup records an answer with hostile header values (Vary
// lists with odd spacing and case, Cache-Control of any shape, huge
// values, header names of any spelling) and looks it up with the same
// and with another cookie. Nothing may panic, the structures must agree,
// a kept answer must be found by its own request, and a request with
// another cookie may get it only if the upstream marked it shareable.
func FuzzRecordLookup(f *testing.F) {
	f.Add("Cookie", "max-age=60", "X-User", "a", "sid=1", "10", "text/plain")
	f.Add(" cookie ,\t, X-USER,,", "public, s-maxage=5", "x-user", "b", "sid=2", "", "")
	f.Add("*", `private="a, b", no-cache`, "Vary", "*", "", "abc", "text/event-stream")
	f.Add("x-forwarded-for", `x="\`, "Cookie", "sid=1", "sid=1", "99999999999999999999", "application/grpc")
	f.Add(strings.Repeat("A,", 40), "stale-if-error=5, must-revalidate", "authorization", "Bearer x", "", "-1", "")
	f.Add(strings.Repeat("X", 1<<16), strings.Repeat("max-age=1,", 1000), "X-Big", strings.Repeat("v", 1<<16), "c", "5, 6", "")
	f.Fuzz(func(t *testing.T, vary, cc, name, value, cookie, age, ctype string) {
		c := New(1 << 20)
		req := get("/f")
		req.Header[name] = []string{value}
		if cookie != "" {
			req.Header["Cookie"] = append(req.Header["Cookie"], cookie)
		}
		resp := answer(200)
		resp.Header["Vary"] = []string{vary}
		resp.Header["Cache-Control"] = []string{cc}
		resp.Header["Age"] = []string{age}
		resp.Header["Content-Type"] = []string{ctype}
		r := c.Record(req, resp, t0)
		_, _ = r.Write([]byte("body"))
		r.Done(true, t0)
		check(t, c)
		if _, ok := c.Lookup(req, forever, t0); r != nil && !ok {
			t.Fatalf("kept answer not found by its own request")
		}
		other := get("/f")
		for k, v := range req.Header {
			other.Header[k] = v
		}
		delete(other.Header, "Cookie")
		other.Header["Cookie"] = []string{cookie + "-other"}
		if _, ok := c.Lookup(other, forever, t0); ok && cookie != "" {
			d, err := cacheobject.ParseResponseCacheControl(cc)
			if err != nil || !(d.Public || d.SMaxAge >= 0) {
				t.Fatalf("a request with another cookie got a non-shareable answer (Cache-Control %q, Vary %q)", cc, vary)
			}
		}
		head := req
		head.Method = http.MethodHead
		if a, ok := c.Lookup(head, forever, t0); ok {
			a.Serve(discard{}, true, "x", t0)
		}
	})
}

// forever is the longest maxAge, so that any upstream Age passes.
const forever = time.Duration(1<<63 - 1)

// discard is a ResponseWriter that drops everything.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}
