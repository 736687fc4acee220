package metrics

import (
	"bytes"
	"context"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sds-proxy/sds-proxy/internal/tooltest"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
)

// waitingRoom is a point's queue with its limit in flight: a try takes a
// free slot or waits again; free frees one and gives the queue a turn,
// as a call's end does. Each wait is observed on the point's series, as
// the proxy's Handler does.
type waitingRoom struct {
	q    *queue.Queue
	pm   *Point
	mu   sync.Mutex
	free int
	wg   sync.WaitGroup
}

func (w *waitingRoom) try(time.Time) (bool, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.free == 0 {
		return false, 0
	}
	w.free--
	return true, 0
}

// wait starts a request's wait on its own goroutine and lets it settle.
func (w *waitingRoom) wait(ctx context.Context) {
	w.wg.Go(func() {
		res := w.q.Wait(ctx, limiter.PriorityDefault, w.try)
		w.pm.ObserveWait(res.Outcome, res.Waited)
	})
	synctest.Wait()
}

func (w *waitingRoom) release() {
	w.mu.Lock()
	w.free++
	w.mu.Unlock()
	w.q.Release(time.Now())
	synctest.Wait()
}

// TestQueueSeries: sds_queue_length reads the requests waiting at scrape
// time, for the points that have a queue only; sds_queue_wait_seconds
// has each wait once, under its outcome, every outcome's series there
// from the point's first wait; a point that never waited has none. The
// Handler writes them as promhttp would, and promtool finds nothing to
// say of the exposition.
func TestQueueSeries(t *testing.T) {
	var during, after []byte
	var reg *prometheus.Registry
	synctest.Test(t, func(t *testing.T) {
		queued, plain := newLimiter(t, "queued"), newLimiter(t, "plain")
		q := queue.New(limiter.Queue{On: true, MaxWait: time.Second, Target: 500 * time.Millisecond}, time.Now)
		live := []Source{{Limiter: queued, Queue: q}, {Limiter: plain}}
		reg = prometheus.NewRegistry()
		m := NewSet(reg, func() []Source { return live })
		m.ForPoint("plain").Proxied.Inc()
		room := &waitingRoom{q: q, pm: m.ForPoint("queued")}
		gone, leave := context.WithCancel(context.Background())
		for _, ctx := range []context.Context{context.Background(), context.Background(), gone} {
			room.wait(ctx)
		}
		during = scrapeText(t, m, reg)

		time.Sleep(20 * time.Millisecond)
		room.release() // the first waiter: admitted after 20ms
		time.Sleep(30 * time.Millisecond)
		leave() // the third: canceled after 50ms
		synctest.Wait()
		time.Sleep(time.Second) // the second: timed out at maxWait
		room.wg.Wait()
		after = scrapeText(t, m, reg)
	})

	checkSample(t, during, `sds_queue_length{point="queued"}`, 3)
	if bytes.Contains(during, []byte("sds_queue_wait_seconds")) || bytes.Contains(during, []byte(`sds_queue_length{point="plain"}`)) {
		t.Errorf("while 3 wait, before any wait ended: got\n%s\nwant sds_queue_length of the queued point only", during)
	}
	checkSample(t, after, `sds_queue_length{point="queued"}`, 0)
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{`sds_queue_wait_seconds_count{outcome="admitted",point="queued"}`, 1},
		{`sds_queue_wait_seconds_sum{outcome="admitted",point="queued"}`, 0.02},
		{`sds_queue_wait_seconds_bucket{outcome="admitted",point="queued",le="0.01"}`, 0},
		{`sds_queue_wait_seconds_bucket{outcome="admitted",point="queued",le="0.025"}`, 1},
		{`sds_queue_wait_seconds_count{outcome="canceled",point="queued"}`, 1},
		{`sds_queue_wait_seconds_sum{outcome="canceled",point="queued"}`, 0.05},
		{`sds_queue_wait_seconds_count{outcome="timeout",point="queued"}`, 1},
		{`sds_queue_wait_seconds_sum{outcome="timeout",point="queued"}`, 1},
		{`sds_queue_wait_seconds_bucket{outcome="timeout",point="queued",le="0.5"}`, 0},
		{`sds_queue_wait_seconds_bucket{outcome="timeout",point="queued",le="1"}`, 1},
		{`sds_queue_wait_seconds_bucket{outcome="timeout",point="queued",le="60"}`, 1},
		{`sds_queue_wait_seconds_count{outcome="shed",point="queued"}`, 0},
		{`sds_queue_wait_seconds_count{outcome="full",point="queued"}`, 0},
	} {
		checkSample(t, after, tc.series, tc.want)
	}
	if bytes.Contains(after, []byte(`sds_queue_wait_seconds_count{outcome="admitted",point="plain"}`)) {
		t.Error("a point without a queue has wait series")
	}
	want := promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true})
	if _, _, body := scrapeBody(t, want, "text/plain;version=0.0.4", ""); !bytes.Equal(body, after) {
		t.Errorf("Handler's text differs from promhttp's: got\n%s\nwant\n%s", after, body)
	}
	promtoolCheck(t, after)
}

// TestObserveWaitAllocs: once a point has waited, recording a wait
// allocates nothing.
func TestObserveWaitAllocs(t *testing.T) {
	pm := NewSet(prometheus.NewRegistry(), func() []Source { return nil }).ForPoint("p")
	pm.ObserveWait(queue.Admitted, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { pm.ObserveWait(queue.Shed, 3*time.Millisecond) }); n != 0 {
		t.Errorf("ObserveWait: got %v allocs, want 0", n)
	}
	pm.ObserveWait(0, time.Second) // no outcome: ignored
}

func newLimiter(t *testing.T, name string) *limiter.Point {
	t.Helper()
	lim, err := limiter.NewPoint(name, limiter.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// scrapeText scrapes m's Handler in the text format.
func scrapeText(t *testing.T, m *Set, reg prometheus.Gatherer) []byte {
	t.Helper()
	code, _, body := scrapeBody(t, m.Handler(reg), "text/plain;version=0.0.4", "")
	if code != 200 {
		t.Fatalf("scrape: status %d", code)
	}
	return body
}

// checkSample requires the text exposition body to hold series (name and
// labels, as written) with value want.
func checkSample(t *testing.T, body []byte, series string, want float64) {
	t.Helper()
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), series+" "); ok {
			if got, err := strconv.ParseFloat(v, 64); err != nil || math.Abs(got-want) > 1e-9 {
				t.Errorf("%s: got %s, want %v", series, v, want)
			}
			return
		}
	}
	t.Errorf("no series %s in\n%s", series, body)
}

// promtoolCheck runs promtool check metrics on an exposition: it must
// find no problem.
func promtoolCheck(t *testing.T, body []byte) {
	t.Helper()
	path := tooltest.LookPath(t, "promtool", "apt-get install prometheus (.ci/run does)")
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
