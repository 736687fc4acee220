package admin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/proxy/stale"
	"github.com/sds-proxy/sds-proxy/route"
)

// cacheableUpstream is a fake service whose every answer is one a shared
// cache may keep: 200, Cache-Control: max-age=60, a body of size bytes.
type cacheableUpstream struct{ size int }

func (u cacheableUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain"}, "Cache-Control": {"max-age=60"}},
		Body:   io.NopCloser(strings.NewReader(strings.Repeat("u", u.size))), ContentLength: int64(u.size), Request: r,
	}, nil
}

// staleFixture is a Handler with a point "kept" (stale: maxAge 10m) and a
// point "plain" without stale:, on up, at the fixed instant adminT0, its
// answers kept in cache (nil: none), with an admin port over them that
// shows cache: wired as run wires them.
func staleFixture(t *testing.T, up http.RoundTripper, cache *stale.Cache) (*proxy.Handler, http.Handler) {
	t.Helper()
	upstream, _ := url.Parse("http://upstream.invalid")
	cfg := &proxy.Config{Upstream: upstream}
	for _, name := range []string{"kept", "plain"} {
		lim, err := limiter.NewPoint(name, limiter.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		var opts proxy.PointOptions
		if name == "kept" {
			opts.StaleMaxAge = 10 * time.Minute
		}
		p := proxy.NewPoint(lim, opts)
		cfg.Points = append(cfg.Points, p)
		cfg.Routes = append(cfg.Routes, proxy.Route{Point: p, Rule: route.Rule{PathPrefix: "/" + name}})
	}
	now := func() time.Time { return adminT0 }
	reg := prometheus.NewRegistry()
	var h *proxy.Handler
	m := metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	h = proxy.New(cfg, proxy.Options{Logger: zap.NewNop(), Metrics: m, Transport: up, Now: now, Stale: cache})
	return h, admin.New(admin.Options{Points: h, Gatherer: reg, Metrics: m, Now: now, Sources: h.Sources, Stale: cache})
}

// staleStatus is what the stale tests read of /status: the cache's
// figures, each point's fields as raw JSON, and whether the document has
// a "staleCache" at all.
type staleStatus struct {
	cache    *admin.StaleCache
	hasCache bool
	points   map[string]map[string]json.RawMessage
}

// getStale reads the stale cache's figures and the points from the admin
// port's /status.
func getStale(t *testing.T, adm http.Handler) staleStatus {
	t.Helper()
	rec := httptest.NewRecorder()
	adm.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	var doc struct {
		StaleCache *admin.StaleCache
		Points     []map[string]json.RawMessage
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("/status: %v\n%s", err, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	st := staleStatus{cache: doc.StaleCache, points: map[string]map[string]json.RawMessage{}}
	_, st.hasCache = top["staleCache"]
	for _, p := range doc.Points {
		var name string
		json.Unmarshal(p["name"], &name)
		st.points[name] = p
	}
	return st
}

// getOK sends a GET of path to h and checks that it was answered 200.
func getOK(t *testing.T, h http.Handler, path string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://svc.example"+path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: got %d, want 200", path, rec.Code)
	}
}

// TestStatusStaleCache: /status shows the stale cache's bound, and what
// its kept answers count for: nothing before a request; one answer, of
// more than 0 bytes and at most maxBytes, once the point with stale:
// relayed a cacheable answer; still one once the point without stale:
// relayed one too. The point with stale: shows its maxAge; the point
// without has no "stale".
func TestStatusStaleCache(t *testing.T) {
	const maxBytes = 1 << 20
	h, adm := staleFixture(t, cacheableUpstream{size: 100}, stale.New(maxBytes))

	if st := getStale(t, adm); st.cache == nil || *st.cache != (admin.StaleCache{MaxBytes: maxBytes}) {
		t.Errorf("before any request: got staleCache %+v, want %+v", st.cache, admin.StaleCache{MaxBytes: maxBytes})
	}
	getOK(t, h, "/kept/items")
	st := getStale(t, adm)
	if c := st.cache; c == nil || c.MaxBytes != maxBytes || c.Entries != 1 || c.Bytes <= 0 || c.Bytes > maxBytes {
		t.Errorf("after a kept answer: got staleCache %+v, want maxBytes %d, 1 entry, bytes in (0, %d]", c, maxBytes, maxBytes)
	}
	kept := st.cache
	getOK(t, h, "/plain/items")
	if st := getStale(t, adm); st.cache == nil || kept == nil || *st.cache != *kept {
		t.Errorf("after an answer of the point without stale:: got staleCache %+v, want it unchanged, %+v", st.cache, kept)
	}

	if got, want := string(st.points["kept"]["stale"]), `{"maxAge":"10m0s"}`; got != want {
		t.Errorf("the kept point's stale: got %s, want %s", got, want)
	}
	if raw, ok := st.points["plain"]["stale"]; ok {
		t.Errorf("the plain point: got stale %s, want none", raw)
	}
}

// TestStatusStaleCacheBound: an on-call engineer reads the cache's figures
// to see its memory: under more answers than fit, bytes stay at most
// maxBytes and the entries are those that fit, least recently used out.
func TestStatusStaleCacheBound(t *testing.T) {
	const maxBytes = 64 << 10 // answers of at most 4 KiB each: about 20 fit
	h, adm := staleFixture(t, cacheableUpstream{size: 2 << 10}, stale.New(maxBytes))
	const answers = 40
	for i := range answers {
		getOK(t, h, fmt.Sprint("/kept/items/", i))
	}
	c := getStale(t, adm).cache
	if c == nil || c.MaxBytes != maxBytes || c.Bytes <= 0 || c.Bytes > maxBytes || c.Entries <= 1 || c.Entries >= answers {
		t.Errorf("after %d answers of 2 KiB: got staleCache %+v, want bytes in (0, %d], entries in (1, %d)", answers, c, maxBytes, answers)
	}
}

// TestStatusWithoutStaleCache: without Options.Stale, /status has no
// "staleCache", and a point with stale: still shows its setting.
func TestStatusWithoutStaleCache(t *testing.T) {
	h, adm := staleFixture(t, cacheableUpstream{size: 100}, nil)
	getOK(t, h, "/kept/items")
	st := getStale(t, adm)
	if st.hasCache {
		t.Errorf("got staleCache %+v, want none", st.cache)
	}
	if got, want := string(st.points["kept"]["stale"]), `{"maxAge":"10m0s"}`; got != want {
		t.Errorf("the kept point's stale: got %s, want %s", got, want)
	}
}

// TestDashboardStale: with a stale cache, the config line says what its
// kept answers count for of its bound and how many there are, and the
// card of a point with stale: says how old an answer it serves; without a
// cache the line is hidden, and the card of a point without stale: says
// nothing of it.
func TestDashboardStale(t *testing.T) {
	needChromium(t)
	for _, tc := range []struct {
		name  string
		cache *stale.Cache
		want  *regexp.Regexp // the stale cache line, hidden or not
	}{
		{"with a cache", stale.New(64 << 20), regexp.MustCompile(`<div id="stale-cache"><span class="k">stale cache</span>` +
			`<span id="stale-cache-figures" class="num" title="[^"]*: [0-9]+ of 67108864 bytes[^"]*">1(\.[0-9])?&nbsp;KiB of 64&nbsp;MiB, 1 answer</span></div>`)},
		{"without", nil, regexp.MustCompile(`<div id="stale-cache" hidden="">`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, adm := staleFixture(t, cacheableUpstream{size: 100}, tc.cache)
			getOK(t, h, "/kept/items")
			srv := httptest.NewServer(adm)
			defer srv.Close()
			dom := dumpDOM(t, srv.URL+"/")
			if line := tc.want.FindString(dom); line == "" {
				i := strings.Index(dom, `<div id="stale-cache"`)
				t.Errorf("the stale cache line does not match %s:\n%s", tc.want, dom[max(i, 0):min(max(i, 0)+400, len(dom))])
			}
			if card := cardHTML(t, dom, "kept"); !strings.Contains(card, "stale&nbsp;≤&nbsp;10m<") {
				t.Errorf("the kept point's card does not say stale ≤ 10m:\n%s", card)
			}
			if card := cardHTML(t, dom, "plain"); strings.Contains(card, "stale") {
				t.Errorf("the plain point's card speaks of stale answers:\n%s", card)
			}
		})
	}
}

// TestStatusStaleCacheUnused: a cache that no point in force uses and
// that holds nothing is not shown (a config without stale: says nothing
// of it); once a point that had stale: loses it, its answers, until a
// reload drops them, still show.
func TestStatusStaleCacheUnused(t *testing.T) {
	cache := stale.New(1 << 20)
	h, adm := staleFixture(t, cacheableUpstream{size: 100}, cache)
	getOK(t, h, "/kept/items")
	cfg := *h.Config()
	plain := cfg.Points[1]
	cfg.Points = cfg.Points[1:]
	cfg.Routes = []proxy.Route{{Point: plain}}
	h.Swap(&cfg)
	if st := getStale(t, adm); !st.hasCache || st.cache.Entries != 1 {
		t.Errorf("no point with stale:, one answer still kept: staleCache %+v (shown %v), want it shown with 1 entry", st.cache, st.hasCache)
	}
	cache.Retain(func(string) bool { return false })
	if st := getStale(t, adm); st.hasCache {
		t.Errorf("no point with stale:, nothing kept: got staleCache %+v, want none", st.cache)
	}
}
