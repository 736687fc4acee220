package stale

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

const minute = time.Minute

func TestVaryKeying(t *testing.T) {
	c := New(1 << 20)
	keep(c, get("/", "X-User", "ann"), answer(200, "Vary", "X-User"), "for ann", t0)
	keep(c, get("/", "X-User", "bob"), answer(200, "Vary", "x-user"), "for bob", t0)
	keep(c, get("/"), answer(200, "Vary", "X-User"), "for nobody", t0)
	rows := []struct {
		name string
		req  Request
		want string // "" for none
	}{
		{"ann", get("/", "X-User", "ann"), "for ann"},
		{"bob", get("/", "X-User", "bob"), "for bob"},
		{"no X-User", get("/"), "for nobody"},
		{"an empty line is not the absent header", get("/", "X-User", ""), ""},
		{"another user", get("/", "X-User", "cat"), ""},
		{"case of the value", get("/", "X-User", "Ann"), ""},
		{"space in the value", get("/", "X-User", "ann "), ""},
		{"two lines", get("/", "X-User", "ann", "X-User", "bob"), ""},
		{"lower-case name in the map", requestRaw("x-user", "ann"), "for ann"},
		{"two spellings", requestRaw("X-User", "ann", "x-user", "ann"), ""},
		{"another path", func() Request { r := get("/b", "X-User", "ann"); return r }(), ""},
	}
	for _, row := range rows {
		got, _ := lookup(c, row.req, minute, t0)
		if got != row.want {
			t.Errorf("%s: got %q, want %q", row.name, got, row.want)
		}
	}

	// Cookie: kept per cookie when the answer varies on it.
	keep(c, get("/c", "Cookie", "sid=1"), answer(200, "Vary", "Cookie"), "sid 1", t0)
	keep(c, get("/c", "Cookie", "sid=2"), answer(200, "Vary", "Cookie"), "sid 2", t0)
	for _, row := range []struct{ cookie, want string }{{"sid=1", "sid 1"}, {"sid=2", "sid 2"}, {"sid=3", ""}, {"", ""}} {
		req := get("/c")
		if row.cookie != "" {
			req.Header.Set("Cookie", row.cookie)
		}
		if got, _ := lookup(c, req, minute, t0); got != row.want {
			t.Errorf("Cookie %q: got %q, want %q", row.cookie, got, row.want)
		}
	}
}

// TestVaryLists: answers of one URL with different Vary lists live side
// by side; the last arrived of those matching wins.
func TestVaryLists(t *testing.T) {
	c := New(1 << 20)
	keep(c, get("/", "Accept", "a"), answer(200, "Vary", "Accept"), "accept a", t0)
	keep(c, get("/", "Accept", "a", "X-User", "u"), answer(200, "Vary", "X-User"), "user u", t0.Add(time.Second))
	if got, _ := lookup(c, get("/", "Accept", "a", "X-User", "u"), minute, t0.Add(2*time.Second)); got != "user u" {
		t.Fatalf("got %q, want the later answer %q", got, "user u")
	}
	if got, _ := lookup(c, get("/", "Accept", "a", "X-User", "v"), minute, t0.Add(2*time.Second)); got != "accept a" {
		t.Fatalf("got %q, want %q", got, "accept a")
	}
	// A ninth Vary list drops the oldest list's answers.
	for i := range maxVarySets {
		keep(c, get("/", "X-H"+fmt.Sprint(i), "v"), answer(200, "Vary", "X-H"+fmt.Sprint(i)), "list", t0)
	}
	check(t, c)
	if g := c.groups[string(appendKey(nil, new(get("/"))))]; len(g.sets) != maxVarySets {
		t.Fatalf("got %d Vary lists, want %d", len(g.sets), maxVarySets)
	}
	if _, ok := lookup(c, get("/", "Accept", "a"), minute, t0); ok {
		t.Fatalf("the oldest Vary list's answer is still served")
	}
}

func TestHeadFindsGet(t *testing.T) {
	c := New(1 << 20)
	keep(c, get("/"), answer(200, "Content-Type", "text/plain"), "body", t0)
	head := get("/")
	head.Method = http.MethodHead
	a, ok := c.Lookup(head, minute, t0)
	if !ok {
		t.Fatalf("HEAD: got no answer, want the GET's")
	}
	w := httptest.NewRecorder()
	a.Serve(w, true, "x", t0)
	if w.Body.Len() != 0 || w.Header().Get("Content-Length") != "4" {
		t.Fatalf("HEAD: got body %q Content-Length %q, want none and 4", w.Body, w.Header().Get("Content-Length"))
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, "", "get"} {
		req := get("/")
		req.Method = m
		if _, ok := c.Lookup(req, minute, t0); ok {
			t.Errorf("method %q: got an answer, want none", m)
		}
	}
}

func TestKeyParts(t *testing.T) {
	c := New(1 << 20)
	keep(c, get("/a", "X", "1"), answer(200), "base", t0)
	same := get("/a")
	same.Host = "EXAMPLE.com"
	if got, _ := lookup(c, same, minute, t0); got != "base" {
		t.Fatalf("host in upper case: got %q, want base", got)
	}
	for name, change := range map[string]func(*Request){
		"point":  func(r *Request) { r.Point = "q" },
		"scheme": func(r *Request) { r.Scheme = "https" },
		"host":   func(r *Request) { r.Host = "example.org" },
		"port":   func(r *Request) { r.Host = "example.com:80" },
		"path":   func(r *Request) { r.Path = "/A" },
		"query":  func(r *Request) { r.RawQuery = "x=1" },
		"moved":  func(r *Request) { r.Point, r.Scheme = "ph", "ttp" },
	} {
		req := get("/a")
		change(&req)
		if got, ok := lookup(c, req, minute, t0); ok {
			t.Errorf("%s changed: got %q, want none", name, got)
		}
	}
}

// TestReplace: an answer replaces the one of the same key and variant,
// unless that one's header arrived later (a slow body ending after a
// newer answer).
func TestReplace(t *testing.T) {
	c := New(1 << 20)
	slow := c.Record(get("/"), answer(200), t0)
	keep(c, get("/"), answer(200), "newer", t0.Add(time.Second))
	_, _ = slow.Write([]byte("older"))
	slow.Done(true, t0.Add(2*time.Second))
	if got, _ := lookup(c, get("/"), minute, t0.Add(2*time.Second)); got != "newer" {
		t.Fatalf("got %q, want newer", got)
	}
	keep(c, get("/"), answer(200), "newest", t0.Add(3*time.Second))
	if got, _ := lookup(c, get("/"), minute, t0.Add(3*time.Second)); got != "newest" {
		t.Fatalf("got %q, want newest", got)
	}
	if _, n := c.Stats(); n != 1 {
		t.Fatalf("got %d entries, want 1", n)
	}
	check(t, c)
}

// sizeOf is the size an answer to get(path) with body counts for.
func sizeOf(t *testing.T, path, body string) int64 {
	c := New(1 << 30)
	keep(c, get(path), answer(200), body, t0)
	n, _ := c.Stats()
	if want := int64(EntryOverhead + len(body) + len(appendKey(nil, new(get(path)))) + len("p")); n != want { // no header line
		t.Fatalf("size: got %d, want %d", n, want)
	}
	return n
}

func TestLRU(t *testing.T) {
	size := sizeOf(t, "/00", strings.Repeat("x", 100))
	c := New(16 * 4 * size) // room for 64 answers
	for i := range 64 {
		keep(c, get(fmt.Sprint("/", i%10)+fmt.Sprint(i/10)), answer(200), strings.Repeat("x", 100), t0)
	}
	if b, n := c.Stats(); n != 64 || b != 64*size {
		t.Fatalf("got %d entries of %d bytes, want 64 of %d", n, b, 64*size)
	}
	// Use the oldest; the next oldest goes first.
	if _, ok := c.Lookup(get("/00"), minute, t0); !ok {
		t.Fatalf("oldest answer missing")
	}
	keep(c, get("/new"), answer(200), strings.Repeat("x", 100), t0)
	if _, ok := c.Lookup(get("/00"), minute, t0); !ok {
		t.Fatalf("the used answer was evicted")
	}
	if _, ok := c.Lookup(get("/10"), minute, t0); ok {
		t.Fatalf("the least recently used answer was not evicted")
	}
	check(t, c)
}

// TestRandomInserts: 10,000 answers of random sizes, keys and Vary
// values, with lookups between; the bound holds after every step and the
// structures agree.
func TestRandomInserts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const maxBytes = 256 << 10
	c := New(maxBytes)
	bound := c.bound.Load()
	now := t0
	for i := range 10000 {
		now = now.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		req := get(fmt.Sprint("/", rng.IntN(300)), "X-User", fmt.Sprint(rng.IntN(5)))
		resp := answer(200)
		if rng.IntN(2) == 0 {
			resp.Header.Set("Vary", "X-User")
		}
		body := strings.Repeat("b", rng.IntN(int(bound)))
		if rng.IntN(3) == 0 {
			c.Lookup(req, minute, now)
		} else {
			keep(c, req, resp, body, now)
		}
		if b, _ := c.Stats(); b > maxBytes {
			t.Fatalf("step %d: got %d bytes, want at most %d", i, b, maxBytes)
		}
		if i%100 == 0 {
			check(t, c)
		}
	}
	check(t, c)
	if c.inflight.Load() != 0 {
		t.Fatalf("got %d bytes in flight, want 0", c.inflight.Load())
	}
}

func TestSetMaxBytes(t *testing.T) {
	size := sizeOf(t, "/00", "body")
	c := New(40 * size)
	for i := range 40 {
		keep(c, get(fmt.Sprintf("/%02d", i)), answer(200), "body", t0)
	}
	if _, n := c.Stats(); n != 40 {
		t.Fatalf("got %d entries, want 40", n)
	}
	c.SetMaxBytes(20 * size)
	if b, n := c.Stats(); n != 20 || b != 20*size {
		t.Fatalf("shrunk: got %d entries of %d bytes, want 20 of %d", n, b, 20*size)
	}
	for i := range 40 {
		_, ok := c.Lookup(get(fmt.Sprintf("/%02d", i)), minute, t0)
		if want := i >= 20; ok != want {
			t.Errorf("/%02d: got kept %v, want %v (the most recent kept)", i, ok, want)
		}
	}
	check(t, c)

	// An answer past the new per-answer bound goes, even if the total fits.
	big := New(1 << 20) // bound 64 KiB
	keep(big, get("/big"), answer(200), strings.Repeat("x", 40<<10), t0)
	keep(big, get("/small"), answer(200), "x", t0)
	big.SetMaxBytes(512 << 10) // bound 32 KiB
	if _, ok := big.Lookup(get("/big"), minute, t0); ok {
		t.Errorf("an answer of 40 KiB kept under a bound of 32 KiB")
	}
	if _, ok := big.Lookup(get("/small"), minute, t0); !ok {
		t.Errorf("a small answer dropped by SetMaxBytes with room to spare")
	}
	check(t, big)

	c.SetMaxBytes(0)
	if b, n := c.Stats(); n != 0 || b != 0 {
		t.Fatalf("off: got %d entries of %d bytes, want none", n, b)
	}
	if r := c.Record(get("/"), answer(200), t0); r != nil {
		t.Fatalf("off: Record returned a recorder")
	}
	if _, ok := c.Lookup(get("/25"), minute, t0); ok {
		t.Fatalf("off: Lookup found an answer")
	}

	var zero Cache
	if r := zero.Record(get("/"), answer(200), t0); r != nil {
		t.Fatalf("zero Cache: Record returned a recorder")
	}
	zero.SetMaxBytes(1 << 20)
	if !keep(&zero, get("/"), answer(200), "x", t0) {
		t.Fatalf("zero Cache after SetMaxBytes: Record returned nil")
	}
	var nilCache *Cache
	if nilCache.Record(get("/"), answer(200), t0) != nil {
		t.Fatalf("nil Cache: Record returned a recorder")
	}
	if _, ok := nilCache.Lookup(get("/"), minute, t0); ok {
		t.Fatalf("nil Cache: Lookup found an answer")
	}
}

func TestRetain(t *testing.T) {
	c := New(1 << 20)
	for _, p := range []string{"a", "b", "c"} {
		req := get("/")
		req.Point = p
		keep(c, req, answer(200), "from "+p, t0)
	}
	inflight := c.Record(get("/late"), answer(200), t0)
	c.Retain(func(p string) bool { return p != "b" })
	_, _ = inflight.Write([]byte("begun before Retain"))
	inflight.Done(true, t0)
	for _, row := range []struct {
		point string
		want  bool
	}{{"a", true}, {"b", false}, {"c", true}} {
		req := get("/")
		req.Point = row.point
		if _, ok := c.Lookup(req, minute, t0); ok != row.want {
			t.Errorf("point %s: got kept %v, want %v", row.point, ok, row.want)
		}
	}
	if _, ok := c.Lookup(get("/late"), minute, t0); ok {
		t.Errorf("a recording begun before Retain was kept")
	}
	check(t, c)
	c.Retain(nil)
	if _, n := c.Stats(); n != 0 {
		t.Fatalf("Retain(nil): got %d entries, want 0", n)
	}
}

func TestRecorderDrops(t *testing.T) {
	c := New(1 << 20)
	bound := c.bound.Load() // 64 KiB
	rows := []struct {
		name     string
		resp     *http.Response
		writes   []int
		complete bool
		want     bool
	}{
		{"complete", answer(200), []int{10, 20}, true, true},
		{"incomplete", answer(200), []int{10, 20}, false, false},
		{"Content-Length matched", answer(200, "Content-Length", "30"), []int{10, 20}, true, true},
		{"Content-Length short", answer(200, "Content-Length", "31"), []int{10, 20}, true, false},
		{"Content-Length long", answer(200, "Content-Length", "29"), []int{10, 20}, true, false},
		{"past the bound", answer(200), []int{int(bound / 2), int(bound / 2)}, true, false},
		{"the bound", answer(200), []int{-1, 0}, true, true},
		{"one byte past the bound", answer(200), []int{-1, 1}, true, false},
		{"empty", answer(200, "Content-Length", "0"), nil, true, true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := c.Record(get("/"+row.name), row.resp, t0)
			if r == nil {
				t.Fatalf("Record: got nil, want a recorder")
			}
			for _, n := range row.writes {
				if n < 0 { // up to the bound
					n = int(bound - r.fixed)
				}
				if got, err := r.Write(make([]byte, n)); got != n || err != nil {
					t.Fatalf("Write: got %d, %v, want %d, nil", got, err, n)
				}
			}
			if row.name == "past the bound" && (r.buf != nil || !r.done) {
				t.Fatalf("past the bound: buffer kept (%d bytes), want it freed at once", len(r.buf))
			}
			r.Done(row.complete, t0)
			r.Done(true, t0) // a second Done does nothing
			if _, got := c.Lookup(get("/"+row.name), minute, t0); got != row.want {
				t.Fatalf("got kept %v, want %v", got, row.want)
			}
			if c.inflight.Load() != 0 {
				t.Fatalf("got %d bytes in flight after Done, want 0", c.inflight.Load())
			}
		})
	}
	var nilRecorder *Recorder
	if n, err := nilRecorder.Write([]byte("x")); n != 1 || err != nil {
		t.Fatalf("nil Recorder: Write got %d, %v", n, err)
	}
	nilRecorder.Done(true, t0)
}

// TestInflightBudget: bodies being recorded at once hold at most
// maxBytes/4; past it a recording is dropped, and Done gives its share
// back.
func TestInflightBudget(t *testing.T) {
	c := New(1 << 20) // budget 256 KiB, bound 64 KiB
	chunk := make([]byte, 60<<10)
	var rs []*Recorder
	for i := range 5 {
		r := c.Record(get(fmt.Sprint("/", i)), answer(200), t0)
		_, _ = r.Write(chunk)
		rs = append(rs, r)
	}
	if got := c.inflight.Load(); got > budget(1<<20) {
		t.Fatalf("got %d bytes in flight, want at most %d", got, budget(1<<20))
	}
	if !rs[4].done {
		t.Fatalf("the fifth recording of 60 KiB was not dropped")
	}
	for _, r := range rs {
		r.Done(true, t0)
	}
	if got := c.inflight.Load(); got != 0 {
		t.Fatalf("got %d bytes in flight after Done, want 0", got)
	}
	if _, n := c.Stats(); n != 4 {
		t.Fatalf("got %d kept, want 4", n)
	}
}

// TestConcurrent records, looks up, serves, resizes and retains from many
// goroutines at once; run with -race.
func TestConcurrent(t *testing.T) {
	c := New(64 << 10)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			now := t0
			for i := range 2000 {
				now = now.Add(time.Millisecond)
				req := get(fmt.Sprint("/", rng.IntN(50)), "X-User", fmt.Sprint(rng.IntN(3)))
				switch op := rng.IntN(20); {
				case op < 9:
					r := c.Record(req, answer(200, "Vary", "X-User"), now)
					for range rng.IntN(4) {
						_, _ = r.Write(make([]byte, rng.IntN(2000)))
					}
					r.Done(rng.IntN(10) > 0, now)
				case op < 18:
					if a, ok := c.Lookup(req, minute, now); ok {
						a.Serve(httptest.NewRecorder(), op%2 == 0, "x", now)
					}
				case op == 18 && i%10 == 0:
					c.SetMaxBytes(int64(32+rng.IntN(64)) << 10)
				case op == 19 && i%10 == 0:
					c.Retain(func(string) bool { return rng.IntN(2) == 0 })
				default:
					c.Stats()
				}
			}
		})
	}
	wg.Wait()
	check(t, c)
	if got := c.inflight.Load(); got != 0 {
		t.Fatalf("got %d bytes in flight, want 0", got)
	}
}

// TestFormulaCoversHeap: what the memory formula counts for an answer
// covers what it takes on the heap (maps, list, header map included), for
// small answers, where the fixed overhead matters most.
func TestFormulaCoversHeap(t *testing.T) {
	var tiny []string // 200 tiny fields: what an upstream would send to be undercounted
	for i := range 200 {
		tiny = append(tiny, fmt.Sprint("X", i), "v")
	}
	for _, fields := range [][]string{nil, {"Content-Type", "text/plain", "Date", "x", "Cache-Control", "max-age=60", "Etag", "abc", "X-A", "1", "X-B", "2"}, tiny} {
		c := New(1 << 30)
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		n := 200000 / (10 + len(fields))
		for i := range n {
			keep(c, get(fmt.Sprint("/", i), "X-User", "u"), answer(200, append([]string{"Vary", "X-User"}, fields...)...), "0123456789", t0)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		counted, _ := c.Stats()
		heap := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
		t.Logf("%d header fields: heap %d bytes per answer, counted %d", len(fields)/2+1, heap/int64(n), counted/int64(n))
		if heap > counted {
			t.Errorf("%d header fields: got %d bytes on the heap, want at most the %d counted", len(fields)/2+1, heap, counted)
		}
		runtime.KeepAlive(c)
	}
}

// TestForgottenDone: a recorder dropped without Done (a relay that
// panicked past its defer, say) gives its share of the inflight budget
// back once the garbage collector finds it.
func TestForgottenDone(t *testing.T) {
	c := New(1 << 20)
	func() {
		r := c.Record(get("/"), answer(200), t0)
		_, _ = r.Write(make([]byte, 32<<10))
	}()
	if c.inflight.Load() == 0 {
		t.Fatalf("no bytes in flight while recording 32 KiB")
	}
	for i := 0; c.inflight.Load() != 0; i++ {
		if i == 1000 {
			t.Fatalf("got %d bytes in flight after the recorder was dropped, want 0", c.inflight.Load())
		}
		runtime.GC()
		runtime.Gosched()
	}
}
