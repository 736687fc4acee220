package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// keyRule returns a rule on header X-Api-Key with the thresholds of s.
func keyRule(tb testing.TB, missing proxy.Missing, s perkey.Settings) proxy.KeyRule {
	tb.Helper()
	src, err := clientkey.ParseSource("header:X-Api-Key")
	if err != nil {
		tb.Fatal(err)
	}
	tab, err := perkey.New(s)
	if err != nil {
		tb.Fatal(err)
	}
	return proxy.KeyRule{Source: src, Missing: missing, Table: tab}
}

// keyRequest is a GET with X-Api-Key key, or none for "".
func keyRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/k", nil)
	if key != "" {
		r.Header.Set("X-Api-Key", key)
	}
	return r
}

// labelOf is the label hasher gives key.
func labelOf(h *clientkey.Hasher, key string) string { return h.Label(h.Sum64(key)) }

// A key over its limit is degraded as key_visit with its label and a
// Retry-After of one bucket, as a degraded visit of the point that spends
// none of its thresholds: another key still gets the point's whole budget.
func TestKeyRuleDegradesOneKey(t *testing.T) {
	hasher := clientkey.NewHasher()
	now := time.Unix(1_700_000_000, 0)
	rule := keyRule(t, proxy.MissingPass, perkey.Settings{VisitThreshold: limiter.At(3)})
	p := rpPoint(t, "p", func(s *limiter.Settings) { s.VisitThreshold = limiter.At(7) }, proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
	h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: rpOK, Hasher: hasher, Now: func() time.Time { return now }})
	serve := func(key string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyRequest(key))
		return rec
	}
	for i := range 3 {
		if rec := serve("noisy"); rec.Code != http.StatusOK {
			t.Fatalf("noisy request %d: %d, want 200 (3 per key)", i+1, rec.Code)
		}
	}
	rec := serve("noisy")
	want := "key_visit; point=p; key=" + labelOf(hasher, "noisy")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Sds-Degraded") != want || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("noisy request 4: %d, Sds-Degraded %q, Retry-After %q; want 429, %q, 1 (a bucket of 1s)", rec.Code, rec.Header().Get("Sds-Degraded"), rec.Header().Get("Retry-After"), want)
	}
	for i := range 3 {
		if rec := serve("quiet"); rec.Code != http.StatusOK {
			t.Fatalf("quiet request %d: %d %q, want 200: the point's visitThreshold 7 holds 3 + 3 admitted", i+1, rec.Code, rec.Header().Get("Sds-Degraded"))
		}
	}
	if rec := serve(""); rec.Code != http.StatusOK {
		t.Errorf("a request without the key under missing: pass: %d %q, want 200 (the point's 7th)", rec.Code, rec.Header().Get("Sds-Degraded"))
	}
	counts, _ := rpCounts(p, now)
	if counts.Visits != 8 || counts.Degraded != 1 {
		t.Errorf("point window: %d visits, %d degraded; want 8 and 1 (the key's refusal is a degraded visit)", counts.Visits, counts.Degraded)
	}
	if got := rpMetric(t, reg, "sds_degraded_total", map[string]string{"point": "p", "strategy": "key_visit"}); got != 1 {
		t.Errorf(`sds_degraded_total{strategy="key_visit"} = %v, want 1`, got)
	}
	if got := rpMetric(t, reg, "sds_perkey_keys", map[string]string{"point": "p"}); got != 2 {
		t.Errorf("sds_perkey_keys = %v, want 2 keys tracked", got)
	}
}

// A key's calls in flight are held until its request ends, whatever the
// point decides: a key at its concurrentThreshold is degraded as
// key_concurrent until one of its calls ends.
func TestKeyRuleConcurrent(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	upstream := rpRoundTrip(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("hold") != "" {
			entered <- struct{}{}
			<-release
		}
		return rpReply(r, http.StatusOK, "upstream"), nil
	})
	rule := keyRule(t, proxy.MissingPass, perkey.Settings{ConcurrentThreshold: limiter.At(1)})
	p := rpPoint(t, "p", nil, proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
	h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: upstream})
	var wg sync.WaitGroup
	held := httptest.NewRecorder()
	wg.Go(func() {
		r := httptest.NewRequest(http.MethodGet, "/k?hold=1", nil)
		r.Header.Set("X-Api-Key", "a")
		h.ServeHTTP(held, r)
	})
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, keyRequest("a"))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("second call of key a while one is in flight: %d, Retry-After %q, want 429 key_concurrent and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := httptest.NewRecorder(); func() int { h.ServeHTTP(rec, keyRequest("b")); return rec.Code }() != http.StatusOK {
		t.Errorf("key b beside it: %d, want 200", rec.Code)
	}
	close(release)
	wg.Wait()
	if held.Code != http.StatusOK {
		t.Fatalf("held call: %d", held.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, keyRequest("a"))
	if rec.Code != http.StatusOK {
		t.Errorf("key a once its call ended: %d %q, want 200", rec.Code, rec.Header().Get("Sds-Degraded"))
	}
}

// missing: degrade answers a request without the key as key_visit with
// key=missing; missing: shared holds all such requests to one key's limit.
func TestKeyRuleMissing(t *testing.T) {
	degrade := rpPoint(t, "degrade", nil, proxy.PointOptions{Keys: []proxy.KeyRule{keyRule(t, proxy.MissingDegrade, perkey.Settings{VisitThreshold: limiter.At(5)})}})
	shared := rpPoint(t, "shared", nil, proxy.PointOptions{Keys: []proxy.KeyRule{keyRule(t, proxy.MissingShared, perkey.Settings{VisitThreshold: limiter.At(2)})}})
	hd, _ := rpHandler(t, rpConfig(rpFakeUpstream, degrade), proxy.Options{Transport: rpOK})
	hs, _ := rpHandler(t, rpConfig(rpFakeUpstream, shared), proxy.Options{Transport: rpOK})

	rec := httptest.NewRecorder()
	hd.ServeHTTP(rec, keyRequest(""))
	if want := "key_visit; point=degrade; key=missing"; rec.Code != http.StatusTooManyRequests || rec.Header().Get("Sds-Degraded") != want {
		t.Errorf("missing: degrade, no key: %d %q, want 429 %q", rec.Code, rec.Header().Get("Sds-Degraded"), want)
	}
	var codes []int
	for _, key := range []string{"", "", "", "k"} {
		rec := httptest.NewRecorder()
		hs.ServeHTTP(rec, keyRequest(key))
		codes = append(codes, rec.Code)
	}
	if want := []int{200, 200, 429, 200}; !slices.Equal(codes, want) {
		t.Errorf("missing: shared, three without the key then one with: %v, want %v", codes, want)
	}
}

// A shadow point forwards a request its key rule would degrade, marked
// with the key's label, and counts it shadow-degraded.
func TestKeyRuleShadow(t *testing.T) {
	hasher := clientkey.NewHasher()
	rule := keyRule(t, proxy.MissingPass, perkey.Settings{VisitThreshold: limiter.At(1)})
	p := rpPoint(t, "p", func(s *limiter.Settings) { s.Shadow = true }, proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
	h, reg := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: rpOK, Hasher: hasher})
	for i, want := range []string{"", "key_visit; point=p; key=" + labelOf(hasher, "a")} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyRequest("a"))
		if rec.Code != http.StatusOK || rec.Header().Get("Sds-Shadow-Degraded") != want {
			t.Errorf("request %d: %d, Sds-Shadow-Degraded %q; want 200 and %q", i+1, rec.Code, rec.Header().Get("Sds-Shadow-Degraded"), want)
		}
	}
	if got := rpMetric(t, reg, "sds_shadow_degraded_total", map[string]string{"point": "p", "strategy": "key_visit"}); got != 1 {
		t.Errorf(`sds_shadow_degraded_total{strategy="key_visit"} = %v, want 1`, got)
	}
}

// A key's empty token bucket is key_token_bucket, whose Retry-After is
// one token of the rule's rate.
func TestKeyRuleTokenBucket(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	rule := keyRule(t, proxy.MissingPass, perkey.Settings{TokensPerSecond: limiter.At(1), TokenBucketSize: limiter.At(2)})
	p := rpPoint(t, "p", nil, proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
	h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: rpOK, Now: func() time.Time { return now }})
	var codes []int
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyRequest("a"))
		codes = append(codes, rec.Code)
		if rec.Code == http.StatusTooManyRequests && (rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Sds-Degraded")[:len("key_token_bucket")] != "key_token_bucket") {
			t.Errorf("empty bucket: Sds-Degraded %q, Retry-After %q; want key_token_bucket and 1", rec.Header().Get("Sds-Degraded"), rec.Header().Get("Retry-After"))
		}
	}
	now = now.Add(time.Second)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, keyRequest("a"))
	codes = append(codes, rec.Code)
	if want := []int{200, 200, 429, 200}; !slices.Equal(codes, want) {
		t.Errorf("a bucket of 2 at 1/s, three at once then one a second later: %v, want %v", codes, want)
	}
}

// A per-key rule adds no allocation to an admitted request: the same
// request, key header included, allocates as much on a point without one.
func TestKeyRuleAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items")
	}
	allocs := func(opts proxy.PointOptions) float64 {
		p := rpPoint(t, "p", allStrategies, opts)
		h, _ := rpHandler(t, rpConfig(rpFakeUpstream, p), proxy.Options{Transport: rpOK})
		req := keyRequest("sk_live_0123456789")
		return testing.AllocsPerRun(1000, func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
		})
	}
	rule := keyRule(t, proxy.MissingPass, perkey.Settings{VisitThreshold: limiter.At(1 << 31), TokensPerSecond: limiter.At(limiter.MaxTokensPerSecond), ConcurrentThreshold: limiter.At(1 << 20)})
	without, with := allocs(proxy.PointOptions{}), allocs(proxy.PointOptions{Keys: []proxy.KeyRule{rule}})
	if with > without {
		t.Errorf("an admitted request allocates %v times with a per-key rule, %v without: want no more", with, without)
	}
}
