package limiter

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// adaptive is the state of a point's adaptive concurrency limit (see
// AdaptiveConcurrency for the algorithm). It is created when a point turns
// the limit on, and kept across a Reconfigure that keeps it on.
//
// A forwarded call remembers the epoch it entered in; its upstream time
// is a sample only if the epoch is still the same when it exits, so that
// calls entered at a higher limit never count in a measurement of the
// minimum latency. Samples are two atomic sums; the interval's work (a
// few divisions) is done by the first Enter or Exit that finds the
// interval over, under mu, which others do not wait for.
type adaptive struct {
	next      atomic.Int64  // Unix ns at which the interval ends; 0: not started
	epoch     atomic.Uint32 // incremented when a measurement starts or ends
	limit     atomic.Int64  // the limit outside a measurement: milli/1000
	measuring atomic.Bool   // the minimum latency is being measured: the limit is MinLimit
	sum       atomic.Int64  // upstream time of this interval's samples, ns
	count     atomic.Int64  // this interval's samples

	mu          sync.Mutex // guards the fields below, and the interval's work
	milli       int64      // the limit in thousandths of a call, which smoothing moves by fractions
	minLatency  int64      // ns; 0 until measured
	latency     int64      // the last interval's mean, ns; 0 when none
	nextMeasure int64      // Unix ns of the next measurement
	msum        int64      // the measurement's samples so far: their sum, ns,
	mcount      int64      // and count
}

func newAdaptive(a AdaptiveConcurrency) *adaptive {
	ad := &adaptive{milli: a.MinLimit * 1000}
	ad.limit.Store(a.MinLimit)
	ad.measuring.Store(true)
	return ad
}

// current returns the limit in force under settings a.
func (ad *adaptive) current(a *AdaptiveConcurrency) int64 {
	if ad.measuring.Load() {
		return a.MinLimit
	}
	return min(max(ad.limit.Load(), a.MinLimit), a.MaxLimit)
}

// sample records one call's upstream time, if the call entered in the
// current epoch.
func (ad *adaptive) sample(epoch uint32, d time.Duration) {
	if epoch != ad.epoch.Load() {
		return
	}
	ad.sum.Add(int64(max(d, 0)))
	ad.count.Add(1)
}

// advance ends the interval if now is past it, and works out the limit
// under p's settings. It does nothing while another goroutine does that
// work.
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
	ad.next.Store(n + int64(a.Interval))
	sum, count := ad.sum.Swap(0), ad.count.Swap(0)
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
		ad.latency = sum / count
		tolerance, _ := a.Tolerance.Get()
		limit := min(max(ad.limit.Load(), a.MinLimit), a.MaxLimit)
		milli := ad.milli
		if milli/1000 != limit { // clamped by new settings
			milli = limit * 1000
		}
		target := ad.minLatency * (100 + tolerance) / 100
		gradient := min(max(target*1000/max(ad.latency, 1), 500), 2000) // per mille
		base := milli * gradient / 1000
		next := base + int64(math.Sqrt(float64(base)/1000)*1000)
		next = milli + (next-milli)*AdaptiveSmoothing/100
		if next > milli && p.InFlight()*2 < limit {
			next = milli
		}
		ad.milli = min(max(next, a.MinLimit*1000), a.MaxLimit*1000)
		ad.limit.Store(ad.milli / 1000)
	}
	if n >= ad.nextMeasure {
		ad.measuring.Store(true)
		ad.msum, ad.mcount = 0, 0
		ad.epoch.Add(1)
	}
}

// AdaptiveStatus is the adaptive limit's state at one instant.
type AdaptiveStatus struct {
	// Limit is the limit in force: calls in flight above it are degraded.
	Limit int64
	// Measuring: the minimum latency is being measured; Limit is MinLimit.
	Measuring bool
	// MinLatency is the last measured minimum latency; 0 until measured.
	MinLatency time.Duration
	// Latency is the mean upstream time of the last interval with
	// samples; 0 when there was none.
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
