package main_test

// End-to-end tests of per-key rules (a point's perKey: in sds.yaml): the
// real proxy in front of the real upstream, offered paced load by key.
//
//   - A heavy key is admitted at its limit while well-behaved keys beside
//     it are all served (TestPerKeyHeavyKeyAtItsLimit), also while
//     thousands of other keys churn through a small table, most of them
//     judged in the sketch (TestPerKeyChurn; bench/perkey runs the same
//     at full scale, without the race detector).
//   - A shadow point degrades nothing and says what it would have
//     (TestPerKeyShadow); missing: degrade and shared, and a key over its
//     limit spends none of the point's own thresholds (TestPerKeyMissing).
//   - Raw keys never leave the process; labels do, the same in
//     Sds-Degraded, the log and /status (TestPerKeyNoRawKey).
//   - A reload keeps an unchanged rule's counts and starts a changed rule
//     afresh (TestPerKeyKeptAcrossReload).
//   - A full table makes room for new keys while /status is read
//     (TestPerKeyTableTurnsOverWhileStatusRead, skipped: it fails).
//
// The load tests do not run in parallel with other tests: their bounds are
// a few percent, and the client, built with -race in CI, needs the CPU.

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/admin"
)

// The per-key rule of the example: visits 300 a window, a token
// bucket of keyRate tokens a second that holds keySize, 4 calls in flight.
// For a key asking far more than keyRate a second the bucket binds: 300
// visits in the default 10s window are 30 a second.
const (
	keyRate = 10
	keySize = 20
)

// perKeyBody is a config body routing everything to point api.search,
// its own visitThreshold pointVisits, and the example's per-key rule on
// X-Api-Key tracking maxKeys keys exactly.
func perKeyBody(pointVisits, maxKeys int) string {
	return fmt.Sprintf(`routes:
  - point: api.search
    match: {}
points:
  api.search:
    visitThreshold: %d
    perKey:
      - key: header:X-Api-Key
        visitThreshold: 300
        tokenBucketGeneratedTokensInSecond: %d
        tokenBucketSize: %d
        concurrentThreshold: 4
        missing: pass
        maxKeys: %d
`, pointVisits, keyRate, keySize, maxKeys)
}

// bucketLimit is what a token bucket of rate tokens a second, full at
// size, admits to a key that asks far more often, over span from its
// first request: the full bucket, then a token every 1/rate.
func bucketLimit(size, rate int, span time.Duration) float64 {
	return float64(size) + float64(rate)*span.Seconds()
}

// rawKey returns a key no output could contain by chance: prefix and 16
// random hex digits.
func rawKey(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:16])
}

// keyStrategies are the per-key strategies, as Sds-Degraded names them.
var keyStrategies = [...]string{"key_visit", "key_token_bucket", "key_concurrent"}

// keyDegraded matches the Sds-Degraded of a request a per-key rule
// degraded: the strategy, the point and the key's label.
var keyDegraded = regexp.MustCompile(`^(key_visit|key_token_bucket|key_concurrent); point=([a-z.]+); key=([0-9a-f]{8})$`)

// The pace of the paced loads: every paceTick the requests due by then
// are sent, each in its own goroutine, at most paceInFlight outstanding.
const (
	paceTick     = 10 * time.Millisecond
	paceInFlight = 256
)

// keyLoad counts the answers to one class of keys' paced requests (the
// heavy key, the well-behaved keys, the churn).
type keyLoad struct {
	point string
	// sent were sent; dropped were due but not sent, paceInFlight being
	// outstanding.
	sent, dropped atomic.Int64
	served        atomic.Int64                     // 200 from the upstream
	degraded      [len(keyStrategies)]atomic.Int64 // 429 by a per-key rule, by keyStrategies
	failed        atomic.Int64                     // anything else; firstFailure says what
	firstFailure  atomic.Pointer[string]
	label         atomic.Pointer[string] // key= of a degraded answer
	slots         chan struct{}          // paceInFlight
	// first and last are when the first and last request was sent; read
	// them once the load ended.
	first, last time.Time
}

func newKeyLoad(point string) *keyLoad {
	return &keyLoad{point: point, slots: make(chan struct{}, paceInFlight)}
}

// degradedAll is the degraded answers, whatever the strategy.
func (l *keyLoad) degradedAll() int64 {
	var n int64
	for i := range l.degraded {
		n += l.degraded[i].Load()
	}
	return n
}

func (l *keyLoad) fail(what string) {
	if l.failed.Add(1) == 1 {
		l.firstFailure.Store(&what)
	}
}

// failure describes the failures, for a test's error.
func (l *keyLoad) failure() string {
	if n := l.failed.Load(); n > 0 {
		return fmt.Sprintf("%d failed, the first: %s", n, *l.firstFailure.Load())
	}
	return "none failed"
}

// judge counts one answer: a 200 from the upstream, or a per-key rule's
// 429 naming l's point with a Retry-After; anything else fails.
func (l *keyLoad) judge(r reply, err error) {
	if err != nil {
		l.fail(err.Error())
		return
	}
	if r.status == http.StatusOK && r.degraded() == "" && strings.HasPrefix(r.body, "upstream") {
		l.served.Add(1)
		return
	}
	m := keyDegraded.FindStringSubmatch(r.degraded())
	if r.status != http.StatusTooManyRequests || m == nil || m[2] != l.point || r.header.Get("Retry-After") == "" {
		l.fail(r.String() + " Retry-After " + r.header.Get("Retry-After"))
		return
	}
	l.degraded[slices.Index(keyStrategies[:], m[1])].Add(1)
	l.label.Store(&m[3])
}

// paceKeys sends perSecond × span requests to the proxy, the i-th due at
// begin + i/perSecond with X-Api-Key keyOf(i), each in its own goroutine,
// and counts the answers into l. Every paceTick it sends the requests due
// by then, and at the first tick past begin+span those left. A request
// due while paceInFlight are outstanding is not sent (dropped).
func (e *env) paceKeys(wg *sync.WaitGroup, l *keyLoad, perSecond int, begin time.Time, span time.Duration, keyOf func(int) string) {
	wg.Go(func() {
		total := int(float64(perSecond) * span.Seconds())
		end := begin.Add(span)
		tick := time.NewTicker(paceTick)
		defer tick.Stop()
		var sent sync.WaitGroup
		defer sent.Wait()
		// A ticker drops the ticks its reader misses: the loop runs at most
		// once a tick until end, and once after; each pass sends what is
		// due, the last one what is left.
		for i, ticks := 0, int(time.Until(end)/paceTick)+2; i < total && ticks > 0; ticks-- {
			now := <-tick.C
			due := min(total, int(now.Sub(begin).Seconds()*float64(perSecond))+1)
			if !now.Before(end) {
				due = total
			}
			for ; i < due; i++ {
				select {
				case l.slots <- struct{}{}:
				default:
					l.dropped.Add(1)
					continue
				}
				if l.first.IsZero() {
					l.first = now
				}
				l.last = now
				l.sent.Add(1)
				req, err := http.NewRequest("GET", e.proxy.url+"/search", nil)
				if err != nil {
					panic(err)
				}
				req.Header.Set("X-Api-Key", keyOf(i))
				sent.Go(func() {
					defer func() { <-l.slots }()
					l.judge(e.do(req))
				})
			}
		}
	})
}

// loadClient is a client that keeps up to paceInFlight connections idle,
// so that a paced load reuses them.
func loadClient(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: paceInFlight, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// The well-behaved keys of the load tests: wellKeys keys, each at
// wellRate requests a second.
const (
	wellKeys = 20
	wellRate = 2
)

// checkHeavy checks the heavy key's load: admitted at no more than its
// bucket's limit over the span it asked (+5%), and, when tight, no less
// (-5%); its bucket binding, every refusal a per-key 429, none failed.
func checkHeavy(t *testing.T, heavy *keyLoad, tight bool) {
	t.Helper()
	span := heavy.last.Sub(heavy.first)
	limit := bucketLimit(keySize, keyRate, span)
	admitted := float64(heavy.served.Load())
	t.Logf("heavy key: sent %d over %v, admitted %.0f (%.2f/s), its limit %.1f (%d + %d/s × %.2fs): %+.1f%%; degraded %v by %q; %s",
		heavy.sent.Load(), span.Round(time.Millisecond), admitted, admitted/span.Seconds(), limit, keySize, keyRate, span.Seconds(),
		100*(admitted/limit-1), loads(heavy.degraded[:]), keyStrategies, heavy.failure())
	if admitted > 1.05*limit {
		t.Errorf("heavy key: admitted %.0f, want at most its limit %.1f + 5%%", admitted, limit)
	}
	if tight && admitted < 0.95*limit {
		t.Errorf("heavy key: admitted %.0f, want at least its limit %.1f - 5%%", admitted, limit)
	}
	if heavy.degraded[1].Load() == 0 {
		t.Errorf("heavy key: no key_token_bucket answer, want its bucket to bind")
	}
	if heavy.failed.Load() > 0 {
		t.Errorf("heavy key: %s, want none", heavy.failure())
	}
}

// checkWell checks the well-behaved keys' load: at least servedAtLeast
// of the requests due served (one the client did not send counts as not
// served), none failed.
func checkWell(t *testing.T, well *keyLoad, due int, servedAtLeast float64) {
	t.Helper()
	served := well.served.Load()
	t.Logf("well-behaved keys: %d due, %d sent, %d served (%.2f%%), %d dropped by the client, degraded %v; %s",
		due, well.sent.Load(), served, 100*float64(served)/float64(due), well.dropped.Load(), loads(well.degraded[:]), well.failure())
	if float64(served) < servedAtLeast*float64(due) {
		t.Errorf("well-behaved keys: %d of %d served, want at least %.0f%%", served, due, 100*servedAtLeast)
	}
	if well.failed.Load() > 0 {
		t.Errorf("well-behaved keys: %s, want none", well.failure())
	}
}

func loads(ns []atomic.Int64) []int64 {
	out := make([]int64, len(ns))
	for i := range ns {
		out[i] = ns[i].Load()
	}
	return out
}

// TestPerKeyHeavyKeyAtItsLimit: on the example, one key asking
// 300 requests a second beside 20 keys asking 2 a second each, for 12s:
// every well-behaved request is served, the heavy key is admitted at its
// token bucket's limit (20 at start and 10 a second; its 300 visits a
// window are looser) within ±5%, every other request of it answered 429
// key_token_bucket (or key_concurrent); the point's own visits count the
// admitted requests only, and the label in Sds-Degraded is the one
// /status lists as the heaviest key.
func TestPerKeyHeavyKeyAtItsLimit(t *testing.T) {
	const (
		span      = 12 * time.Second
		heavyRate = 300
	)
	e := setup(t, "10s", 10, perKeyBody(5000, 10000))
	e.client = loadClient(t)
	heavyKey := rawKey("sds-e2e-heavy")
	well := make([]string, wellKeys)
	for i := range well {
		well[i] = rawKey(fmt.Sprintf("sds-e2e-well%02d", i))
	}
	heavy, good := newKeyLoad("api.search"), newKeyLoad("api.search")
	var wg sync.WaitGroup
	begin := time.Now()
	e.paceKeys(&wg, heavy, heavyRate, begin, span, func(int) string { return heavyKey })
	e.paceKeys(&wg, good, wellKeys*wellRate, begin, span, func(i int) string { return well[i%wellKeys] })
	wg.Wait()
	st := e.point("api.search") // within the window of the run's end

	checkHeavy(t, heavy, true)
	checkWell(t, good, wellKeys*wellRate*int(span/time.Second), 1)

	admitted := heavy.served.Load() + good.served.Load()
	for _, s := range st.Strategies {
		if s.Strategy == "visit" && (s.Count > admitted || s.Count < good.served.Load()/2) {
			t.Errorf("/status: the point's visits %d, want the admitted requests of its window only (%d admitted in all, %d refused by the key rule)",
				s.Count, admitted, heavy.degradedAll())
		}
	}
	if len(st.PerKey) != 1 || len(st.PerKey[0].Heaviest) == 0 {
		t.Fatalf("/status perKey: got %+v, want one rule with its heaviest keys", st.PerKey)
	}
	rule := st.PerKey[0]
	top := rule.Heaviest[0]
	if label := heavy.label.Load(); label == nil || top.Label != *label {
		t.Errorf("/status heaviest key: got %+v, want the heavy key's label from Sds-Degraded %v", top, deref(label))
	}
	if top.Visits > 300 || rule.Key != "header:X-Api-Key" || rule.MaxKeys != 10000 || rule.Tracked != wellKeys+1 {
		t.Errorf("/status perKey: got %+v, want key header:X-Api-Key, maxKeys 10000, %d keys tracked, the heaviest at most 300 visits", rule, wellKeys+1)
	}
	e.metricIs(float64(wellKeys+1), "sds_perkey_keys", "point", "api.search")
	e.metricIs(float64(heavy.degraded[1].Load()), "sds_degraded_total", "point", "api.search", "strategy", "key_token_bucket")
	e.metricIs(0, "sds_degraded_total", "point", "api.search", "strategy", "visit")
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// TestPerKeyChurn is the churn scenario scaled to fit CI under -race:
// 800 new keys a second for 25s (20,000 keys, each seen once) on a rule
// tracking maxKeys 500 keys exactly, and from the 2nd second a heavy key
// at 300 requests a second and 20 keys at 2 a second. A key holds state
// for the window (10s), so the table is full within a second of keys it
// may not drop: the heavy and well-behaved keys start in the sketch, and
// move into the table as the first keys' visits leave the window. The
// heavy key is admitted at no more than its limit (+5%) all along and ends
// up the heaviest key tracked; the well-behaved keys are at least 99%
// served; the table never tracks more than maxKeys. The point's own
// visitThreshold is set out of the way: the churn alone is more than the
// example's 5000 a window.
func TestPerKeyChurn(t *testing.T) {
	const (
		span      = 25 * time.Second
		late      = 2 * time.Second // when the heavy and well-behaved keys start
		heavyRate = 300
		churnRate = 800
		maxKeys   = 500
	)
	e := setup(t, "10s", 10, perKeyBody(1_000_000, maxKeys))
	e.client = loadClient(t)
	heavyKey := rawKey("sds-e2e-heavy")
	well := make([]string, wellKeys)
	for i := range well {
		well[i] = rawKey(fmt.Sprintf("sds-e2e-well%02d", i))
	}
	churnPrefix := rawKey("sds-e2e-churn")
	heavy, good, churn := newKeyLoad("api.search"), newKeyLoad("api.search"), newKeyLoad("api.search")
	var wg sync.WaitGroup
	begin := time.Now()
	e.paceKeys(&wg, churn, churnRate, begin, span, func(i int) string { return fmt.Sprintf("%s-%06d", churnPrefix, i) })
	e.paceKeys(&wg, heavy, heavyRate, begin.Add(late), span-late, func(int) string { return heavyKey })
	e.paceKeys(&wg, good, wellKeys*wellRate, begin.Add(late), span-late, func(i int) string { return well[i%wellKeys] })

	// Once a second, the keys the table tracks exactly. /status is read
	// only at the end while TestPerKeyTableTurnsOverWhileStatusRead fails:
	// reading it during the load keeps every key in the table, and the
	// heavy key in the sketch.
	var tracked []int
	var scrapeErr error
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	sample := time.NewTicker(time.Second)
	defer sample.Stop()
	for n := int((span + wait) / time.Second); n > 0; n-- {
		select {
		case <-done:
			n = 0
			continue
		case <-sample.C:
		}
		ms, err := scrape(e.proxy.admin)
		if err != nil {
			scrapeErr = err
			continue
		}
		v, _ := ms.value("sds_perkey_keys", "point", "api.search")
		tracked = append(tracked, int(v))
	}
	<-done
	rule := e.point("api.search").PerKey

	checkHeavy(t, heavy, false)
	checkWell(t, good, wellKeys*wellRate*int((span-late)/time.Second), 0.99)
	churnDue := churnRate * int(span/time.Second)
	t.Logf("churn: %d keys due, %d sent, %d served (%.2f%%), %d dropped by the client, degraded %v; %s",
		churnDue, churn.sent.Load(), churn.served.Load(), 100*float64(churn.served.Load())/float64(churn.sent.Load()),
		churn.dropped.Load(), loads(churn.degraded[:]), churn.failure())
	if sent := churn.sent.Load(); float64(sent) < 0.9*float64(churnDue) {
		t.Errorf("churn: %d keys sent of %d due, want at least 90%%: the client did not keep its pace", sent, churnDue)
	}
	if churn.failed.Load() > 0 {
		t.Errorf("churn: %s, want none", churn.failure())
	}
	if scrapeErr != nil {
		t.Errorf("scraping /metrics during the churn: %v", scrapeErr)
	}
	t.Logf("keys tracked exactly (sds_perkey_keys), once a second: %v", tracked)
	if len(tracked) == 0 || slices.Max(tracked) != maxKeys {
		t.Errorf("sds_perkey_keys during the churn: got %v, want the table full at maxKeys %d, never more", tracked, maxKeys)
	}
	if len(rule) != 1 || rule[0].Tracked > maxKeys || rule[0].MaxKeys != maxKeys {
		t.Fatalf("/status perKey after the churn: got %+v, want at most %d keys tracked of maxKeys %d", rule, maxKeys, maxKeys)
	}
	if h, label := rule[0].Heaviest, heavy.label.Load(); len(h) == 0 || label == nil || h[0].Label != *label {
		t.Errorf("/status heaviest keys after the churn: got %+v, want the heavy key first, tracked exactly by now, with its label from Sds-Degraded %s", h, deref(label))
	}
}

// TestPerKeyTableTurnsOverWhileStatusRead: a key whose visits have left
// the window gives its place in a full table to a new key, though /status
// is read all the while (a dashboard open, a poller). With maxKeys 1, key A
// takes the one place; /status is read every 100ms for the window and a
// second more; key B then takes A's place, and /status lists it.
func TestPerKeyTableTurnsOverWhileStatusRead(t *testing.T) {
	t.Parallel()
	e := setup(t, "2s", 2, pointRoute+"    perKey:\n      - key: header:X-Api-Key\n        visitThreshold: 1\n        maxKeys: 1\n")
	keyA, keyB := rawKey("sds-e2e-a"), rawKey("sds-e2e-b")
	if r := e.getKey("", keyA); r.status != http.StatusOK || r.degraded() != "" {
		t.Fatalf("key A: got %v, want 200", r)
	}
	const every, span = 100 * time.Millisecond, 3 * time.Second
	poll := time.NewTicker(every)
	defer poll.Stop()
	end := time.Now().Add(span)
	for range span / every {
		if now := <-poll.C; !now.Before(end) {
			break
		}
		e.status()
	}
	if r := e.getKey("", keyB); r.status != http.StatusOK || r.degraded() != "" {
		t.Fatalf("key B: got %v, want 200", r)
	}
	label := refused(t, e, "key B past its 1 visit", keyB)
	if h := e.point("p").PerKey[0].Heaviest; len(h) != 1 || h[0].Label != label || h[0].Visits != 1 {
		t.Errorf("/status heaviest: got %+v, want key B (%s) with 1 visit, tracked exactly in the place key A left", h, label)
	}
}

// TestPerKeyShadow: on a shadow point a key over its limit is served,
// and its answers say what would have happened: Sds-Shadow-Degraded
// key_visit with the key's label, counted as shadow-degraded, never
// degraded.
func TestPerKeyShadow(t *testing.T) {
	t.Parallel()
	e := setup(t, "60s", 6, pointRoute+`    mode: shadow
    perKey:
      - key: header:X-Api-Key
        visitThreshold: 5
`)
	key := rawKey("sds-e2e-shadow")
	var label string
	for i := range 12 {
		r := e.getKey("", key)
		shadow := r.header.Get("Sds-Shadow-Degraded")
		if r.status != http.StatusOK || r.degraded() != "" || !strings.HasPrefix(r.body, "upstream") {
			t.Errorf("request %d: got %v, want 200 from the upstream", i+1, r)
		}
		if i < 5 {
			if shadow != "" {
				t.Errorf("request %d of 5 allowed: got Sds-Shadow-Degraded %q, want none", i+1, shadow)
			}
			continue
		}
		m := keyDegraded.FindStringSubmatch(shadow)
		if m == nil || m[1] != "key_visit" || m[2] != "p" || (label != "" && m[3] != label) {
			t.Errorf("request %d: got Sds-Shadow-Degraded %q, want key_visit; point=p; key=LABEL, one label", i+1, shadow)
			continue
		}
		label = m[3]
	}
	e.metricIs(7, "sds_shadow_degraded_total", "point", "p", "strategy", "key_visit")
	e.metricIs(0, "sds_degraded_total", "point", "p", "strategy", "key_visit")
	if h := e.point("p").PerKey[0].Heaviest; len(h) != 1 || h[0].Label != label || h[0].Visits != 5 {
		t.Errorf("/status heaviest: got %+v, want the key's label %s with 5 visits (would-be degraded ones not counted)", h, label)
	}
}

// getKey sends GET /k to the proxy with Host host ("" for the proxy's
// address) and X-Api-Key key ("" for none).
func (e *env) getKey(host, key string) reply {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.proxy.url+"/k", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	r, err := e.do(req)
	if err != nil {
		e.t.Fatalf("GET /k (key %q): %v", key, err)
	}
	return r
}

// TestPerKeyMissing: a request without the key under missing: degrade is
// degraded as key_visit; under missing: shared, all such requests are one
// key, with its own budget beside the others'. A request a key rule
// degrades spends none of the point's own visits: the point's
// visitThreshold of 8 admits its 8th admitted request however many the
// rule refused, and degrades the 9th.
func TestPerKeyMissing(t *testing.T) {
	t.Parallel()
	e := setup(t, "60s", 6, `routes:
  - point: d
    match: {host: degrade.test}
  - point: s
    match: {}
points:
  d:
    perKey:
      - key: header:X-Api-Key
        visitThreshold: 100
        missing: degrade
  s:
    visitThreshold: 8
    perKey:
      - key: header:X-Api-Key
        visitThreshold: 3
        missing: shared
`)
	served := func(r reply) bool { return r.status == http.StatusOK && r.degraded() == "" }
	keyA, keyB, keyC := rawKey("sds-e2e-a"), rawKey("sds-e2e-b"), rawKey("sds-e2e-c")

	// missing: degrade.
	if r := e.getKey("degrade.test", ""); r.status != http.StatusTooManyRequests || r.degraded() != "key_visit; point=d; key=missing" || r.header.Get("Retry-After") == "" {
		t.Errorf("point d, no key: got %v (Retry-After %q), want 429 key_visit; point=d; key=missing with a Retry-After", r, r.header.Get("Retry-After"))
	}
	if r := e.getKey("degrade.test", keyA); !served(r) {
		t.Errorf("point d, a key: got %v, want 200", r)
	}

	// missing: shared.
	for i := range 3 {
		if r := e.getKey("", ""); !served(r) {
			t.Errorf("point s, no key, request %d of 3: got %v, want 200", i+1, r)
		}
	}
	var shared string
	for i := range 10 {
		r := e.getKey("", "")
		m := keyDegraded.FindStringSubmatch(r.degraded())
		if r.status != http.StatusTooManyRequests || m == nil || m[1] != "key_visit" || m[2] != "s" || (shared != "" && m[3] != shared) {
			t.Fatalf("point s, no key, request %d past 3: got %v, want 429 key_visit; point=s; key=LABEL, one label", i+1, r)
		}
		shared = m[3]
	}
	for i := range 3 {
		if r := e.getKey("", keyA); !served(r) {
			t.Errorf("point s, key A, request %d of 3: got %v, want 200 (its own budget)", i+1, r)
		}
	}
	if r := e.getKey("", keyA); !strings.HasPrefix(r.degraded(), "key_visit; point=s; key=") || strings.HasSuffix(r.degraded(), shared) {
		t.Errorf("point s, key A past 3: got %v, want key_visit with a label other than the shared key's %s", r, shared)
	}
	labels := func() (out []string) {
		for _, k := range e.point("s").PerKey[0].Heaviest {
			out = append(out, fmt.Sprintf("%s:%d", k.Label, k.Visits))
		}
		return out
	}
	if got := labels(); !slices.Contains(got, shared+":3") {
		t.Errorf("/status heaviest of point s: got %v, want the shared key %s with 3 visits", got, shared)
	}

	// 6 admitted so far, 11 refused by the key rule: the point's 7th and
	// 8th pass, its 9th trips its own visitThreshold.
	for i := range 2 {
		if r := e.getKey("", keyB); !served(r) {
			t.Errorf("point s, key B, request %d (the point's admitted %d of 8): got %v, want 200", i+1, 7+i, r)
		}
	}
	if r := e.getKey("", keyC); r.degraded() != "visit; point=s" {
		t.Errorf("point s, the point's 9th admitted request: got %v, want Sds-Degraded visit; point=s", r)
	}
	e.metricIs(11, "sds_degraded_total", "point", "s", "strategy", "key_visit")
	e.metricIs(1, "sds_degraded_total", "point", "d", "strategy", "key_visit")
}

// TestPerKeyNoRawKey: keys read from a header, a query parameter, a
// cookie and X-Forwarded-For, each past its limit, appear in no output of
// the proxy: its log (access log on), /status, /metrics, /config, nor its
// degraded answers. Their labels do: in Sds-Degraded, the access log's
// key field and /status's heaviest keys, the same label in all three.
func TestPerKeyNoRawKey(t *testing.T) {
	t.Parallel()
	e := setup(t, "60s", 6, `accessLog: true
routes:
  - point: p
    match: {}
points:
  p:
    perKey:
      - key: header:X-Api-Key
        visitThreshold: 2
      - key: query:apikey
        visitThreshold: 2
      - key: cookie:session
        visitThreshold: 2
      - key: forwardedFor:1
        visitThreshold: 2
`)
	// The address is from TEST-NET-2: no other output holds it.
	keys := []string{rawKey("sds-e2e-header"), rawKey("sds-e2e-query"), rawKey("sds-e2e-cookie"), "198.51.100.213"}
	requests := []func(*http.Request){
		func(r *http.Request) { r.Header.Set("X-Api-Key", keys[0]) },
		func(r *http.Request) { r.URL.RawQuery = url.Values{"apikey": {keys[1]}}.Encode() },
		func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "session", Value: keys[2]}) },
		func(r *http.Request) { r.Header.Set("X-Forwarded-For", "192.0.2.1, "+keys[3]) },
	}
	var answers strings.Builder
	labels := make([]string, len(keys))
	for i, set := range requests {
		for n := range 4 {
			req, err := http.NewRequest("GET", e.proxy.url+"/k", nil)
			if err != nil {
				t.Fatal(err)
			}
			set(req)
			r, err := e.do(req)
			if err != nil {
				t.Fatal(err)
			}
			if n < 2 {
				if r.status != http.StatusOK || r.degraded() != "" {
					t.Errorf("rule %d, request %d of 2: got %v, want 200", i, n+1, r)
				}
				continue
			}
			m := keyDegraded.FindStringSubmatch(r.degraded())
			if r.status != http.StatusTooManyRequests || m == nil || m[1] != "key_visit" {
				t.Fatalf("rule %d, request %d past 2: got %v, want 429 key_visit; point=p; key=LABEL", i, n-1, r)
			}
			labels[i] = m[3]
			fmt.Fprintf(&answers, "%v\n%v\n", r.header, r.body)
		}
	}
	st := e.status()
	var rules []string
	for i, rule := range st.Points[0].PerKey {
		if len(rule.Heaviest) != 1 || rule.Heaviest[0].Label != labels[i] || rule.Heaviest[0].Visits != 2 {
			t.Errorf("/status perKey[%d] heaviest: got %+v, want the label of its degraded answers %s with 2 visits", i, rule.Heaviest, labels[i])
		}
		rules = append(rules, rule.Key)
	}
	if want := []string{"header:X-Api-Key", "query:apikey", "cookie:session", "forwardedFor:1"}; !slices.Equal(rules, want) {
		t.Errorf("/status perKey keys: got %v, want %v", rules, want)
	}
	for _, label := range labels {
		if e.proxy.countLog(0, func(l logEntry) bool { return l["key"] == label && l["status"] == float64(429) }) != 2 {
			t.Errorf("access log: want 2 lines of status 429 with key %s", label)
		}
	}

	outputs := map[string]string{"degraded answers": answers.String()}
	for _, path := range []string{"/status", "/metrics", "/config"} {
		outputs[path] = e.getURL(e.proxy.admin + path).body
	}
	e.proxy.stop(wait) // the log is whole once the process has exited
	outputs["log (stderr)"], outputs["stdout"] = e.proxy.stderr.String(), e.proxy.stdout.String()
	for name, out := range outputs {
		for _, k := range keys {
			for _, form := range []string{k, url.QueryEscape(k)} {
				if strings.Contains(out, form) {
					t.Errorf("%s: holds the raw key %q", name, form)
				}
			}
		}
	}
}

// TestPerKeyKeptAcrossReload: a reload that changes something else (the
// point's own visitThreshold) keeps the per-key rule's table, so that a
// key over its limit stays over it; a reload that changes the rule starts
// it afresh, every key with its new budget.
func TestPerKeyKeptAcrossReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.config = e.dir + "/sds.yaml"
	body := func(pointVisits, keyVisits int) string {
		return configHeader(e.upstream, "60s", 6) + pointRoute + fmt.Sprintf("    visitThreshold: %d\n    perKey:\n      - key: header:X-Api-Key\n        visitThreshold: %d\n", pointVisits, keyVisits)
	}
	e.write(e.config, body(1000, 5))
	e.proxy = startProxy(t, e.config)
	key := rawKey("sds-e2e-reload")
	// admits sends n requests of key, all to be served, then one more to be
	// degraded, and returns the label it carries.
	admits := func(when string, n int) string {
		t.Helper()
		for i := range n {
			if r := e.getKey("", key); r.status != http.StatusOK || r.degraded() != "" {
				t.Fatalf("%s: request %d of %d: got %v, want 200", when, i+1, n, r)
			}
		}
		return refused(t, e, when, key)
	}
	label := admits("before the reloads", 5)

	mark := e.proxy.stderr.mark()
	e.write(e.config, body(2000, 5))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	st := e.point("p")
	if i := slices.IndexFunc(st.Strategies, func(s admin.StrategyReading) bool { return s.Strategy == "visit" }); i < 0 || st.Strategies[i].Threshold != 2000 {
		t.Fatalf("/status after the reload: strategies %+v, want visit threshold 2000", st.Strategies)
	}
	if got := refused(t, e, "after a reload of another setting", key); got != label {
		t.Errorf("after a reload of another setting: label %s, want %s", got, label)
	}
	if h := st.PerKey[0].Heaviest; len(h) != 1 || h[0].Label != label || h[0].Visits != 5 {
		t.Errorf("/status heaviest after a reload of another setting: got %+v, want %s with its 5 visits kept", h, label)
	}

	mark = e.proxy.stderr.mark()
	e.write(e.config, body(2000, 7))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	if h := e.point("p").PerKey[0].Heaviest; len(h) != 0 {
		t.Errorf("/status heaviest after the rule changed: got %+v, want none (a new table)", h)
	}
	if got := admits("after the rule changed", 7); got != label {
		t.Errorf("after the rule changed: label %s, want %s (the same key, the same process)", got, label)
	}
}

// refused sends one request of key, which its rule must degrade as
// key_visit on point p, and returns the label of its answer.
func refused(t *testing.T, e *env, when, key string) string {
	t.Helper()
	r := e.getKey("", key)
	m := keyDegraded.FindStringSubmatch(r.degraded())
	if r.status != http.StatusTooManyRequests || m == nil || m[1] != "key_visit" || m[2] != "p" {
		t.Fatalf("%s: got %v, want 429 key_visit; point=p; key=LABEL", when, r)
	}
	return m[3]
}
