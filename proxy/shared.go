package proxy

import (
	"net/http"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// SharedBucket is a point's token bucket shared with other proxies, such
// as proxy/cluster's Bucket. The Handler judges it after the point's
// limiter admitted a request (strategy cluster_token_bucket), so a request
// the local strategies degrade takes no shared token.
type SharedBucket interface {
	// Take takes one token at now and reports whether there was one. It
	// must not wait on anything (no I/O), must not allocate, and must be
	// safe for concurrent use.
	Take(now time.Time) bool
}

// sharedEmpty handles a request the limiter admitted and the shared bucket
// refused, and reports whether it answered it. In enforce mode the request
// is degraded as cluster_token_bucket: its call is ended in the limiter as
// refused (limiter.Call.Refused), which counts its visit as degraded, gives
// back a local token it took, frees its concurrency slot (a probe's slot
// too: the next request may probe) and counts no outcome.
// A shadow point's request is forwarded, marked would-be degraded, and
// sharedEmpty reports false.
func (h *Handler) sharedEmpty(w http.ResponseWriter, r *http.Request, c *call, now time.Time) bool {
	c.verdict.Strategy, c.verdict.Count, c.verdict.Threshold = limiter.ClusterTokenBucket, 0, 0
	if c.point.lim.Settings().Shadow {
		c.verdict.Shadow = true
		return false
	}
	c.lim.Refused(now)
	c.verdict.Allowed, c.verdict.Delay, c.verdict.Probe = false, false, false
	status := c.point.fallback.serve(w, r, verdictReason(c.verdict))
	c.metrics.degraded.Inc()
	c.metrics.strategyCounter(c.verdict.Strategy).Inc()
	h.access(r, c, status, 0)
	return true
}
