package config

import (
	"errors"
	"fmt"
	"net/http"
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
	allKnown := !c.d.bad[top("routes")] || len(f.Routes) > 0
	for i, r := range f.Routes {
		if c.d.bad[loc{route: i + 1}] || c.d.bad[loc{route: i + 1, field: "point"}] {
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
		case len(p.Name) > maxNameLen || strings.ContainsFunc(p.Name, func(r rune) bool { return !isNameChar(r) }):
			c.p.add(c.key(loc{point: p.Name}), "point name %q: use up to %d letters, digits, '.', '_' and '-' (the name appears in metric labels and the Sds-Degraded header)", p.Name, maxNameLen)
		}
		if allKnown && !named[p.Name] {
			c.p.add(c.key(loc{point: p.Name}), "point %q is not named by any route, so it never sees a request; add a route with point: %s, or remove the point", p.Name, p.Name)
		}
		if c.d.bad[loc{point: p.Name}] {
			continue
		}
		c.thresholds(p)
		c.combinations(p)
		c.protection(p, sheddable[p.Name], allKnown)
		c.fallback(p)
	}
}

// pl is the location of a point's key.
func pl(p *Point, field string) loc { return loc{point: p.Name, field: field} }

// thresholds checks each setting of a point on its own: the limits of
// limiter.Policy.Check, and the values the limiter runs but that would
// degrade every request, which the file can only mean by mistake.
func (c *checker) thresholds(p *Point) {
	degradeAll := func(field string) {
		c.p.add(c.val(pl(p, field)), "%s: 0 would degrade every request; write a count such as 5, or -1 to turn it off (visitThreshold: 0 is the switch that degrades everything)", field)
	}
	if c.d.ok(pl(p, "timeoutThreshold")) && p.TimeoutThreshold == 0 {
		c.p.add(c.val(pl(p, "timeoutThreshold")), "timeoutThreshold: 0 counts every call as a timeout; write a duration such as 250ms, or -1 to turn it off")
	}
	for _, t := range []struct {
		field string
		v     limiter.Threshold
	}{
		{"timeoutCountThreshold", p.TimeoutCountThreshold},
		{"concurrentThreshold", p.ConcurrentThreshold},
		{"exceptionThreshold", p.ExceptionThreshold},
		{"exceptionRateThreshold", p.ExceptionRateThreshold},
	} {
		if c.d.ok(pl(p, t.field)) && t.v == limiter.At(0) {
			degradeAll(t.field)
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
			key := policyKey(fe.Field)
			c.p.add(c.val(pl(p, key)), "%s: %s", key, fe.Problem)
		}
	}
	if l := pl(p, "upstreamTimeout"); c.d.ok(l) && p.UpstreamTimeout < 0 && p.UpstreamTimeout != -time.Millisecond {
		c.p.add(c.val(l), "upstreamTimeout: %v is negative; write a duration such as 2s, or -1 (or remove it) to turn it off", p.UpstreamTimeout)
	}
}

// policyKey returns the file's key of a limiter.Policy field: the field's
// name with a lower-case initial, but for the two the file names after
// SDS.
func policyKey(field string) string {
	switch field {
	case "TokensPerSecond":
		return "tokenBucketGeneratedTokensInSecond"
	case "Shadow":
		return "mode"
	}
	parts := strings.Split(field, ".") // AdaptiveConcurrency.MinLimit
	for i, part := range parts {
		parts[i] = strings.ToLower(part[:1]) + part[1:]
	}
	return strings.Join(parts, ".")
}

// sdsValue returns t as the file spells it: -1 when off.
func sdsValue(t limiter.Threshold) int64 {
	if n, on := t.Get(); on {
		return n
	}
	return -1
}

// combinations checks the settings of a point that only work together
// (README, Configuration: settings that would silently do nothing are errors).
func (c *checker) combinations(p *Point) {
	// on reports whether a setting is present, well typed and above floor.
	// off reports whether it is absent, or well typed and at most floor.
	on := func(field string, v, floor int64) bool { return c.d.ok(pl(p, field)) && v > floor }
	off := func(field string, v, floor int64) bool {
		return !c.d.has(pl(p, field)) || c.d.ok(pl(p, field)) && v <= floor
	}
	timeout, count := int64(p.TimeoutThreshold), sdsValue(p.TimeoutCountThreshold)
	delay, retry := int64(p.DelayTime), int64(p.RetryInterval)

	if on("timeoutCountThreshold", count, 0) && off("timeoutThreshold", timeout, -1) {
		c.p.add(c.key(pl(p, "timeoutCountThreshold")), "timeoutCountThreshold is set but timeoutThreshold is not: no call is ever counted as a timeout; add timeoutThreshold: 250ms or remove timeoutCountThreshold")
	}
	if on("timeoutThreshold", timeout, 0) && off("timeoutCountThreshold", count, -1) {
		c.p.add(c.key(pl(p, "timeoutThreshold")), "timeoutThreshold is set but timeoutCountThreshold is not: timeouts are counted but never degrade; add timeoutCountThreshold: 5 or remove timeoutThreshold")
	}
	if on("retryInterval", retry, 0) && off("delayTime", delay, 0) {
		c.p.add(c.key(pl(p, "retryInterval")), "retryInterval is set but delayTime is not: there is no delay to probe; add delayTime: 30s or remove retryInterval")
	}
	if on("retryInterval", retry, 0) && on("delayTime", delay, 0) && retry >= delay {
		c.p.add(c.val(pl(p, "retryInterval")), "retryInterval %v is not shorter than delayTime %v: the delay ends before the first probe; make it shorter, such as 2s", p.RetryInterval, p.DelayTime)
	}
	upstream := int64(p.UpstreamTimeout)
	if on("upstreamTimeout", upstream, 0) && on("timeoutThreshold", timeout, 0) && upstream < timeout {
		c.p.add(c.val(pl(p, "upstreamTimeout")), "upstreamTimeout %v is shorter than timeoutThreshold %v: every call is cut before it can count as a timeout, so the timeout strategy never trips; make upstreamTimeout at least %v", p.UpstreamTimeout, p.TimeoutThreshold, p.TimeoutThreshold)
	}
	if on("exceptionRateStart", p.ExceptionRateStart, -1) && off("exceptionRateThreshold", sdsValue(p.ExceptionRateThreshold), -1) {
		c.p.add(c.key(pl(p, "exceptionRateStart")), "exceptionRateStart is set but exceptionRateThreshold is not: the rate is never judged; add exceptionRateThreshold: 50 or remove exceptionRateStart")
	}
	size, rate := sdsValue(p.TokenBucketSize), sdsValue(p.TokensPerSecond)
	if on("tokenBucketSize", size, 0) && off("tokenBucketGeneratedTokensInSecond", rate, -1) {
		c.p.add(c.key(pl(p, "tokenBucketSize")), "tokenBucketSize is set but tokenBucketGeneratedTokensInSecond is not: there is no bucket; add tokenBucketGeneratedTokensInSecond: 100 or remove tokenBucketSize")
	}
	if on("tokenBucketSize", size, 0) && on("tokenBucketGeneratedTokensInSecond", rate, 0) && size < rate {
		c.p.add(c.val(pl(p, "tokenBucketSize")), "tokenBucketSize %d is below tokenBucketGeneratedTokensInSecond %d: the bucket holds max(size, rate) = %d tokens, so the size has no effect; raise it to at least %d or remove it", size, rate, rate, rate)
	}
	if l := pl(p, "pressureTestDowngrade"); c.d.ok(l) && p.PressureTestDowngrade && c.d.f.PressureTestHeader == "" {
		c.p.add(c.key(l), "pressureTestDowngrade is true but pressureTestHeader is not set at the top level, so no request is pressure-test traffic; add pressureTestHeader: X-Pressure-Test")
	}
	strategy, known := c.strategy(p)
	if !known {
		return
	}
	if !strategy && on("delayTime", delay, 0) {
		c.p.add(c.key(pl(p, "delayTime")), "delayTime is set but no strategy is: nothing trips, so the delay never starts; add a threshold or remove delayTime")
	}
	if l := pl(p, "fallback"); c.d.has(l) && !strategy && !p.PressureTestDowngrade && !p.FallbackOnError && c.d.good(pl(p, "pressureTestDowngrade"), pl(p, "fallbackOnError")) {
		c.p.add(c.key(l), "the fallback is never served: point %q has no strategy, no pressureTestDowngrade and no fallbackOnError; add a threshold or remove fallback", p.Name)
	}
}

// strategy reports whether a point has a strategy on; known is false when
// a threshold's value was of the wrong type. A threshold given a value
// that is wrong but not off (0 for a count) counts as on: it is reported
// on its own.
func (c *checker) strategy(p *Point) (on, known bool) {
	fields := map[string]int64{
		"visitThreshold":                     sdsValue(p.VisitThreshold),
		"tokenBucketGeneratedTokensInSecond": sdsValue(p.TokensPerSecond),
		"concurrentThreshold":                sdsValue(p.ConcurrentThreshold),
		"exceptionThreshold":                 sdsValue(p.ExceptionThreshold),
		"exceptionRateThreshold":             sdsValue(p.ExceptionRateThreshold),
		"timeoutThreshold":                   int64(p.TimeoutThreshold),
		"timeoutCountThreshold":              sdsValue(p.TimeoutCountThreshold),
	}
	set := map[string]bool{}
	for field, v := range fields {
		if c.d.bad[pl(p, field)] {
			return false, false
		}
		set[field] = c.d.has(pl(p, field)) && v >= 0
	}
	on = set["visitThreshold"] || set["tokenBucketGeneratedTokensInSecond"] || set["concurrentThreshold"] ||
		set["exceptionThreshold"] || set["exceptionRateThreshold"] || set["timeoutThreshold"] && set["timeoutCountThreshold"]
	return on, true
}

// fallback checks a point's fallback response.
func (c *checker) fallback(p *Point) {
	fb := p.Fallback
	if l := pl(p, "fallback.status"); c.d.ok(l) {
		switch {
		case fb.Status < 200 || fb.Status > 599:
			c.p.add(c.val(l), "fallback.status: %d is not a status a response can end with; write one from 200 to 599, such as 503 (1xx are informational)", fb.Status)
		case (fb.Status == http.StatusNoContent || fb.Status == http.StatusNotModified) && len(fb.Body) > 0:
			c.p.add(c.val(l), "fallback.status: a %d response has no body, so the body would be dropped; remove body or use another status", fb.Status)
		}
	}
	if c.d.has(pl(p, "fallback.body")) && c.d.has(pl(p, "fallback.bodyFile")) {
		c.p.add(c.key(pl(p, "fallback.bodyFile")), "fallback: give body or bodyFile, not both")
	}
	c.grpcFallback(p)
	first := map[string]pos{}
	for i, h := range fb.Headers {
		l := pl(p, fmt.Sprintf("fallback.headers[%d]", i))
		name, value := h[0], h[1]
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !isToken(name):
			c.p.add(c.key(l), "fallback.headers: %q is not a header name; write one such as Content-Type", name)
			continue
		case canon == "Content-Length" || canon == "Transfer-Encoding":
			c.p.add(c.key(l), "fallback.headers: %s is set by the proxy from the body; remove it", name)
			continue
		case strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
			c.p.add(c.val(l), "fallback.headers: the value of %s contains a control character (a line break?); write it on one line", name)
		}
		at := c.key(l)
		if prev, ok := first[canon]; ok && prev != at {
			c.p.add(at, "fallback.headers: %s is given twice (first at line %d), as header names ignore case; give one name a list of values", name, prev.line)
			continue
		}
		first[canon] = at
	}
}

// Limits of a fallback's gRPC answer.
const (
	maxGRPCStatus = 16 // UNAUTHENTICATED, the last code gRPC defines
	// maxGRPCMessage bounds grpcMessage, in bytes: it travels in a header,
	// and gRPC clients refuse header lists above 8-16 KiB.
	maxGRPCMessage = 1024
)

// grpcFallback checks a fallback's gRPC answer, and warns where an HTTP
// fallback is written for a point that gRPC clients may call without
// saying what they get.
//
// The rule (the README states it): when the config carries gRPC (h2c: true,
// or an h2c:// upstream), a fallback that sets status, body or bodyFile
// but neither grpcStatus nor grpcMessage is a warning. gRPC clients never
// get that HTTP answer (they get grpc-status 14 and a message naming the
// point and strategy), so its author most likely meant something for them
// that they do not see.
func (c *checker) grpcFallback(p *Point) {
	fb := p.Fallback
	if l := pl(p, "fallback.grpcStatus"); c.d.ok(l) && (fb.GRPCStatus < 0 || fb.GRPCStatus > maxGRPCStatus) {
		c.p.add(c.val(l), "fallback.grpcStatus: %d is not a gRPC status code; write one from 0 to %d, such as 14 (UNAVAILABLE) or 8 (RESOURCE_EXHAUSTED)", fb.GRPCStatus, maxGRPCStatus)
	}
	if l := pl(p, "fallback.grpcMessage"); c.d.ok(l) {
		switch {
		case fb.GRPCMessage == "":
			c.p.add(c.val(l), "fallback.grpcMessage is empty; remove it for the default message, which names the point and the strategy")
		case len(fb.GRPCMessage) > maxGRPCMessage:
			c.p.add(c.val(l), "fallback.grpcMessage: %d bytes is more than %d; gRPC clients refuse large headers, so keep it short", len(fb.GRPCMessage), maxGRPCMessage)
		}
	}
	f := c.d.f
	carriesGRPC := f.H2C || strings.HasPrefix(f.Upstream, "h2c://")
	httpAnswer := c.d.has(pl(p, "fallback.status")) || c.d.has(pl(p, "fallback.body")) || c.d.has(pl(p, "fallback.bodyFile"))
	grpcAnswer := c.d.has(pl(p, "fallback.grpcStatus")) || c.d.has(pl(p, "fallback.grpcMessage"))
	if carriesGRPC && httpAnswer && !grpcAnswer {
		via := "h2c: true"
		if !f.H2C {
			via = "the h2c:// upstream"
		}
		c.p.warn(c.key(pl(p, "fallback")), "point %q: gRPC clients (%s) never get this fallback's HTTP status and body; they get grpc-status 14 (UNAVAILABLE) with a message naming the point and strategy; set fallback.grpcStatus or fallback.grpcMessage to say what they get", p.Name, via)
	}
}
