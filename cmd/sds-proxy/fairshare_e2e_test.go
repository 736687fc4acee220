package main_test

// End-to-end tests of how a shared token bucket divides its budget among
// the proxies that share it (docs/fleet.md, "What a replica can count on"):
// real sds-proxy binaries on one real redis-server, each offered a paced
// load.

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/cluster/clustertest"
)

// fairRate is the shared bucket's tokensPerSecond (and size) in the fair
// share tests: a budget the proxies' offered rates exceed in every case.
const fairRate = 120

// pacedLoad is one proxy's paced load: requests sent at a fixed rate, each
// answer counted in the second of the run it was sent in.
type pacedLoad struct {
	offered, admitted []atomic.Int64 // by second since the run began
	failed            atomic.Int64
	firstFailure      atomic.Pointer[string]
}

// pace sends perSecond GETs a second to proxy i from now until the end of
// the run that began at begin, each in its own goroutine, and counts the
// answers into pl: an upstream answer is admitted, a 429 of the shared
// bucket is refused, anything else fails. It sends at most perSecond ×
// the run's seconds requests; the ticker paces the load.
func (f *fleet) pace(wg *sync.WaitGroup, pl *pacedLoad, i, perSecond int, begin time.Time) {
	total := time.Duration(len(pl.offered)) * time.Second
	// Read here, before the goroutine: add may grow the fleet's slices
	// while the load runs.
	client, url := f.clients[i], f.proxies[i].url
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		end := begin.Add(total)
		var sent sync.WaitGroup
		for n := 0; n < perSecond*len(pl.offered); n++ {
			at := <-tick.C
			if !at.Before(end) {
				break
			}
			sec := int(at.Sub(begin) / time.Second)
			pl.offered[sec].Add(1)
			sent.Go(func() {
				switch admitted, failure := getWork(client, url, "cluster_token_bucket; point=p"); {
				case failure != "":
					pl.fail(failure)
				case admitted:
					pl.admitted[sec].Add(1)
				}
			})
		}
		sent.Wait()
	})
}

func (pl *pacedLoad) fail(what string) {
	if pl.failed.Add(1) == 1 {
		pl.firstFailure.Store(&what)
	}
}

// rates returns the offered and admitted requests a second over the run's
// seconds [from, to).
func (pl *pacedLoad) rates(from, to int) (offered, admitted float64) {
	for s := from; s < to; s++ {
		offered += float64(pl.offered[s].Load())
		admitted += float64(pl.admitted[s].Load())
	}
	return offered / float64(to-from), admitted / float64(to-from)
}

// maxMinFair divides budget among demands max-min fairly: a demand below
// an equal share of what is left gets what it asks, the rest split the
// remainder.
func maxMinFair(demands []float64, budget float64) []float64 {
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(math.Copysign(1, demands[a]-demands[b])) })
	shares := make([]float64, len(demands))
	left := budget
	for k, i := range order {
		shares[i] = min(demands[i], left/float64(len(order)-k))
		left -= shares[i]
	}
	return shares
}

func TestMaxMinFair(t *testing.T) {
	for _, tc := range []struct{ demands, want []float64 }{
		{[]float64{100, 100}, []float64{60, 60}},
		{[]float64{150, 50}, []float64{70, 50}},
		{[]float64{10, 300}, []float64{10, 110}},
		{[]float64{200, 50, 10}, []float64{60, 50, 10}},
		{[]float64{20, 30}, []float64{20, 30}},
	} {
		if got := maxMinFair(tc.demands, fairRate); !slices.Equal(got, tc.want) {
			t.Errorf("maxMinFair(%v, %d) = %v, want %v", tc.demands, fairRate, got, tc.want)
		}
	}
}

// TestClusterFairSharesE2E: two and three proxies share one bucket of 120
// tokens a second, each offered a steady load, and each is admitted within
// ±15% of its max-min fair share of the 120 (a proxy asking less than an
// equal share gets what it asks; the others split the rest), the fleet
// within ±10% of 120 a second. A proxy that starts mid-run gets its share
// within a second of its start. No request fails.
//
// It runs alone (not parallel, so before the package's parallel tests
// resume) and its cases one at a time: a paced load that the machine
// starves offers less on average than in the second /status is read, and
// the shares follow the instantaneous demand, so the averages the test
// compares stop agreeing (on CI, with the package's tests side by side,
// the 50/s proxy was shared 53.6/s while its load averaged 35/s, and the
// fleet admitted 100 of 120 a second).
func TestClusterFairSharesE2E(t *testing.T) {
	needBinaries(t)
	for _, tc := range fairCases {
		t.Run(tc.name, func(t *testing.T) {
			loads, statuses := runFair(t, tc)
			from := fairMeasureFrom
			if tc.joins > 0 {
				from = tc.joins + 1
			}
			const seconds = fairSeconds
			offered := make([]float64, len(loads))
			admitted := make([]float64, len(loads))
			for i, pl := range loads {
				offered[i], admitted[i] = pl.rates(from, seconds)
				if n := pl.failed.Load(); n > 0 {
					t.Errorf("proxy %d: %d requests failed; the first: %s", i, n, *pl.firstFailure.Load())
				}
			}
			fair := maxMinFair(offered, fairRate)
			var fleet float64
			for i := range loads {
				fleet += admitted[i]
				t.Logf("%s: proxy %d offered %.1f/s, admitted %.1f/s, max-min fair share %.1f/s (%+.0f%%)",
					tc.name, i, offered[i], admitted[i], fair[i], 100*(admitted[i]/fair[i]-1))
				if math.Abs(admitted[i]/fair[i]-1) > 0.15 {
					t.Errorf("proxy %d: admitted %.1f/s over seconds %d-%d, want within ±15%% of its fair share %.1f/s", i, admitted[i], from, seconds, fair[i])
				}
				// /status, read in the run's last second, says the same: the
				// share Redis gave it and the proxies heard. A demand below
				// an equal share is given 5% and 1 token a second of
				// headroom (proxy/cluster's script), so the bound is ±20%
				// and 1 token a second: on a small share the headroom alone
				// is 15% or more.
				if b := statuses[i].Points[0].Cluster; b == nil || b.ReplicasHeard != int64(len(loads)) || math.Abs(b.Share-fair[i]) > 0.2*fair[i]+1 {
					t.Errorf("proxy %d: /status shows the bucket %+v, want %d replicas heard and a share within ±20%% and 1/s of %.1f/s", i, b, len(loads), fair[i])
				}
			}
			t.Logf("%s: the fleet admitted %.1f/s of a budget of %d/s (%+.0f%%)", tc.name, fleet, fairRate, 100*(fleet/fairRate-1))
			if math.Abs(fleet/fairRate-1) > 0.10 {
				t.Errorf("the fleet admitted %.1f/s over seconds %d-%d, want within ±10%% of %d/s", fleet, from, seconds, fairRate)
			}
		})
	}
}

// The fair-share runs last fairSeconds; the bucket's first burst and the
// demand estimates settle in the first seconds, so they are measured from
// second fairMeasureFrom.
const fairSeconds, fairMeasureFrom = 10, 3

// fairCase is one run of TestClusterFairSharesE2E.
type fairCase struct {
	name   string
	offers []int // requests a second to each proxy
	// joins: the last proxy starts at this second of the run, and its
	// share is measured from joins + 2.
	joins int
}

var fairCases = []fairCase{
	{"100/100", []int{100, 100}, 0},
	{"150/50", []int{150, 50}, 0},
	{"300/10", []int{300, 10}, 0},
	{"200/50/10", []int{200, 50, 10}, 0},
	{"100/100 then 100 joins", []int{100, 100, 100}, 4},
}

// runFair starts a Redis and a fleet of proxies sharing a cluster token
// bucket of fairRate, paces each proxy's load for fairSeconds (starting
// the last proxy late if tc.joins), and returns the loads, and each
// proxy's /status read in the run's last second while every load ran.
func runFair(t *testing.T, tc fairCase) ([]*pacedLoad, []clusterStatus) {
	const seconds = fairSeconds
	srv := clustertest.Start(t)
	cluster := fmt.Sprintf("addresses: [%s]\nreplicas: %d", srv.Addr, len(tc.offers))
	point := fmt.Sprintf("clusterTokenBucket: {tokensPerSecond: %d, size: %d}", fairRate, fairRate)
	first := len(tc.offers)
	if tc.joins > 0 {
		first--
	}
	f := startFleet(t, first, cluster, point)
	f.waitShared(wait)
	loads := make([]*pacedLoad, len(tc.offers))
	for i := range loads {
		loads[i] = &pacedLoad{offered: make([]atomic.Int64, seconds), admitted: make([]atomic.Int64, seconds)}
	}
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range first {
		f.pace(&wg, loads[i], i, tc.offers[i], begin)
	}
	if tc.joins > 0 {
		// The last proxy starts once the load reaches second joins.
		if !eventually(time.Duration(tc.joins+5)*time.Second, func() bool { return loads[0].offered[tc.joins].Load() > 0 }) {
			t.Fatalf("the load did not reach second %d", tc.joins)
		}
		f.add()
		f.pace(&wg, loads[first], first, tc.offers[first], begin)
	}
	// In the run's last second, while every load still runs, each
	// proxy's /status.
	if !eventually(time.Duration(seconds+5)*time.Second, func() bool { return loads[0].offered[seconds-1].Load() > 0 }) {
		t.Fatalf("the load did not reach its last second")
	}
	statuses := make([]clusterStatus, len(f.proxies))
	for i, p := range f.proxies {
		statuses[i] = p.clusterStatus(t)
	}
	wg.Wait()
	return loads, statuses
}
