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
	counts := p.VisitThreshold != limiter.Threshold{} || p.TokensPerSecond != limiter.Threshold{} ||
		p.ConcurrentThreshold != limiter.Threshold{} || a.On
	countsKnown := c.d.good(pl(p, keyVisitThreshold), pl(p, keyTokenBucketGeneratedTokensInSecond), pl(p, keyConcurrentThreshold))
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
