package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/sds-proxy/sds-proxy/config"
	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
	"github.com/sds-proxy/sds-proxy/proxy"
)

// translateShared turns a validated config file into the request path's
// Config, once per load (the start, and each reload). Points of prev (the
// config in force, or nil) with the same name keep their limiter state:
// counts, calls in flight, token bucket and delay survive a reload when the
// window shape is unchanged. shared holds the points' shared token buckets
// by point name (sharedBuckets; nil without cluster:); a point absent from
// it has none.
func translateShared(f *config.File, prev *proxy.Config, shared map[string]limiter.Gate) (*proxy.Config, error) {
	upstream, h2c, err := upstreamURL(f.Upstream)
	if err != nil {
		return nil, err
	}
	old := make(map[string]*proxy.Point)
	if prev != nil {
		for _, p := range prev.Points {
			old[p.Name()] = p
		}
	}
	cfg := &proxy.Config{
		Upstream:           upstream,
		UpstreamH2C:        h2c,
		ForwardedHeaders:   f.ForwardedHeaders,
		PressureTestHeader: f.PressureTestHeader,
		AccessLog:          f.AccessLog,
	}
	byName := make(map[string]*proxy.Point, len(f.Points))
	for i := range f.Points {
		cp := &f.Points[i]
		s := f.Settings(cp)
		var lim *limiter.Point
		if o, ok := old[cp.Name]; ok {
			lim, err = o.Limiter().Reconfigure(s)
		} else {
			lim, err = limiter.NewPoint(cp.Name, s)
		}
		if err != nil {
			return nil, fmt.Errorf("point %s: %w", cp.Name, err)
		}
		opts := pointOptions(cp, shared[cp.Name])
		if opts.Keys, err = keyRules(f, cp, old[cp.Name]); err != nil {
			return nil, fmt.Errorf("point %s: %w", cp.Name, err)
		}
		p := proxy.NewPoint(lim, opts)
		byName[cp.Name] = p
		cfg.Points = append(cfg.Points, p)
	}
	for i, r := range f.Routes {
		p, ok := byName[r.Point]
		if !ok {
			return nil, fmt.Errorf("route names unknown point %q", r.Point)
		}
		// NewRoute puts the paths in the normal form requests are routed
		// by, so that whichever spelling the file uses matches.
		rt, err := proxy.NewRoute(proxy.Route{Point: p, Priority: r.Priority, Rule: r.Rule()})
		if err != nil {
			return nil, fmt.Errorf("route %d: %w", i+1, err)
		}
		cfg.Routes = append(cfg.Routes, rt)
	}
	return cfg, nil
}

// keyRules builds the per-key rules of point cp of f. A rule whose key
// and settings are those of a rule of prev (the point in force, or nil)
// keeps its table, so that a reload gives no key a fresh budget; a
// changed rule starts empty.
func keyRules(f *config.File, cp *config.Point, prev *proxy.Point) ([]proxy.KeyRule, error) {
	var rules []proxy.KeyRule
	for i, k := range cp.PerKey {
		src, err := k.Source()
		if err != nil {
			return nil, fmt.Errorf("perKey[%d]: %w", i, err)
		}
		rule := proxy.KeyRule{Source: src, Missing: missing[k.Missing]}
		settings := f.KeySettings(k)
		if prev != nil {
			for _, old := range prev.Keys() {
				if old.Source == src && old.Table.Settings() == perkey.Defaults(settings) {
					rule.Table = old.Table
				}
			}
		}
		if rule.Table == nil {
			if rule.Table, err = perkey.New(settings); err != nil {
				return nil, fmt.Errorf("perKey[%d]: %w", i, err)
			}
		}
		rules = append(rules, rule)
	}
	return rules, nil
}

// missing maps a per-key rule's missing: ("" is pass).
var missing = map[string]proxy.Missing{"": proxy.MissingPass, "pass": proxy.MissingPass, "degrade": proxy.MissingDegrade, "shared": proxy.MissingShared}

// pointOptions maps the parts of a point besides its limiter; shared is
// its fleet-wide bucket, nil for none.
func pointOptions(cp *config.Point, shared limiter.Gate) proxy.PointOptions {
	o := proxy.PointOptions{
		UpstreamTimeout: cp.UpstreamTimeout,
		FallbackOnError: cp.FallbackOnError,
		Fallback:        fallback(cp.Fallback),
		Shared:          shared,
	}
	if cp.Stale.On {
		o.StaleMaxAge = cp.Stale.MaxAge
	}
	return o
}

// fallback maps a point's fallback: the HTTP answer and the gRPC answer.
func fallback(f config.Fallback) proxy.Fallback {
	h := make(http.Header, len(f.Headers))
	for _, kv := range f.Headers {
		h.Add(kv[0], kv[1])
	}
	return proxy.Fallback{
		Status: f.Status, Header: h, Body: f.Body, BodySet: f.BodySet,
		GRPCStatus: f.GRPCStatus, GRPCStatusSet: f.GRPCStatusSet, GRPCMessage: f.GRPCMessage,
	}
}

// upstreamURL parses the upstream; h2c:// means cleartext HTTP/2 to an
// http:// address.
func upstreamURL(raw string) (*url.URL, bool, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false, fmt.Errorf("upstream %q: %w", raw, err)
	}
	h2c := u.Scheme == "h2c"
	if h2c {
		u.Scheme = "http"
	}
	return u, h2c, nil
}
