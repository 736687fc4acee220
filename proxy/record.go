package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/events"
	"github.com/sds-proxy/sds-proxy/proxy/statelog"
)

// TickInterval is how often Run settles the points and samples the
// traffic figures: a trip the window has left behind is reported as
// recovered, and a delay whose time has passed as ended, within one
// TickInterval.
const TickInterval = time.Second

// Run fires the upstream clocks' alarms of the calls in flight (within
// AlarmTick: a timeout is counted in flight, an UpstreamTimeout cuts its
// call) and calls Tick every TickInterval, until ctx is done. Without Run,
// calls are judged and counted when they end, but no alarm fires in
// flight and no state is settled.
func (h *Handler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { h.alarms.run(ctx) })
	t := time.NewTicker(TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Tick(h.now())
		}
	}
}

// Tick brings every point in force up to now (limiter.Point.Settle), logs
// and records what that changed, writes the state-change lines held back
// (statelog.Every), adds the recoveries the history held back
// (events.FlapHold), and samples the traffic figures (Metrics.Sample). It
// does not change what any request gets.
func (h *Handler) Tick(now time.Time) {
	for _, p := range h.Points() {
		h.changes.Changes(p.lim, limiter.Verdict{}, p.lim.Settle(now), now, statelog.BySettle)
	}
	h.expireForces(now)
	h.changes.Flush(now)
	if h.opts.Events != nil {
		h.opts.Events.Flush(now)
	}
	h.opts.Metrics.Sample(now)
}

// probeEnded records a probe that failed: an exception, or a timeout
// (the delay goes on). A good probe ends the delay (statelog.Log.Changes), and a
// canceled one proves nothing.
func (h *Handler) probeEnded(c *call, o limiter.Outcome, end time.Time) {
	threshold := c.point.lim.TimeoutThreshold()
	timedOut := threshold > 0 && c.lim.Duration(end) >= threshold
	if o != limiter.Failed && !timedOut {
		return
	}
	detail := "exception"
	if timedOut {
		detail = "timeout"
	}
	h.changes.Record(events.Event{At: end, Kind: events.ProbeFailed, Point: c.point.name, Strategy: c.verdict.Strategy.String(),
		Shadow: c.point.lim.Settings().Shadow, Detail: detail})
}
