package config

import (
	"fmt"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// The keys of the recovery ramp, adaptive concurrency and priority
// shedding (docs/protections.md, "Recovery ramp, adaptive concurrency, priority
// shedding"): their decoding and the rules between them.

// protection checks a point's recovery ramp, adaptive limit and sheddable
// share: values the limiter would take for its defaults, and settings that
// would do nothing. sheddable reports whether a route of priority
// sheddable names the point (false when a route could not be read).
func (c *checker) protection(p *Point, sheddable, routesKnown bool) {
	on := func(k *key, positive bool) bool { return c.d.ok(pl(p, k)) && positive }
	if on(keyRecoveryTime, p.RecoveryTime > 0) && c.d.good(pl(p, keyDelayTime)) && p.DelayTime <= 0 {
		c.needs(p, keyRecoveryTime, keyDelayTime, "the ramp starts when a delay ends, so it never starts", "30s")
	}
	if c.d.ok(pl(p, keyRecoveryStart)) && c.d.good(pl(p, keyRecoveryTime)) && p.RecoveryTime <= 0 {
		c.needs(p, keyRecoveryStart, keyRecoveryTime, "there is no ramp to start", "10s")
	}
	a := p.AdaptiveConcurrency
	for _, f := range []struct {
		key  *key
		bad  bool
		want string
	}{
		{keyAdaptiveMinLimit, a.MinLimit < 1, "a limit of at least 1, such as 3"},
		{keyAdaptiveMaxLimit, a.MaxLimit < 1, "a limit of at least " + keyAdaptiveMinLimit.name + ", such as 1000"},
		{keyAdaptiveInterval, a.Interval <= 0, "a duration of at least 1ms, such as 100ms"},
		{keyAdaptiveMinLatencyInterval, a.MinLatencyInterval <= 0, "a duration such as 1m"},
	} {
		if l := pl(p, f.key); c.d.ok(l) && f.bad {
			c.wrong(l, "write %s (absent: the default)", f.want)
		}
	}
	q := p.Queue
	for _, f := range []struct {
		key  *key
		zero bool // the limiter takes 0 for its default, and judges the rest
		want string
	}{
		{keyQueueMaxWait, q.MaxWait == 0, "a wait of at least 1ms, such as 500ms"},
		{keyQueueTarget, q.Target == 0, "a duration of at least 1ms, such as 50ms"},
		{keyQueueInterval, q.Interval == 0, "a duration of at least the target, such as 1s"},
		{keyQueueMaxLength, q.MaxLength == 0, "a length of at least 1, such as 1000"},
	} {
		if l := pl(p, f.key); c.d.ok(l) && f.zero {
			c.wrong(l, "write %s instead of 0 (absent: the default)", f.want)
		}
	}
	counts := p.VisitThreshold != limiter.Threshold{} || p.TokensPerSecond != limiter.Threshold{} ||
		p.ConcurrentThreshold != limiter.Threshold{} || a.On
	countsKnown := c.d.good(pl(p, keyVisitThreshold), pl(p, keyTokenBucketGeneratedTokensInSecond), pl(p, keyConcurrentThreshold))
	limits := p.TokensPerSecond != limiter.Threshold{} || p.ConcurrentThreshold != limiter.Threshold{} || a.On
	if q := pl(p, keyQueue); c.d.ok(q) && !limits && countsKnown && c.d.good(pl(p, keyAdaptiveConcurrency)) {
		c.p.add(c.key(q), "%[1]s is set but point %[2]q has no limit to wait at (%[3]s, %[4]s or %[5]s), so no request ever waits; add one or remove %[1]s", q.field, p.Name, keyConcurrentThreshold.path, keyAdaptiveConcurrency.path, keyTokenBucketGeneratedTokensInSecond.path)
	}
	share := pl(p, keySheddableShare)
	if !c.d.ok(share) {
		if sheddable && !counts && countsKnown {
			c.p.warn(c.key(loc{point: p.Name}), "point %q: routes of %s sheddable name it, but it has no count threshold (%s) for them to use a share of, so they are judged as default requests", p.Name, keyRoutePriority.name, countKeys())
		}
		return
	}
	if routesKnown && !sheddable {
		c.p.add(c.key(share), "%[1]s is set but no route of %[2]s sheddable names point %[3]q, so no request uses it; add %[2]s: sheddable to a route of the point or remove %[1]s", share.field, keyRoutePriority.name, p.Name)
	}
	if !counts && countsKnown {
		c.p.add(c.key(share), "%[1]s is set but point %[2]q has no count threshold to share (%[3]s); add one or remove %[1]s", share.field, p.Name, countKeys())
	}
}

// countKeys names the count thresholds that a sheddable share divides.
func countKeys() string {
	return fmt.Sprintf("%s, %s, %s, %s", keyVisitThreshold.path, keyTokenBucketGeneratedTokensInSecond.path, keyConcurrentThreshold.path, keyAdaptiveConcurrency.path)
}
