package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/sds-proxy/sds-proxy/limiter"
)

// lineEnds returns the offset just past each line of data, with line
// breaks as YAML counts them: LF, CR LF, CR, NEL, LS and PS. The last line
// need not end in a break.
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\n':
			ends = append(ends, i+1)
		case data[i] == '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			ends = append(ends, i+1)
		case data[i] >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(data[i:])
			i += size - 1
			if r == '\u0085' || r == '\u2028' || r == '\u2029' {
				ends = append(ends, i+1)
			}
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

// maxFileSize bounds the config file, in bytes.
const maxFileSize = 1 << 20

// maxNodes bounds the YAML nodes one decode visits, aliases expanded, so
// that a small file of nested aliases cannot make it run for long.
const maxNodes = 200_000

// span is where a key and its value start.
type span struct{ key, val pos }

// decoded is a decoded file before validation: f holds every key the file
// names with the value as written (negative thresholds not yet folded to
// -1), and the defaults for the rest.
type decoded struct {
	f *File
	// at holds the position of every key present in the file.
	at map[loc]span
	// bad holds the keys present whose value could not be decoded (the
	// problem is already reported); rules about them are not judged.
	bad map[loc]bool
	// root is where the top-level mapping starts.
	root pos
	// bodyFile maps a point's name to its fallback's bodyFile as written.
	bodyFile map[string]string
	// negative holds the text of each threshold and duration written
	// negative ("-1", "-1ms"): an off value as the file spells it, which
	// decoding folds (a threshold to off, delayTime's -1 to 0), so that a
	// message can say such a key is off rather than not set. nil until
	// one is.
	negative map[loc]string
}

// has reports whether the file names the key at l, whatever its value.
func (d *decoded) has(l loc) bool { _, ok := d.at[l]; return ok }

// ok reports whether the file names every key of ls with a value of the
// right type.
func (d *decoded) ok(ls ...loc) bool {
	for _, l := range ls {
		if !d.has(l) || d.bad[l] {
			return false
		}
	}
	return true
}

// good reports whether none of ls has a value of the wrong type; absent
// keys are good.
func (d *decoded) good(ls ...loc) bool {
	for _, l := range ls {
		if d.bad[l] {
			return false
		}
	}
	return true
}

// decoder walks the YAML node tree by the schema of sds.yaml (README,
// Configuration; the keys are defined in keys.go).
type decoder struct {
	p      *problems
	out    *decoded
	budget int
	// setters, when not nil, records the keys each section's setters
	// decode, for TestDecoderKeys; nil while decoding for real.
	setters map[*section][]string
	// release is the mapping whose entries entries lets go of as it
	// decodes them (releasable); nil for none.
	release *yaml.Node
}

// releasable reports whether n is a mapping or list that its parent alone
// points to: it has no anchor, so no alias reaches it (an alias is to an
// anchor), and it is no alias itself. Its entries may then be let go as
// they are decoded, so that the tree of a large file shrinks while its
// config grows: the points and routes of a 1 MiB file of 10,000 points
// are 22 MiB of nodes, which a reload held beside the config in force and
// the new one. An entry may itself be anchored: the aliases to it hold it.
func releasable(n *yaml.Node) bool {
	return (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Anchor == ""
}

// setter decodes the value v of key into its destination.
type setter func(key string, v *yaml.Node)

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// decode reads data strictly: exactly one YAML document holding a mapping
// with known keys, each once, each of its type. Problems go to p; the
// result is nil when the YAML itself could not be read.
func decode(data []byte, p *problems) *decoded {
	if len(data) > maxFileSize {
		p.add(pos{1, 1}, "the file is %d bytes; a config is at most %d bytes", len(data), maxFileSize)
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			fileEmpty(p)
		} else {
			syntaxError(p, data, err)
		}
		return nil
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case err == nil:
		p.add(pos{second.Line, second.Column}, "a second YAML document starts here; a config is one document: remove this '---' and what follows it")
	case !errors.Is(err, io.EOF):
		syntaxError(p, data, err)
	}
	if len(doc.Content) == 0 {
		fileEmpty(p)
		return nil
	}
	d := &decoder{p: p, budget: maxNodes, out: &decoded{
		f:        newFile(),
		at:       map[loc]span{},
		bad:      map[loc]bool{},
		bodyFile: map[string]string{},
	}}
	root := doc.Content[0]
	d.out.root = pos{root.Line, root.Column}
	if root.ShortTag() == "!!null" {
		fileEmpty(p)
		return nil
	}
	if d.resolve(root).Kind != yaml.MappingNode {
		p.add(d.out.root, "the file must be a mapping of keys such as %s: and %s:, got %s", keyUpstream.name, keyPoints.name, describe(d.resolve(root)))
		return nil
	}
	d.top(root)
	return d.out
}

// fileEmpty reports a file that holds no keys.
func fileEmpty(p *problems) {
	p.add(pos{1, 1}, "the file is empty; it needs at least %s: and %s:", keyUpstream.name, keyPoints.name)
}

// syntaxError records a YAML syntax error in data. The parser's message
// names the line where the construct it was reading began, which can be
// far above the mistake; the line reported is the first whose addition to
// the lines before it makes them unreadable. The column is 1: the parser
// does not report one.
func syntaxError(p *problems, data []byte, err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	at := pos{}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		msg = err.Error()[len(m[0]):]
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			at = pos{n, 1}
		}
	}
	if n := firstBadLine(data); n > 0 {
		at = pos{n, 1}
	}
	if tabIndented(data, at.line) {
		p.add(at, "YAML syntax: a tab indents this line, and YAML indents with spaces only: replace the tab with spaces (the parser says: %s)", msg)
		return
	}
	p.add(at, "YAML syntax: %s", msg)
}

// tabIndented reports whether line n of data (from 1) has a tab among the
// blanks before its first other character; false for n < 1 or past the
// last line.
func tabIndented(data []byte, n int) bool {
	ends := lineEnds(data)
	if n < 1 || n > len(ends) {
		return false
	}
	start := 0
	if n > 1 {
		start = ends[n-2]
	}
	for _, c := range data[start:ends[n-1]] {
		switch c {
		case '\t':
			return true
		case ' ':
		default:
			return false
		}
	}
	return false
}

// firstBadLine returns the smallest n such that the first n lines of data
// are not readable YAML, by binary search, or 0 if it finds none.
func firstBadLine(data []byte) int {
	ends := lineEnds(data)
	readable := func(n int) bool {
		dec := yaml.NewDecoder(bytes.NewReader(data[:ends[n-1]]))
		for {
			var doc yaml.Node
			if err := dec.Decode(&doc); err != nil {
				return errors.Is(err, io.EOF)
			}
		}
	}
	lo, hi := 1, len(ends)
	if readable(hi) {
		return 0
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if readable(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// top decodes the top-level mapping.
func (d *decoder) top(n *yaml.Node) {
	f := d.out.f
	d.fields(n, "at the top level", loc{}, topSection, map[*key]setter{
		keyListen:             d.str(&f.Listen),
		keyH2C:                d.boolean(&f.H2C),
		keyUpstream:           d.str(&f.Upstream),
		keyAdmin:              d.str(&f.Admin),
		keyForwardedHeaders:   d.boolean(&f.ForwardedHeaders),
		keyWindow:             d.duration(&f.Window),
		keyBuckets:            integer(d, &f.Buckets),
		keyPressureTestHeader: d.str(&f.PressureTestHeader),
		keyAccessLog:          d.boolean(&f.AccessLog),
		keyDrainTimeout:       d.duration(&f.DrainTimeout),
		keyMaxConnections:     integer(d, &f.MaxConnections),
		keyAdminTokenFile:     d.str(&f.AdminTokenFile),
		keyTLS:                func(_ string, v *yaml.Node) { d.tls(v, &f.TLS) },
		keyCluster:            func(_ string, v *yaml.Node) { d.cluster(v) },
		keyRoutes:             func(_ string, v *yaml.Node) { d.routes(v) },
		keyPoints:             func(_ string, v *yaml.Node) { d.points(v) },
	})
}

// within returns the scope of the keys of the mapping k at the top level,
// for messages, and the location its keys' paths start from.
func within(k *key) (string, loc) { return "in " + k.path, loc{field: k.path + "."} }

// tls decodes the tls mapping into t.
func (d *decoder) tls(n *yaml.Node, t *TLS) {
	scope, base := within(keyTLS)
	d.fields(n, scope, base, tlsSection, map[*key]setter{
		keyTLSCertFile: d.str(&t.CertFile),
		keyTLSKeyFile:  d.str(&t.KeyFile),
		keyTLSACME: func(_ string, v *yaml.Node) {
			t.ACME = &ACME{}
			scope, base := within(keyTLSACME)
			d.fields(v, scope, base, acmeSection, map[*key]setter{
				keyACMEDomains:    d.strings(loc{field: keyACMEDomains.path}, &t.ACME.Domains),
				keyACMEEmail:      d.str(&t.ACME.Email),
				keyACMECA:         d.str(&t.ACME.CA),
				keyACMECARoot:     d.str(&t.ACME.CARoot),
				keyACMEStorage:    d.str(&t.ACME.Storage),
				keyACMEHTTPListen: d.str(&t.ACME.HTTPListen),
			})
		},
	})
}

// routes decodes the list of routes, in order.
func (d *decoder) routes(n *yaml.Node) {
	items, ok := d.sequence(n, keyRoutes.path, fmt.Sprintf("a list of routes such as - %s: orders.read", keyRoutePoint.name))
	if !ok {
		return
	}
	if len(items) > maxRoutes {
		d.p.add(pos{n.Line, n.Column}, "%s: %d routes; a config holds at most %d", keyRoutes.path, len(items), maxRoutes)
		items = items[:maxRoutes]
	}
	// Sized at once: grown by doubling, the routes of a 1 MiB file cost
	// twice their size again in copies.
	d.out.f.Routes = slices.Grow(d.out.f.Routes, len(items))
	release := releasable(n)
	for i, item := range items {
		if release && i > 0 {
			items[i-1] = nil // decoded
		}
		r := Route{}
		base := loc{route: i + 1}
		d.out.at[base] = span{key: pos{item.Line, item.Column}, val: pos{item.Line, item.Column}}
		scope := fmt.Sprintf("in route %d", i+1)
		if d.resolve(item).Kind != yaml.MappingNode {
			d.p.add(pos{item.Line, item.Column}, "route %d: want a mapping with %s: and %s:, got %s", i+1, keyRoutePoint.name, keyRouteMatch.name, describe(d.resolve(item)))
			d.out.bad[base] = true
			d.out.f.Routes = append(d.out.f.Routes, r)
			continue
		}
		d.fields(item, scope, base, routeSection, map[*key]setter{
			keyRoutePoint: d.str(&r.Point),
			keyRouteMatch: func(_ string, v *yaml.Node) {
				scope := fmt.Sprintf("in the %s of route %d", keyRouteMatch.name, i+1)
				d.fields(v, scope, loc{route: i + 1, field: keyRouteMatch.path + "."}, matchSection, map[*key]setter{
					keyMatchMethods:    d.strings(loc{route: i + 1, field: keyMatchMethods.path}, &r.Methods),
					keyMatchPath:       d.str(&r.Path),
					keyMatchPathPrefix: d.str(&r.PathPrefix),
					keyMatchHost:       d.str(&r.Host),
				})
			},
			keyRoutePriority: d.priority(&r.Priority),
		})
		d.out.f.Routes = append(d.out.f.Routes, r)
	}
}

// points decodes the mapping of points, in file order.
func (d *decoder) points(n *yaml.Node) {
	// Sized at once: grown by doubling, 10,000 points of some 480 bytes
	// each cost 20 MB of copies (a mapping's content is its keys and
	// values, in turn).
	if n.Kind == yaml.MappingNode {
		d.out.f.Points = slices.Grow(d.out.f.Points, min(len(n.Content)/2, maxPoints))
	}
	if releasable(n) {
		d.release = n
		defer func() { d.release = nil }()
	}
	d.entries(n, keyPoints.path, "a mapping of point names to their settings", func(name string, k, v *yaml.Node) {
		if len(d.out.f.Points) == maxPoints {
			d.p.add(pos{k.Line, k.Column}, "%s: a config holds at most %d points", keyPoints.path, maxPoints)
		}
		if len(d.out.f.Points) >= maxPoints {
			return
		}
		p := newPoint(name)
		base := loc{point: name}
		d.out.at[base] = span{key: pos{k.Line, k.Column}, val: pos{v.Line, v.Column}}
		scope := fmt.Sprintf("in point %q", name)
		if m := d.resolve(v); m.Kind != yaml.MappingNode && m.ShortTag() != "!!null" {
			d.out.bad[base] = true
		}
		d.fields(v, scope, base, pointSection, map[*key]setter{
			keyTimeoutThreshold:                   d.duration(&p.TimeoutThreshold),
			keyTimeoutCountThreshold:              d.threshold(&p.TimeoutCountThreshold),
			keyVisitThreshold:                     d.threshold(&p.VisitThreshold),
			keyConcurrentThreshold:                d.threshold(&p.ConcurrentThreshold),
			keyExceptionThreshold:                 d.threshold(&p.ExceptionThreshold),
			keyExceptionRateThreshold:             d.threshold(&p.ExceptionRateThreshold),
			keyExceptionRateStart:                 integer(d, &p.ExceptionRateStart),
			keyTokenBucketGeneratedTokensInSecond: d.threshold(&p.TokensPerSecond),
			keyTokenBucketSize:                    d.threshold(&p.TokenBucketSize),
			keyDowngradeRate:                      d.percent(&p.DowngradeRate),
			keyDelayTime:                          d.delay(&p.DelayTime),
			keyRetryInterval:                      d.delay(&p.RetryInterval),
			keyPressureTestDowngrade:              d.boolean(&p.PressureTestDowngrade),
			keyMode:                               d.mode(&p.Shadow),
			keyUpstreamTimeout:                    d.duration(&p.UpstreamTimeout),
			keyFallbackOnError:                    d.boolean(&p.FallbackOnError),
			keyFallback:                           func(_ string, v *yaml.Node) { d.fallback(v, name, &p.Fallback) },
			keyClusterTokenBucket:                 func(_ string, v *yaml.Node) { d.clusterBucket(v, name, &p.ClusterTokenBucket) },
			keyRecoveryTime:                       d.delay(&p.RecoveryTime),
			keyRecoveryStart:                      d.percent(&p.RecoveryStart),
			keySheddableShare:                     d.percent(&p.SheddableShare),
			keyAdaptiveConcurrency:                func(_ string, v *yaml.Node) { d.adaptive(v, name, &p.AdaptiveConcurrency) },
		})
		d.out.f.Points = append(d.out.f.Points, p)
	})
}

// threshold decodes an integer threshold into dst: a negative one is off,
// as -1 is in SDS.
func (d *decoder) threshold(dst *limiter.Threshold) setter {
	return func(key string, v *yaml.Node) {
		n := int64(-1)
		integer(d, &n)(key, v)
		*dst = limiter.Threshold{}
		if n >= 0 {
			*dst = limiter.At(n)
		}
	}
}

// percent decodes downgradeRate into dst as written, negative included:
// limiter.Policy.Check reports a value that is not a percent.
func (d *decoder) percent(dst *limiter.Threshold) setter {
	return func(key string, v *yaml.Node) {
		before := len(d.p.errs)
		var n int64
		integer(d, &n)(key, v)
		if len(d.p.errs) == before {
			*dst = limiter.At(n)
		}
	}
}

// delay decodes delayTime or retryInterval into dst. -1 (a millisecond)
// is off, as in SDS, and decodes to 0; any other negative duration is kept
// for limiter.Policy.Check to report.
func (d *decoder) delay(dst *time.Duration) setter {
	set := d.duration(dst)
	return func(key string, v *yaml.Node) {
		set(key, v)
		if *dst == -time.Millisecond {
			*dst = 0
		}
	}
}

// fallback decodes the fallback of point into fb; a bodyFile is read later.
func (d *decoder) fallback(n *yaml.Node, point string, fb *Fallback) {
	scope, base := inPoint(keyFallback, point)
	d.fields(n, scope, base, fallbackSection, map[*key]setter{
		keyFallbackStatus:  integer(d, &fb.Status),
		keyFallbackHeaders: func(_ string, v *yaml.Node) { d.headers(v, point, fb) },
		keyFallbackBody: func(key string, v *yaml.Node) {
			if s, ok := d.scalar(key, v, "!!str", "a string"); ok {
				fb.Body, fb.BodySet = []byte(s.Value), true
			}
		},
		keyFallbackBodyFile: func(key string, v *yaml.Node) {
			if s, ok := d.scalar(key, v, "!!str", "a path"); ok {
				d.out.bodyFile[point] = s.Value
				fb.BodySet = true
			}
		},
		keyFallbackGRPCStatus: func(key string, v *yaml.Node) {
			integer(d, &fb.GRPCStatus)(key, v)
			fb.GRPCStatusSet = true
		},
		keyFallbackGRPCMessage: d.str(&fb.GRPCMessage),
	})
}

// inPoint returns the scope of the keys of the mapping k of point, for
// messages, and the location its keys' paths start from.
func inPoint(k *key, point string) (string, loc) {
	return fmt.Sprintf("in the %s of point %q", k.path, point), loc{point: point, field: k.path + "."}
}

// headers decodes a mapping of header names to a value or a list of values.
func (d *decoder) headers(n *yaml.Node, point string, fb *Fallback) {
	d.entries(n, keyFallbackHeaders.name, "a mapping of header names to values such as Content-Type: application/json", func(name string, k, v *yaml.Node) {

		v = d.resolve(v)
		values := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			values = d.items(v)
		}
		for _, vn := range values {
			vn = d.resolve(vn)
			if vn.Kind != yaml.ScalarNode || vn.ShortTag() == "!!null" {
				d.p.add(pos{vn.Line, vn.Column}, "header %s: want a value or a list of values, got %s", name, describe(vn))
				continue
			}
			d.out.at[loc{point: point, field: fmt.Sprintf("%s[%d]", keyFallbackHeaders.path, len(fb.Headers))}] = span{key: pos{k.Line, k.Column}, val: pos{vn.Line, vn.Column}}
			fb.Headers = append(fb.Headers, [2]string{name, vn.Value})
		}
	})
}
