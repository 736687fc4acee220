package config

// The keys of sds.yaml, defined once: each key is a variable below (keyX).
// The decoder decodes each key by its kind into the Go field it names;
// validation and its messages, the positions of problems, a reload's
// explanation (Diff, FileSettings, PointSettings) and the JSON Schema are
// derived from the same definitions.
//
// To add a key: give its struct its Go field, define the key in its
// section below and list it in the section's keys. A rule between keys
// goes in validation. Then regenerate the schema's copy in the repository:
// go run ./cmd/sds-proxy schema > docs/sds.schema.json
// (TestSchemaFileIsCurrent fails until then).

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"time"

	"github.com/sds-proxy/sds-proxy/limiter"
	"github.com/sds-proxy/sds-proxy/limiter/perkey"
)

// kind is the type of a key's value, as the file writes it.
type kind int

const (
	kindString    kind = iota + 1 // a string
	kindBool                      // true or false
	kindInt                       // an integer
	kindThreshold                 // an integer; a negative one (SDS's -1) is off
	kindDuration                  // a Go duration such as 250ms, or an integer of milliseconds
	kindBytes                     // a size such as 64MiB, or an integer of bytes
	kindStrings                   // a list of strings
	kindHeaders                   // a mapping of header names to a value or a list of values
	kindMapping                   // a mapping of the keys of section
	kindList                      // a list of mappings of the keys of section
	kindNamed                     // a mapping of names to mappings of the keys of section
)

// key defines one key of sds.yaml. The zero value of each optional field
// means "none".
type key struct {
	name string
	// path names the key in messages, positions and explanations: its
	// name after those of the mappings above it, from the top level or
	// from its route or point ("tls.acme.domains", "fallback.status").
	// newSection sets it.
	path string
	kind kind
	// doc is the schema's description.
	doc string
	// def is the default as the file would write it (string, bool or
	// int64); nil when an absent key has no value to state.
	def any
	// unit is the unit of a number, for the description.
	unit string
	// enum lists the values a string may take.
	enum []string
	// min and max bound an integer, both inclusive (for a duration, in
	// milliseconds; for a size, in bytes).
	min, max *int64
	// outside is the message of a value beyond min and max (or, for a
	// string, of a length beyond maxLength), a format given the value,
	// min and max; "" where limiter.Policy.Check or a rule of validation
	// judges the value.
	outside string
	// empty says what to write instead of an empty string, after "KEY is
	// empty; "; "" where an empty string is a value or a rule judges it.
	empty string
	// minLength and maxLength bound a string, in characters.
	minLength, maxLength int
	// pattern is a regular expression a string must match (for
	// kindStrings each item, for kindNamed each name).
	pattern string
	// maxItems bounds a list's items or a named mapping's names.
	maxItems int
	// seconds marks a duration meant in seconds or longer (a window, a
	// delay), where an integer of milliseconds from 1 to 999 is most
	// likely a forgotten unit, which decoding warns of.
	seconds bool
	// section holds the keys of a kindMapping, kindList or kindNamed.
	section *section

	// field names the Go field the value decodes into, in the struct of
	// the key's section (a promoted field too); "" for a mapping whose
	// keys are fields of that same struct (a route's match). Its type
	// chooses the decoding: a limiter.Threshold is kept as written for
	// kindInt, off when negative for kindThreshold; a bool or a
	// limiter.Priority for a string with an enum is the enum's value.
	field string
	// index is field's index in the section's struct; nil for "".
	index []int
	// sets names a bool field of the same struct set true when the key's
	// value decodes (the fallback's BodySet, GRPCStatusSet).
	sets string
	// want names a string in the message of a wrong type ("" is "a
	// string").
	want string
	// file marks a string that names a file or directory that Parse reads
	// or checks (File.ReadsOtherFiles).
	file bool
	// sdsOff marks a duration whose -1 (a millisecond) is off, as in SDS,
	// and decodes to 0; other negatives are kept for validation.
	sdsOff bool
	// restart marks a top-level key whose change applies only on a
	// restart (Change.NeedsRestart).
	restart bool
	// show writes the key's value for a reload's explanation, given the
	// struct that holds it and the value; nil writes it by its type
	// (showValue), a mapping key by key. A mapping with show is explained
	// by it alone when whole is set or only one of the two configs has it.
	show  func(owner, v reflect.Value) string
	whole bool
}

// section is the set of keys one kind of mapping in sds.yaml accepts.
type section struct {
	// name names the section in the schema's definitions ("" for the top
	// level; newSection names an unnamed one after the key that lists it).
	name string
	doc  string // the schema's description
	keys []*key
	// index maps each key's name to its place in keys.
	index map[string]int
	// item marks the section of a list's items: its keys' locations are
	// under their item's (perKey[1].visitThreshold), which decoding
	// gives as the base of the item's keys.
	item bool
	// defaults marks a section whose struct starts with its keys' defaults
	// set (the top level and cluster); elsewhere the zero value is the
	// default.
	defaults bool
}

// newSection returns the section of keys whose mapping decodes into a
// struct of type typ, and sets each key's path and field index; it panics
// on a field typ does not have. A section is built before the key that
// lists it, which then puts its name before the paths under it.
func newSection(name string, typ reflect.Type, doc string, keys ...*key) *section {
	s := &section{name: name, doc: doc, keys: keys, index: make(map[string]int, len(keys))}
	for i, k := range keys {
		s.index[k.name] = i
		if k.field != "" {
			f, ok := typ.FieldByName(k.field)
			if !ok {
				panic(fmt.Sprintf("config: key %s: %s has no field %s", k.name, typ, k.field))
			}
			k.index = f.Index
		}
		k.path = k.name
		if k.section != nil && k.section.name == "" {
			k.section.name = k.name
		}
		if k.kind == kindMapping {
			k.section.prefix(k.name + ".")
		}
		if k.kind == kindList {
			k.section.item = true
		}
	}
	return s
}

// newDefaultsSection is newSection for a section with defaults.
func newDefaultsSection(name string, typ reflect.Type, doc string, keys ...*key) *section {
	s := newSection(name, typ, doc, keys...)
	s.defaults = true
	return s
}

// prefix puts p before the path of every key of s and of the mappings
// under them.
func (s *section) prefix(p string) {
	for _, k := range s.keys {
		k.path = p + k.path
		if k.kind == kindMapping {
			k.section.prefix(p)
		}
	}
}

// walk calls fn with each key of sec, its location under base and its
// field in v, the struct of sec's keys, and so on down the mappings and
// the lists of a point v holds (not the routes and points, which have
// their own rules).
func (sec *section) walk(v reflect.Value, base loc, fn func(k *key, l loc, f reflect.Value)) {
	for _, k := range sec.keys {
		l, f := base, field(k, v)
		l.field = k.path
		if sec.item {
			l.field = base.field + k.path
		}
		fn(k, l, f)
		switch {
		case k.kind == kindMapping && (f.Kind() != reflect.Pointer || !f.IsNil()):
			k.section.walk(reflect.Indirect(f), base, fn)
		case k.kind == kindList && k != keyRoutes:
			for i := range f.Len() {
				k.section.walk(f.Index(i), itemLoc(base, k, i), fn)
			}
		}
	}
}

// itemLoc is the base location of the keys of item i of the list k under
// base: perKey[1]. for the second rule of perKey.
func itemLoc(base loc, k *key, i int) loc {
	base.field = fmt.Sprintf("%s[%d].", k.path, i)
	return base
}

// walk is section.walk over f's top level and each of its points.
func (f *File) walk(fn func(k *key, l loc, v reflect.Value)) {
	topSection.walk(reflect.ValueOf(f).Elem(), loc{}, fn)
	for i := range f.Points {
		pointSection.walk(reflect.ValueOf(&f.Points[i]).Elem(), loc{point: f.Points[i].Name}, fn)
	}
}

// field returns the field of owner that k names (owner itself for "").
func field(k *key, owner reflect.Value) reflect.Value {
	if k.field == "" {
		return owner
	}
	return owner.FieldByIndex(k.index)
}

// lookup returns the section's key called name, or nil.
func (s *section) lookup(name string) *key {
	if i, ok := s.index[name]; ok {
		return s.keys[i]
	}
	return nil
}

// has reports whether the section defines the key name.
func (s *section) has(name string) bool { return s.lookup(name) != nil }

// names returns the section's key names in definition order.
func (s *section) names() []string {
	out := make([]string, len(s.keys))
	for i, k := range s.keys {
		out[i] = k.name
	}
	return out
}

// bound returns a pointer to n, for key.min and key.max.
func bound(n int64) *int64 { return &n }

// The keys of sds.yaml by section, each section after the keys it lists.
// They are read-only: nothing changes them after package initialisation.
// A variable is named after the key, following the name of its section
// for keys below the top level and a point: keyWindow, keyFallbackStatus.

// The keys at the top level.
var (
	keyListen = &key{name: "listen", field: "Listen", kind: kindString, restart: true, def: DefaultListen, show: showQuoted,
		doc: "The proxy port's address, host:port."}
	keyH2C = &key{name: "h2c", field: "H2C", kind: kindBool, restart: true, def: false,
		doc: "Also accept cleartext HTTP/2 on the proxy port (gRPC inside a pod)."}
	keyUpstream = &key{name: "upstream", field: "Upstream", kind: kindString, show: showQuoted,
		doc: "The service's base URL: http://, https://, or h2c:// for cleartext HTTP/2, with a host and no path. Required here or as -upstream."}
	keyAdmin = &key{name: "admin", field: "Admin", kind: kindString, restart: true, def: DefaultAdmin, show: showQuoted,
		doc: "The admin port's address, host:port: /healthz, /readyz, /metrics, /status and the dashboard."}
	keyForwardedHeaders = &key{name: "forwardedHeaders", field: "ForwardedHeaders", kind: kindBool, def: true,
		doc: "Set X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host for the upstream."}
	keyWindow = &key{name: "window", field: "Window", kind: kindDuration, def: DefaultWindow.String(), min: bound(1), seconds: true, show: showText,
		doc: "The length of every point's sliding window; it splits evenly into buckets of at least 1ms."}
	keyBuckets = &key{name: "buckets", field: "Buckets", kind: kindInt, def: int64(DefaultBuckets), unit: "buckets", min: bound(1), max: bound(maxBuckets), outside: "%[1]v is not a count from %[2]v to %[3]v; write buckets: 10",
		doc: "How many buckets split the window."}
	keyPressureTestHeader = &key{name: "pressureTestHeader", field: "PressureTestHeader", kind: kindString, minLength: 1, pattern: tokenPattern, empty: "remove it to turn pressure tests off, or name a header such as X-Pressure-Test", show: showQuoted,
		doc: "The request header that marks pressure-test traffic when its value is 1 or true. Absent: no request is pressure-test traffic."}
	keyAccessLog = &key{name: "accessLog", field: "AccessLog", kind: kindBool, def: false,
		doc: "Log one line per request: point, status, strategy, upstream latency."}
	keyDrainTimeout = &key{name: "drainTimeout", field: "DrainTimeout", kind: kindDuration, def: DefaultDrainTimeout.String(), min: bound(0), outside: "%[1]v is negative; write a grace period such as 25s, or 0 to exit without waiting", seconds: true, show: showText,
		doc: "How long SIGTERM waits for requests in flight before exiting; 0 exits without waiting."}
	keyMaxConnections = &key{name: "maxConnections", field: "MaxConnections", kind: kindInt, def: int64(DefaultMaxConnections), unit: "connections", min: bound(1), max: bound(maxConnectionsLimit), outside: "%[1]v is not a count from %[2]v to %[3]v; size it to the memory limit (docs/connections.md, Connection limits), such as maxConnections: " + strconv.Itoa(DefaultMaxConnections),
		doc: "The most client connections the proxy port holds open at once, idle, busy and upgraded together. A change applies on a reload."}
	keyAdminTokenFile = &key{name: "adminTokenFile", field: "AdminTokenFile", kind: kindString, file: true, minLength: 1,
		doc: "A file holding the bearer token (at least 16 visible ASCII characters; surrounding white space ignored) that turns on the admin port's runtime switches, POST and DELETE /points/NAME/force. Absent: the switches do not exist. Read again on every reload; a relative path is resolved against the config file's directory."}
	keyStaleCache = &key{name: "staleCache", field: "StaleCache", kind: kindMapping, section: staleCacheSection,
		doc: "The memory that the points' kept answers (stale:) share. Absent: the defaults; a point without stale: keeps nothing, so the cache holds nothing."}
	keyTLS = &key{name: "tls", field: "TLS", kind: kindMapping, restart: true, section: tlsSection,
		doc: "Inbound TLS: certFile and keyFile, or acme."}
	keyCluster = &key{name: "cluster", field: "Cluster", kind: kindMapping, restart: true, section: clusterSection, whole: true, show: showCluster,
		doc: "The Redis that the points' clusterTokenBucket live in, shared by every proxy that names it. Requests never wait on it: tokens are leased in the background."}
	keyRoutes = &key{name: "routes", field: "Routes", kind: kindList, maxItems: maxRoutes, section: routeSection,
		doc: "Map requests to points; the first match wins. A request that matches no route is proxied unprotected."}
	keyPoints = &key{name: "points", field: "Points", kind: kindNamed, pattern: pointNamePattern, maxItems: maxPoints, section: pointSection,
		doc: "The protected points by name (letters, digits, '.', '_', '-'): thresholds, delay, mode and fallback. Every point is named by a route."}
)

var topSection = newDefaultsSection("", reflect.TypeFor[File](), "sds.yaml: the config of sds-proxy, a sidecar reverse proxy that degrades service points (docs/configuration.md, Configuration).",
	// The keys that need a restart first, in the order Change.NeedsRestart
	// names them; the others in the order of Change.Settings.
	keyListen, keyAdmin, keyTLS, keyH2C, keyCluster, keyUpstream, keyForwardedHeaders, keyWindow, keyBuckets, keyPressureTestHeader, keyAccessLog, keyDrainTimeout, keyMaxConnections, keyAdminTokenFile, keyStaleCache, keyRoutes, keyPoints)

// The keys under staleCache (keyStaleCache).
var keyStaleCacheMaxBytes = &key{name: "maxBytes", field: "MaxBytes", kind: kindBytes, def: DefaultStaleCacheBytes, min: bound(0), max: bound(maxStaleCacheBytes), show: showBytes,
	outside: "%[1]v is not a size from %[2]v to %[3]v; write one such as maxBytes: 64MiB, or 0 to keep no answer",
	doc:     "The most memory all kept answers hold together, least recently used evicted first; one answer holds at most a sixteenth of it and at most 8 MiB. 0 keeps none."}

var staleCacheSection = newDefaultsSection("", reflect.TypeFor[StaleCache](), "The memory that the points' kept answers share (docs/protections.md, Stale answers).",
	keyStaleCacheMaxBytes)

// The keys under tls (keyTLS).
var (
	keyTLSCertFile = &key{name: "certFile", field: "CertFile", kind: kindString, file: true, minLength: 1,
		doc: "The PEM certificate (chain); with keyFile. Reloaded when it changes. A relative path is resolved against the config file's directory."}
	keyTLSKeyFile = &key{name: "keyFile", field: "KeyFile", kind: kindString, file: true, minLength: 1,
		doc: "The PEM private key of certFile. A relative path is resolved against the config file's directory."}
	keyTLSACME = &key{name: "acme", field: "ACME", kind: kindMapping, section: acmeSection, show: showACME,
		doc: "Obtain certificates from an ACME CA (instead of certFile and keyFile)."}
)

var tlsSection = newSection("", reflect.TypeFor[TLS](), "Inbound TLS: a certificate pair, or certificates from an ACME CA.",
	keyTLSCertFile, keyTLSKeyFile, keyTLSACME)

// The keys under tls.acme (keyTLSACME).
var (
	keyACMEDomains = &key{name: "domains", field: "Domains", kind: kindStrings,
		doc: "The host names to obtain certificates for; at least one, no wildcards."}
	keyACMEEmail = &key{name: "email", field: "Email", kind: kindString,
		doc: "The ACME account's contact address."}
	keyACMECA = &key{name: "ca", field: "CA", kind: kindString,
		doc: "The ACME directory URL. Absent: Let's Encrypt production."}
	keyACMECARoot = &key{name: "caRoot", field: "CARoot", kind: kindString, file: true, minLength: 1, empty: "give the PEM file of the ACME server's root certificate, or remove it",
		doc: "A PEM file of the root certificate(s) to trust when talking to ca, for a private ACME server. Absent: the system's roots."}
	keyACMEStorage = &key{name: "storage", field: "Storage", kind: kindString, file: true, minLength: 1, empty: "give a writable directory such as /var/lib/sds/acme, or remove it",
		doc: "The directory holding the ACME account, keys and certificates. Absent: certmagic's default ($XDG_DATA_HOME/certmagic)."}
	keyACMEHTTPListen = &key{name: "httpListen", field: "HTTPListen", kind: kindString, minLength: 1, empty: "give a cleartext address for HTTP-01 challenges such as 0.0.0.0:8081, or remove it",
		doc: "A cleartext host:port that answers HTTP-01 challenges. Absent: only TLS-ALPN-01, on the proxy port."}
)

var acmeSection = newSection("", reflect.TypeFor[ACME](), "Certificates from an ACME CA, such as Let's Encrypt.",
	keyACMEDomains, keyACMEEmail, keyACMECA, keyACMECARoot, keyACMEStorage, keyACMEHTTPListen)

// The keys of a route, an item of routes (keyRoutes).
var (
	keyRoutePoint = &key{name: "point", field: "Point", kind: kindString, minLength: 1,
		doc: "The point the matched requests go to; defined under points."}
	keyRouteMatch = &key{name: "match", field: "", kind: kindMapping, section: matchSection,
		doc: "What the request must match; every condition given must hold. {} matches every request."}
	keyRoutePriority = &key{name: "priority", field: "Priority", kind: kindString, def: "default", enum: []string{"critical", "default", "sheddable"},
		doc: "The priority of the matched requests. sheddable ones may use only the point's sheddableShare of each count threshold (visit, token bucket, concurrency, the adaptive limit), so they are degraded first; critical ones are admitted first during a recovery ramp and are never among the tripped requests a downgradeRate below 100 degrades."}
)

var routeSection = newSection("route", reflect.TypeFor[Route](), "A route: the requests it matches go to its point.",
	keyRoutePoint, keyRouteMatch, keyRoutePriority)

// The keys under a route's match (keyRouteMatch).
var (
	keyMatchMethods = &key{name: "methods", field: "Methods", kind: kindStrings, pattern: methodPattern, maxItems: maxMethods,
		doc: "The request's method is one of these (upper case, such as [GET, HEAD]). Absent: any method."}
	keyMatchPath = &key{name: "path", field: "Path", kind: kindString, pattern: "^/",
		doc: "The exact path, starting with /. Normalised as requests are."}
	keyMatchPathPrefix = &key{name: "pathPrefix", field: "PathPrefix", kind: kindString, pattern: "^/",
		doc: "A path prefix, starting with /. Normalised as requests are."}
	keyMatchHost = &key{name: "host", field: "Host", kind: kindString, minLength: 1,
		doc: "The request's host, with or without a port. Absent: any host."}
)

var matchSection = newSection("", reflect.TypeFor[Route](), "The conditions of a route; every one given must hold.",
	keyMatchMethods, keyMatchPath, keyMatchPathPrefix, keyMatchHost)

// The keys of a point, an entry of points (keyPoints).
var (
	keyTimeoutThreshold = &key{name: "timeoutThreshold", field: "TimeoutThreshold", kind: kindDuration, def: int64(-1),
		doc: "An upstream call running longer than this counts as a timeout, once, when it passes it. -1: off. Needs timeoutCountThreshold."}
	keyTimeoutCountThreshold = &key{name: "timeoutCountThreshold", field: "TimeoutCountThreshold", kind: kindThreshold, def: int64(-1), unit: "timeouts per window",
		doc: "Degrade when this many timeouts are in the window (5 trips on the 5th). Needs timeoutThreshold."}
	keyVisitThreshold = &key{name: "visitThreshold", field: "VisitThreshold", kind: kindThreshold, def: int64(-1), unit: "requests per window",
		doc: "Degrade when the window holds more than this many requests not degraded. 0 degrades every request (an off switch for the point)."}
	keyConcurrentThreshold = &key{name: "concurrentThreshold", field: "ConcurrentThreshold", kind: kindThreshold, def: int64(-1), unit: "calls in flight",
		doc: "Degrade when more than this many upstream calls would be in flight."}
	keyExceptionThreshold = &key{name: "exceptionThreshold", field: "ExceptionThreshold", kind: kindThreshold, def: int64(-1), unit: "exceptions per window",
		doc: "Degrade when this many exceptions (transport errors, upstreamTimeout, 5xx) are in the window."}
	keyExceptionRateThreshold = &key{name: "exceptionRateThreshold", field: "ExceptionRateThreshold", kind: kindThreshold, def: int64(-1), unit: "percent", max: bound(100),
		doc: "Degrade when exceptions are at least this percent of the window's requests not degraded."}
	keyExceptionRateStart = &key{name: "exceptionRateStart", field: "ExceptionRateStart", kind: kindInt, def: int64(0), unit: "requests per window",
		doc: "The exception rate is not judged until the window holds more requests than this. Needs exceptionRateThreshold."}
	keyTokenBucketGeneratedTokensInSecond = &key{name: "tokenBucketGeneratedTokensInSecond", field: "TokensPerSecond", kind: kindThreshold, def: int64(-1), unit: "tokens per second", max: bound(limiter.MaxTokensPerSecond),
		doc: "A token bucket filled at this rate, full at start; a forwarded request takes a token, and none left degrades."}
	keyTokenBucketSize = &key{name: "tokenBucketSize", field: "TokenBucketSize", kind: kindThreshold, def: int64(-1), unit: "tokens",
		doc: "The token bucket's capacity: max(tokenBucketSize, tokenBucketGeneratedTokensInSecond). Needs tokenBucketGeneratedTokensInSecond."}
	keyDowngradeRate = &key{name: "downgradeRate", field: "DowngradeRate", kind: kindInt, def: int64(100), unit: "percent", min: bound(0), max: bound(100),
		doc: "The percent of tripped requests actually degraded; 0 degrades none (strategies are still judged and reported)."}
	keyDelayTime = &key{name: "delayTime", field: "DelayTime", kind: kindDuration, def: int64(0), min: bound(-1), seconds: true, sdsOff: true,
		doc: "After a trip, keep degrading this long without judging the strategies. 0 or -1: no delay."}
	keyRetryInterval = &key{name: "retryInterval", field: "RetryInterval", kind: kindDuration, def: int64(0), min: bound(-1), seconds: true, sdsOff: true,
		doc: "During the delay, let one probe through this often; a good probe ends the delay. Shorter than delayTime. 0 or -1: no probes."}
	keyPressureTestDowngrade = &key{name: "pressureTestDowngrade", field: "PressureTestDowngrade", kind: kindBool, def: false,
		doc: "Degrade pressure-test traffic (see pressureTestHeader) on this point at once."}
	keyMode = &key{name: "mode", field: "Shadow", kind: kindString, def: "enforce", enum: []string{"enforce", "shadow"},
		doc: "enforce degrades; shadow never degrades but counts, logs and reports what it would degrade (header Sds-Shadow-Degraded)."}
	keyUpstreamTimeout = &key{name: "upstreamTimeout", field: "UpstreamTimeout", kind: kindDuration, def: int64(-1), min: bound(-1),
		doc: "A hard deadline for the upstream call, counted as an exception when passed. -1: none."}
	keyFallbackOnError = &key{name: "fallbackOnError", field: "FallbackOnError", kind: kindBool, def: false,
		doc: "Answer the fallback instead of 502 or 504 when the upstream call fails (transport error or upstreamTimeout)."}
	keyFallback = &key{name: "fallback", field: "Fallback", kind: kindMapping, section: fallbackSection,
		doc: "The answer of a degraded request. Absent: 429 with Retry-After for visit and token_bucket, 503 otherwise."}
	keyRecoveryTime = &key{name: "recoveryTime", field: "RecoveryTime", kind: kindDuration, def: int64(0), min: bound(-1), seconds: true, sdsOff: true,
		doc: "A recovery ramp after each delay: the share of requests admitted rises linearly from recoveryStart percent to all of them over this time; the others are degraded as recovery, and a call that fails during the ramp trips the point again. Needs delayTime. 0 or -1: no ramp."}
	keyRecoveryStart = &key{name: "recoveryStart", field: "RecoveryStart", kind: kindInt, def: int64(limiter.DefaultRecoveryStart), unit: "percent", min: bound(0), max: bound(100), show: showRecoveryStart,
		doc: "The percent of requests the recovery ramp admits when it starts. Needs recoveryTime."}
	keySheddableShare = &key{name: "sheddableShare", field: "SheddableShare", kind: kindInt, def: int64(limiter.DefaultSheddableShare), unit: "percent", min: bound(0), max: bound(100), show: showSheddableShare,
		doc: "A request of priority sheddable passes each count threshold (visitThreshold, the token bucket, concurrentThreshold, the adaptive limit) only while the point's whole count, every priority's requests and itself included, is at most this percent of it; past it, it is degraded (Sds-Degraded gains ; priority=sheddable) while other requests use the rest, kept for their bursts. Such a degradation is no trip. Needs a route of priority sheddable and a count threshold."}
	keyAdaptiveConcurrency = &key{name: "adaptiveConcurrency", field: "AdaptiveConcurrency", kind: kindMapping, section: adaptiveSection, show: showOn,
		doc: "A limit on the upstream calls in flight that finds the calls the upstream serves at once from its latency against its minimum (Little's law, after TCP Vegas and BBR); calls above it are degraded as adaptive_concurrency. {} turns it on with the defaults."}
	keyQueue = &key{name: "queue", field: "Queue", kind: kindMapping, section: queueSection, show: showOn,
		doc: "A queue at the point's limit: a request that finds the calls in flight at concurrentThreshold or the adaptive limit (or its sheddable share), or the token bucket empty, waits for a slot or a token instead of being degraded at once: critical before default before sheddable; within a priority first in first out until its requests stand, then newest first while CoDel sheds those that waited past the target, sheddable before default, never critical. A sheddable request may take a slot past its share while no other request waits. {} turns it on with the defaults."}
	keyStale = &key{name: "stale", field: "Stale", kind: kindMapping, section: staleSection, show: showOn,
		doc: "Serve the last good answer instead of the fallback: a degraded GET or HEAD (any strategy, the delay, an operator's switch, or with fallbackOnError a failed call) gets the answer the upstream last gave to the same request, if one was kept and is younger than maxAge, with Age and Sds-Degraded: STRATEGY; point=P; stale. Only what a shared cache may keep is kept, never an answer meant for one user (docs/protections.md, Stale answers). {} turns it on with the defaults."}
	keyPerKey = &key{name: "perKey", field: "PerKey", kind: kindList, maxItems: maxPerKeyRules, section: perKeySection, show: showPerKey, want: "a list of per-key rules such as - key: header:X-Api-Key",
		doc: "Per-key rules, judged in order before the point's strategies: each holds every key (a client's API key, address, cookie) to its own thresholds in the point's window, with bounded memory that no client escapes by churning keys. A request a rule degrades is a degraded visit of the point that spends none of its thresholds, answered 429 with Retry-After and Sds-Degraded: key_visit; point=P; key=LABEL (key_token_bucket, key_concurrent), LABEL a short keyed hash of the key, never the key (docs/protections.md, Per-key limits)."}
	keyClusterTokenBucket = &key{name: "clusterTokenBucket", field: "ClusterTokenBucket", kind: kindMapping, section: clusterBucketSection,
		doc: "A token bucket shared by every proxy of the same cluster: Redis and point name, judged after the local strategies; none left degrades as cluster_token_bucket (429). While Redis fails, each proxy counts on tokensPerSecond / cluster.replicas."}
)

var pointSection = newSection("point", reflect.TypeFor[Point](), "A protected point: its strategies, delay, mode and fallback. An absent or negative threshold is off (SDS's -1).",
	keyTimeoutThreshold, keyTimeoutCountThreshold, keyVisitThreshold, keyConcurrentThreshold, keyExceptionThreshold, keyExceptionRateThreshold, keyExceptionRateStart, keyTokenBucketGeneratedTokensInSecond, keyTokenBucketSize, keyDowngradeRate, keyDelayTime, keyRetryInterval, keyPressureTestDowngrade, keyMode, keyUpstreamTimeout, keyFallbackOnError, keyFallback, keyClusterTokenBucket, keyRecoveryTime, keyRecoveryStart, keySheddableShare, keyAdaptiveConcurrency, keyQueue, keyPerKey, keyStale)

// The keys under a point's adaptiveConcurrency (keyAdaptiveConcurrency).
var (
	keyAdaptiveMinLimit = &key{name: "minLimit", field: "MinLimit", kind: kindInt, def: int64(limiter.DefaultAdaptiveMinLimit), unit: "calls in flight", min: bound(1), max: bound(limiter.MaxAdaptiveLimit), show: showOrDefault,
		doc: "The lowest limit, and the first: from it the limit doubles each round that fills it without a queue."}
	keyAdaptiveMaxLimit = &key{name: "maxLimit", field: "MaxLimit", kind: kindInt, def: int64(limiter.DefaultAdaptiveMaxLimit), unit: "calls in flight", min: bound(1), max: bound(limiter.MaxAdaptiveLimit), show: showOrDefault,
		doc: "The highest limit; at least minLimit."}
	keyAdaptiveInterval = &key{name: "interval", field: "Interval", kind: kindDuration, def: limiter.DefaultAdaptiveInterval.String(), min: bound(1), show: showOrDefault,
		doc: "The shortest round: how often the limit is worked out again from the calls that ended well in it (their mean upstream time and the calls in flight when they entered); a round lasts the last mean latency if that is longer; at least 1ms."}
	keyAdaptiveTolerance = &key{name: "tolerance", field: "Tolerance", kind: kindInt, def: int64(limiter.DefaultAdaptiveTolerance), unit: "percent", min: bound(0), max: bound(1000), show: showOrDefault,
		doc: "How far above its minimum the latency may rise before the limit shrinks: the queue the upstream may hold, in percent of the calls it serves and at least one call. The limit settles near the capacity plus this share of it."}
	keyAdaptiveMinLatencyInterval = &key{name: "minLatencyInterval", field: "MinLatencyInterval", kind: kindDuration, def: limiter.DefaultAdaptiveMinLatencyInterval.String(), min: bound(1), seconds: true, show: showOrDefault,
		doc: "How often the minimum latency is measured again after the startup (the limit is held at 3/4 of itself, at least minLimit, until 25 calls entered since have ended); at least interval."}
)

var adaptiveSection = newSection("", reflect.TypeFor[limiter.AdaptiveConcurrency](), "An adaptive concurrency limit: each round, of the calls in flight, the share minimum latency / mean latency (at most 1) was served and the rest queued; a queue above the allowance, max(1, tolerance percent of the calls served), moves the limit half-way down to the calls served plus the allowance (no lower than half the limit), a full limit without one raises it to them, and from minLimit the limit doubles each full round until the first queue.",
	keyAdaptiveMinLimit, keyAdaptiveMaxLimit, keyAdaptiveInterval, keyAdaptiveTolerance, keyAdaptiveMinLatencyInterval)

// The keys under a point's queue (keyQueue).
var (
	keyQueueMaxWait = &key{name: "maxWait", field: "MaxWait", kind: kindDuration, def: limiter.DefaultQueueMaxWait.String(), min: bound(1), max: bound(limiter.MaxQueueWait.Milliseconds()), show: showOrDefault,
		doc: "The longest a request waits; then it is judged without waiting, and degraded as it would have been without a queue."}
	keyQueueTarget = &key{name: "target", field: "Target", kind: kindDuration, min: bound(1), show: showOrDefault,
		doc: "CoDel's target: once a priority's oldest request has waited longer than this for a whole interval, that priority's requests stand (newest first) until none has waited this long, and those that waited longer are shed, sheddable first, never critical ones. Absent: the point's mean upstream time, at least 5ms and at most maxWait."}
	keyQueueInterval = &key{name: "interval", field: "Interval", kind: kindDuration, min: bound(1), show: showOrDefault,
		doc: "How long a priority's oldest request must stay above the target before its requests stand; at least the target. Absent: twice maxWait, so that a burst the service drains within maxWait is served first in first out and never shed."}
	keyQueueMaxLength = &key{name: "maxLength", field: "MaxLength", kind: kindInt, def: int64(limiter.DefaultQueueMaxLength), unit: "requests", min: bound(1), max: bound(limiter.MaxQueueLength), show: showOrDefault,
		doc: "The most requests waiting; a request past it sheds the lowest priority's oldest, or is not queued when every waiting request has a higher priority."}
)

var queueSection = newSection("", reflect.TypeFor[limiter.Queue](), "A queue at the point's limit (docs/protections.md, Queue at the limit).",
	keyQueueMaxWait, keyQueueTarget, keyQueueInterval, keyQueueMaxLength)

// The keys under cluster (keyCluster).
var (
	keyClusterAddresses = &key{name: "addresses", field: "Addresses", kind: kindStrings, maxItems: maxClusterAddresses,
		doc: "Redis host:port addresses: one server, several nodes of a Redis Cluster, or the sentinels with masterName. At least one."}
	keyClusterUsername = &key{name: "username", field: "Username", kind: kindString,
		doc: "The ACL user. Absent: the default user."}
	keyClusterPasswordFile = &key{name: "passwordFile", field: "PasswordFile", kind: kindString, file: true, minLength: 1,
		doc: "A file holding the Redis servers' password (a Kubernetes Secret mounted as a file; sentinels are asked without one), read for every new connection so that a rotated password applies without a restart. A relative path is resolved against the config file's directory."}
	keyClusterTLS = &key{name: "tls", field: "TLS", kind: kindMapping, section: clusterTLSSection,
		doc: "Speak TLS to Redis. {} trusts the system's roots."}
	keyClusterDB = &key{name: "db", field: "DB", kind: kindInt, def: int64(0), unit: "database number", min: bound(0), outside: "%[1]v is negative; Redis numbers its databases from 0",
		doc: "The database number; a Redis Cluster has only 0."}
	keyClusterMasterName = &key{name: "masterName", field: "MasterName", kind: kindString, minLength: 1, empty: "give the Sentinel master set's name, or remove the key",
		doc: "The Sentinel master set's name; addresses are then the sentinels'. The proxies follow a failover."}
	keyClusterKeyPrefix = &key{name: "keyPrefix", field: "KeyPrefix", kind: kindString, def: DefaultClusterKeyPrefix,
		doc: "Starts every key the proxies write; a bucket's key is keyPrefix + \"bucket:\" + the point's name."}
	keyClusterTimeout = &key{name: "timeout", field: "Timeout", kind: kindDuration, def: DefaultClusterTimeout.String(), min: bound(1), max: bound(maxClusterTimeout.Milliseconds()), outside: "%[1]v is not from %[2]v to %[3]v; it bounds each background call to Redis (default " + DefaultClusterTimeout.String() + ")",
		doc: "Bounds every background call to Redis (dial, write, read); past it Redis counts as failed and each point falls back to its share."}
	keyClusterReplicas = &key{name: "replicas", field: "Replicas", kind: kindInt, def: int64(1), unit: "proxies", min: bound(1), max: bound(maxReplicas), outside: "%[1]v is not from %[2]v to %[3]v; give the number of proxies sharing the buckets",
		doc: "How many proxies share the buckets (the Deployment's replicas): while Redis fails, each counts on tokensPerSecond / replicas."}
)

var clusterSection = newDefaultsSection("", reflect.TypeFor[Cluster](), "The Redis of the shared token buckets: one server, a Redis Cluster (several addresses) or Sentinel (masterName).",
	keyClusterAddresses, keyClusterUsername, keyClusterPasswordFile, keyClusterTLS, keyClusterDB, keyClusterMasterName, keyClusterKeyPrefix, keyClusterTimeout, keyClusterReplicas)

// The keys under cluster.tls (keyClusterTLS).
var (
	keyClusterTLSCAFile = &key{name: "caFile", field: "CAFile", kind: kindString, file: true, minLength: 1,
		doc: "A PEM file of the roots to trust. Absent: the system's roots."}
	keyClusterTLSCertFile = &key{name: "certFile", field: "CertFile", kind: kindString, file: true, minLength: 1,
		doc: "A PEM client certificate; with keyFile."}
	keyClusterTLSKeyFile = &key{name: "keyFile", field: "KeyFile", kind: kindString, file: true, minLength: 1,
		doc: "The PEM private key of certFile."}
	keyClusterTLSServerName = &key{name: "serverName", field: "ServerName", kind: kindString, minLength: 1,
		doc: "The name to verify the server's certificate against. Absent: the address's host."}
)

var clusterTLSSection = newSection("clusterTLS", reflect.TypeFor[ClusterTLS](), "TLS to Redis.",
	keyClusterTLSCAFile, keyClusterTLSCertFile, keyClusterTLSKeyFile, keyClusterTLSServerName)

// The keys under a point's clusterTokenBucket (keyClusterTokenBucket).
var (
	keyClusterBucketTokensPerSecond = &key{name: "tokensPerSecond", field: "TokensPerSecond", kind: kindInt, unit: "tokens per second", min: bound(1), max: bound(maxClusterTokensPerSec), outside: "%[1]v is not from %[2]v to %[3]v", show: showFigure,
		doc: "The shared bucket fills at this rate, whatever the number of proxies. Required."}
	keyClusterBucketSize = &key{name: "size", field: "Size", kind: kindInt, unit: "tokens", min: bound(1), max: bound(maxClusterBucketSize), outside: "%[1]v is not from %[2]v to %[3]v tokens", show: showFigure,
		doc: "The most tokens the shared bucket holds (the burst across all proxies); it starts full. Absent: tokensPerSecond."}
)

var clusterBucketSection = newSection("", reflect.TypeFor[ClusterTokenBucket](), "A token bucket shared through cluster:'s Redis by every proxy with this point.",
	keyClusterBucketTokensPerSecond, keyClusterBucketSize)

// The keys under a point's fallback (keyFallback).
var (
	keyFallbackStatus = &key{name: "status", field: "Status", kind: kindInt, unit: "HTTP status", min: bound(200), max: bound(599), outside: "%[1]v is not a status a response can end with; write one from %[2]v to %[3]v, such as 503 (1xx are informational)", show: showOrDefault,
		doc: "The status. Absent: 429 for visit and token_bucket trips, 503 otherwise."}
	keyFallbackHeaders = &key{name: "headers", field: "Headers", kind: kindHeaders,
		doc: "Response headers: a name and a value, or a list of values."}
	keyFallbackBody = &key{name: "body", field: "Body", kind: kindString, sets: "BodySet", show: showBody,
		doc: "The response body (or bodyFile, not both)."}
	keyFallbackBodyFile = &key{name: "bodyFile", field: "BodyFile", kind: kindString, file: true, empty: "give the path of the body's file, or use body:", want: "a path", sets: "BodySet",
		doc: "A file holding the response body, read when the config loads; relative to the config file's directory."}
	keyFallbackGRPCStatus = &key{name: "grpcStatus", field: "GRPCStatus", kind: kindInt, def: int64(14), unit: "gRPC status code", min: bound(0), max: bound(maxGRPCStatus), outside: "%[1]v is not a gRPC status code; write one from %[2]v to %[3]v, such as 14 (UNAVAILABLE) or 8 (RESOURCE_EXHAUSTED)", sets: "GRPCStatusSet", show: showGRPCStatus,
		doc: "The grpc-status gRPC calls get instead of the HTTP answer (14 UNAVAILABLE, 8 RESOURCE_EXHAUSTED ...)."}
	keyFallbackGRPCMessage = &key{name: "grpcMessage", field: "GRPCMessage", kind: kindString, outside: "%[1]v bytes is more than %[3]v; gRPC clients refuse large headers, so keep it short", minLength: 1, maxLength: maxGRPCMessage, empty: "remove it for the default message, which names the point and the strategy",
		doc: "The grpc-message gRPC calls get. Absent: a message naming the point and the strategy."}
)

var fallbackSection = newSection("", reflect.TypeFor[Fallback](), "The answer of a degraded request; it carries Sds-Degraded: STRATEGY; point=NAME.",
	keyFallbackStatus, keyFallbackHeaders, keyFallbackBodyFile, keyFallbackBody, keyFallbackGRPCStatus, keyFallbackGRPCMessage)

// Patterns of the schema; validation matches the same (tokenRE,
// pointNameRE).
const (
	// tokenPattern is an RFC 9110 token: a header name.
	tokenPattern = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
	// methodPattern is a token in upper case: a method as routes match it.
	methodPattern = "^[!#$%&'*+.^_`|~0-9A-Z-]+$"
	// bytesPattern is a size as parseBytes reads it.
	bytesPattern = `^[0-9]+(B|KiB|MiB|GiB)?$`
	// durationPattern is what time.ParseDuration reads, and a little more.
	durationPattern = `^[-+]?(0|([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+)$`
)

// pointNamePattern is a point's name: 1 to maxNameLen letters, digits,
// '.', '_' and '-'.
var pointNamePattern = fmt.Sprintf("^[A-Za-z0-9._-]{1,%d}$", maxNameLen)

var (
	tokenRE     = regexp.MustCompile(tokenPattern)
	pointNameRE = regexp.MustCompile(pointNamePattern)
)

// maxMillis is the largest duration the decoder accepts as an integer of
// milliseconds (and -maxMillis the smallest).
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// The keys of a per-key rule, an item of a point's perKey (keyPerKey).
var (
	keyPerKeyKey = &key{name: "key", field: "Key", kind: kindString, minLength: 1, empty: "write where a request's key is, such as header:X-Api-Key",
		doc: "Where a request's key is: header:NAME, query:NAME or cookie:NAME (its value, exactly; differing repeated values are one shared key), clientIP (the TCP peer), or forwardedFor:N (the Nth address from the right of X-Forwarded-For, N the trusted proxies in front; never the client's leftmost). Required."}
	keyPerKeyVisitThreshold = &key{name: "visitThreshold", field: "VisitThreshold", kind: kindThreshold, def: int64(-1), unit: "requests per window per key",
		doc: "Degrade a request when its key's admitted requests in the point's window, this one included, are above this (key_visit)."}
	keyPerKeyTokenBucketGeneratedTokensInSecond = &key{name: "tokenBucketGeneratedTokensInSecond", field: "TokensPerSecond", kind: kindThreshold, def: int64(-1), unit: "tokens per second per key", max: bound(limiter.MaxTokensPerSecond),
		doc: "Each key's token bucket, filled at this rate and full at start; a request admitted takes a token, and none left degrades (key_token_bucket)."}
	keyPerKeyTokenBucketSize = &key{name: "tokenBucketSize", field: "TokenBucketSize", kind: kindThreshold, def: int64(-1), unit: "tokens",
		doc: "Each key's bucket capacity: max(tokenBucketSize, tokenBucketGeneratedTokensInSecond). Needs tokenBucketGeneratedTokensInSecond."}
	keyPerKeyConcurrentThreshold = &key{name: "concurrentThreshold", field: "ConcurrentThreshold", kind: kindThreshold, def: int64(-1), unit: "requests in flight per key",
		doc: "Degrade a request when its key's requests in flight, this one included, are above this (key_concurrent)."}
	keyPerKeyMissing = &key{name: "missing", field: "Missing", kind: kindString, def: "pass", enum: []string{"pass", "degrade", "shared"},
		doc: "A request without the key: pass (the rule does not judge it), degrade (key_visit, as over its limit), or shared (all such requests are one key)."}
	keyPerKeyMaxKeys = &key{name: "maxKeys", field: "MaxKeys", kind: kindInt, def: int64(perkey.DefaultMaxKeys), unit: "keys", min: bound(1), max: bound(perkey.MaxMaxKeys), outside: "%[1]v is not a count from %[2]v to %[3]v; size it to the clients you expect, such as maxKeys: 10000",
		doc: "Keys tracked exactly; beyond them, keys share a fixed-size sketch that never under-counts a key, so memory stays bounded however many keys arrive: a rule holds at most maxKeys × (120 + 20·buckets) bytes, all from the start (2.3 MiB at the defaults)."}
)

var perKeySection = newSection("", reflect.TypeFor[PerKey](), "A per-key rule: where a request's key is, and the thresholds each key is held to in the point's window. An absent or negative threshold is off.",
	keyPerKeyKey, keyPerKeyVisitThreshold, keyPerKeyTokenBucketGeneratedTokensInSecond, keyPerKeyTokenBucketSize, keyPerKeyConcurrentThreshold, keyPerKeyMissing, keyPerKeyMaxKeys)

// The keys under a point's stale (keyStale).
var keyStaleMaxAge = &key{name: "maxAge", field: "MaxAge", kind: kindDuration, def: DefaultStaleMaxAge.String(), min: bound(1000), max: bound(maxStaleAge.Milliseconds()), seconds: true, show: showText,
	outside: "%[1]v is not from %[2]v to %[3]v; write one such as maxAge: 10m",
	doc:     "How old a kept answer may be when it is served: the time since the upstream gave it, plus any Age it came with. An answer that says must-revalidate, proxy-revalidate or s-maxage is served only while fresh, and one with stale-if-error no later than that past its freshness."}

var staleSection = newDefaultsSection("", reflect.TypeFor[Stale](), "Serve the last good answer while the point degrades (docs/protections.md, Stale answers).",
	keyStaleMaxAge)
