package proxy

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/proxy/queue"
	"github.com/sds-proxy/sds-proxy/proxy/statelog"
)

// queues keeps each point's queue by name across reloads, so that the
// requests waiting keep their places and a call that ends under the
// previous Config still gives a turn. Only Swap writes it.
type queues map[string]*queue.Queue

// swap returns the queue of each point of cfg that has one: the one of
// the same name, reconfigured, or a new one; points without a queue
// drop theirs (their waiters' waits end by maxWait).
func (qs queues) swap(cfg *Config, now func() time.Time) map[*Point]*queue.Queue {
	byPoint := map[*Point]*queue.Queue{}
	kept := map[string]bool{}
	for _, p := range cfg.Points {
		s := p.lim.Settings().Queue
		if !s.On {
			continue
		}
		q, ok := qs[p.name]
		if ok {
			q.Reconfigure(s)
		} else {
			q = queue.New(s, now)
			qs[p.name] = q
		}
		byPoint[p], kept[p.name] = q, true
	}
	for name := range qs {
		if !kept[name] {
			delete(qs, name)
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
