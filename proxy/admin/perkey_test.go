package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/internal/testclock"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/route"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// perKeyFixture is a Handler with a point "keyed" of two per-key rules
// (the key in X-Api-Key: more than 5 visits in the window, or 5 calls in
// flight, degraded, maxKeys left at its default; the key in the cookie
// "session": 100 visits, maxKeys 64) and a point "plain" without any, on
// up, on clock, its keys hashed by hasher, with an admin port over them
// that labels keys with the same hasher: wired as run wires them.
func perKeyFixture(t *testing.T, up http.RoundTripper, clock *testclock.Clock, hasher *clientkey.Hasher) (*proxy.Handler, http.Handler) {
	t.Helper()
	upstream, _ := url.Parse("http://upstream.invalid")
	cfg := &proxy.Config{Upstream: upstream}
	rule := func(spec string, s perkey.Settings) proxy.KeyRule {
		src, err := clientkey.ParseSource(spec)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := perkey.New(s)
		if err != nil {
			t.Fatal(err)
		}
		return proxy.KeyRule{Source: src, Table: tab}
	}
	for _, name := range []string{"keyed", "plain"} {
		lim, err := limiter.NewPoint(name, limiter.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		var opts proxy.PointOptions
		if name == "keyed" {
			opts.Keys = []proxy.KeyRule{
				rule("header:X-Api-Key", perkey.Settings{VisitThreshold: limiter.At(5), ConcurrentThreshold: limiter.At(5)}),
				rule("cookie:session", perkey.Settings{VisitThreshold: limiter.At(100), MaxKeys: 64}),
			}
		}
		p := proxy.NewPoint(lim, opts)
		cfg.Points = append(cfg.Points, p)
		cfg.Routes = append(cfg.Routes, proxy.Route{Point: p, Rule: route.Rule{PathPrefix: "/" + name}})
	}
	reg := prometheus.NewRegistry()
	var h *proxy.Handler
	m := metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	h = proxy.New(cfg, proxy.Options{Logger: zap.NewNop(), Metrics: m, Transport: up, Now: clock.Now, Hasher: hasher})
	return h, admin.New(admin.Options{Points: h, Gatherer: reg, Metrics: m, Now: clock.Now,
		Sources: h.Sources, KeyLabel: hasher.Label})
}

// sendKeyed sends a GET of path to h with the API key apiKey and the
// session cookie session, each left out when "".
func sendKeyed(h http.Handler, path, apiKey, session string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "http://svc.example"+path, nil)
	if apiKey != "" {
		req.Header.Set("X-Api-Key", apiKey)
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: "session", Value: session})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// perKeyStatus is what the per-key tests read of /status: the body, each
// point's rules, and each point's fields as raw JSON.
type perKeyStatus struct {
	body  string
	rules map[string][]admin.KeyRule
	raw   map[string]map[string]json.RawMessage
}

// getPerKey reads each point's per-key rules from the admin port's
// /status.
func getPerKey(t *testing.T, adm http.Handler) perKeyStatus {
	t.Helper()
	rec := httptest.NewRecorder()
	adm.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	var doc struct{ Points []json.RawMessage }
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("/status: %v\n%s", err, rec.Body)
	}
	st := perKeyStatus{body: rec.Body.String(), rules: map[string][]admin.KeyRule{}, raw: map[string]map[string]json.RawMessage{}}
	for _, raw := range doc.Points {
		var p struct {
			Name   string
			PerKey []admin.KeyRule
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		st.rules[p.Name], st.raw[p.Name] = p.PerKey, fields
	}
	return st
}

// TestStatusPerKey: with keys sent through a Handler, /status shows the
// keyed point's rules in order: the API key rule tracks the four keys
// seen, dave's among them though his visit left the window, its maxKeys
// the default, its heaviest keys most first by label (the label bob's
// degraded answer carried), carol's call in flight counted until it
// ends; the cookie rule tracks dave's session alone and lists no key
// ("heaviest": []). No raw key, and no key's sum, is in the document, and
// the point without rules has no "perKey".
func TestStatusPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := testclock.New(adminT0.Add(-20 * time.Second)) // two windows before
		hasher := clientkey.NewHasher()
		up := heldUpstream{release: make(chan struct{})}
		h, adm := perKeyFixture(t, up, clock, hasher)
		label := func(key string) string { return hasher.Label(hasher.Sum64(key)) }

		sendKeyed(h, "/keyed", "dave-api-key", "dave-session")
		clock.Set(adminT0)
		var bobDegraded *httptest.ResponseRecorder
		for i := range 6 { // the 6th is over the visit threshold of 5
			bobDegraded = sendKeyed(h, "/keyed", "bob-api-key", "")
			if i < 5 && bobDegraded.Code != http.StatusOK {
				t.Fatalf("bob's request %d: got %d, want 200", i+1, bobDegraded.Code)
			}
		}
		if got := bobDegraded.Header().Get("Sds-Degraded"); bobDegraded.Code != http.StatusTooManyRequests || !strings.Contains(got, "key="+label("bob-api-key")) {
			t.Fatalf("bob's 6th request: got %d, Sds-Degraded %q; want 429 with key=%s", bobDegraded.Code, got, label("bob-api-key"))
		}
		for range 3 {
			sendKeyed(h, "/keyed", "alice-api-key", "")
		}
		sendKeyed(h, "/keyed", "carol-api-key", "")
		var wg sync.WaitGroup
		wg.Go(func() { sendKeyed(h, "/keyed/held", "carol-api-key", "") })
		synctest.Wait()

		st := getPerKey(t, adm)
		want := []admin.KeyRule{
			{Key: "header:X-Api-Key", Tracked: 4, MaxKeys: perkey.DefaultMaxKeys, Heaviest: []admin.KeyFigures{
				{Label: label("bob-api-key"), Visits: 5},
				{Label: label("alice-api-key"), Visits: 3},
				{Label: label("carol-api-key"), Visits: 2, InFlight: 1},
			}},
			{Key: "cookie:session", Tracked: 1, MaxKeys: 64, Heaviest: []admin.KeyFigures{}},
		}
		if got := st.rules["keyed"]; !reflect.DeepEqual(got, want) {
			t.Errorf("keyed point's perKey:\ngot  %+v\nwant %+v", got, want)
		}
		var rawRules []map[string]json.RawMessage
		json.Unmarshal(st.raw["keyed"]["perKey"], &rawRules)
		if len(rawRules) != 2 || string(rawRules[1]["heaviest"]) != "[]" {
			t.Errorf(`the cookie rule: got %s, want "heaviest": []`, st.raw["keyed"]["perKey"])
		}
		if raw, ok := st.raw["plain"]["perKey"]; ok {
			t.Errorf("plain point: got perKey %s, want none", raw)
		}
		for _, key := range []string{"dave-api-key", "dave-session", "bob-api-key", "alice-api-key", "carol-api-key"} {
			sum := hasher.Sum64(key)
			for _, leak := range []string{key, strconv.FormatUint(sum, 10), strconv.FormatUint(sum, 16), fmt.Sprintf("%016x", sum)} {
				if strings.Contains(st.body, leak) {
					t.Errorf("/status holds %q, key %s or its sum:\n%s", leak, key, st.body)
				}
			}
		}

		close(up.release)
		wg.Wait()
		carol := getPerKey(t, adm).rules["keyed"][0].Heaviest[2]
		if want := (admin.KeyFigures{Label: label("carol-api-key"), Visits: 2}); carol != want {
			t.Errorf("carol once her call ended: got %+v, want %+v", carol, want)
		}
	})
}

// TestStatusPerKeyHeaviest: a rule lists its HeaviestKeys heaviest keys,
// most first, of all it tracks; without KeyLabel it lists none, and
// still says how many it tracks.
func TestStatusPerKeyHeaviest(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	hasher := clientkey.NewHasher()
	const keys = admin.HeaviestKeys + 2
	var want []admin.KeyFigures
	for n := keys; n > keys-admin.HeaviestKeys; n-- { // the key of sum n has n visits
		want = append(want, admin.KeyFigures{Label: hasher.Label(uint64(n)), Visits: int64(n)})
	}
	for _, tc := range []struct {
		name     string
		keyLabel func(uint64) string
		want     []admin.KeyFigures
	}{
		{"labelled", hasher.Label, want},
		{"without KeyLabel", nil, []admin.KeyFigures{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := limiter.NewPoint("keyed", limiter.Settings{})
			tab, err := perkey.New(perkey.Settings{VisitThreshold: limiter.At(100), MaxKeys: 500})
			if err != nil {
				t.Fatal(err)
			}
			for sum := uint64(1); sum <= keys; sum++ {
				for range sum {
					if v := tab.Enter(nil, now.Add(-time.Second), sum); !v.Allowed {
						t.Fatalf("key %d: got %+v, want allowed", sum, v)
					}
				}
			}
			adm := admin.New(admin.Options{Points: snapshots{lim}, Gatherer: prometheus.NewRegistry(),
				Now: func() time.Time { return now }, KeyLabel: tc.keyLabel,
				Sources: func() []metrics.Source {
					return []metrics.Source{{Limiter: lim, Keys: []metrics.KeySource{{Source: "query:tenant", Table: tab}}}}
				}})
			want := []admin.KeyRule{{Key: "query:tenant", Tracked: keys, MaxKeys: 500, Heaviest: tc.want}}
			if got := getPerKey(t, adm).rules["keyed"]; !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestDashboardPerKey: the keyed point's card shows its rule, the keys it
// tracks of its maxKeys, and its heaviest keys by label with their visits,
// the call in flight said; the card of a point without rules shows none.
func TestDashboardPerKey(t *testing.T) {
	needChromium(t)
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	hasher := clientkey.NewHasher()
	keyed, _ := limiter.NewPoint("keyed", limiter.Settings{})
	plain, _ := limiter.NewPoint("plain", limiter.Settings{})
	tab, err := perkey.New(perkey.Settings{VisitThreshold: limiter.At(100), ConcurrentThreshold: limiter.At(10)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // ended calls: visits, none in flight
		var c perkey.Call
		tab.Enter(&c, now, 7)
		c.Exit()
	}
	var held perkey.Call
	tab.Enter(&held, now, 9)
	defer held.Exit()
	srv := httptest.NewServer(admin.New(admin.Options{Points: snapshots{keyed, plain}, Gatherer: prometheus.NewRegistry(),
		Now: func() time.Time { return now }, KeyLabel: hasher.Label,
		Sources: func() []metrics.Source {
			return []metrics.Source{{Limiter: keyed, Keys: []metrics.KeySource{{Source: "header:X-Api-Key", Table: tab}}}, {Limiter: plain}}
		}}))
	defer srv.Close()
	dom := dumpDOM(t, srv.URL+"/")
	wantLine := "header:X-Api-Key&nbsp;2/10000&nbsp;keys: " + hasher.Label(7) + "&nbsp;3&nbsp;visits, " +
		hasher.Label(9) + "&nbsp;1&nbsp;visits&nbsp;(1&nbsp;in&nbsp;flight)"
	if card := cardHTML(t, dom, "keyed"); !strings.Contains(card, wantLine) {
		t.Errorf("the keyed point's card lacks %q:\n%s", wantLine, card)
	}
	if card := cardHTML(t, dom, "plain"); strings.Contains(card, "&nbsp;keys") {
		t.Errorf("the plain point's card shows per-key rules:\n%s", card)
	}
}
