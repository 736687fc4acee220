package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// TestDecodeProblems covers the strict decoding of sds.yaml (README,
// Configuration): each row is a
// file and every problem it must report, as LINE:COL: and a part of the
// message.
func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"empty file", "", []string{"1:1: the file is empty"}},
		{"comments only", "# nothing\n", []string{"1:1: the file is empty"}},
		{"null document", "---\n", []string{"1:1: the file is empty"}},
		{"not a mapping", "- a\n- b\n", []string{"1:1: the file must be a mapping of keys such as upstream: and points:, got a list"}},
		{"second document", valid + "    visitThreshold: 1\n---\nlisten: :1\n", []string{"8:1: a second YAML document starts here"}},
		{"syntax error", "upstream: [\n", []string{"1:1: YAML syntax: did not find expected node content"}},
		{"tab indentation", "points:\n\tp: {}\n", []string{"2:1: YAML syntax: a tab indents this line, and YAML indents with spaces only: replace the tab with spaces (the parser says: found character that cannot start any token)"}},
		{"tab after spaces", "upstream: http://a:1\npoints:\n  p:\n  \t  visitThreshold: 1\n", []string{"4:1: YAML syntax: a tab indents this line"}},
		{"tab in a list", "upstream: http://a:1\nroutes:\n  - point: p\n\t- point: q\n", []string{"4:1: YAML syntax: a tab indents this line"}},
		{"tab on the first line", "\tupstream: http://a:1\n", []string{"1:1: YAML syntax: a tab indents this line"}},
		{"tab in a value is no indentation", "upstream: [\t\n", []string{"1:1: YAML syntax: did not find expected node content"}},
		{"unknown top-level key", "lisen: :8080\n" + valid + "    visitThreshold: 1\n", []string{`1:1: unknown key "lisen" at the top level; did you mean "listen"?`}},
		{"unknown key, nothing near", "frobnicate: 1\n" + valid + "    visitThreshold: 1\n", []string{`1:1: unknown key "frobnicate" at the top level; known keys: accessLog, admin,`}},
		{"unknown point key", withPoint("visitTreshold: 1"), []string{`7:5: unknown key "visitTreshold" in point "p"; did you mean "visitThreshold"?`}},
		{"key in the wrong case", withPoint("VisitThreshold: 1"), []string{`7:5: unknown key "VisitThreshold" in point "p"; did you mean "visitThreshold"?`}},
		{"unknown match key", strings.Replace(valid, "match: {}", "match: {prefix: /x}", 1) + "    visitThreshold: 1\n", []string{`4:13: unknown key "prefix" in the match of route 1; known keys: host, methods, path, pathPrefix`}},
		{"unknown fallback key", withPoint("visitThreshold: 1\nfallback: {code: 503}"), []string{`8:16: unknown key "code" in the fallback of point "p"`}},
		{"duplicate top-level key", "upstream: http://a:1\n" + valid + "    visitThreshold: 1\n", []string{`2:1: the top level: duplicate key "upstream" (first at line 1)`}},
		{"duplicate point key", withPoint("visitThreshold: 1\nvisitThreshold: 2"), []string{`8:5: point "p": duplicate key "visitThreshold" (first at line 7)`}},
		{"duplicate point", valid + "    visitThreshold: 1\n  p:\n    visitThreshold: 2\n", []string{`8:3: points: duplicate key "p" (first at line 6)`}},
		{"merge key", withPoint("<<: {visitThreshold: 1}"), []string{"7:5: point \"p\": merge keys (<<) are not supported"}},
		{"string for integer", withPoint("visitThreshold: many"), []string{`7:21: visitThreshold: want an integer, got the string "many"`}},
		{"float for integer", withPoint("visitThreshold: 1.5"), []string{"7:21: visitThreshold: want an integer, got the number 1.5"}},
		{"integer out of range", withPoint("visitThreshold: 99999999999999999999"), []string{"7:21: visitThreshold: want an integer, got the number 99999999999999999999"}},
		{"list for integer", withPoint("visitThreshold: [1]"), []string{"7:21: visitThreshold: want an integer, got a list"}},
		{"no value", withPoint("visitThreshold:"), []string{"7:20: visitThreshold: want an integer, got no value"}},
		{"string for bool", withPoint("visitThreshold: 1\nfallbackOnError: yes"), []string{`8:22: fallbackOnError: want true or false, got the string "yes"`}},
		{"integer for string", "listen: 8080\n" + valid + "    visitThreshold: 1\n", []string{`1:9: listen: want a string, got the integer 8080; quote it: listen: "8080"`}},
		{"bad duration", withPoint("timeoutThreshold: fast\ntimeoutCountThreshold: 1"), []string{`7:23: timeoutThreshold: want a duration such as 250ms or an integer of milliseconds, got "fast"`}},
		{"duration without unit", withPoint(`timeoutThreshold: "250"` + "\ntimeoutCountThreshold: 1"), []string{`7:23: timeoutThreshold: want a duration such as 250ms or an integer of milliseconds, got "250"`}},
		{"duration as float", withPoint("timeoutThreshold: 0.5\ntimeoutCountThreshold: 1"), []string{"7:23: timeoutThreshold: want a duration such as 250ms or an integer of milliseconds, got the number 0.5"}},
		{"milliseconds out of range", withPoint("timeoutThreshold: 9223372036854775\ntimeoutCountThreshold: 1"), []string{"7:23: timeoutThreshold: 9223372036854775 milliseconds is out of range"}},
		{"bad mode", withPoint("visitThreshold: 1\nmode: enforced"), []string{`8:11: mode: want enforce or shadow, got "enforced"`}},
		{"point is not a mapping", valid + "    5\n", []string{`7:5: point "p": want a mapping, got the integer 5`}},
		{"routes not a list", "upstream: http://a:1\nroutes: {point: p}\npoints: {p: {visitThreshold: 1}}\n", []string{"2:9: routes: want a list of routes such as - point: orders.read, got a mapping"}},
		{"route not a mapping", strings.Replace(valid, "  - point: p\n    match: {}\n", "  - p\n  - point: p\n    match: {}\n", 1) + "    visitThreshold: 1\n", []string{"3:5: route 1: want a mapping with point: and match:, got the string \"p\""}},
		{"methods not a list", strings.Replace(valid, "match: {}", "match: {methods: GET}", 1) + "    visitThreshold: 1\n", []string{"4:22: methods: want a list such as [a, b], got the string \"GET\""}},
		{"body as a mapping", withPoint("visitThreshold: 1\nfallback:\n  body: {error: x}"), []string{"9:13: body: want a string, got a mapping"}},
		{"header value a mapping", withPoint("visitThreshold: 1\nfallback:\n  headers: {X-A: {b: c}}"), []string{"9:22: header X-A: want a value or a list of values, got a mapping"}},
		{"aliases resolve", withPoint("visitThreshold: &n 5\nconcurrentThreshold: *n"), nil},
		{"alias to a mapping", "upstream: http://a:1\nroutes: [{point: p, match: &all {}}, {point: q, match: *all}]\npoints:\n  p: &s {visitThreshold: 1}\n  q: *s\n", []string{"2:38: route 2 can never match: route 1 (line 2)"}},
		{"problems gathered", withPoint("visitThreshold: x\nconcurrentThreshold: y\nmode: z"), []string{
			`7:21: visitThreshold: want an integer`,
			`8:26: concurrentThreshold: want an integer`,
			`9:11: mode: want enforce or shadow`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, problemsOf(t, tt.src, Options{}), tt.want)
		})
	}
}

// problemCase is a config and the problems validation reports in it, as
// LINE:COL: message prefixes.
type problemCase struct {
	name string
	src  string
	want []string
}

// checkProblemCases parses each case's config and checks its problems.
func checkProblemCases(t *testing.T, tests []problemCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, problemsOf(t, tt.src, Options{}), tt.want)
		})
	}
}

// topLines returns valid with lines before it at the top level.
func topLines(lines string) string { return lines + "\n" + valid + "    visitThreshold: 1\n" }

// routeMatch returns valid with its route's match replaced.
func routeMatch(match string) string {
	return strings.Replace(valid, "match: {}", "match: "+match, 1) + "    visitThreshold: 1\n"
}

// TestValidateProblems: each problem of the top level is reported at its
// line and column, with what to write instead.
func TestValidateProblems(t *testing.T) {
	checkProblemCases(t, []problemCase{
		// Addresses.
		{"listen without port", topLines("listen: 0.0.0.0"), []string{`1:9: listen: "0.0.0.0" is not a host:port address; write it as 0.0.0.0:8080`}},
		{"listen port too big", topLines("listen: :70000"), []string{`1:9: listen: port "70000" is not a number from 0 to 65535`}},
		{"listen bad host", topLines("listen: 'a b:80'"), []string{`1:9: listen: host "a b" is neither an IP address nor a host name`}},
		{"listen port 0", topLines("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0"), nil},
		{"listen ipv6", topLines("listen: '[::1]:8080'"), nil},
		{"admin on listen's port", topLines("listen: :8080\nadmin: 127.0.0.1:8080"), []string{"2:8: admin: 127.0.0.1:8080 is the same port as listen :8080"}},
		{"admin bad", topLines("admin: localhost"), []string{`1:8: admin: "localhost" is not a host:port address; write it as 0.0.0.0:9901`}},
		// Upstream.
		{"upstream without scheme", strings.Replace(valid, "http://127.0.0.1:9000", "127.0.0.1:9000", 1) + "    visitThreshold: 1\n", []string{`1:11: upstream: "127.0.0.1:9000" has no scheme; write http://127.0.0.1:9000`}},
		{"upstream bad scheme", strings.Replace(valid, "http://", "grpc://", 1) + "    visitThreshold: 1\n", []string{`1:11: upstream: scheme "grpc" is not supported`}},
		{"upstream no host", strings.Replace(valid, "http://127.0.0.1:9000", "http:///x", 1) + "    visitThreshold: 1\n", []string{`1:11: upstream: "http:///x" has no host`}},
		{"upstream path", strings.Replace(valid, ":9000", ":9000/api", 1) + "    visitThreshold: 1\n", []string{`1:11: upstream: "http://127.0.0.1:9000/api" has a path, query or fragment; requests keep their own path, so write http://127.0.0.1:9000`}},
		{"upstream query", strings.Replace(valid, ":9000", ":9000/?a=1", 1) + "    visitThreshold: 1\n", []string{`1:11: upstream: "http://127.0.0.1:9000/?a=1" has a path, query or fragment`}},
		{"upstream slash", strings.Replace(valid, ":9000", ":9000/", 1) + "    visitThreshold: 1\n", nil},
		{"upstream user", strings.Replace(valid, "http://", "http://u:p@", 1) + "    visitThreshold: 1\n", []string{`1:11: upstream: "http://u:p@127.0.0.1:9000" carries a user name or password`}},
		{"upstream bad port", strings.Replace(valid, ":9000", ":0", 1) + "    visitThreshold: 1\n", []string{`1:11: upstream: port "0" is not a number from 1 to 65535`}},
		{"upstream https and h2c", strings.Replace(valid, "http://127.0.0.1:9000", "h2c://svc:50051", 1) + "    visitThreshold: 1\n", nil},
		{"upstream empty", strings.Replace(valid, "http://127.0.0.1:9000", "''", 1) + "    visitThreshold: 1\n", []string{"1:11: upstream is required"}},
		// Window.
		{"window uneven", topLines("window: 10s\nbuckets: 3"), []string{"2:10: window 10s does not split evenly into 3 buckets"}},
		{"window uneven, default buckets", topLines("window: 10001ns"), []string{"1:9: window 10.001µs does not split evenly into 10 buckets"}},
		{"bucket too narrow", topLines("window: 5ms"), []string{"1:9: window 5ms split into 10 buckets gives buckets of 500µs; a bucket is at least 1ms"}},
		{"window zero", topLines("window: 0"), []string{"1:9: window: 0s is not a positive duration"}},
		{"buckets zero", topLines("buckets: 0"), []string{"1:10: buckets: 0 is not a count from 1 to 1000"}},
		{"buckets huge", topLines("buckets: 100000"), []string{"1:10: buckets: 100000 is not a count from 1 to 1000"}},
		{"window in milliseconds", topLines("window: 60000\nbuckets: 60"), nil},
		// Other top-level settings.
		{"drainTimeout negative", topLines("drainTimeout: -1s"), []string{"1:15: drainTimeout: -1s is negative"}},
		{"drainTimeout zero", topLines("drainTimeout: 0"), nil},
		{"maxConnections zero", topLines("maxConnections: 0"), []string{"1:17: maxConnections: 0 is not a count from 1 to 1000000"}},
		{"maxConnections negative", topLines("maxConnections: -1"), []string{"1:17: maxConnections: -1 is not a count from 1 to 1000000"}},
		{"maxConnections one", topLines("maxConnections: 1"), nil},
		{"maxConnections at its bound", topLines("maxConnections: 1000000"), nil},
		{"maxConnections over its bound", topLines("maxConnections: 1000001"), []string{"1:17: maxConnections: 1000001 is not a count from 1 to 1000000"}},
		{"maxConnections not a number", topLines("maxConnections: lots"), []string{"1:17: maxConnections: want an integer"}},
		{"pressureTestHeader not a name", topLines("pressureTestHeader: 'X Test'"), []string{`1:21: pressureTestHeader: "X Test" is not a header name`}},
		{"pressureTestHeader empty", topLines("pressureTestHeader: ''"), []string{"1:21: pressureTestHeader is empty"}},
		{"pressureTestDowngrade without header", withPoint("visitThreshold: 1\npressureTestDowngrade: true"), []string{"8:5: pressureTestDowngrade is true but pressureTestHeader is not set at the top level"}},
		{"pressureTestDowngrade with header", "pressureTestHeader: X-Test\n" + withPoint("pressureTestDowngrade: true"), nil},
	})
}

// TestValidateProblemsRoutes: the problems of TLS and of routes.
func TestValidateProblemsRoutes(t *testing.T) {
	checkProblemCases(t, []problemCase{
		// TLS.
		{"tls empty", topLines("tls: {}"), nil},
		{"certFile without keyFile", topLines("tls: {certFile: validate_test.go}"), []string{"1:7: tls.certFile is set but tls.keyFile is not"}},
		{"keyFile without certFile", topLines("tls: {keyFile: validate_test.go}"), []string{"1:7: tls.keyFile is set but tls.certFile is not"}},
		{"cert missing", topLines("tls: {certFile: nope.pem, keyFile: nope.key}"), []string{
			"1:17: tls.certFile: nope.pem does not exist",
			"1:36: tls.keyFile: nope.key does not exist",
		}},
		{"cert and acme", topLines("tls:\n  certFile: validate_test.go\n  keyFile: validate_test.go\n  acme: {domains: [a.example]}"), []string{"4:3: tls: give either certFile and keyFile or acme, not both"}},
		{"acme without domains", topLines("tls: {acme: {email: a@b.example}}"), []string{"1:7: tls.acme has no domains"}},
		{"acme bad domains", topLines("tls: {acme: {domains: ['*.a.example', 'a b', shop.example], email: nobody, ca: ftp://x}}"), []string{
			`1:24: tls.acme.domains: "*.a.example" is a wildcard`,
			`1:39: tls.acme.domains: "a b" is not a host name`,
			`1:68: tls.acme.email: "nobody" is not an email address`,
			`1:80: tls.acme.ca: "ftp://x" is not the URL of an ACME directory`,
		}},
		{"h2c with tls", topLines("h2c: true\ntls: {acme: {domains: [a.example]}}"), []string{"1:6: h2c: true has no effect with tls"}},
		{"h2c alone", topLines("h2c: true"), nil},
		// Routes.
		{"route without point", strings.Replace(valid, "    match: {}\n", "    match: {path: /a}\n  - match: {path: /b}\n", 1) + "    visitThreshold: 1\n", []string{"5:5: route 2 has no point; add point: and name one of: p"}},
		{"route without match", strings.Replace(valid, "    match: {}\n", "", 1) + "    visitThreshold: 1\n", []string{"3:5: route 1 has no match; write match: {} to match every request"}},
		{"route empty point", strings.Replace(valid, "point: p", "point: ''", 1) + "    visitThreshold: 1\n", []string{
			"3:12: route 1: point is empty; name one of: p",
			`6:3: point "p" is not named by any route`,
		}},
		{"route unknown point", strings.Replace(valid, "point: p", "point: q", 1) + "    visitThreshold: 1\n", []string{
			`3:12: route 1: point "q" is not defined under points:; did you mean "p"?`,
			`6:3: point "p" is not named by any route`,
		}},
		{"route unknown point, no points", "upstream: http://a:1\nroutes: [{point: x, match: {}}]\n", []string{`2:18: route 1: point "x" is not defined under points:`}},
		{"bad methods", routeMatch("{methods: [GET, get, 'GE T', GET]}"), []string{
			`4:28: route 1: method "get" is not upper case, and methods are case-sensitive; write GET`,
			`4:33: route 1: "GE T" is not an HTTP method`,
			`4:41: route 1: method GET is listed twice`,
		}},
		{"empty methods", routeMatch("{methods: []}"), []string{"4:22: route 1: methods is empty, which would match any method"}},
		{"path and prefix", routeMatch("{path: /a, pathPrefix: /a}"), []string{"4:23: route 1: give path (exact) or pathPrefix, not both"}},
		{"path without slash", routeMatch("{path: api}"), []string{`4:19: route 1: path "api" does not start with /; write /api`}},
		{"prefix with query", routeMatch("{pathPrefix: '/a?b'}"), []string{`4:25: route 1: pathPrefix "/a?b" contains ? or #`}},
		{"path with space", routeMatch("{path: '/a b'}"), []string{`4:19: route 1: path "/a b" contains a space or control character`}},
		{"path with encoded slash", routeMatch("{path: '/a%2Fb'}"), []string{`4:19: route 1: path "/a%2Fb" contains an encoded slash (%2F), so no request could match it: the proxy answers such a request 400 before routing; write / to match a path separator`}},
		{"prefix with encoded slash, lower case", routeMatch("{pathPrefix: '/a%2fb'}"), []string{`4:25: route 1: pathPrefix "/a%2fb" contains an encoded slash (%2f)`}},
		{"path with backslash", routeMatch(`{path: '/a\b'}`), []string{`4:19: route 1: path "/a\\b" contains a backslash, so no request could match it`}},
		{"path with encoded backslash", routeMatch("{path: '/a%5cb'}"), []string{`4:19: route 1: path "/a%5cb" contains an encoded backslash (%5c)`}},
		{"path with invalid escape", routeMatch("{path: '/a%zz'}"), []string{`4:19: route 1: path "/a%zz" has an invalid escape "%zz": % must be followed by two hexadecimal digits; write %25 for a % itself`}},
		{"path with cut escape", routeMatch("{pathPrefix: '/a%2'}"), []string{`4:25: route 1: pathPrefix "/a%2" has an invalid escape "%2"`}},
		{"path ending in %", routeMatch("{path: '/a%'}"), []string{`4:19: route 1: path "/a%" has an invalid escape "%"`}},
		{"path escaped", routeMatch("{path: '/a%20b'}"), nil},
		{"path escaped unreserved", routeMatch("{path: '/%7euser/%2e%2E/x'}"), nil},
		{"path with dot segments and slashes", routeMatch("{pathPrefix: '//x/./../api//'}"), nil},
		{"path with an escaped percent", routeMatch("{path: '/100%25'}"), nil},
		{"host with scheme", routeMatch("{host: 'http://a'}"), []string{`4:19: route 1: host "http://a" is not a host name`}},
		{"host with port", routeMatch("{host: 'shop.example:8443'}"), nil},
		{"host IPv6", routeMatch("{host: '[::1]'}"), nil},
		{"host IPv6 without brackets", routeMatch("{host: '::1'}"), nil},
		{"host IPv6 with port", routeMatch("{host: '[::1]:8080'}"), nil},
		{"host with trailing dot", routeMatch("{host: 'shop.example.'}"), nil},
		{"host empty", routeMatch("{host: ''}"), []string{"4:19: route 1: host is empty"}},
		{"route after catch-all", strings.Replace(valid, "    match: {}\n", "    match: {}\n  - point: p\n    match: {path: /x}\n", 1) + "    visitThreshold: 1\n", []string{"5:5: route 2 can never match: route 1 (line 3) matches every request it would"}},
		{"route after wider prefix", strings.Replace(valid, "    match: {}\n", "    match: {pathPrefix: /api}\n  - point: p\n    match: {methods: [GET], pathPrefix: /api/orders}\n", 1) + "    visitThreshold: 1\n", []string{"5:5: route 2 can never match: route 1 (line 3)"}},
		{"route after narrower prefix", strings.Replace(valid, "    match: {}\n", "    match: {pathPrefix: /api/orders}\n  - point: p\n    match: {pathPrefix: /api}\n", 1) + "    visitThreshold: 1\n", nil},
		{"route after prefix without boundary", strings.Replace(valid, "    match: {}\n", "    match: {pathPrefix: /api}\n  - point: p\n    match: {path: /apis}\n", 1) + "    visitThreshold: 1\n", nil},
		{"route after other methods", strings.Replace(valid, "    match: {}\n", "    match: {methods: [POST]}\n  - point: p\n    match: {methods: [GET]}\n", 1) + "    visitThreshold: 1\n", nil},
		{"route after a prefix, spelt with dot segments", strings.Replace(valid, "    match: {}\n", "    match: {pathPrefix: /api}\n  - point: p\n    match: {path: /api/../x}\n", 1) + "    visitThreshold: 1\n", nil},
		{"route after a prefix, spelt escaped", strings.Replace(valid, "    match: {}\n", "    match: {pathPrefix: /api}\n  - point: p\n    match: {path: '/api%2F..'}\n", 1) + "    visitThreshold: 1\n", []string{`6:19: route 2: path "/api%2F.." contains an encoded slash`}},
		{"route after other host", strings.Replace(valid, "    match: {}\n", "    match: {host: a.example}\n  - point: p\n    match: {}\n", 1) + "    visitThreshold: 1\n", nil},
	})
}

// TestValidatePointProblems: the problems of points, their limits and
// fallbacks, and no problem reported again from a value of the wrong type.
func TestValidatePointProblems(t *testing.T) {
	checkProblemCases(t, []problemCase{
		// Points.
		{"point not routed", valid + "    visitThreshold: 1\n  q:\n    visitThreshold: 1\n", []string{`8:3: point "q" is not named by any route, so it never sees a request`}},
		{"point name empty", "upstream: http://a:1\nroutes: [{point: '', match: {}}]\npoints:\n  '':\n    visitThreshold: 1\n", []string{
			"2:18: route 1: point is empty; define a point under points: first",
			"4:3: a point's name is empty",
		}},
		{"point name with space", "upstream: http://a:1\nroutes: [{point: a b, match: {}}]\npoints:\n  a b:\n    visitThreshold: 1\n", []string{`4:3: point name "a b": use up to 128 letters`}},
		{"point without strategy", withPoint("upstreamTimeout: 2s"), nil},
		{"point without settings", valid, nil},
		{"negative thresholds are off", withPoint("visitThreshold: -1\nconcurrentThreshold: -5\ntimeoutThreshold: -1\ntimeoutCountThreshold: -1\nexceptionThreshold: -2"), nil},
		{"timeoutCount without timeout", withPoint("timeoutCountThreshold: 5"), []string{"7:5: timeoutCountThreshold is set but timeoutThreshold is not: no call is ever counted as a timeout; add timeoutThreshold: 250ms or remove timeoutCountThreshold"}},
		{"timeoutCount with timeout off", withPoint("timeoutThreshold: -1\ntimeoutCountThreshold: 5"), []string{"8:5: timeoutCountThreshold is set but timeoutThreshold is -1 (off)"}},
		{"timeout without count", withPoint("timeoutThreshold: 250ms"), []string{"7:5: timeoutThreshold is set but timeoutCountThreshold is not: timeouts are counted but never degrade"}},
		{"timeout zero", withPoint("timeoutThreshold: 0\ntimeoutCountThreshold: 5"), []string{"7:23: timeoutThreshold: 0 counts every call as a timeout"}},
		{"timeout count zero", withPoint("timeoutThreshold: 1s\ntimeoutCountThreshold: 0"), []string{"8:28: timeoutCountThreshold: 0 would degrade every request"}},
		{"concurrent zero", withPoint("concurrentThreshold: 0"), []string{"7:26: concurrentThreshold: 0 would degrade every request"}},
		{"exception zero", withPoint("exceptionThreshold: 0"), []string{"7:25: exceptionThreshold: 0 would degrade every request"}},
		{"visit zero is the off switch", withPoint("visitThreshold: 0"), nil},
		{"exception rate over 100", withPoint("exceptionRateThreshold: 101"), []string{"7:29: exceptionRateThreshold: 101 is more than 100 percent"}},
		{"exception rate 100", withPoint("exceptionRateThreshold: 100"), nil},
		{"exception rate zero", withPoint("exceptionRateThreshold: 0"), []string{"7:29: exceptionRateThreshold: 0 would degrade every request"}},
		{"exceptionRateStart without rate", withPoint("visitThreshold: 1\nexceptionRateStart: 20"), []string{"8:5: exceptionRateStart is set but exceptionRateThreshold is not: the rate is never judged"}},
		{"exceptionRateStart zero without rate", withPoint("visitThreshold: 1\nexceptionRateStart: 0"), []string{"8:5: exceptionRateStart is set but exceptionRateThreshold is not"}},
		{"exceptionRateStart -1 without rate", withPoint("visitThreshold: 1\nexceptionRateStart: -1"), nil},
		{"token rate zero", withPoint("tokenBucketGeneratedTokensInSecond: 0"), []string{"7:41: tokenBucketGeneratedTokensInSecond: 0 never refills the bucket"}},
		{"token size without rate", withPoint("visitThreshold: 1\ntokenBucketSize: 10"), []string{"8:5: tokenBucketSize is set but tokenBucketGeneratedTokensInSecond is not: there is no bucket"}},
		{"token size below rate", withPoint("tokenBucketGeneratedTokensInSecond: 100\ntokenBucketSize: 99"), []string{"8:22: tokenBucketSize 99 is below tokenBucketGeneratedTokensInSecond 100: the bucket holds max(size, rate) = 100 tokens"}},
		{"token size equal to rate", withPoint("tokenBucketGeneratedTokensInSecond: 100\ntokenBucketSize: 100"), nil},
		{"token size zero", withPoint("tokenBucketGeneratedTokensInSecond: 100\ntokenBucketSize: 0"), []string{"8:22: tokenBucketSize: 0 holds no token"}},
		// Limits of the limiter: what validate accepts, the limiter runs.
		{"token rate above one per nanosecond", withPoint("tokenBucketGeneratedTokensInSecond: 2000000000"), []string{"7:41: tokenBucketGeneratedTokensInSecond: 2000000000 is more than 1000000000, one token per nanosecond"}},
		{"token rate one per nanosecond", withPoint("tokenBucketGeneratedTokensInSecond: 1000000000"), nil},
		{"token bucket that overflows its clock", withPoint("tokenBucketGeneratedTokensInSecond: 1\ntokenBucketSize: 9000000000000000000"), []string{"8:22: tokenBucketSize: 9000000000000000000 tokens at 1 per second take more than 100 years to fill"}},
		{"token bucket of 100 years", withPoint("tokenBucketGeneratedTokensInSecond: 1000\ntokenBucketSize: 3153600000000"), nil},
		{"downgradeRate over 100", withPoint("visitThreshold: 1\ndowngradeRate: 101"), []string{"8:20: downgradeRate: 101 is not a percent from 0 to 100"}},
		{"downgradeRate negative", withPoint("visitThreshold: 1\ndowngradeRate: -1"), []string{"8:20: downgradeRate: -1 is not a percent from 0 to 100"}},
		{"downgradeRate zero", withPoint("visitThreshold: 1\ndowngradeRate: 0"), nil},
		{"retryInterval without delay", withPoint("visitThreshold: 1\nretryInterval: 2s"), []string{"8:5: retryInterval is set but delayTime is not: there is no delay to probe"}},
		{"retryInterval not shorter than delay", withPoint("visitThreshold: 1\ndelayTime: 2s\nretryInterval: 2s"), []string{"9:20: retryInterval 2s is not shorter than delayTime 2s"}},
		{"delay without strategy", withPoint("delayTime: 10s"), []string{"7:5: delayTime is set but no strategy is: nothing trips"}},
		{"delay -1 is off", withPoint("delayTime: -1\nretryInterval: -1\nupstreamTimeout: -1"), nil},
		{"negative durations", withPoint("visitThreshold: 1\ndelayTime: -5s\nretryInterval: -2ms\nupstreamTimeout: -1s"), []string{
			"8:16: delayTime: -5s is negative",
			"9:20: retryInterval: -2ms is negative",
			"10:22: upstreamTimeout: -1s is negative",
		}},
		{"upstreamTimeout below timeoutThreshold", withPoint("timeoutThreshold: 1s\ntimeoutCountThreshold: 1\nupstreamTimeout: 500ms"), []string{
			"9:22: upstreamTimeout 500ms is shorter than timeoutThreshold 1s: every call is cut before it can count as a timeout",
		}},
		{"upstreamTimeout equal to timeoutThreshold", withPoint("timeoutThreshold: 1s\ntimeoutCountThreshold: 1\nupstreamTimeout: 1s"), nil},
		// Fallbacks.
		{"fallback status out of range", withPoint("visitThreshold: 1\nfallback: {status: 600}"), []string{"8:24: fallback.status: 600 is not a status a response can end with; write one from 200 to 599"}},
		{"fallback status 1xx", withPoint("visitThreshold: 1\nfallback: {status: 100}"), []string{"8:24: fallback.status: 100 is not a status"}},
		{"fallback status 0", withPoint("visitThreshold: 1\nfallback: {status: 0}"), []string{"8:24: fallback.status: 0 is not a status"}},
		{"fallback 204 with body", withPoint("visitThreshold: 1\nfallback: {status: 204, body: x}"), []string{"8:24: fallback.status: a 204 response has no body"}},
		{"fallback 204 without body", withPoint("visitThreshold: 1\nfallback: {status: 204}"), nil},
		{"body and bodyFile", withPoint("visitThreshold: 1\nfallback: {body: x, bodyFile: validate_test.go}"), []string{"8:25: fallback: give body or bodyFile, not both"}},
		{"bodyFile empty", withPoint("visitThreshold: 1\nfallback: {bodyFile: ''}"), []string{"8:26: fallback.bodyFile is empty"}},
		{"bodyFile a directory", withPoint("visitThreshold: 1\nfallback: {bodyFile: testdata}"), []string{"8:26: fallback.bodyFile: testdata is not a regular file"}},
		{"bad headers", withPoint("visitThreshold: 1\nfallback:\n  headers:\n    Content-Type: a\n    content-type: b\n    'X A': c\n    Content-Length: 3\n    X-B: \"a\\nb\""), []string{
			"11:9: fallback.headers: content-type is given twice (first at line 10)",
			`12:9: fallback.headers: "X A" is not a header name`,
			"13:9: fallback.headers: Content-Length is set by the proxy from the body",
			"14:14: fallback.headers: the value of X-B contains a control character",
		}},
		{"fallback never served", withPoint("fallback: {status: 503}"), []string{`7:5: the fallback is never served: point "p" has no strategy, no pressureTestDowngrade and no fallbackOnError`}},
		{"fallback on error only", withPoint("fallbackOnError: true\nfallback: {status: 502}"), nil},
		// Problems of the wrong type are not judged again.
		{"no cascade from a bad type", withPoint("timeoutThreshold: x\ntimeoutCountThreshold: 5\ndelayTime: 10s\nfallback: {status: 503}"), []string{"7:23: timeoutThreshold: want a duration"}},
		{"no cascade from a bad route", strings.Replace(valid, "point: p", "point: [p]", 1) + "    visitThreshold: 1\n", []string{"3:12: point: want a string, got a list"}},
	})
}

// TestPairedOffMessages: a setting that needs another, given beside that
// other's off value, says the other is off, as written, not that it is
// not set (the user did set it); an absent other is "not" set.
func TestPairedOffMessages(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  string
		want string
	}{
		{"timeoutThreshold absent", withPoint("timeoutCountThreshold: 5"), "7:5: timeoutCountThreshold is set but timeoutThreshold is not: no call is ever counted as a timeout; add timeoutThreshold: 250ms or remove timeoutCountThreshold"},
		{"timeoutThreshold -1", withPoint("timeoutThreshold: -1\ntimeoutCountThreshold: 5"), "8:5: timeoutCountThreshold is set but timeoutThreshold is -1 (off): no call is ever counted as a timeout; set timeoutThreshold: 250ms or remove timeoutCountThreshold"},
		{"timeoutThreshold -1s", withPoint("timeoutThreshold: -1s\ntimeoutCountThreshold: 5"), "8:5: timeoutCountThreshold is set but timeoutThreshold is -1s (off)"},
		{"timeoutCountThreshold -1", withPoint("timeoutThreshold: 250ms\ntimeoutCountThreshold: -1"), "7:5: timeoutThreshold is set but timeoutCountThreshold is -1 (off): timeouts are counted but never degrade; set timeoutCountThreshold: 5 or remove timeoutThreshold"},
		{"timeoutCountThreshold -5", withPoint("timeoutThreshold: 250ms\ntimeoutCountThreshold: -5"), "7:5: timeoutThreshold is set but timeoutCountThreshold is -5 (off)"},
		{"timeoutCountThreshold through an alias", withPoint("timeoutThreshold: 250ms\nvisitThreshold: &off -1\ntimeoutCountThreshold: *off"), "7:5: timeoutThreshold is set but timeoutCountThreshold is -1 (off)"},
		{"delayTime -1", withPoint("visitThreshold: 1\ndelayTime: -1\nretryInterval: 2s"), "9:5: retryInterval is set but delayTime is -1 (off): there is no delay to probe; set delayTime: 30s or remove retryInterval"},
		{"delayTime 0", withPoint("visitThreshold: 1\ndelayTime: 0\nretryInterval: 2s"), "9:5: retryInterval is set but delayTime is 0 (off)"},
		{"exceptionRateThreshold -1", withPoint("visitThreshold: 1\nexceptionRateThreshold: -1\nexceptionRateStart: 20"), "9:5: exceptionRateStart is set but exceptionRateThreshold is -1 (off): the rate is never judged"},
		{"token rate -1", withPoint("visitThreshold: 1\ntokenBucketGeneratedTokensInSecond: -1\ntokenBucketSize: 10"), "9:5: tokenBucketSize is set but tokenBucketGeneratedTokensInSecond is -1 (off): there is no bucket"},
		{"recovery ramp, delayTime -1", withPoint("visitThreshold: 1\ndelayTime: -1\nrecoveryTime: 10s"), "9:5: recoveryTime is set but delayTime is -1 (off)"},
		{"recovery start, recoveryTime 0", withPoint("visitThreshold: 1\ndelayTime: 5s\nrecoveryTime: 0\nrecoveryStart: 5"), "10:5: recoveryStart is set but recoveryTime is 0 (off)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, problemsOf(t, tt.src, Options{}), []string{tt.want})
		})
	}
}

// TestPolicyKeys: every field of limiter.Policy, whose Check problems are
// reported at the field's key, has a key in the file.
func TestPolicyKeys(t *testing.T) {
	fields := reflect.TypeFor[limiter.Policy]()
	for i := range fields.NumField() {
		name := fields.Field(i).Name
		if key := policyKey(name); !pointSection.has(key) {
			t.Errorf("limiter.Policy.%s: got key %q, want one of %v", name, key, pointSection.names())
		}
	}
}
