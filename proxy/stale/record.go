package stale

import (
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pquerna/cachecontrol/cacheobject"
)

// Record decides whether the answer resp to req may be kept (the package
// doc's rules) and, if so, returns the Recorder that keeps it while its
// body is relayed; nil when it may not be kept, when the cache is nil or
// off, or when resp is nil. now is when resp's header arrived: the answer's
// age counts from it.
//
// Record takes no lock, reads resp's header and never its body, and
// allocates nothing when the header alone rules the answer out (method,
// status, Set-Cookie, Vary, streams, a Content-Length past the bound); a
// Cache-Control header is parsed (github.com/pquerna/cachecontrol) only
// after those checks pass.
func (c *Cache) Record(req Request, resp *http.Response, now time.Time) *Recorder {
	if c == nil || resp == nil || req.Method != http.MethodGet || !keepableStatus(resp.StatusCode) {
		return nil
	}
	bound := c.bound.Load()
	if bound <= 0 || resp.ContentLength > bound {
		return nil
	}
	var rs respScan
	if !rs.scan(resp.Header) {
		return nil
	}
	var qs reqScan
	if !qs.scan(req.Header) {
		return nil
	}
	if qs.cacheControl != nil {
		d, err := cacheobject.ParseRequestCacheControl(joinLines(qs.cacheControl))
		if err != nil || d.NoStore {
			return nil
		}
	}
	d := noDirectives
	if rs.cacheControl != nil {
		p, err := cacheobject.ParseResponseCacheControl(joinLines(rs.cacheControl))
		if err != nil {
			return nil
		}
		d = *p
	}
	if d.NoStore || d.PrivatePresent || d.NoCachePresent {
		return nil
	}
	shared := d.Public || d.SMaxAge >= 0
	if qs.authorization && !shared {
		return nil
	}
	if qs.cookie && !shared && !rs.varyCookie {
		return nil
	}

	e := &entry{point: req.Point}
	e.ans.status = resp.StatusCode
	e.ans.arrived = now
	e.ans.initialAge = ageHeader(rs.age)
	lifetime := freshness(&d, rs.expires, rs.date, now)
	switch {
	case d.StaleIfError >= 0:
		e.limit, e.limited = lifetime+seconds(int64(d.StaleIfError)), true
	case d.MustRevalidate || d.ProxyRevalidate || d.SMaxAge >= 0:
		e.limit, e.limited = lifetime, true
	}
	if e.limited && e.ans.initialAge >= e.limit {
		return nil // it could never be served
	}

	var kb, vb [256]byte
	names := varyNames(resp.Header)
	variant, ok := appendVariant(vb[:0], req.Header, names)
	if !ok {
		return nil
	}
	var headerBytes int64
	e.ans.header, headerBytes = storedHeader(resp.Header)
	e.key = string(appendKey(kb[:0], &req))
	e.variant = string(variant)
	e.vary = names
	fixed := int64(EntryOverhead) + headerBytes + int64(len(e.key)+len(e.variant)+len(e.point))
	for _, n := range names {
		fixed += int64(len(n))
	}
	if fixed+max(resp.ContentLength, 0) > bound {
		return nil
	}
	return &Recorder{c: c, e: e, gen: c.gen.Load(), fixed: fixed, bound: bound, length: resp.ContentLength}
}

// noDirectives is an answer without Cache-Control, as the parser gives it.
var noDirectives = cacheobject.ResponseCacheDirectives{MaxAge: -1, SMaxAge: -1, StaleIfError: -1, StaleWhileRevalidate: -1}

// Recorder keeps a copy of the body of one answer being relayed, for
// Cache.Record. It is used by one goroutine: Write for every body byte
// relayed, then Done once, deferred so that it runs whatever happens to
// the relay. A nil *Recorder does nothing, so the caller need not check
// Record's result.
type Recorder struct {
	c      *Cache
	e      *entry
	gen    uint64
	fixed  int64 // the entry's size without the body
	bound  int64 // the per-answer bound when Record was called
	length int64 // Content-Length, -1 if unknown
	buf    []byte
	res    *reservation // nil until the first buffer is taken
	done   bool
}

// reservation is the part of the cache's inflight budget that one
// recorder's buffer holds; a recorder dropped without Done gives it back
// when the garbage collector finds it (runtime.AddCleanup).
type reservation struct {
	c *Cache
	n atomic.Int64
}

func (r *reservation) release() { r.c.inflight.Add(-r.n.Swap(0)) }

// Write copies p into the recorder's buffer, grown as needed, and always
// returns len(p), nil: it never blocks and never fails the relay. Past
// the per-answer bound, or when the bodies being recorded at once would
// hold more than maxBytes/4 beyond their first 4 KiB each, the recording
// is dropped at once (the buffer freed, later writes ignored).
func (r *Recorder) Write(p []byte) (int, error) {
	if r == nil || r.done || len(p) == 0 {
		return len(p), nil
	}
	need := int64(len(r.buf)) + int64(len(p))
	if r.fixed+need > r.bound {
		r.drop()
		return len(p), nil
	}
	if need > int64(cap(r.buf)) {
		newCap := max(need, 2*int64(cap(r.buf)), 512)
		if r.length >= 0 && r.length >= need {
			newCap = r.length // the whole body at once
		}
		newCap = min(newCap, r.bound-r.fixed)
		if d := charged(newCap) - charged(int64(cap(r.buf))); d > 0 && !r.reserve(d) {
			r.drop()
			return len(p), nil
		}
		nb := make([]byte, len(r.buf), newCap)
		copy(nb, r.buf)
		r.buf = nb
	}
	r.buf = append(r.buf, p...)
	return len(p), nil
}

// freeBuffer is the part of each recording's buffer that the inflight
// budget does not count: no more than the connection's own buffers, so
// that a small answer costs neither an atomic add nor a cleanup.
const freeBuffer = 4 << 10

// charged is the part of a buffer of n bytes that the inflight budget
// counts.
func charged(n int64) int64 { return max(n-freeBuffer, 0) }

// reserve takes n more bytes of the cache's inflight budget.
func (r *Recorder) reserve(n int64) bool {
	c := r.c
	if c.inflight.Add(n) > budget(c.limit.Load()) {
		c.inflight.Add(-n)
		return false
	}
	if r.res == nil {
		r.res = &reservation{c: c}
		runtime.AddCleanup(r, (*reservation).release, r.res)
	}
	r.res.n.Add(n)
	return true
}

// Done ends the recording: the answer is kept if complete (the body
// ended cleanly, at EOF) and the body has the Content-Length the answer
// gave, if it gave one; otherwise, or after a drop, it is not. now is when
// the body ended: an answer that could no longer be served then (past
// must-revalidate's freshness, say) is not kept. Done takes the cache's
// lock once; calls after the first do nothing.
func (r *Recorder) Done(complete bool, now time.Time) {
	if r == nil || r.done {
		return
	}
	r.done = true
	buf := r.buf
	r.buf = nil
	if r.res != nil {
		r.res.release()
	}
	if !complete || (r.length >= 0 && int64(len(buf)) != r.length) {
		return
	}
	if len(buf) < cap(buf) { // grown by doubling: keep no more than the body
		buf = append(make([]byte, 0, len(buf)), buf...)
	}
	e := r.e
	e.ans.body = buf
	e.size = r.fixed + int64(len(buf))
	r.c.insert(e, r.gen, now)
}

// drop ends a recording that will not be kept and frees its buffer.
func (r *Recorder) drop() {
	r.done = true
	r.buf = nil
	if r.res != nil {
		r.res.release()
	}
}

// keepableStatus says whether a status is one a shared cache may keep by
// heuristic (RFC 9110 §15.1), 206 left out: a part is never served whole.
func keepableStatus(code int) bool {
	switch code {
	case 200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501:
		return true
	}
	return false
}

// respScan is what Record needs of a response header, read in one pass
// over its fields without allocating.
type respScan struct {
	cacheControl []string
	age          []string
	date         []string
	expires      []string
	varyCookie   bool
	seen         uint16 // the fields met, to refuse one spelled twice
}

// Field bits of respScan.seen and reqScan.seen.
const (
	seenCacheControl = 1 << iota
	seenAge
	seenDate
	seenExpires
	seenVary
	seenContentType
	seenCookie
	seenAuthorization
)

// scan reads h, and says false for an answer that is never kept: one with
// Set-Cookie, Vary: *, a Vary naming a header the proxy writes or removes
// or more than maxVaryNames names, a stream (text/event-stream,
// application/grpc*, an upgrade), or one of the fields read here under two
// spellings (a header map not built by net/http).
func (s *respScan) scan(h http.Header) bool {
	names := 0
	for k, vv := range h {
		bit := 0
		switch {
		case foldEqual(k, "Set-Cookie"), foldEqual(k, "Upgrade"):
			return false
		case foldEqual(k, "Connection"):
			for _, v := range vv {
				for t := range strings.SplitSeq(v, ",") {
					if foldEqual(trimOWS(t), "upgrade") {
						return false
					}
				}
			}
		case foldEqual(k, "Cache-Control"):
			bit, s.cacheControl = seenCacheControl, vv
		case foldEqual(k, "Age"):
			bit, s.age = seenAge, vv
		case foldEqual(k, "Date"):
			bit, s.date = seenDate, vv
		case foldEqual(k, "Expires"):
			bit, s.expires = seenExpires, vv
		case foldEqual(k, "Content-Type"):
			bit = seenContentType
			if len(vv) > 0 && isStream(vv[0]) {
				return false
			}
		case foldEqual(k, "Vary"):
			bit = seenVary
			for _, v := range vv {
				for t := range strings.SplitSeq(v, ",") {
					t = trimOWS(t)
					switch {
					case t == "":
						continue
					case t == "*", proxyWritten(t):
						return false
					case foldEqual(t, "Cookie"):
						s.varyCookie = true
					}
					if names++; names > maxVaryNames {
						return false
					}
				}
			}
		}
		if bit != 0 {
			if s.seen&uint16(bit) != 0 {
				return false
			}
			s.seen |= uint16(bit)
		}
	}
	return true
}

// reqScan is what Record needs of a request header.
type reqScan struct {
	cacheControl  []string
	cookie        bool
	authorization bool
	seen          uint16
}

// scan reads h, and says false for a request whose answer is never kept:
// an upgrade, or one of the fields read here under two spellings.
func (s *reqScan) scan(h http.Header) bool {
	for k, vv := range h {
		bit := 0
		switch {
		case foldEqual(k, "Upgrade"):
			return false
		case foldEqual(k, "Cache-Control"):
			bit, s.cacheControl = seenCacheControl, vv
		case foldEqual(k, "Cookie"):
			bit, s.cookie = seenCookie, len(vv) > 0
		case foldEqual(k, "Authorization"):
			bit, s.authorization = seenAuthorization, len(vv) > 0
		}
		if bit != 0 {
			if s.seen&uint16(bit) != 0 {
				return false
			}
			s.seen |= uint16(bit)
		}
	}
	return true
}

// isStream says whether a Content-Type is a stream's: text/event-stream
// or application/grpc (with any suffix: +proto, -web, ...).
func isStream(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = trimOWS(ct)
	const grpc = "application/grpc"
	return foldEqual(ct, "text/event-stream") || (len(ct) >= len(grpc) && foldEqual(ct[:len(grpc)], grpc))
}

// proxyWritten says whether the proxy writes or removes the request
// header name on its way to the upstream: a Vary naming one would key the
// answer on what the client sent while the upstream saw something else.
func proxyWritten(name string) bool {
	for _, p := range [...]string{
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "X-Real-Ip", "Via",
		"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Proxy-Authorization", "Proxy-Authenticate",
	} {
		if foldEqual(name, p) {
			return true
		}
	}
	return false
}

// notKept says whether a response header is one a proxy does not pass on
// (hop-by-hop, RFC 9110 §7.6.1), or one Serve writes itself (Age,
// Content-Length).
func notKept(name string) bool {
	for _, p := range [...]string{
		"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Proxy-Authorization", "Proxy-Authenticate",
		"Age", "Content-Length",
	} {
		if foldEqual(name, p) {
			return true
		}
	}
	return false
}

// storedHeader copies h for keeping: without the hop-by-hop fields, the
// fields Connection names, Age and Content-Length (Serve writes those),
// each value slice full so that appending to it copies; and returns the
// bytes it counts for: names, values and FieldOverhead per line.
func storedHeader(h http.Header) (http.Header, int64) {
	var connection []string
	for k, vv := range h {
		if foldEqual(k, "Connection") {
			connection = append(connection, vv...)
		}
	}
	named := func(k string) bool {
		for _, v := range connection {
			for t := range strings.SplitSeq(v, ",") {
				if foldEqual(trimOWS(t), k) {
					return true
				}
			}
		}
		return false
	}
	out := make(http.Header, len(h))
	count := 0
	for _, vv := range h {
		count += len(vv)
	}
	vals := make([]string, count) // one array for every value, as Header.Clone
	var n int64
	for k, vv := range h {
		if len(vv) == 0 || notKept(k) || named(k) {
			continue
		}
		m := copy(vals, vv)
		out[k] = vals[:m:m]
		vals = vals[m:]
		n += int64(len(k))
		for _, v := range vv {
			n += int64(len(v)) + FieldOverhead
		}
	}
	return out, n
}

// varyNames returns the names h's Vary lists, canonical, sorted and
// unique; nil for none.
func varyNames(h http.Header) []string {
	var names []string
	for k, vv := range h {
		if !foldEqual(k, "Vary") {
			continue
		}
		for _, v := range vv {
			for t := range strings.SplitSeq(v, ",") {
				if t = trimOWS(t); t != "" {
					names = append(names, http.CanonicalHeaderKey(t))
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// freshness is the answer's freshness lifetime for a shared cache (RFC
// 9111 §4.2.1): s-maxage, else max-age, else Expires − Date (Date absent
// or invalid: arrived; Expires invalid: already expired); 0 without any.
func freshness(d *cacheobject.ResponseCacheDirectives, expires, date []string, arrived time.Time) time.Duration {
	switch {
	case d.SMaxAge >= 0:
		return seconds(int64(d.SMaxAge))
	case d.MaxAge >= 0:
		return seconds(int64(d.MaxAge))
	case len(expires) > 0:
		exp, err := http.ParseTime(expires[0])
		if err != nil {
			return 0
		}
		base := arrived
		if len(date) > 0 {
			if t, err := http.ParseTime(date[0]); err == nil {
				base = t
			}
		}
		return max(exp.Sub(base), 0)
	}
	return 0
}

// ageHeader reads an Age field (RFC 9111 §5.1): the first member of the
// first line, a non-negative integer of seconds; anything else is
// ignored (0).
func ageHeader(vv []string) time.Duration {
	if len(vv) == 0 {
		return 0
	}
	v := vv[0]
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	n, err := strconv.ParseUint(trimOWS(v), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		n = 1 << 31
	case err != nil:
		return 0
	}
	return seconds(int64(min(n, 1<<31)))
}

// seconds is n seconds, n at most 2^31 (delta-seconds' cap, RFC 9111
// §1.2.2), so that it never overflows.
func seconds(n int64) time.Duration { return time.Duration(min(n, 1<<31)) * time.Second }

// joinLines is the lines of a list field as one value.
func joinLines(vv []string) string {
	if len(vv) == 1 {
		return vv[0]
	}
	return strings.Join(vv, ", ")
}

// trimOWS removes the spaces and tabs around s (RFC 9110 §5.6.3).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// foldEqual compares ASCII case-insensitively, as header names are.
func foldEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
