package proxy

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
	"github.com/sds-proxy/sds-proxy/proxy/statelog"
)

// keepQueues returns the queue of each point of cfg that has one, kept
// across reloads by point name (queue.Set).
func (h *Handler) keepQueues(cfg *Config) map[*Point]*queue.Queue {
	settings := make(map[string]limiter.Queue)
	for _, p := range cfg.Points {
		if qs := p.lim.Settings().Queue; qs.On {
			settings[p.name] = qs
		}
	}
	byName := h.queues.Keep(settings, h.now)
	byPoint := make(map[*Point]*queue.Queue, len(byName))
	for _, p := range cfg.Points {
		if q := byName[p.name]; q != nil {
			byPoint[p] = q
		}
	}
	return byPoint
}

// wait waits in c's queue for a request whose verdict said it may wait
// (limiter.Verdict.Wait): each turn judges it again, and a wait that
// ends without an admission (shed, maxWait, a full queue) judges it once
// more without waiting, so it is degraded as it would have been without
// a queue, or admitted if a slot has freed. A client that goes away
// while waiting leaves the queue; its request is counted canceled and
// answered nothing.
func (h *Handler) wait(r *http.Request, c *call, req limiter.Request) {
	p := c.point
	judge := func(now time.Time) {
		req.WholeLimit = !c.queue.Ahead(req.Priority)
		c.verdict = p.lim.Enter(&c.lim, now, req)
		h.changes.Changes(p.lim, c.verdict, c.verdict.Events, now, statelog.ByRequest)
	}
	res := c.queue.Wait(r.Context(), req.Priority, func(now time.Time) (bool, time.Duration) {
		judge(now)
		return !c.verdict.Wait, c.verdict.RetryAfter
	})
	c.waited = res.Waited
	c.series.ObserveWait(res.Outcome, res.Waited)
	switch res.Outcome {
	case queue.Admitted:
	case queue.Canceled:
		c.verdict = limiter.Verdict{}
		c.failure = failClientGone
		c.counted.Store(true)
		c.series.Canceled.Inc()
	default:
		req.Wait = false
		judge(h.now())
	}
}

// waitedField is the access log's "waited" field: how long the request
// waited in its point's queue, or nothing for one that did not wait.
func waitedField(waited time.Duration) zap.Field {
	if waited == 0 {
		return zap.Skip()
	}
	return zap.Duration("waited", waited)
}
