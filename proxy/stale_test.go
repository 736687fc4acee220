package proxy_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
)

// staleEnv is a Handler on a fake upstream whose answers the test sets,
// a fake clock, and one point p with visitThreshold 1 in a window of an
// hour (every request after the first is degraded) and stale.maxAge 1m,
// or with set's settings.
type staleEnv struct {
	h      *proxy.Handler
	cache  *stale.Cache
	now    time.Time
	answer func(r *http.Request) (*http.Response, error)
	p      *proxy.Point
}

func newStaleEnv(t *testing.T, set func(*limiter.Settings), opts proxy.PointOptions) *staleEnv {
	t.Helper()
	e := &staleEnv{now: time.Unix(1_700_000_000, 0), cache: stale.New(1 << 20)}
	e.answer = func(r *http.Request) (*http.Response, error) {
		return rpReply(r, http.StatusOK, "good "+r.URL.Path, "Content-Type", "text/plain", "Cache-Control", "max-age=5"), nil
	}
	if set == nil {
		set = func(s *limiter.Settings) { s.VisitThreshold, s.Window, s.Buckets = limiter.At(1), time.Hour, 1 }
	}
	if opts.StaleMaxAge == 0 {
		opts.StaleMaxAge = time.Minute
	}
	e.p = rpPoint(t, "p", set, opts)
	upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) { return e.answer(r) })
	e.h, _ = rpHandler(t, rpConfig(rpFakeUpstream, e.p), proxy.Options{Transport: upstream, Stale: e.cache, Now: func() time.Time { return e.now }})
	return e
}

func (e *staleEnv) do(method, path string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, r)
	return rec
}

// A degraded GET gets the last good answer to the same GET, with Age and
// the mark; a HEAD gets its head; another path, with no answer kept, gets
// the fallback; past maxAge, the fallback again.
func TestStaleServed(t *testing.T) {
	e := newStaleEnv(t, nil, proxy.PointOptions{})
	if rec := e.do(http.MethodGet, "/a"); rec.Code != http.StatusOK {
		t.Fatalf("first GET: %d", rec.Code)
	}
	e.now = e.now.Add(3 * time.Second)
	rec := e.do(http.MethodGet, "/a")
	if rec.Code != http.StatusOK || rec.Body.String() != "good /a" || rec.Header().Get("Age") != "3" || rec.Header().Get("Sds-Degraded") != "visit; point=p; stale" {
		t.Errorf("degraded GET: %d %q, Age %q, Sds-Degraded %q; want 200 \"good /a\", Age 3, \"visit; point=p; stale\"", rec.Code, rec.Body, rec.Header().Get("Age"), rec.Header().Get("Sds-Degraded"))
	}
	rec = e.do(http.MethodHead, "/a")
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "7" {
		t.Errorf("degraded HEAD: %d, body %q, Content-Length %q; want 200, no body, 7", rec.Code, rec.Body, rec.Header().Get("Content-Length"))
	}
	if rec := e.do(http.MethodGet, "/b"); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Sds-Degraded") != "visit; point=p" {
		t.Errorf("degraded GET of a path never answered: %d %q, want the fallback's 429", rec.Code, rec.Header().Get("Sds-Degraded"))
	}
	e.now = e.now.Add(time.Minute)
	if rec := e.do(http.MethodGet, "/a"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("degraded GET past maxAge: %d %q, want the fallback", rec.Code, rec.Header().Get("Sds-Degraded"))
	}
}

// What is not the last good answer is never kept: an exception, an
// answer meant for one user, a body that broke off.
func TestStaleNotKept(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(r *http.Request) (*http.Response, error)
	}{
		{"5xx", func(r *http.Request) (*http.Response, error) {
			return rpReply(r, http.StatusServiceUnavailable, "busy"), nil
		}},
		{"private", func(r *http.Request) (*http.Response, error) {
			return rpReply(r, http.StatusOK, "yours", "Cache-Control", "private, max-age=60"), nil
		}},
		{"set-cookie", func(r *http.Request) (*http.Response, error) {
			return rpReply(r, http.StatusOK, "yours", "Set-Cookie", "session=abc"), nil
		}},
		{"broken body", func(r *http.Request) (*http.Response, error) {
			resp := rpReply(r, http.StatusOK, "good")
			resp.ContentLength = 100 // the body ends short of it
			return resp, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStaleEnv(t, nil, proxy.PointOptions{})
			e.answer = tc.answer
			e.do(http.MethodGet, "/a")
			if rec := e.do(http.MethodGet, "/a"); rec.Header().Get("Sds-Degraded") != "visit; point=p" {
				t.Errorf("degraded after a %s answer: %d %q, want the fallback", tc.name, rec.Code, rec.Header().Get("Sds-Degraded"))
			}
			if _, n := e.cache.Stats(); n != 0 {
				t.Errorf("%d answers kept, want none", n)
			}
		})
	}
}

// With fallbackOnError, a failed upstream call gets the kept answer,
// marked upstream_error; an operator's switch gets it marked forced.
func TestStaleOnErrorAndForced(t *testing.T) {
	e := newStaleEnv(t, func(s *limiter.Settings) {}, proxy.PointOptions{FallbackOnError: true})
	e.do(http.MethodGet, "/a")
	e.answer = func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") }
	if rec := e.do(http.MethodGet, "/a"); rec.Code != http.StatusOK || rec.Header().Get("Sds-Degraded") != "upstream_error; point=p; stale" || rec.Body.String() != "good /a" {
		t.Errorf("a failed call: %d %q %q, want the kept answer marked upstream_error; point=p; stale", rec.Code, rec.Header().Get("Sds-Degraded"), rec.Body)
	}
	if _, err := e.h.Force("p", proxy.ForceDegrade, time.Minute, "test"); err != nil {
		t.Fatal(err)
	}
	if rec := e.do(http.MethodGet, "/a"); rec.Code != http.StatusOK || rec.Header().Get("Sds-Degraded") != "forced; point=p; stale" {
		t.Errorf("under an operator's switch: %d %q, want the kept answer marked forced; point=p; stale", rec.Code, rec.Header().Get("Sds-Degraded"))
	}
}

// Two users whose answers vary on their cookie never get each other's.
func TestStaleVaryCookie(t *testing.T) {
	e := newStaleEnv(t, func(s *limiter.Settings) { s.VisitThreshold = limiter.At(2) }, proxy.PointOptions{})
	e.answer = func(r *http.Request) (*http.Response, error) {
		c, _ := r.Cookie("u")
		return rpReply(r, http.StatusOK, "for "+c.Value, "Vary", "Cookie", "Cache-Control", "max-age=60"), nil
	}
	e.do(http.MethodGet, "/me", "Cookie", "u=ann")
	e.do(http.MethodGet, "/me", "Cookie", "u=bob")
	for _, u := range []string{"ann", "bob"} {
		if rec := e.do(http.MethodGet, "/me", "Cookie", "u="+u); rec.Body.String() != "for "+u || rec.Header().Get("Sds-Degraded") != "visit; point=p; stale" {
			t.Errorf("user %s, degraded: %q %q, want their own answer, stale", u, rec.Body, rec.Header().Get("Sds-Degraded"))
		}
	}
	if rec := e.do(http.MethodGet, "/me", "Cookie", "u=eve"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("user eve, never answered, degraded: %d %q, want the fallback", rec.Code, rec.Body)
	}
}
