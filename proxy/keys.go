package proxy

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy/metrics"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// MaxKeyRules is the most per-key rules a point may have
// (PointOptions.Keys): a request carries one call per rule.
const MaxKeyRules = 4

// Missing is what a per-key rule does with a request that has no key.
// The zero Missing is MissingPass.
type Missing uint8

const (
	// MissingPass: the rule does not judge the request.
	MissingPass Missing = iota
	// MissingDegrade: the request is degraded as key_visit, as a key over
	// its limit would be.
	MissingDegrade
	// MissingShared: every request without the key is one key, held to
	// the rule's thresholds together.
	MissingShared
)

// sharedMissingKey is the one key of the requests without a key under
// MissingShared.
const sharedMissingKey = "\x00sds:missing"

// KeyRule is a per-key rule of a point: where a request's key is, what a
// request without one gets, and the table that counts every key against
// the rule's thresholds (limiter/perkey). A table may be kept from one
// Config to the next, as a point's limiter is, so that a reload does not
// give every key a fresh budget.
type KeyRule struct {
	Source  clientkey.Source
	Missing Missing
	Table   *perkey.Table
}

// retryAfter is when a client degraded by the rule's strategy st may
// try again: after one bucket of the window (key_visit), after one token
// (key_token_bucket), or at least a second (key_concurrent, whose slot
// frees when one of the key's calls ends).
func (k *KeyRule) retryAfter(st limiter.Strategy) time.Duration {
	s := k.Table.Settings()
	switch st {
	case limiter.KeyVisit:
		return s.Window / time.Duration(s.Buckets)
	case limiter.KeyTokenBucket:
		if rate, on := s.TokensPerSecond.Get(); on && rate > 0 {
			return time.Second / time.Duration(rate)
		}
	}
	return time.Second
}

// keyVerdict is a per-key rule's judgement of a request.
type keyVerdict struct {
	perkey.Verdict
	rule  *KeyRule
	label string // the key's label (clientkey.Hasher.Label)
}

// judgeKeys judges r on the per-key rules of c's point at now, in order,
// and returns the first rule's verdict that degrades it, or an allowed
// verdict. Each rule that admits it counts it (a visit, a token, a call
// in flight held in c.keys until exitKeys); once one degrades it, the
// calls of the rules before are freed and the later rules are not asked.
// It does not allocate but for the label of a degraded request.
func (h *Handler) judgeKeys(r *http.Request, c *call, now time.Time) keyVerdict {
	rules := c.point.keys
	for i := range rules {
		rule := &rules[i]
		key, ok := rule.Source.Key(r)
		if !ok {
			switch rule.Missing {
			case MissingPass:
				continue
			case MissingDegrade:
				v := perkey.Verdict{Strategy: limiter.KeyVisit}
				c.exitKeys()
				return keyVerdict{Verdict: v, rule: rule, label: "missing"}
			}
			key = sharedMissingKey
		}
		sum := h.hasher.Sum64(key)
		v := rule.Table.Enter(&c.keys[i], now, sum)
		if !v.Allowed {
			c.exitKeys()
			return keyVerdict{Verdict: v, rule: rule, label: h.hasher.Label(sum)}
		}
	}
	return keyVerdict{Verdict: perkey.Verdict{Allowed: true}}
}

// exitKeys frees the calls in flight c holds on its point's per-key
// rules. It is safe to call more than once.
func (c *call) exitKeys() {
	for i := range c.keys {
		c.keys[i].Exit()
	}
}

// keySources returns the per-key rules as the metrics and the admin
// port read them.
func keySources(rules []KeyRule) []metrics.KeySource {
	if len(rules) == 0 {
		return nil
	}
	out := make([]metrics.KeySource, len(rules))
	for i, k := range rules {
		out[i] = metrics.KeySource{Source: k.Source.String(), Table: k.Table}
	}
	return out
}

// keyField is the access log's "key" field: the label of the key that
// degraded the request (or would have, on a shadow point), or nothing.
func keyField(label string) zap.Field {
	if label == "" {
		return zap.Skip()
	}
	return zap.String("key", label)
}
