package config

import (
	"strings"
	"testing"
)

// warningsOf parses src, which must have no error, and returns its
// warnings as "LINE:COL: warning: message".
func warningsOf(t *testing.T, src string, opts Options) []string {
	t.Helper()
	f, err := Parse("sds.yaml", []byte(src), opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, w := range f.Warnings {
		if !w.Warning {
			t.Errorf("%v: Warning is false", w)
		}
		got = append(got, strings.TrimPrefix(w.Error(), "sds.yaml:"))
	}
	return got
}

// TestGRPCUpstreamWarning: h2c: true with an http:// upstream takes gRPC
// from clients and calls the upstream over HTTP/1.1, so every gRPC call
// fails; validate warns at h2c and names h2c:// as the fix.
func TestGRPCUpstreamWarning(t *testing.T) {
	withUpstream := func(top, upstream string) string {
		return top + strings.Replace(withPoint("visitThreshold: 1"), "http://127.0.0.1:9000", upstream, 1)
	}
	const warning = "1:6: warning: h2c: true accepts cleartext HTTP/2 from clients, but the upstream http://127.0.0.1:9000 is called over HTTP/1.1, so gRPC calls fail; use h2c://127.0.0.1:9000 for a gRPC upstream"
	for _, tt := range []struct {
		name string
		src  string
		opts Options
		want []string
	}{
		{"h2c with http upstream", withUpstream("h2c: true\n", "http://127.0.0.1:9000"), Options{}, []string{warning}},
		{"h2c with http upstream, no port", withUpstream("h2c: true\n", "http://svc"), Options{}, []string{"1:6: warning: h2c: true accepts cleartext HTTP/2 from clients, but the upstream http://svc is called over HTTP/1.1, so gRPC calls fail; use h2c://svc for a gRPC upstream"}},
		{"h2c with http upstream from the flag", "h2c: true\n" + strings.Replace(withPoint("visitThreshold: 1"), "upstream: http://127.0.0.1:9000\n", "", 1), Options{Upstream: "http://127.0.0.1:9000"}, []string{warning}},
		{"h2c with h2c upstream", withUpstream("h2c: true\n", "h2c://127.0.0.1:9000"), Options{}, nil},
		{"h2c with https upstream", withUpstream("h2c: true\n", "https://127.0.0.1:9000"), Options{}, nil},
		{"h2c false with http upstream", withUpstream("h2c: false\n", "http://127.0.0.1:9000"), Options{}, nil},
		{"no h2c with http upstream", withUpstream("", "http://127.0.0.1:9000"), Options{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, warningsOf(t, tt.src, tt.opts), tt.want)
		})
	}
}

// TestBareMillisWarning: a duration meant in seconds (a window, a delay)
// given as a bare integer from 1 to 999 is milliseconds, and most likely a
// forgotten unit: it is warned of at its value, with the seconds it
// probably meant. Durations counted in milliseconds (timeoutThreshold,
// upstreamTimeout) are not.
func TestBareMillisWarning(t *testing.T) {
	top := func(line string) string { return line + "\n" + withPoint("visitThreshold: 1") }
	point := func(lines string) string { return withPoint("visitThreshold: 1\n" + lines) }
	for _, tt := range []struct {
		name string
		src  string
		want []string
	}{
		{"window 10", top("window: 10"), []string{"1:9: warning: window is 10ms: a bare integer is milliseconds (as in SDS); did you mean 10s? (write 10ms if you meant milliseconds)"}},
		{"window 1", top("window: 1\nbuckets: 1"), []string{"1:9: warning: window is 1ms"}},
		{"window 999", top("window: 999\nbuckets: 1"), []string{"1:9: warning: window is 999ms: a bare integer is milliseconds (as in SDS); did you mean 999s?"}},
		{"window 1000", top("window: 1000"), nil},
		{"window 10s", top("window: 10s"), nil},
		{"window 10ms", top("window: 10ms"), nil},
		{"window quoted", top(`window: "10ms"`), nil},
		{"window through an alias", top("buckets: &n 10\nwindow: *n"), []string{"2:9: warning: window is 10ms"}},
		{"drainTimeout 25", top("drainTimeout: 25"), []string{"1:15: warning: drainTimeout is 25ms"}},
		{"drainTimeout 0", top("drainTimeout: 0"), nil},
		{"delayTime 30", point("delayTime: 30"), []string{"8:16: warning: delayTime is 30ms: a bare integer is milliseconds (as in SDS); did you mean 30s?"}},
		{"delayTime -1", point("delayTime: -1"), nil},
		{"delayTime 0", point("delayTime: 0"), nil},
		{"delayTime 30000", point("delayTime: 30000"), nil},
		{"retryInterval 2", point("delayTime: 30s\nretryInterval: 2"), []string{"9:20: warning: retryInterval is 2ms"}},
		{"recoveryTime 10", point("delayTime: 30s\nrecoveryTime: 10"), []string{"9:19: warning: recoveryTime is 10ms"}},
		{"minLatencyInterval 60", point("adaptiveConcurrency: {interval: 50, minLatencyInterval: 60}"), []string{"8:61: warning: adaptiveConcurrency.minLatencyInterval is 60ms"}},
		{"timeoutThreshold in milliseconds", point("timeoutThreshold: 250\ntimeoutCountThreshold: 5"), nil},
		{"upstreamTimeout in milliseconds", point("upstreamTimeout: 500"), nil},
		{"adaptive interval in milliseconds", point("adaptiveConcurrency: {interval: 100}"), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, warningsOf(t, tt.src, Options{}), tt.want)
		})
	}
}

// TestFilePrefixWarning: a pathPrefix whose last segment looks like a
// file's name without its extension matches whole segments only, so
// /index never matches /index.html: it is warned of at its value. Folder
// and API prefixes are not.
func TestFilePrefixWarning(t *testing.T) {
	route := func(prefix string) string {
		return strings.Replace(valid, "match: {}", "match: {pathPrefix: '"+prefix+"'}", 1) + "    visitThreshold: 1\n"
	}
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"/index", []string{`4:25: warning: route 1: pathPrefix "/index" matches whole path segments, so it matches /index and /index/... but not /index.html; to match the file, write path: /index.html`}},
		{"/Index", []string{`4:25: warning: route 1: pathPrefix "/Index" matches whole path segments, so it matches /Index and /Index/... but not /Index.html`}},
		{"/docs/index", []string{`4:25: warning: route 1: pathPrefix "/docs/index" matches whole path segments, so it matches /docs/index and /docs/index/... but not /docs/index.html`}},
		{"/favicon", []string{`4:25: warning: route 1: pathPrefix "/favicon" matches whole path segments, so it matches /favicon and /favicon/... but not /favicon.ico`}},
		{"/robots", []string{`4:25: warning: route 1: pathPrefix "/robots" matches whole path segments, so it matches /robots and /robots/... but not /robots.txt`}},
		{"/sitemap", []string{`4:25: warning: route 1: pathPrefix "/sitemap"`}},
		{"/static/main", []string{`4:25: warning: route 1: pathPrefix "/static/main" matches whole path segments, so it matches /static/main and /static/main/... but not /static/main.js`}},
		{"/static/js/app", []string{`4:25: warning: route 1: pathPrefix "/static/js/app" matches whole path segments, so it matches /static/js/app and /static/js/app/... but not /static/js/app.js`}},
		{"/assets/css/main", []string{`4:25: warning: route 1: pathPrefix "/assets/css/main" matches whole path segments, so it matches /assets/css/main and /assets/css/main/... but not /assets/css/main.css`}},
		{"/dist/styles", []string{`4:25: warning: route 1: pathPrefix "/dist/styles" matches whole path segments, so it matches /dist/styles and /dist/styles/... but not /dist/styles.css`}},
		// Not judged: folders, API resources, names with an extension,
		// build names outside a folder of assets, other spellings.
		{"/index/", nil},
		{"/index.html", nil},
		{"/indexes", nil},
		{"/api/orders", nil},
		{"/app", nil},
		{"/main", nil},
		{"/api/main", nil},
		{"/static/img", nil},
		{"/static/", nil},
		{"/", nil},
		{"/x/../index", nil},
	} {
		t.Run(tt.prefix, func(t *testing.T) {
			checkProblems(t, warningsOf(t, route(tt.prefix), Options{}), tt.want)
		})
	}
}

// TestExactPathNoFileWarning: an exact path is what it says, /index
// included: only prefixes are judged.
func TestExactPathNoFileWarning(t *testing.T) {
	src := strings.Replace(valid, "match: {}", "match: {path: /index}", 1) + "    visitThreshold: 1\n"
	checkProblems(t, warningsOf(t, src, Options{}), nil)
}
