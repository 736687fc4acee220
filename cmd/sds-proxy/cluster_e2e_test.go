package main_test

// End-to-end tests of the shared token bucket (docs/fleet.md, "Fleet-wide
// budgets"): real redis-server processes (proxy/cluster/clustertest) and
// several real sds-proxy binaries on 127.0.0.1.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/cluster/clustertest"
)

// fleet is n proxies with one config in front of one upstream.
type fleet struct {
	t       *testing.T
	path    string // the proxies' config file
	proxies []*proxyProcess
	clients []*http.Client
}

// startFleet starts an upstream and n proxies whose config is the test
// header, the cluster section (cluster:'s lines, "" for none) and point p
// with the given settings, on a catch-all route.
func startFleet(t *testing.T, n int, cluster, point string) *fleet {
	t.Helper()
	e := newEnv(t)
	src := configHeader(e.upstream, "10s", 10)
	if cluster != "" {
		src += "cluster:\n"
		for line := range strings.SplitSeq(strings.TrimSuffix(cluster, "\n"), "\n") {
			src += "  " + line + "\n"
		}
	}
	src += pointRoute
	for line := range strings.SplitSeq(strings.TrimSuffix(point, "\n"), "\n") {
		src += "    " + line + "\n"
	}
	path := filepath.Join(e.dir, "sds.yaml")
	e.write(path, src)
	f := &fleet{t: t, path: path}
	for range n {
		f.add()
	}
	return f
}

// add starts one more proxy of the fleet's config, and its client.
func (f *fleet) add() {
	f.proxies = append(f.proxies, startProxy(f.t, f.path))
	f.clients = append(f.clients, newClient(f.t))
}

// tally counts a load run's answers.
type tally struct {
	admitted, degraded, failed atomic.Int64
	firstFailure               atomic.Pointer[string]
}

func (ta *tally) fail(what string) {
	if ta.failed.Add(1) == 1 {
		ta.firstFailure.Store(&what)
	}
}

// load sends GETs to the proxies from workers[i] goroutines each (uneven
// load: a count per proxy), until stop is closed or d passes, at most
// 200,000 requests per goroutine. An upstream answer counts as admitted,
// a 429 with wantDegraded as Sds-Degraded as degraded, anything else as a
// failure.
func (f *fleet) load(workers []int, d time.Duration, wantDegraded string, stop <-chan struct{}) *tally {
	return f.loadInto(&tally{}, workers, d, wantDegraded, stop)
}

// loadInto is load counting into ta, which may be read while it runs.
func (f *fleet) loadInto(ta *tally, workers []int, d time.Duration, wantDegraded string, stop <-chan struct{}) *tally {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, w := range workers {
		client, url := f.clients[i], f.proxies[i].url
		for range w {
			wg.Go(func() {
				for range 200_000 {
					select {
					case <-stop:
						return
					default:
					}
					if time.Now().After(deadline) {
						return
					}
					switch admitted, failure := getWork(client, url, wantDegraded); {
					case failure != "":
						ta.fail(failure)
					case admitted:
						ta.admitted.Add(1)
					default:
						ta.degraded.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	return ta
}

// getWork sends one GET /work to the proxy at url: an upstream answer is
// admitted, a 429 with wantDegraded as Sds-Degraded is not, and anything
// else is a failure, described.
func getWork(client *http.Client, url, wantDegraded string) (admitted bool, failure string) {
	return getURL(client, url+"/work", wantDegraded)
}

// getURL is getWork of a whole URL.
func getURL(client *http.Client, url, wantDegraded string) (admitted bool, failure string) {
	resp, err := client.Get(url)
	if err != nil {
		return false, err.Error()
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "upstream"):
		return true, ""
	case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Sds-Degraded") == wantDegraded:
		return false, ""
	}
	return false, fmt.Sprintf("%d Sds-Degraded %q %q", resp.StatusCode, resp.Header.Get("Sds-Degraded"), body)
}

// clusterStatus is the part of /status the tests read.
type clusterStatus struct {
	Cluster *struct {
		Up        bool   `json:"up"`
		LastError string `json:"lastError"`
	} `json:"cluster"`
	Points []struct {
		Name    string `json:"name"`
		Cluster *struct {
			Shared        bool    `json:"shared"`
			Level         int64   `json:"level"`
			Share         float64 `json:"share"`
			ReplicasHeard int64   `json:"replicasHeard"`
		} `json:"cluster"`
	} `json:"points"`
}

// status reads a proxy's /status.
func (p *proxyProcess) clusterStatus(t *testing.T) clusterStatus {
	t.Helper()
	resp, err := http.Get(p.admin + "/status")
	if err != nil {
		t.Fatalf("/status: %v", err)
	}
	defer resp.Body.Close()
	var st clusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/status: %v", err)
	}
	return st
}

// shared reports whether point p of the proxy spends the shared bucket.
func (p *proxyProcess) shared(t *testing.T) bool {
	st := p.clusterStatus(t)
	return st.Cluster != nil && st.Cluster.Up && len(st.Points) > 0 && st.Points[0].Cluster != nil && st.Points[0].Cluster.Shared
}

// waitShared waits until every proxy of the fleet spends the shared bucket.
func (f *fleet) waitShared(timeout time.Duration) {
	f.t.Helper()
	for i, p := range f.proxies {
		if !eventually(timeout, func() bool { return p.shared(f.t) }) {
			f.t.Fatalf("proxy %d: the shared bucket is not in use within %v: %+v", i, timeout, p.clusterStatus(f.t))
		}
	}
}

// calls sums sds_cluster_calls_total over the fleet's proxies.
func (f *fleet) calls() []float64 {
	f.t.Helper()
	out := make([]float64, len(f.proxies))
	for i, p := range f.proxies {
		ms, err := scrape(p.admin)
		if err != nil {
			f.t.Fatal(err)
		}
		ok, _ := ms.value("sds_cluster_calls_total", "result", "ok")
		bad, _ := ms.value("sds_cluster_calls_total", "result", "error")
		out[i] = ok + bad
	}
	return out
}

const (
	clusterPoint  = "clusterTokenBucket: {tokensPerSecond: 100, size: 100}"
	localPoint    = "tokenBucketGeneratedTokensInSecond: 100\ntokenBucketSize: 100"
	clusterLoad   = 10 * time.Second
	clusterBudget = 100*10 + 100 // tokensPerSecond × 10 s + size
)

// TestClusterBudgetE2E: two and four proxies sharing tokensPerSecond 100,
// size 100 through one Redis, with load spread unevenly over them for 10
// s, admit 100 × 10 + 100 together (±10%), where per-pod buckets of the
// same figures admit about four times that; no request fails. It logs
// the Redis calls per second per proxy and the request rate.
func TestClusterBudgetE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	for _, tc := range []struct {
		name    string
		proxies int
		workers []int
		shared  bool
	}{
		{"2 proxies shared", 2, []int{3, 1}, true},
		{"4 proxies shared", 4, []int{3, 2, 1, 1}, true},
		{"4 proxies per-pod", 4, []int{3, 2, 1, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cluster, point, want := "", localPoint, "token_bucket; point=p"
			if tc.shared {
				srv := clustertest.Start(t)
				cluster = fmt.Sprintf("addresses: [%s]\nreplicas: %d", srv.Addr, tc.proxies)
				point, want = clusterPoint, "cluster_token_bucket; point=p"
			}
			f := startFleet(t, tc.proxies, cluster, point)
			if tc.shared {
				f.waitShared(wait)
			}
			before := f.calls()
			start := time.Now()
			ta := f.load(tc.workers, clusterLoad, want, nil)
			took := time.Since(start)
			after := f.calls()
			admitted, total := ta.admitted.Load(), ta.admitted.Load()+ta.degraded.Load()
			t.Logf("%s: %d admitted of %d requests in %.1fs (%.0f req/s); budget 100 × 10 + 100 = %d",
				tc.name, admitted, total, took.Seconds(), float64(total)/took.Seconds(), clusterBudget)
			if n := ta.failed.Load(); n > 0 {
				t.Errorf("%d requests failed; the first: %s", n, *ta.firstFailure.Load())
			}
			if !tc.shared {
				// About 4×; a wide margin for a machine too loaded to give
				// every proxy 100 requests a second.
				if admitted < 5*clusterBudget/2 {
					t.Errorf("per-pod buckets admitted %d, want about 4 × %d (at least 2.5×)", admitted, clusterBudget)
				}
				return
			}
			for i := range after {
				t.Logf("proxy %d (%d load goroutines): %.1f Redis calls/s", i, tc.workers[i], (after[i]-before[i])/took.Seconds())
				if rate := (after[i] - before[i]) / took.Seconds(); rate > 50 {
					t.Errorf("proxy %d: %.1f Redis calls/s, want a small constant (at most 50)", i, rate)
				}
			}
			if lo, hi := 0.9*clusterBudget, 1.1*clusterBudget; float64(admitted) < lo || float64(admitted) > hi {
				t.Errorf("admitted %d, want within ±10%% of %d", admitted, clusterBudget)
			}
		})
	}
}

// TestClusterRedisFailureE2E: Redis killed mid-run fails no request; each
// proxy counts on its share (tokensPerSecond ÷ replicas) from its next
// call, logs it once, and shows it in sds_cluster_up and /status; Redis
// restarted, the shared bucket is back within seconds.
func TestClusterRedisFailureE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	srv := clustertest.Start(t)
	f := startFleet(t, 2, fmt.Sprintf("addresses: [%s]\nreplicas: 2\ntimeout: 50ms", srv.Addr), clusterPoint)
	f.waitShared(wait)

	// One bounded run of load through the whole test.
	stop := make(chan struct{})
	ta := make(chan *tally, 1)
	running := &tally{}
	go func() { ta <- f.loadInto(running, []int{2, 1}, 60*time.Second, "cluster_token_bucket; point=p", stop) }()
	var stopOnce sync.Once
	finish := func() *tally { stopOnce.Do(func() { close(stop) }); return <-ta }
	defer func() {
		stopOnce.Do(func() { close(stop) })
	}()
	running.waitProgress(t, 500)

	// The outage's log lines are counted from the kill to the restart: a
	// call that times out on a loaded machine while Redis runs is a real
	// failure, logged as one, and not this outage's.
	marks := []int{f.proxies[0].stderr.mark(), f.proxies[1].stderr.mark()}
	killed := time.Now()
	srv.Kill()
	for i, p := range f.proxies {
		if !eventually(wait, func() bool { st := p.clusterStatus(t); return st.Cluster != nil && !st.Cluster.Up }) {
			t.Fatalf("proxy %d still shows Redis up", i)
		}
		t.Logf("proxy %d: on its share %v after Redis was killed", i, time.Since(killed).Round(time.Millisecond))
		p.waitLog(t, marks[i], wait, msgStarts("redis does not answer"))
		ms, err := scrape(p.admin)
		if err != nil {
			t.Fatal(err)
		}
		if up, _ := ms.value("sds_cluster_up"); up != 0 {
			t.Errorf("proxy %d: sds_cluster_up = %v, want 0", i, up)
		}
	}
	// On their shares, 50 tokens a second each and 100 together, against
	// load far above it: measured over the next 5,000 answers.
	from, at := running.admitted.Load(), time.Now()
	running.waitProgress(t, 5000)
	admitted, span := running.admitted.Load()-from, time.Since(at).Seconds()
	t.Logf("on their shares: %d admitted in %.1fs (%.0f/s; the shares add up to 100/s)", admitted, span, float64(admitted)/span)
	// At most the two shares' bursts (50 each) and 100 a second; at least
	// half the shares' rate on a loaded machine.
	if most := (100 + 100*span) * 1.3; float64(admitted) > most || float64(admitted) < 50*span {
		t.Errorf("on their shares the proxies admitted %d in %.1fs, want from %.0f to %.0f (100/s plus the shares' bursts)", admitted, span, 50*span, most)
	}

	restartMarks := []int{f.proxies[0].stderr.mark(), f.proxies[1].stderr.mark()}
	restarted := time.Now()
	srv.Restart()
	f.waitShared(wait)
	t.Logf("shared again %v after Redis restarted", time.Since(restarted).Round(time.Millisecond))
	if d := time.Since(restarted); d > 10*time.Second {
		t.Errorf("shared again after %v, want within seconds", d)
	}
	running.waitProgress(t, 500)
	for i, p := range f.proxies {
		p.waitLog(t, restartMarks[i], wait, msgStarts("redis answers again"))
		checkOutageLog(t, i, p, marks[i], restartMarks[i])
	}
	total := finish()
	if n := total.failed.Load(); n > 0 {
		t.Errorf("%d requests failed; the first: %s", n, *total.firstFailure.Load())
	}
	t.Logf("whole run: %d admitted, %d degraded, %d failed", total.admitted.Load(), total.degraded.Load(), total.failed.Load())
}

// waitProgress waits until the load has had n more answers.
func (ta *tally) waitProgress(t *testing.T, n int64) {
	t.Helper()
	from := ta.admitted.Load() + ta.degraded.Load()
	if !eventually(wait, func() bool { return ta.admitted.Load()+ta.degraded.Load()-from >= n }) {
		t.Fatalf("the load made no progress: %d admitted, %d degraded, %d failed", ta.admitted.Load(), ta.degraded.Load(), ta.failed.Load())
	}
}

// checkOutageLog requires proxy i (p) to have logged a Redis outage once
// between the log marks killed and restarted, and nothing but its JSON
// log since killed.
func checkOutageLog(t *testing.T, i int, p *proxyProcess, killed, restarted int) {
	t.Helper()
	if n := p.countLog(killed, msgStarts("redis does not answer")) - p.countLog(restarted, msgStarts("redis does not answer")); n != 1 {
		var lines []string
		for line := range strings.SplitSeq(p.stderr.String(), "\n") {
			if strings.Contains(line, "redis") {
				lines = append(lines, line)
			}
		}
		t.Errorf("proxy %d: logged the outage %d times, want once:\n%s", i, n, strings.Join(lines, "\n"))
	}
	// go-redis's own logger is off (main): a line per failed dial
	// would not be the proxy's JSON.
	if n := p.stderr.count(killed, func(s string) bool { return parseLog(s) == nil }); n > 0 {
		t.Errorf("proxy %d: %d lines on stderr since Redis was killed are not the proxy's JSON log (go-redis's?), want none", i, n)
	}
}

// TestClusterSilentRedisE2E: a Redis that accepts connections and never
// answers delays no request: the proxy counts on its share, and its
// requests take no longer than with no Redis at all (it logs the
// quantiles; each request is checked against the timeout with a margin).
func TestClusterSilentRedisE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	silent := clustertest.Silent(t)
	const timeout = 50 * time.Millisecond
	f := startFleet(t, 1, fmt.Sprintf("addresses: [%s]\ntimeout: %v", silent, timeout),
		"clusterTokenBucket: {tokensPerSecond: 100000, size: 100000}")
	p := f.proxies[0]
	p.waitLog(t, 0, wait, msgStarts("redis does not answer"))
	var took []time.Duration
	for i := range 300 {
		start := time.Now()
		resp, err := f.clients[0].Get(p.url + "/work")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(start))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200 (the local share holds 100,000 tokens)", i, resp.StatusCode)
		}
	}
	slices.Sort(took)
	p50, p99, worst := took[len(took)/2], took[len(took)*99/100], took[len(took)-1]
	t.Logf("against a silent Redis (timeout %v): p50 %v, p99 %v, max %v over %d requests", timeout, p50, p99, worst, len(took))
	if p50 > timeout {
		t.Errorf("p50 %v is past the timeout %v: requests wait on Redis", p50, timeout)
	}
	st := p.clusterStatus(t)
	if st.Cluster == nil || st.Cluster.Up || !strings.Contains(st.Cluster.LastError, "deadline exceeded") && !strings.Contains(st.Cluster.LastError, "timeout") {
		t.Errorf("/status cluster: got %+v, want down with a timeout", st.Cluster)
	}
}

// TestClusterLatencyE2E measures what the shared bucket adds to a
// request: two proxies in front of one upstream, one with a shared bucket
// that never runs dry and one without, asked in turn; it logs both p50s
// and asserts nothing about time.
func TestClusterLatencyE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	srv := clustertest.Start(t)
	with := startFleet(t, 1, fmt.Sprintf("addresses: [%s]", srv.Addr), "clusterTokenBucket: {tokensPerSecond: 1000000, size: 1000000}")
	without := startFleet(t, 1, "", "visitThreshold: 100000000")
	with.waitShared(wait)
	var a, b []time.Duration
	get := func(f *fleet) time.Duration {
		start := time.Now()
		resp, err := f.clients[0].Get(f.proxies[0].url + "/work")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	for range 2000 {
		a = append(a, get(with))
		b = append(b, get(without))
	}
	pa, pb := median(a), median(b)
	t.Logf("p50 with the shared bucket %v, without %v: %+.1f%%", pa, pb, 100*(pa.Seconds()-pb.Seconds())/pb.Seconds())
	if !with.proxies[0].shared(t) {
		t.Error("the shared bucket was not in use")
	}
}

// isMaster reports whether the Redis at addr says it is a master.
func isMaster(addr string) bool {
	role, err := clustertest.Role(addr)
	return err == nil && role == "master"
}

// TestClusterCallsE2E: the Redis calls a proxy makes do not grow with its
// request rate: one proxy under as much load as the machine gives it for
// 5 s, with a shared bucket that runs dry (most requests degraded: the
// proxy's fastest path) and with one that never does (every request
// proxied). It logs the request rate and the calls per second, and checks
// that the calls stay a small constant.
func TestClusterCallsE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	for _, tc := range []struct {
		name, point string
	}{
		{"bucket dry", "clusterTokenBucket: {tokensPerSecond: 100, size: 100}"},
		{"bucket never dry", "clusterTokenBucket: {tokensPerSecond: 1000000, size: 1000000}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := clustertest.Start(t)
			f := startFleet(t, 1, fmt.Sprintf("addresses: [%s]", srv.Addr), tc.point)
			f.waitShared(wait)
			before := f.calls()
			start := time.Now()
			ta := f.load([]int{8}, 5*time.Second, "cluster_token_bucket; point=p", nil)
			took := time.Since(start).Seconds()
			calls := (f.calls()[0] - before[0]) / took
			requests := float64(ta.admitted.Load()+ta.degraded.Load()) / took
			t.Logf("%s: %.0f req/s (%d admitted, %d degraded), %.1f Redis calls/s", tc.name, requests, ta.admitted.Load(), ta.degraded.Load(), calls)
			if n := ta.failed.Load(); n > 0 {
				t.Errorf("%d requests failed; the first: %s", n, *ta.firstFailure.Load())
			}
			if calls > 50 {
				t.Errorf("%.1f Redis calls/s at %.0f req/s, want a small constant (at most 50)", calls, requests)
			}
		})
	}
}

// TestClusterRedisClusterE2E: with several addresses the proxies speak to
// a Redis Cluster (three masters set up by redis-cli from the same
// package), and two proxies sharing a bucket admit its budget together:
// about 100 + 100 × 3 over 3 s of uneven load.
func TestClusterRedisClusterE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	nodes := clustertest.StartCluster(t, 3, 0)
	addrs := []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}
	f := startFleet(t, 2, fmt.Sprintf("addresses: [%s]\nreplicas: 2", strings.Join(addrs, ", ")), clusterPoint)
	f.waitShared(wait)
	start := time.Now()
	ta := f.load([]int{2, 1}, 3*time.Second, "cluster_token_bucket; point=p", nil)
	took := time.Since(start).Seconds()
	want := 100 + 100*took
	t.Logf("Redis Cluster of 3 masters, 2 proxies: %d admitted of %d in %.1fs, budget %.0f", ta.admitted.Load(), ta.admitted.Load()+ta.degraded.Load(), took, want)
	if n := ta.failed.Load(); n > 0 {
		t.Errorf("%d requests failed; the first: %s", n, *ta.firstFailure.Load())
	}
	if got := float64(ta.admitted.Load()); got < 0.85*want || got > 1.15*want {
		t.Errorf("admitted %v, want within ±15%% of %.0f", got, want)
	}
}

// TestClusterReloadE2E: a reload that leaves a point's shared bucket
// unchanged keeps it, lease and all (the point is still on the shared
// bucket the moment the reload is logged, with the level of an answer
// before it); a new rate applies on the reload; a change of cluster: is
// reported as needing a restart and not applied.
func TestClusterReloadE2E(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := clustertest.Start(t)
	header := configHeader(e.upstream, "10s", 10) + fmt.Sprintf("cluster:\n  addresses: [%s]\n  replicas: 1\n", srv.Addr)
	body := func(visits, rate int) string {
		return header + pointRoute + fmt.Sprintf("    visitThreshold: %d\n    clusterTokenBucket: {tokensPerSecond: %d}\n", visits, rate)
	}
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, body(100000, 100))
	e.proxy = startProxy(t, e.config)
	f := &fleet{t: t, proxies: []*proxyProcess{e.proxy}, clients: []*http.Client{e.client}}
	f.waitShared(wait)

	type pointCluster struct {
		Shared          bool      `json:"shared"`
		TokensPerSecond int64     `json:"tokensPerSecond"`
		LevelAt         time.Time `json:"levelAt"`
	}
	read := func() pointCluster {
		t.Helper()
		resp, err := http.Get(e.proxy.admin + "/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Points []struct {
				Cluster *pointCluster `json:"cluster"`
			} `json:"points"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Points) == 0 || st.Points[0].Cluster == nil {
			t.Fatalf("/status: %v", err)
		}
		return *st.Points[0].Cluster
	}

	mark := e.proxy.stderr.mark()
	e.write(e.config, body(90000, 100))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	if got := read(); !got.Shared || got.LevelAt.IsZero() || got.TokensPerSecond != 100 {
		t.Errorf("after a reload that left the bucket as it was: %+v, want the same bucket, shared, with its last answer", got)
	}

	mark = e.proxy.stderr.mark()
	e.write(e.config, body(90000, 250))
	e.proxy.waitLog(t, mark, wait, msgIs("config reloaded"))
	if got := read(); got.TokensPerSecond != 250 {
		t.Errorf("after a reload to 250/s: %+v, want tokensPerSecond 250", got)
	}
	f.waitShared(wait)

	mark = e.proxy.stderr.mark()
	e.write(e.config, strings.Replace(body(90000, 250), "replicas: 1", "replicas: 3", 1))
	l := e.proxy.waitLog(t, mark, wait, msgIs("config change needs a restart to apply"))
	if got := fmt.Sprint(l["settings"]); got != "[cluster]" {
		t.Errorf("needs restart: got %s, want [cluster]", got)
	}
}

// TestClusterTLSE2E: with cluster.tls the proxies speak TLS to Redis,
// trusting caFile: a Redis that serves TLS only, with a certificate for
// 127.0.0.1, shares the bucket; a proxy that trusts another CA refuses
// the server and counts on its share.
func TestClusterTLSE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	certs, other := t.TempDir(), t.TempDir()
	cert := writeCert(t, certs, 1)
	writeCert(t, other, 2)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	srv := clustertest.StartTLS(t, filepath.Join(certs, "cert.pem"), filepath.Join(certs, "key.pem"), filepath.Join(certs, "cert.pem"),
		&tls.Config{RootCAs: roots})

	trusted := startFleet(t, 1, fmt.Sprintf("addresses: [%s]\ntls: {caFile: %s}", srv.Addr, filepath.Join(certs, "cert.pem")), clusterPoint)
	trusted.waitShared(wait)

	distrusted := startFleet(t, 1, fmt.Sprintf("addresses: [%s]\ntls: {caFile: %s}", srv.Addr, filepath.Join(other, "cert.pem")), clusterPoint)
	p := distrusted.proxies[0]
	l := p.waitLog(t, 0, wait, msgStarts("redis does not answer"))
	if msg := fmt.Sprint(l["error"]); !strings.Contains(msg, "certificate") {
		t.Errorf("a proxy trusting another CA: error %q, want a certificate error", msg)
	}
	if p.shared(t) {
		t.Error("a proxy trusting another CA shares the bucket")
	}
}
