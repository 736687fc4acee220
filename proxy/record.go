package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/events"
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
// (StateLogEvery), adds the recoveries the history held back
// (events.FlapHold), and samples the traffic figures (Metrics.Sample). It
// does not change what any request gets.
func (h *Handler) Tick(now time.Time) {
	for _, p := range h.Points() {
		h.pointEvents(p, limiter.Verdict{}, p.lim.Settle(now), now, bySettle)
	}
	h.expireForces(now)
	h.stateLog.flush(h.opts.Logger, now)
	if h.opts.Events != nil {
		h.opts.Events.Flush(now)
	}
	h.opts.Metrics.Sample(now)
}

// eventCause says what made a point's state change, for the event's detail.
type eventCause uint8

const (
	byRequest eventCause = iota // a request's Enter
	byProbe                     // a probe's Exit
	bySettle                    // Tick, with no request
)

// pointEvents records each state change of p in the event history and
// logs a line for it (in that order: whoever reads the line finds the
// event), at most one per kind and StateLogEvery (stateLog): a trip with
// the figures of v, the request's verdict.
func (h *Handler) pointEvents(p *Point, v limiter.Verdict, ev limiter.Events, now time.Time, cause eventCause) {
	if v.Probe && cause == byRequest {
		h.record(events.Event{At: now, Kind: events.Probe, Point: p.name, Strategy: v.Strategy.String(), Shadow: p.lim.Settings().Shadow})
	}
	if ev == 0 {
		return
	}
	log := h.opts.Logger
	shadow := p.lim.Settings().Shadow
	fields := []zap.Field{zap.String("point", p.name), zap.String("strategy", v.Strategy.String()),
		zap.Int64("count", v.Count), zap.Int64("threshold", v.Threshold)}
	if shadow {
		fields = append(fields, zap.Bool("shadow", true))
	}
	if ev.Has(limiter.EventTripped) {
		h.record(events.Event{At: now, Kind: events.Trip, Point: p.name, Strategy: v.Strategy.String(), Shadow: shadow,
			Detail: tripDetail(v)})
		h.stateLog.write(log, stateKey{p.name, changeTripped, v.Strategy}, now, true, "point tripped", fields...)
	}
	if ev.Has(limiter.EventDelayStarted) {
		delay := p.lim.Settings().DelayTime
		h.record(events.Event{At: now, Kind: events.DelayStart, Point: p.name, Strategy: v.Strategy.String(), Shadow: shadow,
			Detail: "for " + delay.String()})
		h.stateLog.write(log, stateKey{p.name, changeDelayStarted, v.Strategy}, now, true, "delay started", append(fields, zap.Duration("delay", delay))...)
	}
	if ev.Has(limiter.EventDelayEnded) {
		detail := "delay time passed"
		if cause == byProbe {
			detail = "probe passed"
		}
		h.record(events.Event{At: now, Kind: events.DelayEnd, Point: p.name, Shadow: shadow, Detail: detail})
		h.stateLog.write(log, stateKey{point: p.name, kind: changeDelayEnded}, now, false, "delay ended", zap.String("point", p.name), zap.String("cause", detail))
	}
	if ev.Has(limiter.EventRecovered) {
		detail := "a request passed"
		if cause == bySettle {
			detail = "the window slid past the trip"
		}
		h.record(events.Event{At: now, Kind: events.Recover, Point: p.name, Shadow: shadow, Detail: detail})
		h.stateLog.write(log, stateKey{point: p.name, kind: changeRecovered}, now, false, "point recovered", zap.String("point", p.name), zap.String("cause", detail))
	}
}

// probeEnded records a probe that failed: an exception, or a timeout
// (the delay goes on). A good probe ends the delay (pointEvents), and a
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
	h.record(events.Event{At: end, Kind: events.ProbeFailed, Point: c.point.name, Strategy: c.verdict.Strategy.String(),
		Shadow: c.point.lim.Settings().Shadow, Detail: detail})
}

// tripDetail is a trip's figures: "visit 21 > 20", "exception 5 >= 5".
func tripDetail(v limiter.Verdict) string {
	switch v.Strategy {
	case limiter.Visit, limiter.Concurrent:
		return fmt.Sprintf("%s %d > %d", v.Strategy, v.Count, v.Threshold)
	case limiter.TokenBucket:
		return fmt.Sprintf("token_bucket empty (size %d)", v.Threshold)
	case limiter.ExceptionRate:
		return fmt.Sprintf("exception_rate %d%% >= %d%%", v.Count, v.Threshold)
	}
	return fmt.Sprintf("%s %d >= %d", v.Strategy, v.Count, v.Threshold)
}

func (h *Handler) record(e events.Event) {
	if h.opts.Events != nil {
		h.opts.Events.Add(e)
	}
}
