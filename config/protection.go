package config

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// The keys of the recovery ramp, adaptive concurrency and priority
// shedding (README, "Recovery ramp, adaptive concurrency, priority
// shedding"): their decoding and the rules between them.

// priority decodes a route's priority into dst.
func (d *decoder) priority(dst *limiter.Priority) setter {
	return func(key string, v *yaml.Node) {
		s, ok := d.scalar(key, v, "!!str", "critical, default or sheddable")
		if !ok {
			return
		}
		pr, ok := limiter.ParsePriority(s.Value)
		if !ok {
			d.p.add(pos{v.Line, v.Column}, "priority: want critical, default or sheddable, got %q", s.Value)
			return
		}
		*dst = pr
	}
}

// adaptive decodes a point's adaptiveConcurrency into a, which it turns
// on; absent fields keep their defaults (limiter.AdaptiveConcurrency).
func (d *decoder) adaptive(n *yaml.Node, point string, a *limiter.AdaptiveConcurrency) {
	a.On = true
	d.fields(n, fmt.Sprintf("in the adaptiveConcurrency of point %q", point), loc{point: point, field: "adaptiveConcurrency."}, adaptiveSection, map[string]setter{
		"minLimit":           integer(d, &a.MinLimit),
		"maxLimit":           integer(d, &a.MaxLimit),
		"interval":           d.duration(&a.Interval),
		"tolerance":          d.percent(&a.Tolerance),
		"minLatencyInterval": d.duration(&a.MinLatencyInterval),
	})
}

// protection checks a point's recovery ramp, adaptive limit and sheddable
// share: values the limiter would take for its defaults, and settings that
// would do nothing. sheddable reports whether a route of priority
// sheddable names the point (false when a route could not be read).
func (c *checker) protection(p *Point, sheddable, routesKnown bool) {
	on := func(field string, positive bool) bool { return c.d.ok(pl(p, field)) && positive }
	if on("recoveryTime", p.RecoveryTime > 0) && c.d.good(pl(p, "delayTime")) && p.DelayTime <= 0 {
		c.p.add(c.key(pl(p, "recoveryTime")), "recoveryTime is set but delayTime is not: the ramp starts when a delay ends, so it never starts; add delayTime: 30s or remove recoveryTime")
	}
	if c.d.ok(pl(p, "recoveryStart")) && c.d.good(pl(p, "recoveryTime")) && p.RecoveryTime <= 0 {
		c.p.add(c.key(pl(p, "recoveryStart")), "recoveryStart is set but recoveryTime is not: there is no ramp to start; add recoveryTime: 10s or remove recoveryStart")
	}
	a := p.AdaptiveConcurrency
	for _, f := range []struct {
		field string
		bad   bool
		want  string
	}{
		{"minLimit", a.MinLimit < 1, "a limit of at least 1, such as 3"},
		{"maxLimit", a.MaxLimit < 1, "a limit of at least minLimit, such as 1000"},
		{"interval", a.Interval <= 0, "a duration of at least 1ms, such as 100ms"},
		{"minLatencyInterval", a.MinLatencyInterval <= 0, "a duration such as 1m"},
	} {
		if l := pl(p, "adaptiveConcurrency."+f.field); c.d.ok(l) && f.bad {
			c.p.add(c.val(l), "adaptiveConcurrency.%s: write %s (absent: the default)", f.field, f.want)
		}
	}
	counts := p.VisitThreshold != limiter.Threshold{} || p.TokensPerSecond != limiter.Threshold{} ||
		p.ConcurrentThreshold != limiter.Threshold{} || a.On
	countsKnown := c.d.good(pl(p, "visitThreshold"), pl(p, "tokenBucketGeneratedTokensInSecond"), pl(p, "concurrentThreshold"))
	if !c.d.ok(pl(p, "sheddableShare")) {
		if sheddable && !counts && countsKnown {
			c.p.warn(c.key(loc{point: p.Name}), "point %q: routes of priority sheddable name it, but it has no count threshold (visitThreshold, tokenBucketGeneratedTokensInSecond, concurrentThreshold, adaptiveConcurrency) for them to use a share of, so they are judged as default requests", p.Name)
		}
		return
	}
	if routesKnown && !sheddable {
		c.p.add(c.key(pl(p, "sheddableShare")), "sheddableShare is set but no route of priority sheddable names point %q, so no request uses it; add priority: sheddable to a route of the point or remove sheddableShare", p.Name)
	}
	if !counts && countsKnown {
		c.p.add(c.key(pl(p, "sheddableShare")), "sheddableShare is set but point %q has no count threshold to share (visitThreshold, tokenBucketGeneratedTokensInSecond, concurrentThreshold, adaptiveConcurrency); add one or remove sheddableShare", p.Name)
	}
}
