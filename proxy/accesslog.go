package proxy

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// The access log's fields that let `sds-proxy replay` run a request again
// through a candidate config (docs/operations.md, Logs): with arrived,
// host, method, path and priority, these say what the request carried and
// what its upstream call did.

// outcomeNames are the access log's "outcome" values, by limiter.Outcome.
var outcomeNames = [...]string{limiter.OK: "ok", limiter.Failed: "failed", limiter.Canceled: "canceled"}

// errorNames are the access log's "error" values, by upstreamError: the
// sds_upstream_errors_total kinds.
var errorNames = [...]string{errTimeout: "upstream_timeout", errTransport: "transport", errBody: "body"}

// outcomeField is the access log's "outcome" of a request whose upstream
// call ended: how it counted in the limiter, ok, failed or canceled;
// nothing for one never forwarded.
func outcomeField(c *call) zap.Field {
	if c.ended == 0 || int(c.classified.outcome) >= len(outcomeNames) {
		return zap.Skip()
	}
	return zap.String("outcome", outcomeNames[c.classified.outcome])
}

// errorField is the access log's "error" of a request whose upstream call
// failed or answered an exception status: upstream_timeout, transport,
// body or status_5xx (the sds_upstream_errors_total kinds); nothing
// otherwise.
func errorField(c *call) zap.Field {
	o := c.classified
	switch {
	case c.ended == 0:
	case o.err != 0 && int(o.err) < len(errorNames):
		return zap.String("error", errorNames[o.err])
	case o.status:
		return zap.String("error", "status_5xx")
	}
	return zap.Skip()
}

// endedField is the access log's "ended": when the request's upstream call
// ended in the limiter, to the microsecond; nothing for one never
// forwarded.
func endedField(c *call) zap.Field {
	if c.ended == 0 {
		return zap.Skip()
	}
	return zap.String("ended", time.Unix(0, c.ended).UTC().Format(startLayout))
}

// pressureField is the access log's "pressure_test": true for a request
// marked as pressure-test traffic, nothing otherwise.
func pressureField(marked bool) zap.Field {
	if !marked {
		return zap.Skip()
	}
	return zap.Bool("pressure_test", true)
}

// keysField is the access log's "keys": for a point with per-key rules,
// each rule's label of the request's key, in rule order, "" for a request
// without one. Labels are computed again here, from the request: they
// cost two SHA-256 blocks each, which only a request logged pays.
func (h *Handler) keysField(c *call, r *http.Request) zap.Field {
	rules := c.point.keys
	if len(rules) == 0 {
		return zap.Skip()
	}
	labels := make([]string, len(rules))
	for i := range rules {
		key, ok := rules[i].Source.Key(r)
		switch {
		case ok:
			labels[i] = h.hasher.Label(h.hasher.Sum64(key))
		case rules[i].Missing == MissingShared:
			labels[i] = h.hasher.Label(h.hasher.Sum64(sharedMissingKey))
		}
	}
	return zap.Strings("keys", labels)
}
