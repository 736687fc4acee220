package main_test

// End to end, the stale answers of issue 22 (docs/protections.md, "Stale
// answers") with the real binaries: a point with stale: keeps the good
// answers it relays to GET and serves them to its degraded GET and HEAD,
// never an answer meant for one user, never one too old, within
// staleCache.maxBytes, across reloads.
//
// A test degrades the point at the moment it chooses with the operator's
// switch (POST /points/p/force), or with visitThreshold: 1 in a window of
// an hour. sds-upstream's ?serial=1 numbers its answers, so that an answer
// served twice is seen to be one upstream answer; ?header= sets the
// answer's headers (Cache-Control, Age, Vary, Set-Cookie) and ?echo= shows
// a request header in the body. Nothing waits for time to pass: an answer
// is made old by the Age its upstream gives it.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// staleToken is the admin token of the stale tests' switches.
const staleToken = "stale-e2e-token-0123456789abcdef"

// maxAge60 is the query parameter of an answer a shared cache may keep:
// Cache-Control: max-age=60.
const maxAge60 = "header=Cache-Control:max-age%3D60"

// newStaleEnv starts an upstream and a proxy whose config is the usual
// header with a window of an hour, then top (top-level keys), the admin
// token file, and the one point p on every path, with point (its keys,
// indented by four spaces). It returns the upstream's process too, for a
// test that stops it.
func newStaleEnv(t *testing.T, top, point string) (*env, *process) {
	t.Helper()
	needBinaries(t)
	up := startProcess(t, "sds-upstream", "-listen", "127.0.0.1:0")
	line, ok := up.stdout.find(0, wait, up.exited, func(s string) bool { return strings.HasPrefix(s, "listening ") })
	if !ok {
		t.Fatalf("sds-upstream did not print its address: %s %s", up.stdout, up.stderr)
	}
	e := &env{t: t, dir: t.TempDir(), upstream: "http://" + strings.TrimPrefix(line, "listening "), client: newClient(t)}
	if err := os.WriteFile(filepath.Join(e.dir, "token"), []byte(staleToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, staleConfig(e.upstream, top, point))
	e.proxy = startProxy(t, e.config)
	return e, up
}

// staleConfig is newStaleEnv's config.
func staleConfig(upstream, top, point string) string {
	return configHeader(upstream, "1h", 10) + top + "adminTokenFile: token\n" + pointRoute + point
}

// staleReload writes the config with top and point and waits for the
// proxy to apply it.
func (e *env) staleReload(top, point string) {
	e.t.Helper()
	mark := e.proxy.stderr.mark()
	e.write(e.config, staleConfig(e.upstream, top, point))
	e.proxy.waitLog(e.t, mark, wait, msgIs("config reloaded"))
}

// staleForce puts the operator's degrade switch on p (on), or clears it.
func (e *env) staleForce(on bool) {
	e.t.Helper()
	method, body := http.MethodPost, `{"action":"degrade","ttl":"10m","reason":"stale e2e"}`
	if !on {
		method, body = http.MethodDelete, ""
	}
	if r := e.adminSend(method, "/points/p/force", "Bearer "+staleToken, body); r.status != http.StatusOK {
		e.t.Fatalf("%s /points/p/force: got %v, want 200", method, r)
	}
}

// staleDo sends method path to the proxy with the request headers given
// as name, value pairs; a transport error fails the test.
func (e *env) staleDo(method, path string, header ...string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.proxy.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	r, err := e.do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// staleEntries waits until sds_stale_cache_entries is n: an answer is
// kept once the proxy has read its body to the end, which may be a moment
// after the client has it.
func (e *env) staleEntries(n float64) {
	e.t.Helper()
	var got float64
	if !eventually(wait, func() bool { got, _ = e.metric("sds_stale_cache_entries"); return got == n }) {
		e.t.Fatalf("sds_stale_cache_entries: got %v, want %v", got, n)
	}
}

// isStale checks that r is the kept answer first (the same status and
// body) served degraded with mark and "; stale", and an Age of at least
// minAge seconds and below minAge plus the harness's wait.
func isStale(t *testing.T, what string, r, first reply, mark string, minAge int) {
	t.Helper()
	age, err := strconv.Atoi(r.header.Get("Age"))
	if r.status != first.status || r.body != first.body || r.degraded() != mark+"; stale" || err != nil || age < minAge || age >= minAge+int(wait/time.Second) {
		t.Errorf("%s: got %v with Age %q, want the kept answer %v marked %q with an Age of %d s or a little more", what, r, r.header.Get("Age"), first, mark+"; stale", minAge)
	}
}

// isFallback checks that r is p's fallback with the mark given.
func isFallback(t *testing.T, what string, r reply, status int, mark string) {
	t.Helper()
	if r.status != status || r.degraded() != mark || !strings.Contains(r.body, `"error":"degraded"`) {
		t.Errorf("%s: got %v, want the fallback %d %q", what, r, status, mark)
	}
}

// A good GET answer is kept; once the point trips, the same GET gets it
// back (the same serial: the upstream is not called) with Age and the
// mark, a HEAD gets its head, a GET never answered the fallback. The
// metrics, /status and the access log show it.
func TestStaleE2EServed(t *testing.T) {
	t.Parallel()
	e, _ := newStaleEnv(t, "accessLog: true\n", "    visitThreshold: 1\n    stale: {maxAge: 10m}\n")
	path := "/a?serial=1&" + maxAge60
	first := e.get(path)
	if first.status != http.StatusOK || first.degraded() != "" || !strings.Contains(first.body, "#") {
		t.Fatalf("first GET: got %v, want the upstream's 200 with a serial", first)
	}
	e.staleEntries(1)
	isStale(t, "a degraded GET", e.get(path), first, "visit; point=p", 0)
	head := e.staleDo(http.MethodHead, path)
	if head.status != http.StatusOK || head.body != "" || head.header.Get("Content-Length") != strconv.Itoa(len(first.body)) || head.degraded() != "visit; point=p; stale" {
		t.Errorf("a degraded HEAD: got %v, Content-Length %q; want 200, no body, Content-Length %d, stale", head, head.header.Get("Content-Length"), len(first.body))
	}
	isFallback(t, "a degraded GET never answered", e.get("/b?"+maxAge60), http.StatusTooManyRequests, "visit; point=p")
	if requests, _ := e.upstreamStats(); requests != 1 {
		t.Errorf("upstream requests: got %d, want 1 (the first GET only)", requests)
	}
	e.metricIs(2, "sds_stale_served_total", "point", "p")
	e.metricIs(3, "sds_degraded_total", "point", "p", "strategy", "visit")
	e.metricIs(64<<20, "sds_stale_cache_max_bytes")
	bytes, _ := e.metric("sds_stale_cache_bytes")
	st := e.status()
	if sc := st.StaleCache; sc == nil || sc.MaxBytes != 64<<20 || sc.Entries != 1 || float64(sc.Bytes) != bytes || sc.Bytes < int64(len(first.body)) {
		t.Errorf("/status staleCache: got %+v, want maxBytes 64 MiB, 1 entry of %v bytes as the metric says", sc, bytes)
	}
	if p := e.point("p"); p.Stale == nil || p.Stale.MaxAge != "10m0s" {
		t.Errorf("/status p's stale: got %+v, want maxAge 10m0s", p.Stale)
	}
	l := e.proxy.waitLog(t, 0, wait, func(l logEntry) bool { return l["msg"] == "request" && l["stale"] == true })
	if l["method"] != "GET" || l["status"] != float64(200) || l["degraded"] != true {
		t.Errorf("the access log line of a stale answer: got %v, want GET, 200, degraded, stale", l)
	}
}

// staleNeverRows are answers, and requests, that must never be kept: the
// answer is meant for one user, says not to keep it, or is an exception.
var staleNeverRows = []struct {
	name, path string
	header     []string // the request's, name and value pairs
}{
	{"Cache-Control: private", "/private?header=Cache-Control:private,max-age%3D60", nil},
	{"Set-Cookie", "/set-cookie?header=Set-Cookie:session%3Dann&" + maxAge60, nil},
	{"no-store", "/no-store?header=Cache-Control:no-store", nil},
	{"no-cache", "/no-cache?header=Cache-Control:no-cache,max-age%3D60", nil},
	{"Vary: *", "/vary-star?header=Vary:*&" + maxAge60, nil},
	{"Vary on a header the proxy writes", "/vary-xff?header=Vary:X-Forwarded-For&" + maxAge60, nil},
	{"a request with Authorization, no public", "/auth?" + maxAge60, []string{"Authorization", "Bearer ann"}},
	{"a request with Cookie, no public nor Vary: Cookie", "/cookie?" + maxAge60, []string{"Cookie", "u=ann"}},
	{"a request with no-store", "/req-no-store?" + maxAge60, []string{"Cache-Control", "no-store"}},
	{"a 503", "/503?status=503&" + maxAge60, nil},
}

// An answer meant for one user, or that says not to keep it, is never
// served stale: the degraded request gets the fallback. Answers beside
// them that may be kept are (public with Authorization among them).
func TestStaleE2ENeverForOneUser(t *testing.T) {
	t.Parallel()
	e, _ := newStaleEnv(t, "", "    visitThreshold: 1000\n    stale: {maxAge: 10m}\n")
	for _, row := range staleNeverRows {
		if r := e.staleDo(http.MethodGet, row.path, row.header...); r.degraded() != "" || !strings.HasPrefix(r.body, "upstream") {
			t.Fatalf("%s, not degraded: got %v, want the upstream's answer", row.name, r)
		}
	}
	kept := e.get("/kept?" + maxAge60)
	public := e.staleDo(http.MethodGet, "/public?header=Cache-Control:public,max-age%3D60", "Authorization", "Bearer ann")
	e.staleEntries(2) // the two kept answers came last: every other one was judged by then
	e.staleForce(true)
	for _, row := range staleNeverRows {
		isFallback(t, row.name+", degraded", e.staleDo(http.MethodGet, row.path, row.header...), http.StatusServiceUnavailable, "forced; point=p")
	}
	isStale(t, "an answer that may be kept, degraded", e.get("/kept?"+maxAge60), kept, "forced; point=p", 0)
	isStale(t, "a public answer to Authorization, degraded", e.staleDo(http.MethodGet, "/public?header=Cache-Control:public,max-age%3D60", "Authorization", "Bearer ann"), public, "forced; point=p", 0)
}

// Answers that vary on X-User are kept apart: ann and bob each get their
// own when degraded, eve, never answered, and a request without X-User get
// the fallback.
func TestStaleE2EVary(t *testing.T) {
	t.Parallel()
	e, _ := newStaleEnv(t, "", "    visitThreshold: 1000\n    stale: {maxAge: 10m}\n")
	path := "/v?header=Vary:X-User&echo=X-User&serial=1&" + maxAge60
	first := map[string]reply{}
	for _, u := range []string{"ann", "bob"} {
		first[u] = e.staleDo(http.MethodGet, path, "X-User", u)
		if !strings.Contains(first[u].body, "X-User: "+u+"\n") || first[u].degraded() != "" {
			t.Fatalf("%s, not degraded: got %v, want the upstream's answer to %s", u, first[u], u)
		}
	}
	e.staleEntries(2)
	e.staleForce(true)
	for _, u := range []string{"ann", "bob"} {
		isStale(t, u+", degraded", e.staleDo(http.MethodGet, path, "X-User", u), first[u], "forced; point=p", 0)
	}
	isFallback(t, "eve, degraded", e.staleDo(http.MethodGet, path, "X-User", "eve"), http.StatusServiceUnavailable, "forced; point=p")
	isFallback(t, "no X-User, degraded", e.get(path), http.StatusServiceUnavailable, "forced; point=p")
	e.metricIs(2, "sds_stale_served_total", "point", "p")
}

// Two users, each with their own Cookie, on a page that says neither
// public nor Vary: Cookie: nothing of theirs is kept, so neither ever gets
// the other's page, degraded or not.
func TestStaleE2ECookies(t *testing.T) {
	t.Parallel()
	e, _ := newStaleEnv(t, "", "    visitThreshold: 1000\n    stale: {maxAge: 10m}\n")
	path := "/me?echo=Cookie&serial=1&" + maxAge60
	users := []string{"ann", "bob"}
	own := func(what, u string, r reply) {
		t.Helper()
		if r.degraded() != "" || !strings.Contains(r.body, "Cookie: u="+u+"\n") {
			t.Errorf("%s: got %v, want the upstream's answer to %s", what, r, u)
		}
	}
	seen := map[string]bool{}
	for round := range 2 {
		for _, u := range users {
			r := e.staleDo(http.MethodGet, path, "Cookie", "u="+u)
			own(fmt.Sprintf("%s, round %d", u, round+1), u, r)
			if seen[r.body] {
				t.Errorf("%s, round %d: got an answer served before: %v", u, round+1, r)
			}
			seen[r.body] = true
		}
	}
	kept := e.get("/other?" + maxAge60) // kept, and last: the others were judged by then
	e.staleEntries(1)
	e.staleForce(true)
	for _, u := range users {
		isFallback(t, u+", degraded", e.staleDo(http.MethodGet, path, "Cookie", "u="+u), http.StatusServiceUnavailable, "forced; point=p")
	}
	isStale(t, "a page without cookie, degraded", e.get("/other?"+maxAge60), kept, "forced; point=p", 0)
	e.staleForce(false)
	for _, u := range users {
		own(u+", after the switch", u, e.staleDo(http.MethodGet, path, "Cookie", "u="+u))
	}
}

// With fallbackOnError and the upstream stopped, a GET gets its kept
// answer marked upstream_error, a HEAD its head, and a GET never answered
// the fallback.
func TestStaleE2EUpstreamError(t *testing.T) {
	t.Parallel()
	e, up := newStaleEnv(t, "", "    fallbackOnError: true\n    stale: {maxAge: 10m}\n")
	path := "/a?serial=1&" + maxAge60
	first := e.get(path)
	if first.status != http.StatusOK || first.degraded() != "" {
		t.Fatalf("first GET: got %v, want the upstream's 200", first)
	}
	e.staleEntries(1)
	up.stop(10 * time.Second)
	isStale(t, "GET with the upstream stopped", e.get(path), first, "upstream_error; point=p", 0)
	if r := e.staleDo(http.MethodHead, path); r.status != http.StatusOK || r.body != "" || r.degraded() != "upstream_error; point=p; stale" {
		t.Errorf("HEAD with the upstream stopped: got %v, want the kept answer's head", r)
	}
	isFallback(t, "a GET never answered, the upstream stopped", e.get("/b?"+maxAge60), http.StatusServiceUnavailable, "upstream_error; point=p")
	e.metricIs(2, "sds_stale_served_total", "point", "p")
}

// A reload that keeps stale: on the point (with another maxAge) keeps its
// answers; one that removes it drops them, and one that puts it back does
// not bring them back.
func TestStaleE2EReload(t *testing.T) {
	t.Parallel()
	const point = "    visitThreshold: 1000\n"
	e, _ := newStaleEnv(t, "", point+"    stale: {maxAge: 10m}\n")
	path := "/a?serial=1&" + maxAge60
	first := e.get(path)
	e.staleEntries(1)
	e.staleForce(true)
	isStale(t, "degraded before any reload", e.get(path), first, "forced; point=p", 0)

	e.staleReload("", point+"    stale: {maxAge: 5m}\n")
	e.metricIs(1, "sds_stale_cache_entries")
	if p := e.point("p"); p.Stale == nil || p.Stale.MaxAge != "5m0s" {
		t.Errorf("/status p's stale after the reload: got %+v, want maxAge 5m0s", p.Stale)
	}
	isStale(t, "degraded after a reload that keeps stale:", e.get(path), first, "forced; point=p", 0)

	e.staleReload("", point)
	e.metricIs(0, "sds_stale_cache_entries")
	e.metricIs(0, "sds_stale_cache_bytes")
	if p := e.point("p"); p.Stale != nil {
		t.Errorf("/status p's stale after the reload that removed it: got %+v, want none", p.Stale)
	}
	isFallback(t, "degraded after a reload that removed stale:", e.get(path), http.StatusServiceUnavailable, "forced; point=p")

	e.staleReload("", point+"    stale: {maxAge: 10m}\n")
	isFallback(t, "degraded after stale: came back", e.get(path), http.StatusServiceUnavailable, "forced; point=p")
	e.staleForce(false)
	again := e.get(path)
	if again.body == first.body || again.degraded() != "" {
		t.Errorf("GET after the switch: got %v, want a new upstream answer", again)
	}
	e.staleEntries(1)
	e.staleForce(true)
	isStale(t, "degraded, the new answer kept", e.get(path), again, "forced; point=p", 0)
}

// How old an answer may be when served: under maxAge (1m) counted with the
// Age it came with, and within what its Cache-Control allows
// (must-revalidate: only while fresh; stale-if-error=N: no later than N
// past its freshness, whatever maxAge says). No test waits: the upstream's
// Age makes an answer old at once.
func TestStaleE2EMaxAge(t *testing.T) {
	t.Parallel()
	e, _ := newStaleEnv(t, "", "    visitThreshold: 1000\n    stale: {maxAge: 1m}\n")
	rows := []struct {
		name, query string
		age         int // the Age it comes with
		served      bool
	}{
		{"Age 0", maxAge60, 0, true},
		{"Age 30", maxAge60, 30, true},
		{"Age 60, maxAge 1m: the boundary is strict", maxAge60, 60, false},
		{"Age 120", maxAge60, 120, false},
		{"no Cache-Control, Age 30", "", 30, true},
		{"must-revalidate, fresh", "header=Cache-Control:max-age%3D600,must-revalidate", 30, true},
		{"must-revalidate, past its freshness", "header=Cache-Control:max-age%3D10,must-revalidate", 20, false},
		{"stale-if-error=30, 10 s past its freshness", "header=Cache-Control:max-age%3D10,stale-if-error%3D30", 20, true},
		{"stale-if-error=30, 35 s past its freshness, under maxAge", "header=Cache-Control:max-age%3D10,stale-if-error%3D30", 45, false},
	}
	first := make([]reply, len(rows))
	path := func(i int) string {
		return fmt.Sprintf("/age/%d?serial=1&header=Age:%d&%s", i, rows[i].age, rows[i].query)
	}
	for i := range rows {
		if first[i] = e.get(path(i)); first[i].status != http.StatusOK || first[i].degraded() != "" {
			t.Fatalf("%s, not degraded: got %v, want the upstream's 200", rows[i].name, first[i])
		}
	}
	e.get("/last?" + maxAge60) // kept, and last: the others were judged by then
	e.staleEntries(8)          // every row but the two that could never be served, and /last
	e.staleForce(true)
	for i, row := range rows {
		r := e.get(path(i))
		if row.served {
			isStale(t, row.name, r, first[i], "forced; point=p", row.age)
		} else {
			isFallback(t, row.name, r, http.StatusServiceUnavailable, "forced; point=p")
		}
	}
}

// staleFlood sends GET /flood/N?body=size for N in [0, n) from workers
// goroutines, each answer kept if it can be, and returns how many got a
// 200; it stops sending at deadline.
func (e *env) staleFlood(n, workers, size int, deadline time.Time) int {
	var next, ok atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && time.Now().Before(deadline); i = next.Add(1) - 1 {
				resp, err := e.client.Get(fmt.Sprintf("%s/flood/%d?body=%d&%s", e.proxy.url, i, size, maxAge60))
				if err != nil {
					continue
				}
				if _, err := io.Copy(io.Discard, resp.Body); err == nil && resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// vmHWM returns the peak resident set of process pid, VmHWM in
// /proc/PID/status, in bytes; 0 where there is none.
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// A flood of distinct URLs, 5,000 answers of 2 KiB (about 18 MiB kept
// were nothing evicted), holds no more than staleCache.maxBytes (1 MiB):
// the metrics and /status agree; the last answers are kept, the first
// evicted. A reload that lowers maxBytes evicts at once. The proxy's
// peak RSS is logged.
func TestStaleE2EMaxBytes(t *testing.T) {
	t.Parallel()
	const maxBytes, n, size = 1 << 20, 5000, 2 << 10
	e, _ := newStaleEnv(t, "staleCache: {maxBytes: 1MiB}\n", "    visitThreshold: 1000000\n    stale: {maxAge: 10m}\n")
	before := vmHWM(e.proxy.cmd.Process.Pid)
	start := time.Now()
	if got := e.staleFlood(n, 8, size, start.Add(4*wait)); got != n {
		t.Fatalf("the flood: got %d answers of 200 in %v, want %d", got, time.Since(start).Round(time.Millisecond), n)
	}
	took := time.Since(start)
	last := e.get(fmt.Sprintf("/flood/%d?body=%d&%s", n, size, maxAge60))
	bytes, _ := e.metric("sds_stale_cache_bytes")
	entries, _ := e.metric("sds_stale_cache_entries")
	if bytes > maxBytes || bytes < maxBytes/2 || entries < 100 || entries > maxBytes/size {
		t.Errorf("after the flood: %v bytes in %v entries, want at most %d bytes (and at least half of it), 100 to %d entries", bytes, entries, maxBytes, maxBytes/size)
	}
	if sc := e.status().StaleCache; sc == nil || float64(sc.Bytes) != bytes || float64(sc.Entries) != entries || sc.MaxBytes != maxBytes {
		t.Errorf("/status staleCache: got %+v, want %v bytes, %v entries, maxBytes %d as the metrics say", sc, bytes, entries, maxBytes)
	}
	hwm := vmHWM(e.proxy.cmd.Process.Pid)
	t.Logf("%d answers of %d bytes in %v: %.0f bytes in %.0f entries kept; proxy VmHWM %.1f MiB (%.1f MiB before the flood)",
		n, size, took.Round(time.Millisecond), bytes, entries, float64(hwm)/(1<<20), float64(before)/(1<<20))

	e.staleForce(true)
	isStale(t, "the last answer, degraded", e.get(fmt.Sprintf("/flood/%d?body=%d&%s", n, size, maxAge60)), last, "forced; point=p", 0)
	isFallback(t, "the first answer, evicted, degraded", e.get(fmt.Sprintf("/flood/0?body=%d&%s", size, maxAge60)), http.StatusServiceUnavailable, "forced; point=p")

	e.staleReload("staleCache: {maxBytes: 256KiB}\n", "    visitThreshold: 1000000\n    stale: {maxAge: 10m}\n")
	e.metricIs(256<<10, "sds_stale_cache_max_bytes")
	if b, _ := e.metric("sds_stale_cache_bytes"); b > 256<<10 || b == 0 {
		t.Errorf("after a reload to 256 KiB: got %v bytes, want at most %d, and some", b, 256<<10)
	}
	isStale(t, "the last answer, degraded, after the reload", e.get(fmt.Sprintf("/flood/%d?body=%d&%s", n, size, maxAge60)), last, "forced; point=p", 0)
}
