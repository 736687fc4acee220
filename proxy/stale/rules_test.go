package stale

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// TestKeepRules has one row per rule of what may be kept: Record must
// refuse (nil) exactly the answers the package doc rules out, and a kept
// one must be found right after.
func TestKeepRules(t *testing.T) {
	head := get("/")
	head.Method = http.MethodHead
	post := get("/")
	post.Method = http.MethodPost
	rows := []struct {
		name string
		req  Request
		resp *http.Response
		want bool
	}{
		{"GET 200", get("/"), answer(200), true},
		{"HEAD", head, answer(200), false},
		{"POST", post, answer(200, "Cache-Control", "public, max-age=60"), false},
		{"206", get("/"), answer(206), false},
		{"101", get("/"), answer(101), false},
		{"302", get("/"), answer(302, "Cache-Control", "public, max-age=60"), false},
		{"304", get("/"), answer(304), false},
		{"500", get("/"), answer(500), false},
		{"503", get("/"), answer(503), false},
		{"request no-store", get("/", "Cache-Control", "no-store"), answer(200), false},
		{"request no-store, second line", get("/", "Cache-Control", "max-age=0", "Cache-Control", "no-store"), answer(200), false},
		{"request max-age=0", get("/", "Cache-Control", "max-age=0"), answer(200), true},
		{"request Cache-Control unparsable", get("/", "Cache-Control", "max-age=x"), answer(200), false},
		{"no-store", get("/"), answer(200, "Cache-Control", "no-store"), false},
		{"private", get("/"), answer(200, "Cache-Control", "private"), false},
		{"PRIVATE, max-age", get("/"), answer(200, "Cache-Control", "PRIVATE, max-age=60"), false},
		{"private with field names", get("/"), answer(200, "Cache-Control", `private="X-Secret"`), false},
		{"private with a bare field name", get("/"), answer(200, "Cache-Control", `max-age=60, private=X-Secret`), false},
		{"no-cache", get("/"), answer(200, "Cache-Control", "no-cache"), false},
		{"no-cache with field names", get("/"), answer(200, "Cache-Control", `no-cache="Set-Cookie, X-Id"`), false},
		{"private on a second line", get("/"), answer(200, "Cache-Control", "max-age=60", "Cache-Control", "private"), false},
		{"Cache-Control unparsable", get("/"), answer(200, "Cache-Control", "max-age=abc"), false},
		{"Cache-Control open quote", get("/"), answer(200, "Cache-Control", `public, x="abc`), false},
		{"public, max-age", get("/"), answer(200, "Cache-Control", "public, max-age=60"), true},
		{"unknown directive", get("/"), answer(200, "Cache-Control", "x-thing=1, max-age=60"), true},
		{"Set-Cookie", get("/"), answer(200, "Set-Cookie", "a=1"), false},
		{"Set-Cookie, public", get("/"), answer(200, "Cache-Control", "public", "Set-Cookie", "a=1"), false},
		{"Vary *", get("/"), answer(200, "Vary", "*"), false},
		{"Vary Accept, *", get("/"), answer(200, "Vary", "Accept,*"), false},
		{"Vary Accept-Encoding", get("/"), answer(200, "Vary", "Accept-Encoding"), true},
		{"Vary 33 names", get("/"), answer(200, "Vary", manyNames(33)), false},
		{"Vary 32 names", get("/"), answer(200, "Vary", manyNames(32)), true},
		{"Vary X-User, the client's Connection names it", get("/", "X-User", "ann", "Connection", "keep-alive, x-user"), answer(200, "Vary", "X-User"), false},
		{"Vary X-User, Connection names another", get("/", "X-User", "ann", "Connection", "X-Other"), answer(200, "Vary", "X-User"), true},
		{"Authorization", get("/", "Authorization", "Bearer a"), answer(200), false},
		{"Authorization, max-age", get("/", "Authorization", "Bearer a"), answer(200, "Cache-Control", "max-age=60"), false},
		{"Authorization, must-revalidate", get("/", "Authorization", "Bearer a"), answer(200, "Cache-Control", "must-revalidate, max-age=60"), false},
		{"Authorization, Vary Authorization", get("/", "Authorization", "Bearer a"), answer(200, "Vary", "Authorization"), false},
		{"Authorization, public", get("/", "Authorization", "Bearer a"), answer(200, "Cache-Control", "public"), true},
		{"Authorization, s-maxage", get("/", "Authorization", "Bearer a"), answer(200, "Cache-Control", "s-maxage=60"), true},
		{"Cookie", get("/", "Cookie", "sid=a"), answer(200), false},
		{"Cookie, max-age", get("/", "Cookie", "sid=a"), answer(200, "Cache-Control", "max-age=60"), false},
		{"Cookie, public", get("/", "Cookie", "sid=a"), answer(200, "Cache-Control", "public"), true},
		{"Cookie, s-maxage", get("/", "Cookie", "sid=a"), answer(200, "Cache-Control", "s-maxage=60"), true},
		{"Cookie, Vary Cookie", get("/", "Cookie", "sid=a"), answer(200, "Vary", "Cookie"), true},
		{"Cookie, Vary ' accept , cookie '", get("/", "Cookie", "sid=a"), answer(200, "Vary", " accept ,\tcookie "), true},
		{"Cookie, Vary on a second line", get("/", "Cookie", "sid=a"), answer(200, "Vary", "Accept", "Vary", "Cookie"), true},
		{"Cookie, Vary X-Cookie", get("/", "Cookie", "sid=a"), answer(200, "Vary", "X-Cookie"), false},
		{"text/event-stream", get("/"), answer(200, "Content-Type", "Text/Event-Stream; charset=utf-8"), false},
		{"application/grpc", get("/"), answer(200, "Content-Type", "application/grpc"), false},
		{"application/grpc+proto", get("/"), answer(200, "Content-Type", "application/grpc+proto"), false},
		{"application/grpc-web", get("/"), answer(200, "Content-Type", "application/grpc-web+proto"), false},
		{"application/json", get("/"), answer(200, "Content-Type", "application/json"), true},
		{"Upgrade in the answer", get("/"), answer(200, "Upgrade", "websocket"), false},
		{"Connection: upgrade", get("/"), answer(200, "Connection", "keep-alive, Upgrade"), false},
		{"Upgrade in the request", get("/", "Upgrade", "websocket"), answer(200), false},
		{"Content-Length past the bound", get("/"), answer(200, "Content-Length", "70000"), false},
		{"must-revalidate without a lifetime", get("/"), answer(200, "Cache-Control", "must-revalidate"), false},
		{"must-revalidate, arrived past its lifetime", get("/"), answer(200, "Cache-Control", "must-revalidate, max-age=60", "Age", "60"), false},
		{"s-maxage=0", get("/"), answer(200, "Cache-Control", "s-maxage=0"), false},
		{"max-age=0", get("/"), answer(200, "Cache-Control", "max-age=0"), true},
		{"Cache-Control under two spellings", get("/"), answerRaw(200, "Cache-Control", "max-age=60", "cache-control", "private"), false},
		{"Set-Cookie lower-case", get("/"), answerRaw(200, "set-cookie", "a=1"), false},
		{"Vary lower-case *", get("/"), answerRaw(200, "vary", "*"), false},
		{"Cookie under two spellings", requestRaw("Cookie", "a=1", "cookie", "b=2"), answer(200, "Cache-Control", "public"), false},
		{"cookie lower-case, no Vary", requestRaw("cookie", "a=1"), answer(200), false},
	}
	for _, h := range []string{
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "X-Real-Ip", "Via",
		"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
		"Proxy-Authorization", "Proxy-Authenticate", "x-forwarded-for",
	} {
		rows = append(rows, struct {
			name string
			req  Request
			resp *http.Response
			want bool
		}{"Vary " + h, get("/"), answer(200, "Vary", "Accept, "+h+" "), false})
	}
	for _, code := range []int{200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501} {
		rows = append(rows, struct {
			name string
			req  Request
			resp *http.Response
			want bool
		}{"status " + strconv.Itoa(code), get("/"), answer(code), true})
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			c := New(1 << 20) // per-answer bound 64 KiB
			r := c.Record(row.req, row.resp, t0)
			if got := r != nil; got != row.want {
				t.Fatalf("Record: got a recorder %v, want %v", got, row.want)
			}
			if r == nil {
				return
			}
			_, _ = r.Write([]byte("body"))
			r.Done(true, t0)
			req := row.req
			req.Method = http.MethodGet
			if _, ok := c.Lookup(req, time.Minute, t0); !ok {
				t.Fatalf("Lookup right after keeping: got no answer, want one")
			}
		})
	}
}

func manyNames(n int) string {
	s := ""
	for i := range n {
		s += "X-H" + strconv.Itoa(i) + ","
	}
	return s
}

// answerRaw is answer with the header map written as given, names not
// canonicalised (a header map net/http would not build).
func answerRaw(status int, fields ...string) *http.Response {
	r := answer(status)
	for i := 0; i+1 < len(fields); i += 2 {
		r.Header[fields[i]] = append(r.Header[fields[i]], fields[i+1])
	}
	return r
}

func requestRaw(fields ...string) Request {
	req := get("/")
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header[fields[i]] = append(req.Header[fields[i]], fields[i+1])
	}
	return req
}

// TestServeRules has one row per serving rule, each at its boundary: the
// answer is served at the last instant below its limit and not at the
// limit.
func TestServeRules(t *testing.T) {
	rows := []struct {
		name   string
		fields []string
		maxAge time.Duration
		at     time.Duration // after the header arrived
		want   bool
	}{
		{"plain, under maxAge", nil, 10 * time.Minute, 10*time.Minute - time.Nanosecond, true},
		{"plain, at maxAge", nil, 10 * time.Minute, 10 * time.Minute, false},
		{"maxAge 0", nil, 0, 0, false},
		{"clock behind the arrival", nil, time.Minute, -time.Hour, true},
		{"Age 60, age under maxAge", []string{"Age", "60"}, 10 * time.Minute, 9*time.Minute - time.Nanosecond, true},
		{"Age 60, age at maxAge", []string{"Age", "60"}, 10 * time.Minute, 9 * time.Minute, false},
		{"Age invalid is ignored", []string{"Age", "-5"}, time.Minute, time.Minute - time.Nanosecond, true},
		{"Age list, first member", []string{"Age", "30, 100"}, time.Minute, 30 * time.Second, false},
		{"max-age, stale past it", []string{"Cache-Control", "max-age=60"}, 10 * time.Minute, 10*time.Minute - time.Nanosecond, true},
		{"must-revalidate, fresh", []string{"Cache-Control", "must-revalidate, max-age=60"}, 10 * time.Minute, 60*time.Second - time.Nanosecond, true},
		{"must-revalidate, stale", []string{"Cache-Control", "must-revalidate, max-age=60"}, 10 * time.Minute, 60 * time.Second, false},
		{"must-revalidate with Age, stale", []string{"Cache-Control", "must-revalidate, max-age=60", "Age", "20"}, 10 * time.Minute, 40 * time.Second, false},
		{"must-revalidate with Age, fresh", []string{"Cache-Control", "must-revalidate, max-age=60", "Age", "20"}, 10 * time.Minute, 40*time.Second - time.Nanosecond, true},
		{"must-revalidate, fresh past maxAge", []string{"Cache-Control", "must-revalidate, max-age=3600"}, 10 * time.Minute, 10 * time.Minute, false},
		{"proxy-revalidate, fresh", []string{"Cache-Control", "proxy-revalidate, max-age=60"}, 10 * time.Minute, 60*time.Second - time.Nanosecond, true},
		{"proxy-revalidate, stale", []string{"Cache-Control", "proxy-revalidate, max-age=60"}, 10 * time.Minute, 60 * time.Second, false},
		{"s-maxage over max-age, fresh", []string{"Cache-Control", "s-maxage=30, max-age=60"}, 10 * time.Minute, 30*time.Second - time.Nanosecond, true},
		{"s-maxage over max-age, stale", []string{"Cache-Control", "s-maxage=30, max-age=60"}, 10 * time.Minute, 30 * time.Second, false},
		{"must-revalidate, Expires - Date, fresh", []string{"Cache-Control", "must-revalidate", "Date", httpDate(t0.Add(-time.Hour)), "Expires", httpDate(t0.Add(-time.Hour + 2*time.Minute))}, 10 * time.Minute, 2*time.Minute - time.Nanosecond, true},
		{"must-revalidate, Expires - Date, stale", []string{"Cache-Control", "must-revalidate", "Date", httpDate(t0.Add(-time.Hour)), "Expires", httpDate(t0.Add(-time.Hour + 2*time.Minute))}, 10 * time.Minute, 2 * time.Minute, false},
		{"must-revalidate, Expires without Date, stale", []string{"Cache-Control", "must-revalidate", "Expires", httpDate(t0.Add(2 * time.Minute))}, 10 * time.Minute, 2 * time.Minute, false},
		{"must-revalidate, max-age over Expires", []string{"Cache-Control", "must-revalidate, max-age=10", "Expires", httpDate(t0.Add(2 * time.Minute))}, 10 * time.Minute, 10 * time.Second, false},
		{"stale-if-error, within", []string{"Cache-Control", "max-age=60, stale-if-error=60"}, 10 * time.Minute, 120*time.Second - time.Nanosecond, true},
		{"stale-if-error, past", []string{"Cache-Control", "max-age=60, stale-if-error=60"}, 10 * time.Minute, 120 * time.Second, false},
		{"stale-if-error without a lifetime", []string{"Cache-Control", "stale-if-error=60"}, 10 * time.Minute, 60 * time.Second, false},
		{"stale-if-error over must-revalidate, within", []string{"Cache-Control", "must-revalidate, max-age=30, stale-if-error=60"}, 10 * time.Minute, 90*time.Second - time.Nanosecond, true},
		{"stale-if-error over must-revalidate, past", []string{"Cache-Control", "must-revalidate, max-age=30, stale-if-error=60"}, 10 * time.Minute, 90 * time.Second, false},
		{"stale-if-error past maxAge", []string{"Cache-Control", "max-age=600, stale-if-error=600"}, 10 * time.Minute, 10 * time.Minute, false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			c := New(1 << 20)
			if !keep(c, get("/"), answer(200, row.fields...), "body", t0) {
				t.Fatalf("Record: got nil, want a recorder")
			}
			_, got := c.Lookup(get("/"), row.maxAge, t0.Add(row.at))
			if got != row.want {
				t.Fatalf("Lookup at %v under maxAge %v: got served %v, want %v", row.at, row.maxAge, got, row.want)
			}
		})
	}
}

func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// TestDoneTooLateForRevalidate: an answer that may be served only while
// fresh, whose body ends after its freshness, is not kept.
func TestDoneTooLateForRevalidate(t *testing.T) {
	c := New(1 << 20)
	r := c.Record(get("/"), answer(200, "Cache-Control", "must-revalidate, max-age=5"), t0)
	_, _ = r.Write([]byte("slow"))
	r.Done(true, t0.Add(5*time.Second))
	if _, n := c.Stats(); n != 0 {
		t.Fatalf("got %d entries, want 0", n)
	}
}

// TestServe checks what Serve writes: the kept status and header without
// hop-by-hop fields, the upstream's Age replaced by ours, Date kept,
// Content-Length of the body, Sds-Degraded; HEAD without body; 204
// without Content-Length; the kept header never changed by a served copy.
func TestServe(t *testing.T) {
	c := New(1 << 20)
	date := httpDate(t0.Add(-10 * time.Second))
	resp := answer(200,
		"Content-Type", "text/plain", "Date", date, "Age", "10", "X-Multi", "a", "X-Multi", "b",
		"Connection", "X-Hop", "X-Hop", "secret", "Keep-Alive", "timeout=5", "Transfer-Encoding", "chunked",
		"Trailer", "X-T", "Proxy-Authenticate", "Basic", "Content-Length", "5")
	keep(c, get("/a"), resp, "hello", t0)
	for _, tc := range []struct {
		name string
		head bool
		body string
	}{{"GET", false, "hello"}, {"HEAD", true, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			req := get("/a")
			if tc.head {
				req.Method = http.MethodHead
			}
			a, ok := c.Lookup(req, time.Minute, t0.Add(2500*time.Millisecond))
			if !ok {
				t.Fatalf("Lookup: got no answer, want one")
			}
			w := httptest.NewRecorder()
			w.Header().Set("X-Before", "kept")
			if got := a.Serve(w, tc.head, "shed; point=p; stale", t0.Add(2500*time.Millisecond)); got != 200 {
				t.Fatalf("Serve returned %d, want 200", got)
			}
			h := w.Result().Header
			want := map[string]string{
				"Content-Type": "text/plain", "Date": date, "Age": "12", "Content-Length": "5",
				"Sds-Degraded": "shed; point=p; stale", "X-Before": "kept",
			}
			for k, v := range want {
				if got := h.Get(k); got != v {
					t.Errorf("%s: got %q, want %q", k, got, v)
				}
			}
			if got := h.Values("X-Multi"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
				t.Errorf("X-Multi: got %q, want [a b]", got)
			}
			for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Transfer-Encoding", "Trailer", "Proxy-Authenticate"} {
				if v, ok := h[k]; ok {
					t.Errorf("%s: got %q, want none", k, v)
				}
			}
			if got := w.Body.String(); got != tc.body {
				t.Errorf("body: got %q, want %q", got, tc.body)
			}
			w.Header()["X-Multi"][0] = "changed"
		})
	}
	if a, _ := c.Lookup(get("/a"), time.Minute, t0); a.header.Get("X-Multi") != "a" {
		t.Fatalf("kept header changed by a served copy: got %q, want a", a.header.Get("X-Multi"))
	}

	keep(c, get("/empty"), answer(204, "Content-Length", "0"), "", t0)
	a, ok := c.Lookup(get("/empty"), time.Minute, t0)
	if !ok {
		t.Fatalf("204: got no answer, want one")
	}
	w := httptest.NewRecorder()
	a.Serve(w, false, "", t0)
	if v, ok := w.Result().Header["Content-Length"]; ok || w.Code != 204 {
		t.Fatalf("204: got status %d Content-Length %q, want 204 and none", w.Code, v)
	}
	if _, ok := w.Result().Header["Sds-Degraded"]; ok {
		t.Fatalf("Sds-Degraded written for an empty value")
	}
}

// TestLookupConnectionHidesVary: a request whose Connection names a
// header its answer varies on gets no kept answer: the upstream would not
// have seen that header.
func TestLookupConnectionHidesVary(t *testing.T) {
	c := New(1 << 20)
	if !keep(c, get("/a", "X-User", "ann"), answer(200, "Vary", "X-User"), "for ann", t0) {
		t.Fatal("the answer for ann was not kept")
	}
	if _, ok := c.Lookup(get("/a", "X-User", "ann"), time.Minute, t0); !ok {
		t.Error("ann's own request: no answer, want hers")
	}
	if _, ok := c.Lookup(get("/a", "X-User", "ann", "Connection", "X-User"), time.Minute, t0); ok {
		t.Error("a request whose Connection names X-User got the answer kept for X-User: ann, want none")
	}
}
