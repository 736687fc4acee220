package main

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// class is a request's priority, chosen by its Host. Zero is unknown.
type class uint8

const (
	critical class = iota + 1
	normal         // the default priority
	sheddable
)

// classes lists the classes in report order.
var classes = [...]class{critical, normal, sheddable}

// name is the class's name in the report.
func (c class) name() string { return [...]string{"?", "critical", "default", "sheddable"}[c] }

// host is the Host header of the class's requests: the proxy's routes rank
// them by it.
func (c class) host() string {
	return [...]string{"", "critical.test", "default.test", "sheddable.test"}[c]
}

// percent is the class's share of the arrivals, in percent.
func (c class) percent() float64 { return [...]float64{0, 3, 37, 60}[c] }

// arrival is one request of a rung's schedule.
type arrival struct {
	at    time.Duration // when it is due, from the rung's start
	class class
}

// schedule returns rung r's arrivals over o.warmup+o.duration: a Poisson
// process (exponential gaps) of rate r.rateAt, classes drawn by their
// percent. It depends only on o.seed, the rung's index idx and r, so every
// setup gets the same arrivals at a rung.
func schedule(r rung, o options, idx int) []arrival {
	rng := rand.New(rand.NewPCG(o.seed, uint64(idx)))
	length := o.warmup + o.duration
	capacity := o.capacity()
	out := make([]arrival, 0, int(r.multiple*capacity*length.Seconds()*1.1)+16)
	var t time.Duration
	for len(out) < maxArrivals {
		// need is the area under the rate until the next arrival; each
		// pass places the arrival or moves t to the end of a stretch of
		// constant rate, so the inner loop ends within 2 passes a second.
		need := rng.ExpFloat64()
		for t < length {
			rate, end := r.rateAt(t, capacity)
			end = min(end, length)
			if area := rate * (end - t).Seconds(); need <= area {
				t += time.Duration(need / rate * float64(time.Second))
				break
			} else {
				need -= area
			}
			t = end
		}
		if t >= length {
			break
		}
		out = append(out, arrival{at: t, class: pickClass(rng)})
	}
	return out
}

// rateAt returns the rung's rate at t, in requests per second, and when it
// next changes.
func (r rung) rateAt(t time.Duration, capacity float64) (float64, time.Duration) {
	if !r.bursts {
		return r.multiple * capacity, math.MaxInt64
	}
	phase := t % burstPeriod
	if phase < burstLength {
		return burstMultiple * capacity, t - phase + burstLength
	}
	burst := burstMultiple * burstLength.Seconds()
	rest := (r.multiple*burstPeriod.Seconds() - burst) / (burstPeriod - burstLength).Seconds()
	return max(rest, 0) * capacity, t - phase + burstPeriod
}

// pickClass draws a class by the classes' percents.
func pickClass(rng *rand.Rand) class {
	x := rng.Float64() * 100
	for _, c := range classes {
		if x < c.percent() {
			return c
		}
		x -= c.percent()
	}
	return classes[len(classes)-1]
}

// record is what became of one arrival.
type record struct {
	dropped  bool          // not sent: o.maxInFlight requests were outstanding
	status   int           // of a complete answer; 0 for none (an error, a timeout, a broken body)
	degraded bool          // the answer carried Sds-Degraded (the proxy's fallback)
	latency  time.Duration // from the moment due to the end of the answer or the error
	lag      time.Duration // from the moment due to the moment sent: the client's own delay
}

// load sends sched to url, each request when due (or as soon after as the
// client can), at most o.maxInFlight outstanding, and returns what became
// of each. It returns once every request sent has ended, within 2×o.slo of
// the last one due; if ctx ends first it returns the records of the
// arrivals reached.
func load(ctx context.Context, c *http.Client, url string, sched []arrival, o options) []record {
	recs := make([]record, len(sched))
	slots := make(chan struct{}, o.maxInFlight)
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	n := 0
arrivals:
	for ; n < len(sched) && ctx.Err() == nil; n++ {
		a := sched[n]
		due := start.Add(a.at)
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break arrivals
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			recs[n] = record{dropped: true, lag: time.Since(due)}
			continue
		}
		wg.Add(1)
		go func(rec *record) {
			defer wg.Done()
			defer func() { <-slots }()
			*rec = send(ctx, c, url, a.class, due, o.slo)
		}(&recs[n])
	}
	wg.Wait()
	return recs[:n]
}

// send makes one request of class cl due at due, giving up 2×slo after
// due, and records its answer.
func send(ctx context.Context, c *http.Client, url string, cl class, due time.Time, slo time.Duration) record {
	rec := record{lag: time.Since(due)}
	ctx, cancel := context.WithDeadline(ctx, due.Add(2*slo))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		rec.latency = time.Since(due)
		return rec
	}
	req.Host = cl.host()
	resp, err := c.Do(req)
	if err != nil {
		rec.latency = time.Since(due)
		return rec
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	rec.latency = time.Since(due)
	rec.degraded = resp.Header.Get("Sds-Degraded") != ""
	if err == nil {
		rec.status = resp.StatusCode
	}
	return rec
}

// newClient returns the one client of a sitting: no environment proxy, no
// redirects, and idle connections enough that the client is not the
// bottleneck.
func newClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
