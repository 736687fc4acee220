package main_test

// End-to-end tests of the fleet budget through Redis's own failures
// (docs/fleet.md, "When Redis fails"): a Sentinel failover, a Redis
// Cluster failover, one Cluster node down and a single Redis restarted,
// each with real redis-server (and redis-sentinel) processes and two real
// proxies under a paced load far above the shared budget. In each, the
// tokens the fleet admits from the failure to 15 s after it shares again
// exceed the budget by at most one size (+10%), and no request fails.

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/cluster/clustertest"
)

// The outage runs' figures, as in issue 26: two proxies offered 100/s and
// 40/s on point p, sharing 60 tokens a second holding 60.
const (
	outageRate = 60
	outageSize = 60
	// outageAfter is how long the fleet is watched once shared again.
	outageAfter = 15 * time.Second
)

var outageOffers = []int{100, 40}

// outageAnswer is one request of an outage run.
type outageAnswer struct {
	at       time.Time // sent
	proxy    int
	point    string
	admitted bool
}

// outageLoad is the paced load of an outage run: each answer recorded.
type outageLoad struct {
	mu       sync.Mutex
	answers  []outageAnswer
	failures []string
}

func (l *outageLoad) record(a outageAnswer, failure string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if failure != "" {
		l.failures = append(l.failures, failure)
		return
	}
	l.answers = append(l.answers, a)
}

// sentSince counts the answered requests to point sent since from.
func (l *outageLoad) sentSince(point string, from time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.answers {
		if a.point == point && !a.at.Before(from) {
			n++
		}
	}
	return n
}

// last returns when the latest answered request was sent.
func (l *outageLoad) last() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var t time.Time
	for _, a := range l.answers {
		if a.at.After(t) {
			t = a.at
		}
	}
	return t
}

// admitted counts the admitted requests to point sent in [from, to), in
// all and by second since from.
func (l *outageLoad) admitted(point string, from, to time.Time) (total int, bySecond []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bySecond = make([]int, int(math.Ceil(to.Sub(from).Seconds())))
	for _, a := range l.answers {
		if a.point == point && a.admitted && !a.at.Before(from) && a.at.Before(to) {
			total++
			bySecond[int(a.at.Sub(from)/time.Second)]++
		}
	}
	return total, bySecond
}

// paceOutage sends perSecond GETs a second of path to proxy i until stop
// is closed (at most 90 s of them), each in its own goroutine, sending at
// each tick every request due by then. A 429 of the shared bucket is
// degraded; anything but it and an upstream answer is a failure.
func (f *fleet) paceOutage(wg *sync.WaitGroup, l *outageLoad, i int, point, path string, perSecond int, stop <-chan struct{}) {
	client, url := f.clients[i], f.proxies[i].url+path
	want := "cluster_token_bucket; point=" + point
	wg.Go(func() {
		interval := time.Second / time.Duration(perSecond)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		begin := time.Now()
		var sent sync.WaitGroup
		defer sent.Wait()
		for n, most := 0, 90*perSecond; n < most; {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				for due := min(most, int(now.Sub(begin)/interval)); n < due; n++ {
					sent.Go(func() {
						at := time.Now()
						admitted, failure := getURL(client, url, want)
						l.record(outageAnswer{at: at, proxy: i, point: point, admitted: admitted}, failure)
					})
				}
			}
		}
	})
}

// pointShared reports whether the proxy's point spends its shared bucket.
func (p *proxyProcess) pointShared(t *testing.T, point string) bool {
	for _, pt := range p.clusterStatus(t).Points {
		if pt.Name == point {
			return pt.Cluster != nil && pt.Cluster.Shared
		}
	}
	return false
}

// outage is one failure of an outage run.
type outage struct {
	// cluster is the config's cluster: section (its lines).
	cluster string
	// other, when not "", is a second point whose bucket another node
	// holds: paced at 20/s a proxy on path /other, its bucket never
	// dry, and required to stay shared through the failure.
	other string
	// fail makes the failure; recover ends it and returns when Redis
	// could serve the bucket again (a restart answered, a replica
	// promoted), given the run's load.
	fail    func()
	recover func(*outageLoad) time.Time
}

// runOutage runs o against a fleet of two proxies, checks and logs what
// it admitted, and returns the fleet, its proxies still running.
func runOutage(t *testing.T, o outage) *fleet {
	t.Helper()
	f := startOutageFleet(t, o)
	load := &outageLoad{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	finish := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer finish()
	var at outageTimes
	at.begin = time.Now()
	for i, offer := range outageOffers {
		f.paceOutage(&wg, load, i, "p", "/work", offer, stop)
		if o.other != "" {
			f.paceOutage(&wg, load, i, o.other, "/other", 20, stop)
		}
	}
	// 3 s of steady load before the failure.
	if !eventually(wait, func() bool { return load.last().Sub(at.begin) >= 3*time.Second }) {
		t.Fatal("the load did not run for 3 s")
	}
	at.failed = time.Now()
	o.fail()
	otherDown := 0 // /status samples showing the other point on its share
	sharedWhile := func(p *proxyProcess, shared bool) func() bool {
		return func() bool {
			if o.other != "" && !p.pointShared(t, o.other) {
				otherDown++
			}
			return p.pointShared(t, "p") == shared
		}
	}
	for i, p := range f.proxies {
		if !eventually(wait, sharedWhile(p, false)) {
			t.Fatalf("proxy %d did not notice the failure", i)
		}
	}
	at.ready = o.recover(load)
	for i, p := range f.proxies {
		if !eventually(30*time.Second, sharedWhile(p, true)) {
			t.Fatalf("proxy %d: p not shared again within 30 s of Redis's recovery: %+v", i, p.clusterStatus(t))
		}
		at.shared = time.Now() // the proxies in turn: the last one
	}
	at.end = at.shared.Add(outageAfter)
	if !eventually(outageAfter+wait, func() bool { return load.last().After(at.end) }) {
		t.Fatal("the load did not run 15 s past the recovery")
	}
	finish()
	load.check(t, o, at)
	if otherDown > 0 {
		t.Errorf("%s, on a healthy node, was on its share in %d /status samples through the failure, want none", o.other, otherDown)
	}
	return f
}

// startOutageFleet starts an upstream and two proxies for o, and waits
// until both share p's bucket.
func startOutageFleet(t *testing.T, o outage) *fleet {
	t.Helper()
	point := fmt.Sprintf("clusterTokenBucket: {tokensPerSecond: %d, size: %d}", outageRate, outageSize)
	body := fmt.Sprintf("routes:\n  - point: p\n    match: {}\npoints:\n  p:\n    %s\n", point)
	if o.other != "" {
		body = fmt.Sprintf("routes:\n  - point: %s\n    match: {path: /other}\n  - point: p\n    match: {}\npoints:\n  p:\n    %s\n  %s:\n    clusterTokenBucket: {tokensPerSecond: 100000}\n",
			o.other, point, o.other)
	}
	e := newEnv(t)
	src := configHeader(e.upstream, "10s", 10) + "cluster:\n"
	for line := range strings.SplitSeq(strings.TrimSuffix(o.cluster, "\n"), "\n") {
		src += "  " + line + "\n"
	}
	f := &fleet{t: t, path: filepath.Join(e.dir, "sds.yaml")}
	e.write(f.path, src+body)
	f.add()
	f.add()
	f.waitShared(wait)
	return f
}

// outageTimes are an outage run's instants: the load began, the failure,
// Redis could serve again, both proxies shared again, the run's end.
type outageTimes struct {
	begin, failed, ready, shared, end time.Time
}

// check logs the run's figures and checks them: the tokens over the
// budget from the failure to the end at most size (+10%), shared again
// within seconds of Redis's recovery, no failed request, and the other
// point's requests (never dry) all admitted.
func (l *outageLoad) check(t *testing.T, o outage, at outageTimes) {
	t.Helper()
	steady, _ := l.admitted("p", at.begin.Add(time.Second), at.failed)
	admitted, bySecond := l.admitted("p", at.failed, at.end)
	span := at.end.Sub(at.failed).Seconds()
	over := float64(admitted) - outageRate*span
	t.Logf("steady before the failure: %.1f/s of a budget of %d/s", float64(steady)/at.failed.Sub(at.begin.Add(time.Second)).Seconds(), outageRate)
	t.Logf("Redis could serve again %v after the failure; the proxies shared again %v after that",
		at.ready.Sub(at.failed).Round(time.Millisecond), at.shared.Sub(at.ready).Round(time.Millisecond))
	t.Logf("from the failure to 15 s after: %d admitted in %.1fs, budget %.0f: %+.0f tokens (size %d); by second: %v",
		admitted, span, outageRate*span, over, outageSize, bySecond)
	if over > 1.1*outageSize {
		t.Errorf("the fleet admitted %.0f tokens over the budget from the failure to 15 s after the return, want at most size %d (+10%%)", over, outageSize)
	}
	if d := at.shared.Sub(at.ready); d > 3*time.Second {
		t.Errorf("shared again %v after Redis could serve, want within a few retries (500 ms each)", d)
	}
	if n := len(l.failures); n > 0 {
		t.Errorf("%d requests failed; the first: %s", n, l.failures[0])
	}
	if o.other == "" {
		return
	}
	if all, _ := l.admitted(o.other, at.begin, at.end); all == 0 {
		t.Errorf("no request to %s admitted", o.other)
	}
	for _, a := range l.answers {
		if a.point == o.other && !a.admitted {
			t.Errorf("a request to %s (never dry, on a healthy node) was degraded at %v", o.other, a.at.Sub(at.failed))
			break
		}
	}
}

// TestOutageSentinelFailover: the master killed, Sentinel promotes the
// replica, the proxies find it and share again.
func TestOutageSentinelFailover(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	master := clustertest.Start(t)
	replica := clustertest.Start(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port))
	sentinel := clustertest.StartSentinel(t, "sds", master.Addr, time.Second)
	// Sentinel learns the replica from the master's INFO.
	if !eventually(wait, func() bool {
		line, err := clustertest.Do(sentinel.Addr, "", "SENTINEL", "REPLICAS", "sds")
		return err == nil && line != "*0"
	}) {
		t.Fatal("sentinel did not discover the replica")
	}
	runOutage(t, outage{
		cluster: fmt.Sprintf("addresses: [%s]\nmasterName: sds\nreplicas: 2\ntimeout: 50ms", sentinel.Addr),
		fail:    master.Kill,
		recover: func(*outageLoad) time.Time {
			if !eventually(30*time.Second, func() bool { return isMaster(replica.Addr) }) {
				t.Fatal("sentinel did not promote the replica")
			}
			return time.Now()
		},
	})
}

// TestOutageClusterFailover: on a Redis Cluster of three masters with a
// replica each, the master holding the bucket's key killed; the cluster
// promotes its replica, and the proxies use it within a retry of the
// cluster knowing it (they reload the slot map after a failed call).
func TestOutageClusterFailover(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	nodes := clustertest.StartCluster(t, 3, 1)
	owner := clustertest.Owner(nodes, "sds:bucket:p")
	if owner == nil {
		t.Fatal("no node holds sds:bucket:p")
	}
	var addrs []string
	for _, n := range nodes[:3] {
		addrs = append(addrs, n.Addr)
	}
	runOutage(t, outage{
		cluster: fmt.Sprintf("addresses: [%s]\nreplicas: 2\ntimeout: 50ms", strings.Join(addrs, ", ")),
		fail:    owner.Kill,
		recover: func(*outageLoad) time.Time {
			if !eventually(30*time.Second, func() bool { return clustertest.Owner(nodes, "sds:bucket:p") != nil }) {
				t.Fatal("the cluster did not promote a replica")
			}
			return time.Now()
		},
	})
}

// TestOutageClusterNodeDown: on a Redis Cluster of three masters and no
// replicas (cluster-require-full-coverage no, so the others serve their
// slots meanwhile), the master holding p's key killed and restarted: p
// counts on its shares, and a second point whose key another master holds
// stays shared throughout.
func TestOutageClusterNodeDown(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	nodes := clustertest.StartCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
	owner := clustertest.Owner(nodes, "sds:bucket:p")
	other := ""
	for _, name := range []string{"q", "r", "s", "t", "u", "v", "w", "x"} {
		if o := clustertest.Owner(nodes, "sds:bucket:"+name); o != nil && o != owner {
			other = name
			break
		}
	}
	if owner == nil || other == "" {
		t.Fatal("no two points on two masters")
	}
	addrs := []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}
	f := runOutage(t, outage{
		cluster: fmt.Sprintf("addresses: [%s]\nreplicas: 2\ntimeout: 50ms", strings.Join(addrs, ", ")),
		other:   other,
		fail:    owner.Kill,
		recover: func(*outageLoad) time.Time {
			owner.Restart()
			if !eventually(30*time.Second, func() bool { return owner.ClusterOK() && clustertest.Owner(nodes, "sds:bucket:p") == owner }) {
				t.Fatal("the restarted node does not serve its slots")
			}
			return time.Now()
		},
	})
	// A killed node refuses connections, and the errors say so.
	for i, p := range f.proxies {
		ms, err := scrape(p.admin)
		if err != nil {
			t.Fatal(err)
		}
		refused, _ := ms.value("sds_cluster_errors_total", "kind", "refused")
		timeout, _ := ms.value("sds_cluster_errors_total", "kind", "timeout")
		other, _ := ms.value("sds_cluster_errors_total", "kind", "other")
		t.Logf("proxy %d: sds_cluster_errors_total refused %v, timeout %v, other %v; last error %q", i, refused, timeout, other, p.clusterStatus(t).Cluster.LastError)
		if refused == 0 || refused < timeout {
			t.Errorf("proxy %d: %v refused and %v timeout errors, want mostly refused: the node refused connections", i, refused, timeout)
		}
	}
}

// TestOutageRedisRestart: a single Redis killed and, once the proxies have
// counted on their shares for a while, restarted empty (every bucket full).
func TestOutageRedisRestart(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	srv := clustertest.Start(t)
	var killed time.Time
	runOutage(t, outage{
		cluster: fmt.Sprintf("addresses: [%s]\nreplicas: 2\ntimeout: 50ms", srv.Addr),
		fail:    func() { killed = time.Now(); srv.Kill() },
		recover: func(l *outageLoad) time.Time {
			// About as long as a Sentinel failover: 350 requests of p
			// answered by the proxies on their shares, 2.5 s of the load.
			if !eventually(wait, func() bool { return l.sentSince("p", killed) >= 350 }) {
				t.Fatal("the load made no progress while Redis was down")
			}
			srv.Restart()
			return time.Now()
		},
	})
}
