package config

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// points checks each point: its name, that a route names it, its
// settings alone and together, and its fallback.
func (c *checker) points() {
	f := c.d.f
	named := map[string]bool{}
	sheddable := map[string]bool{} // named by a route of priority sheddable
	allKnown := !c.d.bad[top(keyRoutes)] || len(f.Routes) > 0
	for i, r := range f.Routes {
		if c.d.bad[loc{route: i + 1}] || c.d.bad[rl(i+1, keyRoutePoint)] {
			allKnown = false
			continue
		}
		named[r.Point] = true
		if r.Priority == limiter.PrioritySheddable {
			sheddable[r.Point] = true
		}
	}
	for i := range f.Points {
		p := &f.Points[i]
		switch {
		case p.Name == "":
			c.p.add(c.key(loc{point: p.Name}), "a point's name is empty; name it, such as orders.read:")
		case !pointNameRE.MatchString(p.Name):
			c.p.add(c.key(loc{point: p.Name}), "point name %q: use up to %d letters, digits, '.', '_' and '-' (the name appears in metric labels and the Sds-Degraded header)", p.Name, maxNameLen)
		}
		if allKnown && !named[p.Name] {
			c.p.add(c.key(loc{point: p.Name}), "point %q is not named by any route, so it never sees a request; add a route with %s: %s, or remove the point", p.Name, keyRoutePoint.name, p.Name)
		}
		if c.d.bad[loc{point: p.Name}] {
			continue
		}
		c.thresholds(p)
		c.combinations(p)
		c.protection(p, sheddable[p.Name], allKnown)
		c.perKey(p)
		c.stale(p)
		c.fallback(p)
	}
}

// pl is the location of the key k of point p.
func pl(p *Point, k *key) loc { return loc{point: p.Name, field: k.path} }

// thresholds checks each setting of a point on its own: the limits of
// limiter.Policy.Check, and values that would degrade every request,
// which the file can only mean by mistake.
func (c *checker) thresholds(p *Point) {
	if l := pl(p, keyTimeoutThreshold); c.d.ok(l) && p.TimeoutThreshold == 0 {
		c.wrong(l, "0 counts every call as a timeout; write a duration such as 250ms, or -1 to turn it off")
	}
	for _, t := range []struct {
		key *key
		v   limiter.Threshold
	}{
		{keyTimeoutCountThreshold, p.TimeoutCountThreshold},
		{keyConcurrentThreshold, p.ConcurrentThreshold},
		{keyExceptionThreshold, p.ExceptionThreshold},
		{keyExceptionRateThreshold, p.ExceptionRateThreshold},
	} {
		if l := pl(p, t.key); c.d.ok(l) && t.v == limiter.At(0) {
			c.wrong(l, "0 would degrade every request; write a count such as 5, or -1 to turn it off (%s: 0 is the switch that degrades everything)", keyVisitThreshold.name)
		}
	}
	if err := p.Policy.Check(); err != nil {
		errs := []error{err}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = joined.Unwrap()
		}
		for _, e := range errs {
			var fe *limiter.FieldError
			if !errors.As(e, &fe) {
				c.p.add(c.key(loc{point: p.Name}), "%v", e)
				continue
			}
			c.wrong(loc{point: p.Name, field: policyKey(fe.Field)}, "%s", fe.Problem)
		}
	}
	if l := pl(p, keyUpstreamTimeout); c.d.ok(l) && p.UpstreamTimeout < 0 && p.UpstreamTimeout != -time.Millisecond {
		c.wrong(l, "%v is negative; write a duration such as 2s, or -1 (or remove it) to turn it off", p.UpstreamTimeout)
	}
}

// policyKey returns the path of the point key of field, as a
// limiter.FieldError names it ("AdaptiveConcurrency.MinLimit"); field
// itself when no key has it.
func policyKey(field string) string {
	sec, path := pointSection, field
	for name := range strings.SplitSeq(field, ".") {
		i := slices.IndexFunc(sec.keys, func(k *key) bool { return k.field == name })
		if i < 0 {
			return field
		}
		path, sec = sec.keys[i].path, sec.keys[i].section
	}
	return path
}

// sdsValue returns t as the file spells it: -1 when off.
func sdsValue(t limiter.Threshold) int64 {
	if n, on := t.Get(); on {
		return n
	}
	return -1
}

// needs reports, at the key k of point p, that k is set without the key
// other it works with, absent or off (as written: "-1 (off)", "0 (off)"):
// why k then does nothing, and an example of other.
func (c *checker) needs(p *Point, k, other *key, why, example string) {
	state, verb := "not", "add"
	if l := pl(p, other); c.d.has(l) {
		state, verb = "0 (off)", "set"
		if text, ok := c.d.negative[l]; ok {
			state = text + " (off)"
		}
	}
	c.p.add(c.key(pl(p, k)), "%[1]s is set but %[2]s is %[5]s: %[3]s; %[6]s %[2]s: %[4]s or remove %[1]s", k.path, other.path, why, example, state, verb)
}

// combinations checks the settings of a point that only work together:
// settings that would silently do nothing are errors.
func (c *checker) combinations(p *Point) {
	// on: present, well typed and above floor; off: absent, or well typed
	// and at most floor.
	on := func(k *key, v, floor int64) bool { return c.d.ok(pl(p, k)) && v > floor }
	off := func(k *key, v, floor int64) bool {
		return !c.d.has(pl(p, k)) || c.d.ok(pl(p, k)) && v <= floor
	}
	timeout, count := int64(p.TimeoutThreshold), sdsValue(p.TimeoutCountThreshold)
	delay, retry := int64(p.DelayTime), int64(p.RetryInterval)

	if on(keyTimeoutCountThreshold, count, 0) && off(keyTimeoutThreshold, timeout, -1) {
		c.needs(p, keyTimeoutCountThreshold, keyTimeoutThreshold, "no call is ever counted as a timeout", "250ms")
	}
	if on(keyTimeoutThreshold, timeout, 0) && off(keyTimeoutCountThreshold, count, -1) {
		c.needs(p, keyTimeoutThreshold, keyTimeoutCountThreshold, "timeouts are counted but never degrade", "5")
	}
	if on(keyRetryInterval, retry, 0) && off(keyDelayTime, delay, 0) {
		c.needs(p, keyRetryInterval, keyDelayTime, "there is no delay to probe", "30s")
	}
	if on(keyRetryInterval, retry, 0) && on(keyDelayTime, delay, 0) && retry >= delay {
		c.p.add(c.val(pl(p, keyRetryInterval)), "%s %v is not shorter than %s %v: the delay ends before the first probe; make it shorter, such as 2s", keyRetryInterval.path, p.RetryInterval, keyDelayTime.path, p.DelayTime)
	}
	upstream := int64(p.UpstreamTimeout)
	if on(keyUpstreamTimeout, upstream, 0) && on(keyTimeoutThreshold, timeout, 0) && upstream < timeout {
		c.p.add(c.val(pl(p, keyUpstreamTimeout)), "%[1]s %[2]v is shorter than %[3]s %[4]v: every call is cut before it can count as a timeout, so the timeout strategy never trips; make %[1]s at least %[4]v", keyUpstreamTimeout.path, p.UpstreamTimeout, keyTimeoutThreshold.path, p.TimeoutThreshold)
	}
	if on(keyExceptionRateStart, p.ExceptionRateStart, -1) && off(keyExceptionRateThreshold, sdsValue(p.ExceptionRateThreshold), -1) {
		c.needs(p, keyExceptionRateStart, keyExceptionRateThreshold, "the rate is never judged", "50")
	}
	size, rate := sdsValue(p.TokenBucketSize), sdsValue(p.TokensPerSecond)
	if on(keyTokenBucketSize, size, 0) && off(keyTokenBucketGeneratedTokensInSecond, rate, -1) {
		c.needs(p, keyTokenBucketSize, keyTokenBucketGeneratedTokensInSecond, "there is no bucket", "100")
	}
	if on(keyTokenBucketSize, size, 0) && on(keyTokenBucketGeneratedTokensInSecond, rate, 0) && size < rate {
		c.p.add(c.val(pl(p, keyTokenBucketSize)), "%s %d is below %s %d: the bucket holds max(size, rate) = %d tokens, so the size has no effect; raise it to at least %d or remove it", keyTokenBucketSize.path, size, keyTokenBucketGeneratedTokensInSecond.path, rate, rate, rate)
	}
	if l := pl(p, keyPressureTestDowngrade); c.d.ok(l) && p.PressureTestDowngrade && c.d.f.PressureTestHeader == "" {
		c.p.add(c.key(l), "%[1]s is true but %[2]s is not set at the top level, so no request is pressure-test traffic; add %[2]s: X-Pressure-Test", l.field, keyPressureTestHeader.path)
	}
	strategy, known := c.strategy(p)
	if !known {
		return
	}
	if !strategy && on(keyDelayTime, delay, 0) {
		c.p.add(c.key(pl(p, keyDelayTime)), "%[1]s is set but no strategy is: nothing trips, so the delay never starts; add a threshold or remove %[1]s", keyDelayTime.path)
	}
	if l := pl(p, keyFallback); c.d.has(l) && !strategy && !p.PressureTestDowngrade && !p.FallbackOnError && c.d.good(pl(p, keyPressureTestDowngrade), pl(p, keyFallbackOnError)) {
		c.p.add(c.key(l), "the fallback is never served: point %q has no strategy, no %s and no %s; add a threshold or remove %s", p.Name, keyPressureTestDowngrade.path, keyFallbackOnError.path, l.field)
	}
}

// strategy reports whether a point has a strategy on; known is false when
// a threshold's value was of the wrong type. A threshold given a value
// that is wrong but not off (0 for a count) counts as on: it is reported
// on its own.
func (c *checker) strategy(p *Point) (on, known bool) {
	set := func(k *key, v int64) bool { return c.d.has(pl(p, k)) && v >= 0 }
	on = set(keyVisitThreshold, sdsValue(p.VisitThreshold)) ||
		set(keyTokenBucketGeneratedTokensInSecond, sdsValue(p.TokensPerSecond)) ||
		set(keyConcurrentThreshold, sdsValue(p.ConcurrentThreshold)) ||
		set(keyExceptionThreshold, sdsValue(p.ExceptionThreshold)) ||
		set(keyExceptionRateThreshold, sdsValue(p.ExceptionRateThreshold)) ||
		set(keyTimeoutThreshold, int64(p.TimeoutThreshold)) && set(keyTimeoutCountThreshold, sdsValue(p.TimeoutCountThreshold))
	known = c.d.good(pl(p, keyVisitThreshold), pl(p, keyTokenBucketGeneratedTokensInSecond), pl(p, keyConcurrentThreshold),
		pl(p, keyExceptionThreshold), pl(p, keyExceptionRateThreshold), pl(p, keyTimeoutThreshold), pl(p, keyTimeoutCountThreshold))
	return on && known, known
}

// fallback checks a point's fallback response.
func (c *checker) fallback(p *Point) {
	fb := p.Fallback
	if l := pl(p, keyFallbackStatus); c.d.ok(l) && (fb.Status == http.StatusNoContent || fb.Status == http.StatusNotModified) && len(fb.Body) > 0 {
		c.wrong(l, "a %d response has no body, so the body would be dropped; remove %s or use another status", fb.Status, keyFallbackBody.name)
	}
	if c.d.has(pl(p, keyFallbackBody)) && c.d.has(pl(p, keyFallbackBodyFile)) {
		c.p.add(c.key(pl(p, keyFallbackBodyFile)), "%s: give %s or %s, not both", keyFallback.path, keyFallbackBody.name, keyFallbackBodyFile.name)
	}
	c.grpcFallback(p)
	headers := pl(p, keyFallbackHeaders)
	first := map[string]pos{}
	for i, h := range fb.Headers {
		l := headers.item(i)
		name, value := h[0], h[1]
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !tokenRE.MatchString(name):
			c.p.add(c.key(l), "%s: %q is not a header name; write one such as Content-Type", headers.field, name)
			continue
		case canon == "Content-Length" || canon == "Transfer-Encoding":
			c.p.add(c.key(l), "%s: %s is set by the proxy from the body; remove it", headers.field, name)
			continue
		case strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
			c.p.add(c.val(l), "%s: the value of %s contains a control character (a line break?); write it on one line", headers.field, name)
		}
		at := c.key(l)
		if prev, ok := first[canon]; ok && prev != at {
			c.p.add(at, "%s: %s is given twice (first at line %d), as header names ignore case; give one name a list of values", headers.field, name, prev.line)
			continue
		}
		first[canon] = at
	}
}

// grpcFallback warns when the config carries gRPC (h2c: true, or an
// h2c:// upstream) and a fallback sets status, body or bodyFile but
// neither grpcStatus nor grpcMessage: gRPC clients never get that HTTP
// answer, so its author most likely meant something they do not see.
func (c *checker) grpcFallback(p *Point) {
	f := c.d.f
	carriesGRPC := f.H2C || strings.HasPrefix(f.Upstream, "h2c://")
	httpAnswer := c.d.has(pl(p, keyFallbackStatus)) || c.d.has(pl(p, keyFallbackBody)) || c.d.has(pl(p, keyFallbackBodyFile))
	grpcAnswer := c.d.has(pl(p, keyFallbackGRPCStatus)) || c.d.has(pl(p, keyFallbackGRPCMessage))
	if carriesGRPC && httpAnswer && !grpcAnswer {
		via := keyH2C.name + ": true"
		if !f.H2C {
			via = "the h2c:// upstream"
		}
		c.p.warn(c.key(pl(p, keyFallback)), "point %q: gRPC clients (%s) never get this fallback's HTTP status and body; they get grpc-status 14 (UNAVAILABLE) with a message naming the point and strategy; set %s or %s to say what they get", p.Name, via, keyFallbackGRPCStatus.path, keyFallbackGRPCMessage.path)
	}
}

// protection checks a point's recovery ramp, adaptive limit and sheddable
// share (docs/protections.md): values the limiter would take for its
// defaults, and settings that would do nothing. sheddable reports whether
// a route of priority sheddable names the point (false when a route could
// not be read).
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

// stale reports a point's stale: that can keep nothing: staleCache's
// maxBytes is 0.
func (c *checker) stale(p *Point) {
	l := pl(p, keyStale)
	if !c.d.ok(l) || c.d.f.StaleCache.MaxBytes > 0 || !c.d.good(top(keyStaleCacheMaxBytes)) {
		return
	}
	c.p.add(c.key(l), "%s is set but %s is 0, so no answer is ever kept; remove %s or set %s: 64MiB", l.field, keyStaleCacheMaxBytes.path, l.field, keyStaleCacheMaxBytes.path)
}
