package stale

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// get is a GET of path on point p, http://example.com, with the header
// fields given as name, value pairs (a name given twice adds a line).
func get(path string, fields ...string) Request {
	return Request{Point: "p", Method: http.MethodGet, Scheme: "http", Host: "example.com", Path: path, Header: header(fields...)}
}

func header(fields ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(fields); i += 2 {
		h.Add(fields[i], fields[i+1])
	}
	return h
}

// answer is an upstream answer with status and header fields; its
// Content-Length is unknown unless the fields give one.
func answer(status int, fields ...string) *http.Response {
	r := &http.Response{StatusCode: status, Header: header(fields...), ContentLength: -1}
	if v := r.Header.Get("Content-Length"); v != "" {
		r.ContentLength, _ = strconv.ParseInt(v, 10, 64)
	}
	return r
}

// keep records resp to req with body at now, complete; it says whether
// Record took it (not whether Done kept it).
func keep(c *Cache, req Request, resp *http.Response, body string, now time.Time) bool {
	r := c.Record(req, resp, now)
	if r == nil {
		return false
	}
	_, _ = r.Write([]byte(body))
	r.Done(true, now)
	return true
}

// body looks req up at now and returns the body served, "" for none.
func lookup(c *Cache, req Request, maxAge time.Duration, now time.Time) (string, bool) {
	a, ok := c.Lookup(req, maxAge, now)
	if !ok {
		return "", false
	}
	return string(a.body), true
}

// check verifies the cache's structures agree: every entry in the list is
// in the maps and the other way round, the counts and bytes add up, no
// entry is larger than the per-answer bound, the total is within
// maxBytes, no group or set is empty.
func check(t testing.TB, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.next == nil {
		return
	}
	var bytes int64
	n := 0
	inList := map[*entry]bool{}
	for e := c.lru.next; e != &c.lru; e = e.next {
		if e.next.prev != e {
			t.Fatalf("list broken at %q", e.key)
		}
		inList[e] = true
		bytes += e.size
		n++
		if e.size > c.bound.Load() {
			t.Fatalf("entry of %d bytes, bound %d", e.size, c.bound.Load())
		}
		if c.groups[e.key] != e.group || e.set.entries[e.variant] != e {
			t.Fatalf("entry %q not in its maps", e.key)
		}
	}
	inMaps := 0
	for k, g := range c.groups {
		if len(g.sets) == 0 {
			t.Fatalf("empty group %q", k)
		}
		for _, s := range g.sets {
			if len(s.entries) == 0 {
				t.Fatalf("empty set in %q", k)
			}
			for _, e := range s.entries {
				if !inList[e] {
					t.Fatalf("entry %q in the maps, not in the list", k)
				}
				inMaps++
			}
		}
	}
	if bytes != c.bytes || n != c.entries || inMaps != n {
		t.Fatalf("got bytes %d entries %d (maps %d), want bytes %d entries %d", c.bytes, c.entries, inMaps, bytes, n)
	}
	if c.bytes > c.limit.Load() {
		t.Fatalf("got %d bytes, want at most maxBytes %d", c.bytes, c.limit.Load())
	}
}
