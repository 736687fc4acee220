package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy"
	"github.com/sds-proxy/sds-proxy/proxy/admin"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
	"github.com/sds-proxy/sds-proxy/route"
)

// heldUpstream is a fake service whose calls to a path ending in /held
// are answered once release is closed; the others at once.
type heldUpstream struct{ release chan struct{} }

func (u heldUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/held") {
		<-u.release
	}
	return adminUpstream{}.RoundTrip(r)
}

// queueFixture is a Handler with a point "queued" (one call in flight,
// then requests wait up to 2s) and a point "plain" without a queue, on
// up, with its metrics and an admin port over them, wired as run wires
// them; on the bubble's clock when made in one.
func queueFixture(t *testing.T, up http.RoundTripper) (*proxy.Handler, http.Handler) {
	t.Helper()
	upstream, _ := url.Parse("http://upstream.invalid")
	cfg := &proxy.Config{Upstream: upstream}
	for _, name := range []string{"queued", "plain"} {
		s := limiter.Settings{Policy: limiter.Policy{ConcurrentThreshold: limiter.At(1)}}
		if name == "queued" {
			s.Queue = limiter.Queue{On: true, MaxWait: 2 * time.Second}
		}
		lim, err := limiter.NewPoint(name, s)
		if err != nil {
			t.Fatal(err)
		}
		p := proxy.NewPoint(lim, proxy.PointOptions{})
		cfg.Points = append(cfg.Points, p)
		cfg.Routes = append(cfg.Routes, proxy.Route{Point: p, Rule: route.Rule{PathPrefix: "/" + name}})
	}
	reg := prometheus.NewRegistry()
	var h *proxy.Handler
	m := metrics.NewSet(reg, func() []metrics.Source { return h.Sources() })
	h = proxy.New(cfg, proxy.Options{Logger: zap.NewNop(), Metrics: m, Transport: up})
	return h, admin.New(admin.Options{Points: h, Gatherer: reg, Metrics: m, Sources: h.Sources})
}

// queueDoc is what the queue tests read of /status.
type queueDoc struct {
	Points []struct {
		Name  string
		Queue *admin.Queue
	}
}

// getQueues reads each point's queue from the admin port's /status.
func getQueues(t *testing.T, adm http.Handler) map[string]*admin.Queue {
	t.Helper()
	rec := httptest.NewRecorder()
	adm.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	var doc queueDoc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("/status: %v\n%s", err, rec.Body)
	}
	out := map[string]*admin.Queue{}
	for _, p := range doc.Points {
		out[p.Name] = p.Queue
	}
	return out
}

// getMetric reads one sample, written as name{labels}, from the admin
// port's /metrics in the text format; ok is false when it is absent.
func getMetric(t *testing.T, adm http.Handler, series string) (float64, bool) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	adm.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f, true
		}
	}
	return 0, false
}

// TestStatusQueue: with one call in flight and two requests waiting,
// /status shows the queued point's queue (2 waiting, not standing, the
// least target while no call has ended, the settings with their
// defaults) and no queue on the point without one, and sds_queue_length
// says 2; once the call ends after 40ms, both are admitted in turn, each
// observed under admitted after its 40ms, and the target follows the
// upstream's time.
func TestStatusQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := heldUpstream{release: make(chan struct{})}
		h, adm := queueFixture(t, up)
		var wg sync.WaitGroup
		codes := make([]int, 3)
		for i, path := range []string{"/queued/held", "/queued/a", "/queued/b"} {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://svc.example"+path, nil))
				codes[i] = rec.Code
			})
			synctest.Wait()
		}

		qs := getQueues(t, adm)
		want := admin.Queue{Length: 2, Standing: false, Target: limiter.MinQueueTarget.String(), MaxWait: "2s", Interval: "4s", MaxLength: limiter.DefaultQueueMaxLength}
		if q := qs["queued"]; q == nil || *q != want {
			t.Errorf("queued point's queue: got %+v, want %+v", q, want)
		}
		if q, ok := qs["plain"]; !ok || q != nil {
			t.Errorf("plain point (present %v): got queue %+v, want none", ok, q)
		}
		if n, _ := getMetric(t, adm, `sds_queue_length{point="queued"}`); n != 2 {
			t.Errorf("sds_queue_length: got %v, want 2", n)
		}
		if _, ok := getMetric(t, adm, `sds_queue_length{point="plain"}`); ok {
			t.Error("sds_queue_length of the point without a queue: present, want absent")
		}

		time.Sleep(40 * time.Millisecond) // fake time: the requests have waited 40ms
		close(up.release)
		wg.Wait()
		for i, code := range codes {
			if code != http.StatusOK {
				t.Errorf("request %d: got %d, want 200", i, code)
			}
		}
		q := getQueues(t, adm)["queued"]
		target, err := time.ParseDuration(q.Target)
		if q.Length != 0 || err != nil || target <= limiter.MinQueueTarget || target > 40*time.Millisecond {
			t.Errorf("after the calls: got %+v, want 0 waiting and a target above 5ms, at most the 40ms call", q)
		}
		for series, want := range map[string]float64{
			`sds_queue_wait_seconds_count{outcome="admitted",point="queued"}`:             2,
			`sds_queue_wait_seconds_sum{outcome="admitted",point="queued"}`:               0.08,
			`sds_queue_wait_seconds_bucket{outcome="admitted",point="queued",le="0.05"}`:  2,
			`sds_queue_wait_seconds_bucket{outcome="admitted",point="queued",le="0.025"}`: 0,
			`sds_queue_wait_seconds_count{outcome="timeout",point="queued"}`:              0,
			`sds_queue_length{point="queued"}`:                                            0,
		} {
			if got, ok := getMetric(t, adm, series); !ok || got != want {
				t.Errorf("%s: got %v (present %v), want %v", series, got, ok, want)
			}
		}
	})
}

// TestDashboardQueue: a queued point's card says how many requests wait,
// and that the queue stands; the card of a point without a queue says
// nothing of one.
func TestDashboardQueue(t *testing.T) {
	needChromium(t)
	lim, err := limiter.NewPoint("queued", limiter.Settings{Policy: limiter.Policy{Queue: limiter.Queue{On: true, MaxWait: time.Minute, Target: time.Millisecond, Interval: time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := limiter.NewPoint("plain", limiter.Settings{})
	q := queue.New(lim.Settings().Queue, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 2 { // critical: a standing queue never sheds them
		wg.Go(func() {
			q.Wait(ctx, limiter.PriorityCritical, func(time.Time) (bool, time.Duration) { return false, 0 })
		})
	}
	// Each turn judges the queue: it stands once its oldest has waited
	// past the 1ms target for the 1ms interval.
	if !eventually(10*time.Second, func() bool { q.Release(time.Now()); return q.Len() == 2 && q.Status().Standing }) {
		t.Fatalf("the queue did not stand: %+v", q.Status())
	}
	srv := httptest.NewServer(admin.New(admin.Options{Points: snapshots{lim, plain}, Gatherer: prometheus.NewRegistry(),
		Sources: func() []metrics.Source { return []metrics.Source{{Limiter: lim, Queue: q}, {Limiter: plain}} }}))
	defer srv.Close()
	dom := dumpDOM(t, srv.URL+"/")
	if card := cardHTML(t, dom, "queued"); !strings.Contains(card, "queue&nbsp;2&nbsp;waiting&nbsp;(standing)") {
		t.Errorf("the queued point's card does not say 2 wait in a standing queue:\n%s", card)
	}
	if card := cardHTML(t, dom, "plain"); strings.Contains(card, "queue") {
		t.Errorf("the plain point's card speaks of a queue:\n%s", card)
	}
}

// eventually polls cond every 5ms until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
