package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// perKey checks the per-key rules of point p: each has a key that
// parses, no key twice, at least one threshold, and every threshold
// within limiter/perkey's limits.
func (c *checker) perKey(p *Point) {
	seen := map[clientkey.Source]string{}
	for i, r := range p.PerKey {
		base := itemLoc(loc{point: p.Name}, keyPerKey, i)
		item := loc{point: p.Name, field: strings.TrimSuffix(base.field, ".")}
		if c.d.bad[item] {
			continue
		}
		at := func(k *key) loc { l := base; l.field += k.path; return l }
		switch kl := at(keyPerKeyKey); {
		case !c.d.has(kl):
			c.p.add(c.key(item), "%s of point %q has no %s: write where a request's key is, such as %s: header:X-Api-Key", item.field, p.Name, keyPerKeyKey.name, keyPerKeyKey.name)
		case c.d.ok(kl) && r.Key != "":
			src, err := r.Source()
			if err != nil {
				c.wrong(kl, "%v", err)
			} else if other, dup := seen[src]; dup {
				c.wrong(kl, "%s is the key of %s too, so each request would be judged twice on one key; put the thresholds of both in one rule", src, other)
			} else {
				seen[src] = item.field
			}
		}
		thresholds := []*key{keyPerKeyVisitThreshold, keyPerKeyTokenBucketGeneratedTokensInSecond, keyPerKeyConcurrentThreshold}
		for k, v := range map[*key]limiter.Threshold{keyPerKeyVisitThreshold: r.VisitThreshold, keyPerKeyConcurrentThreshold: r.ConcurrentThreshold} {
			if l := at(k); c.d.ok(l) && v == limiter.At(0) {
				c.wrong(l, "0 would degrade every request that has a key; write a count such as 100, or -1 to turn it off (the point's %s: 0 degrades everything)", keyVisitThreshold.name)
			}
		}
		none := r.VisitThreshold == limiter.Threshold{} && r.TokensPerSecond == limiter.Threshold{} && r.ConcurrentThreshold == limiter.Threshold{}
		known := !slices.ContainsFunc(thresholds, func(k *key) bool { return c.d.bad[at(k)] })
		if none && known && r.Missing != "degrade" {
			c.p.add(c.key(item), "%s of point %q has no threshold, so it never degrades a key; set %s, %s or %s", item.field, p.Name, keyPerKeyVisitThreshold.name, keyPerKeyTokenBucketGeneratedTokensInSecond.name, keyPerKeyConcurrentThreshold.name)
		}
		if l := at(keyPerKeyTokenBucketSize); c.d.ok(l) && r.TokenBucketSize != (limiter.Threshold{}) && r.TokensPerSecond == (limiter.Threshold{}) && c.d.good(at(keyPerKeyTokenBucketGeneratedTokensInSecond)) {
			c.p.add(c.key(l), "%s is set but %s is not: the bucket is never filled; add %s: 10 or remove %s", l.field, at(keyPerKeyTokenBucketGeneratedTokensInSecond).field, keyPerKeyTokenBucketGeneratedTokensInSecond.name, keyPerKeyTokenBucketSize.name)
		}
		c.perKeyLimits(p, r, item, base)
	}
}

// The memory the per-key rules of a config may hold: a table holds all of
// its memory from the start (limiter/perkey), about 2.3 MiB at the
// default maxKeys.
const (
	// perKeyWarnBytes is the total past which validation warns: a quarter
	// of the example Deployment's 128 MiB memory limit.
	perKeyWarnBytes = 32 << 20
	// perKeyMaxBytes is the total past which a config is rejected: no
	// sidecar is meant to hold more.
	perKeyMaxBytes = 2 << 30
)

// perKeyMemory reports a config whose per-key rules together hold more
// memory than a sidecar should: a warning past perKeyWarnBytes, an error
// past perKeyMaxBytes, at the rule that holds the most.
func (c *checker) perKeyMemory() {
	total, most := 0, 0
	var at loc
	for i := range c.d.f.Points {
		p := &c.d.f.Points[i]
		for j, r := range p.PerKey {
			n := perkey.Bytes(c.d.f.KeySettings(r))
			total += n
			if n > most {
				most, at = n, loc{point: p.Name, field: fmt.Sprintf("%s[%d]", keyPerKey.path, j)}
			}
		}
	}
	const mib = 1 << 20
	switch {
	case total > perKeyMaxBytes:
		c.p.add(c.key(at), "the per-key rules would hold %d MiB of memory from the start, more than %d MiB; lower their maxKeys (point %q's %s holds %d MiB)", total/mib, perKeyMaxBytes/mib, at.point, at.field, most/mib)
	case total > perKeyWarnBytes:
		c.p.warn(c.key(at), "the per-key rules hold %d MiB of memory from the start (point %q's %s holds %d MiB: a rule holds at most maxKeys × (120 + 20·buckets) bytes); size the sidecar's memory limit for it, or lower maxKeys", total/mib, at.point, at.field, most/mib)
	}
}

// perKeyLimits reports what limiter/perkey's Settings.Check rejects of
// the rule r, at the key of each field it names.
func (c *checker) perKeyLimits(p *Point, r PerKey, item, base loc) {
	err := c.d.f.KeySettings(r).Check()
	if err == nil {
		return
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var fe *limiter.FieldError
		i := -1
		if errors.As(e, &fe) {
			i = slices.IndexFunc(perKeySection.keys, func(k *key) bool { return k.field == fe.Field })
		}
		if i < 0 {
			c.p.add(c.key(item), "%s of point %q: %v", item.field, p.Name, e)
			continue
		}
		l := base
		l.field += perKeySection.keys[i].path
		if c.d.ok(l) {
			c.wrong(l, "%s", fe.Problem)
		}
	}
}
