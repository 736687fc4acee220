package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// adaptive is the state of a point's adaptive concurrency limit (see
// AdaptiveConcurrency for the algorithm). It is created when a point turns
// the limit on, and kept across a Reconfigure that keeps it on.
//
// A forwarded call remembers the epoch it entered in and the calls in
// flight then; its upstream time is a sample only if the epoch is still
// the same when it exits, so that calls entered at a higher limit never
// count in a measurement of the minimum latency. Samples are three atomic
// sums, and a request that finds the limit full sets hit; the round's
// work (a few divisions) is done by the first Enter or Exit that finds the
// round over, under mu, which others do not wait for.
type adaptive struct {
	next      atomic.Int64  // Unix ns at which the round ends; 0: not started
	epoch     atomic.Uint32 // incremented when a measurement starts or ends
	limit     atomic.Int64  // the limit outside a measurement: milli/1000
	measuring atomic.Bool   // the minimum latency is being measured: the limit is AdaptiveMeasureShare of it
	hit       atomic.Bool   // a request found the calls in flight above the limit this round
	sum       atomic.Int64  // upstream time of this round's samples, ns
	load      atomic.Int64  // calls in flight at their Enter, summed over this round's samples
	count     atomic.Int64  // this round's samples

	mu          sync.Mutex // guards the fields below, and the round's work
	milli       int64      // the limit in thousandths of a call, which the steps move by fractions
	startup     bool       // the limit doubles each round until the upstream queues
	minLatency  int64      // ns; 0 until the first round with samples
	latency     int64      // the last round's mean, ns; 0 when none
	nextMeasure int64      // Unix ns of the next measurement
	msum        int64      // the measurement's samples so far (in startup, the rounds without a queue): their sum, ns,
	mcount      int64      // and count
}

func newAdaptive(a AdaptiveConcurrency) *adaptive {
	ad := &adaptive{milli: a.MinLimit * 1000, startup: true}
	ad.limit.Store(a.MinLimit)
	return ad
}

// current returns the limit in force under settings a.
func (ad *adaptive) current(a *AdaptiveConcurrency) int64 {
	limit := ad.limit.Load()
	if ad.measuring.Load() {
		limit = limit * AdaptiveMeasureShare / 100
	}
	return min(max(limit, a.MinLimit), a.MaxLimit)
}

// full records that a request found the calls in flight above the limit.
// It writes only the first time in a round, so that a flood of degraded
// requests does not contend on the flag.
func (ad *adaptive) full() {
	if !ad.hit.Load() {
		ad.hit.Store(true)
	}
}

// sample records one call's upstream time d and the calls in flight at
// its Enter, if the call entered in the current epoch.
func (ad *adaptive) sample(epoch uint32, d time.Duration, load int64) {
	if epoch != ad.epoch.Load() {
		return
	}
	ad.sum.Add(int64(max(d, 0)))
	ad.load.Add(load)
	ad.count.Add(1)
}

// advance ends the round if now is past it, and works out the limit under
// p's settings. It does nothing while another goroutine does that work.
func (ad *adaptive) advance(now time.Time, p *Point) {
	a := &p.s.AdaptiveConcurrency
	n := now.UnixNano()
	if next := ad.next.Load(); next != 0 && n < next {
		return
	}
	if !ad.mu.TryLock() {
		return
	}
	defer ad.mu.Unlock()
	next := ad.next.Load()
	switch {
	case next != 0 && n < next:
		return
	case next == 0:
		ad.next.Store(n + int64(a.Interval))
		return
	}
	sum, load, count := ad.sum.Swap(0), ad.load.Swap(0), ad.count.Swap(0)
	ad.step(n, a, sum, load, count, ad.hit.Swap(false))
	ad.next.Store(n + max(int64(a.Interval), ad.latency))
}

// step is the work of a round that ends at n (Unix ns), with count
// samples of sum ns whose calls found load calls in flight in all, and
// hit when a request found the limit full in it.
func (ad *adaptive) step(n int64, a *AdaptiveConcurrency, sum, load, count int64, hit bool) {
	if ad.measuring.Load() {
		ad.msum += sum
		ad.mcount += count
		if ad.mcount >= MinLatencySamples {
			ad.minLatency = max(1, ad.msum/ad.mcount)
			ad.measuring.Store(false)
			ad.epoch.Add(1)
			ad.nextMeasure = n + int64(a.MinLatencyInterval)
		}
		return
	}
	if count > 0 {
		ad.latency = max(1, sum/count)
		if ad.minLatency == 0 {
			ad.minLatency = ad.latency
		}
		tolerance, _ := a.Tolerance.Get()
		limit := min(max(ad.limit.Load(), a.MinLimit), a.MaxLimit)
		milli := ad.milli
		if milli/1000 != limit { // clamped by new settings
			milli = limit * 1000
		}
		// Little's law: of the calls in flight, minLatency/latency are
		// served and the rest wait in the upstream's queue, which may
		// hold the allowance: latency up to Tolerance percent above the
		// minimum, and at least one call.
		gradient := min(ad.minLatency*1000/ad.latency, 1000) // per mille
		inflight := load * 1000 / count                      // thousandths of a call
		served := inflight * gradient / 1000
		allowance := max(1000, served*tolerance/100)
		queued := inflight-served > allowance
		next := max(served+allowance, milli/2) // no round more than halves the limit
		switch {
		case ad.startup && !queued:
			if inflight-served <= 1000 { // at most one call queued: the minimum's
				ad.msum += sum
				ad.mcount += count
				ad.minLatency = max(1, ad.msum/ad.mcount)
			}
			next = milli
			if hit {
				next = 2 * milli
			}
		case ad.startup:
			ad.startup = false // next: the capacity found, and the allowance
			ad.nextMeasure = n + int64(a.MinLatencyInterval)
		case queued:
			next = milli + (min(next, milli)-milli)*AdaptiveSmoothing/100
		case hit:
			next = max(next, milli)
		default:
			next = milli
		}
		ad.milli = min(max(next, a.MinLimit*1000), a.MaxLimit*1000)
		ad.limit.Store(ad.milli / 1000)
	}
	if !ad.startup && n >= ad.nextMeasure {
		ad.measuring.Store(true)
		ad.msum, ad.mcount = 0, 0
		ad.epoch.Add(1)
	}
}

// AdaptiveStatus is the adaptive limit's state at one instant.
type AdaptiveStatus struct {
	// Limit is the limit in force: calls in flight above it are degraded.
	Limit int64
	// Measuring: the minimum latency is being measured again; Limit is
	// AdaptiveMeasureShare percent of the limit before, at least MinLimit.
	Measuring bool
	// MinLatency is the minimum latency the limit is judged against; 0
	// until the first calls have ended.
	MinLatency time.Duration
	// Latency is the mean upstream time of the last round with samples;
	// 0 when there was none.
	Latency time.Duration
}

// status returns the state under settings a.
func (ad *adaptive) status(a *AdaptiveConcurrency) AdaptiveStatus {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	return AdaptiveStatus{
		Limit:      ad.current(a),
		Measuring:  ad.measuring.Load(),
		MinLatency: time.Duration(ad.minLatency),
		Latency:    time.Duration(ad.latency),
	}
}
