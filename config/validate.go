package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Limits of the values validate accepts.
const (
	maxBuckets     = 1000
	minBucketWidth = time.Millisecond
	maxNameLen     = 128
	maxMethods     = 32
	// maxRoutes and maxPoints bound a config: a route per API path or
	// gRPC method of a large service. Validation, the router and a reload's
	// diff take time linear in them (docs/configuration.md, Configuration).
	maxRoutes = 10_000
	maxPoints = 10_000
	// maxPerKeyRules bounds a point's perKey rules: each costs every
	// request of the point a look-up, and a request carries their calls.
	maxPerKeyRules = 4
	// maxStaleCacheBytes bounds staleCache.maxBytes: 4 GiB.
	maxStaleCacheBytes = 4 << 30
	// maxStaleAge bounds a point's stale.maxAge: an answer a week old is
	// the oldest worth serving in place of a fallback.
	maxStaleAge = 7 * 24 * time.Hour
	// maxConnectionsLimit bounds maxConnections: far beyond what a sidecar's
	// memory holds, and each connection needs a file descriptor.
	maxConnectionsLimit = 1_000_000

	maxClusterTimeout      = 10 * time.Second
	maxReplicas            = 10_000
	maxClusterAddresses    = 64
	maxClusterTokensPerSec = 1_000_000_000
	maxClusterBucketSize   = 1_000_000_000_000

	maxGRPCStatus = 16 // UNAUTHENTICATED, the last code gRPC defines
	// maxGRPCMessage bounds grpcMessage, in bytes: it travels in a header,
	// and gRPC clients refuse header lists above 8-16 KiB.
	maxGRPCMessage = 1024
)

// checker runs the rules of validation over a decoded file. Each rule
// reports at the position of the key it is about and skips keys whose
// value was of the wrong type (already reported by decode).
type checker struct {
	d    *decoded
	p    *problems
	opts Options
}

// validate reports every problem of the decoded file d to p.
func validate(d *decoded, opts Options, p *problems) {
	c := &checker{d: d, p: p, opts: opts}
	d.f.walk(c.bounds)
	c.addresses()
	c.upstream()
	c.window()
	c.settings()
	c.tls()
	c.cluster()
	c.routes()
	c.points()
	c.perKeyMemory()
}

// bounds reports the value f of the key k at l when it is beyond k's
// bounds (key.outside) or empty (key.empty).
func (c *checker) bounds(k *key, l loc, f reflect.Value) {
	switch {
	case !c.d.ok(l) || k.kind == kindMapping:
	case k.empty != "" && f.Len() == 0:
		c.p.add(c.val(l), "%s is empty; %s", l.field, k.empty)
	case k.maxLength > 0 && f.Len() > k.maxLength:
		c.wrong(l, k.outside, f.Len(), k.minLength, k.maxLength)
	case k.outside != "" && k.kind != kindString && !inBounds(k, f.Int()):
		lo, hi := limits(k)
		c.wrong(l, k.outside, shown(k, f.Int()), shown(k, lo), shown(k, hi))
	}
}

// inBounds reports whether n, a value of k, is within k's bounds.
func inBounds(k *key, n int64) bool {
	lo, hi := limits(k)
	return lo <= n && n <= hi
}

// limits returns k's bounds in the unit of its value (nanoseconds for a
// duration), the extremes of int64 where it has none.
func limits(k *key) (lo, hi int64) {
	unit := int64(1)
	if k.kind == kindDuration {
		unit = int64(time.Millisecond)
	}
	lo, hi = math.MinInt64, math.MaxInt64
	if k.min != nil {
		lo = *k.min * unit
	}
	if k.max != nil {
		hi = *k.max * unit
	}
	return lo, hi
}

// shown returns n, a value of k, to print: a duration or a size as one.
func shown(k *key, n int64) any {
	switch k.kind {
	case kindDuration:
		return time.Duration(n)
	case kindBytes:
		return formatBytes(n)
	}
	return n
}

// key returns where the key at l starts; for an absent key, where its
// route or point starts, or else the top of the file.
func (c *checker) key(l loc) pos {
	if s, ok := c.d.at[l]; ok {
		return s.key
	}
	if s, ok := c.d.at[loc{point: l.point, route: l.route}]; ok {
		return s.key
	}
	return c.d.root
}

// val returns where the value of the key at l starts (see key).
func (c *checker) val(l loc) pos {
	if s, ok := c.d.at[l]; ok {
		return s.val
	}
	return c.key(l)
}

// top is the location of the top-level key k, or of one under it.
func top(k *key) loc { return loc{field: k.path} }

// item is the location of item i of the list at l, from 0.
func (l loc) item(i int) loc {
	l.field = fmt.Sprintf("%s[%d]", l.field, i)
	return l
}

// wrong reports a problem with the value of the key at l, the message
// starting with the key's path.
func (c *checker) wrong(l loc, format string, args ...any) {
	c.p.add(c.val(l), l.field+": "+format, args...)
}

// setting reports a problem with a top-level setting: against the flag
// of the key's name when it gave the value, else at the value in the file.
func (c *checker) setting(k *key, flagValue, format string, args ...any) {
	if flagValue != "" {
		c.p.flag(k.name, format, args...)
		return
	}
	c.wrong(top(k), format, args...)
}

// addresses checks listen and admin, and that they do not share a port.
func (c *checker) addresses() {
	f := c.d.f
	listenOK := c.address(keyListen, f.Listen, c.opts.Listen, DefaultListen)
	adminOK := c.address(keyAdmin, f.Admin, c.opts.Admin, DefaultAdmin)
	if listenOK && adminOK && sameAddress(f.Listen, f.Admin) {
		c.setting(keyAdmin, c.opts.Admin, "%s is the same port as %s %s; give the admin port its own, such as %s: %s", f.Admin, keyListen.name, f.Listen, keyAdmin.name, DefaultAdmin)
	}
}

// address checks the host:port to listen on that k gives.
func (c *checker) address(k *key, value, flagValue, example string) bool {
	if !c.d.good(top(k)) {
		return false
	}
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		c.setting(k, flagValue, "%q is not a host:port address; write it as %s", value, example)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.setting(k, flagValue, "port %q is not a number from 0 to 65535", port)
		return false
	}
	if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
		c.setting(k, flagValue, "host %q is neither an IP address nor a host name; write it as %s", host, example)
		return false
	}
	return true
}

// sameAddress reports whether two listen addresses would share a port.
func sameAddress(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wildcard(ha) || wildcard(hb)
}

// upstream checks the upstream URL: http, https or h2c, a host, no path.
func (c *checker) upstream() {
	f := c.d.f
	if !c.d.good(top(keyUpstream)) {
		return
	}
	if f.Upstream == "" {
		c.p.add(c.val(top(keyUpstream)), "%[1]s is required: add %[1]s: http://127.0.0.1:9000 (the service's address) or pass -%[1]s", keyUpstream.name)
		return
	}
	report := func(format string, args ...any) { c.setting(keyUpstream, c.opts.Upstream, format, args...) }
	if !strings.Contains(f.Upstream, "://") {
		host, _, _ := strings.Cut(f.Upstream, "/")
		report("%q has no scheme; write http://%s (or https://, or h2c:// for cleartext HTTP/2)", f.Upstream, host)
		return
	}
	u, err := url.Parse(f.Upstream)
	if err != nil {
		report("%q is not a URL: %v", f.Upstream, unwrapURLError(err))
		return
	}
	switch u.Scheme {
	case "http", "https", "h2c":
	default:
		report("scheme %q is not supported; write http://, https:// or h2c:// (cleartext HTTP/2)", u.Scheme)
		return
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		report("%q has no host; write it as http://127.0.0.1:9000", f.Upstream)
	case u.User != nil:
		report("%q carries a user name or password, which is not sent; remove it", f.Upstream)
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		report("%q has a path, query or fragment; requests keep their own path, so write %s://%s", f.Upstream, u.Scheme, u.Host)
	case u.Port() != "" && !validPort(u.Port()):
		report("port %q is not a number from 1 to 65535", u.Port())
	}
}

// unwrapURLError drops url.Error's repetition of the URL.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// window checks that the window splits evenly into buckets of at least
// minBucketWidth.
func (c *checker) window() {
	f := c.d.f
	windowOK, bucketsOK := c.d.good(top(keyWindow)), c.d.good(top(keyBuckets))
	if windowOK && f.Window <= 0 {
		c.wrong(top(keyWindow), "%v is not a positive duration; write %s: 10s", f.Window, keyWindow.name)
		windowOK = false
	}
	bucketsOK = bucketsOK && inBounds(keyBuckets, int64(f.Buckets))
	if !windowOK || !bucketsOK {
		return
	}
	at := c.val(top(keyBuckets))
	if !c.d.has(top(keyBuckets)) {
		at = c.val(top(keyWindow))
	}
	if f.Window%time.Duration(f.Buckets) != 0 {
		c.p.add(at, "%s %v does not split evenly into %d buckets; choose %s that divide it (such as 10 for 10s) or a window that is a multiple of %d", keyWindow.path, f.Window, f.Buckets, keyBuckets.name, f.Buckets)
		return
	}
	if w := f.Window / time.Duration(f.Buckets); w < minBucketWidth {
		c.p.add(at, "%s %v split into %d buckets gives buckets of %v; a bucket is at least %v: use a longer window or fewer buckets", keyWindow.path, f.Window, f.Buckets, w, minBucketWidth)
	}
}

// settings checks the other top-level settings.
func (c *checker) settings() {
	f := c.d.f
	if l := top(keyPressureTestHeader); c.d.ok(l) && f.PressureTestHeader != "" && !tokenRE.MatchString(f.PressureTestHeader) {
		c.wrong(l, "%q is not a header name; write one such as X-Pressure-Test", f.PressureTestHeader)
	}
	if f.H2C && f.TLS.Enabled() && c.d.ok(top(keyH2C)) {
		c.wrong(top(keyH2C), "true has no effect with %s, which offers HTTP/2 itself; remove %s", keyTLS.name, keyH2C.name)
	}
	c.grpcUpstream()
}

// grpcUpstream warns when h2c: true takes cleartext HTTP/2 from clients
// but the upstream is http://, called over HTTP/1.1, so gRPC calls fail
// (docs/tls.md). A warning: plain HTTP over cleartext HTTP/2 is still
// served. (With tls, h2c is an error already.)
func (c *checker) grpcUpstream() {
	f := c.d.f
	if !f.H2C || f.TLS.Enabled() || !c.d.ok(top(keyH2C)) || !c.d.good(top(keyUpstream)) {
		return
	}
	u, err := url.Parse(f.Upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return
	}
	c.p.warn(c.val(top(keyH2C)), "%[1]s: true accepts cleartext HTTP/2 from clients, but the %[2]s %[3]s is called over HTTP/1.1, so gRPC calls fail; use h2c://%[4]s for a gRPC %[2]s (or remove %[1]s if no client speaks gRPC)", keyH2C.name, keyUpstream.name, f.Upstream, u.Host)
}

// tls checks the inbound TLS setting: a certificate pair or ACME.
func (c *checker) tls() {
	t := c.d.f.TLS
	if !c.d.has(top(keyTLS)) {
		return
	}
	cert, priv := top(keyTLSCertFile), top(keyTLSKeyFile)
	certOK, keyOK := c.d.ok(cert), c.d.ok(priv)
	switch {
	case certOK && t.CertFile == "":
		c.p.add(c.val(cert), "%s is empty; give the PEM certificate's path or remove it", cert.field)
	case keyOK && t.KeyFile == "":
		c.p.add(c.val(priv), "%s is empty; give the PEM private key's path or remove it", priv.field)
	case certOK && !c.d.has(priv):
		c.p.add(c.key(cert), "%s is set but %s is not; add %s: with the private key's path", cert.field, priv.field, keyTLSKeyFile.name)
	case keyOK && !c.d.has(cert):
		c.p.add(c.key(priv), "%s is set but %s is not; add %s: with the certificate's path", priv.field, cert.field, keyTLSCertFile.name)
	}
	acme := top(keyTLSACME)
	if t.ACME == nil || !c.d.good(acme) {
		return
	}
	if c.d.has(cert) || c.d.has(priv) {
		c.p.add(c.key(acme), "%s: give either %s and %s or %s, not both", keyTLS.path, keyTLSCertFile.name, keyTLSKeyFile.name, keyTLSACME.name)
	}
	if len(t.ACME.Domains) == 0 {
		c.p.add(c.key(acme), "%s has no %s; list the names to obtain certificates for, such as %[2]s: [shop.example]", acme.field, keyACMEDomains.name)
	}
	for i, name := range t.ACME.Domains {
		at := c.val(top(keyACMEDomains).item(i))
		switch {
		case strings.HasPrefix(name, "*."):
			c.p.add(at, "%s: %q is a wildcard, which needs the DNS challenge that sds-proxy does not set up; list each name", keyACMEDomains.path, name)
		case net.ParseIP(name) == nil && !validHostname(name):
			c.p.add(at, "%s: %q is not a host name such as shop.example", keyACMEDomains.path, name)
		}
	}
	if a := t.ACME; a.Email != "" && !strings.Contains(a.Email, "@") {
		c.wrong(top(keyACMEEmail), "%q is not an email address", a.Email)
	}
	if a := t.ACME; a.CA != "" {
		if u, err := url.Parse(a.CA); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			c.wrong(top(keyACMECA), "%q is not the URL of an ACME directory, such as https://acme-staging-v02.api.letsencrypt.org/directory", a.CA)
		}
	}
	f := c.d.f
	if a := t.ACME; a.HTTPListen != "" && c.address(keyACMEHTTPListen, a.HTTPListen, "", "0.0.0.0:8081") {
		for _, other := range []struct {
			key  *key
			addr string
		}{{keyListen, f.Listen}, {keyAdmin, f.Admin}} {
			if sameAddress(a.HTTPListen, other.addr) {
				c.wrong(top(keyACMEHTTPListen), "%s is the same port as %s %s; give the challenge listener its own, such as 0.0.0.0:8081", a.HTTPListen, other.key.name, other.addr)
			}
		}
	}
}

// isSpaceOrControl reports whether r is an ASCII space or control character.
func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// validHostname reports whether s is a DNS name: labels of letters,
// digits, '-' and '_', each 1-63 bytes, 253 at most in all.
func validHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// validHostPort reports whether s is a host name or IP address with an
// optional :port, as in a Host header.
func validHostPort(s string) bool {
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		if !validPort(port) {
			return false
		}
		host = h
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	return net.ParseIP(host) != nil || validHostname(host)
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535 && s[0] != '+'
}

// cluster checks cluster: and every point's clusterTokenBucket.
func (c *checker) cluster() {
	f := c.d.f
	used := false
	for i := range f.Points {
		pt := &f.Points[i]
		base := pl(pt, keyClusterTokenBucket)
		if !c.d.has(base) {
			continue
		}
		used = true
		if f.Cluster == nil {
			c.p.add(c.key(base), "point %q: %s needs a top-level %s: with the Redis addresses the proxies share", pt.Name, base.field, keyCluster.name)
		}
		if !c.d.has(pl(pt, keyClusterBucketTokensPerSecond)) {
			c.p.add(c.key(base), "point %q: %s needs %s, such as %[3]s: 100", pt.Name, base.field, keyClusterBucketTokensPerSecond.name)
		}
	}
	cl := f.Cluster
	if cl == nil {
		return
	}
	if !used {
		c.p.warn(c.key(top(keyCluster)), "%[1]s: no point has a %[2]s, so Redis is never called; add %[2]s: {%[3]s: N} to a point, or remove %[1]s:", keyCluster.path, keyClusterTokenBucket.name, keyClusterBucketTokensPerSecond.name)
	}
	if l := top(keyClusterAddresses); c.d.good(l) {
		switch {
		case len(cl.Addresses) == 0:
			c.p.add(c.key(top(keyCluster)), "%s: needs %s, such as %[2]s: [redis.default.svc:6379]", keyCluster.path, keyClusterAddresses.name)
		case len(cl.Addresses) > maxClusterAddresses:
			c.wrong(l, "%d addresses; at most %d", len(cl.Addresses), maxClusterAddresses)
		}
		for i, a := range cl.Addresses {
			if problem := redisAddress(a); problem != "" {
				c.p.add(c.val(l.item(i)), "%s: %q %s", l.field, a, problem)
			}
		}
	}
	if l := top(keyClusterDB); c.d.good(l) && cl.DB > 0 && len(cl.Addresses) > 1 && cl.MasterName == "" {
		c.wrong(l, "%d with several addresses (a Redis Cluster), which has only database 0", cl.DB)
	}
	if t := cl.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		c.p.add(c.key(top(keyClusterTLS)), "%s: %s and %s go together; give both for a client certificate, or neither", keyClusterTLS.path, keyClusterTLSCertFile.name, keyClusterTLSKeyFile.name)
	}
}

// redisAddress returns what is wrong with a Redis host:port, or "".
func redisAddress(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return "is not a host:port address; write it as redis.default.svc:6379"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has no port from 1 to 65535"
	}
	if net.ParseIP(host) == nil && !validHostname(host) {
		return "has a host that is neither an IP address nor a host name"
	}
	return ""
}
