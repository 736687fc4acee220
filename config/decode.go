package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
// names with the value as written, and the defaults for the rest.
type decoded struct {
	f    *File
	at   map[loc]span // the position of every key present in the file
	root pos          // where the top-level mapping starts
	// bad holds the keys present whose value could not be decoded (the
	// problem is already reported); rules about them are not judged.
	bad map[loc]bool
	// negative holds the text of each threshold and duration written
	// negative ("-1", "-1ms"), which decoding folds to off, so that a
	// message can say such a key is off rather than not set.
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

// decoder walks the YAML node tree by the keys of keys.go into the Go
// fields they name.
type decoder struct {
	p      *problems
	out    *decoded
	budget int
}

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
	d := &decoder{p: p, budget: maxNodes, out: &decoded{f: newFile(), at: map[loc]span{}, bad: map[loc]bool{}}}
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
	d.fields(root, "at the top level", loc{}, topSection, reflect.ValueOf(d.out.f).Elem())
	return d.out
}

// fileEmpty reports a file that holds no keys.
func fileEmpty(p *problems) {
	p.add(pos{1, 1}, "the file is empty; it needs at least %s: and %s:", keyUpstream.name, keyPoints.name)
}

// syntaxError records a YAML syntax error in data at column 1 (the parser
// gives none) of the first line that makes the lines up to it unreadable:
// the parser names the line where the construct it was reading began,
// which can be far above the mistake.
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

// tabIndented reports whether line n of data (from 1) has a tab in its
// indentation.
func tabIndented(data []byte, n int) bool {
	ends := lineEnds(data)
	if n < 1 || n > len(ends) {
		return false
	}
	start := 0
	if n > 1 {
		start = ends[n-2]
	}
	line := data[start:ends[n-1]]
	indent := line[:len(line)-len(bytes.TrimLeft(line, " \t"))]
	return bytes.IndexByte(indent, '\t') >= 0
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

// value decodes v, the value of the key k of the mapping at base, into
// the field k names in owner, by k's kind and the field's type.
func (d *decoder) value(k *key, v *yaml.Node, base loc, owner reflect.Value) {
	dst := field(k, owner)
	before := len(d.p.errs)
	switch k.kind {
	case kindMapping:
		d.mapping(k, v, base, dst)
	case kindList:
		if k == keyRoutes {
			d.routes(v)
		} else {
			d.list(k, v, base, dst)
		}
	case kindNamed:
		d.points(v)
	case kindHeaders:
		d.headers(v, base.point, dst.Addr().Interface().(*[][2]string))
	case kindStrings:
		d.strings(k.name, v, loc{point: base.point, route: base.route, field: k.path}, dst)
	case kindBool:
		if s, ok := d.scalar(k.name, v, "!!bool", "true or false"); ok {
			dst.SetBool(strings.EqualFold(s.Value, "true"))
		}
	case kindString:
		d.text(k, v, dst)
	case kindDuration:
		d.duration(k, v, dst)
	case kindBytes:
		d.size(k, v, dst)
	default:
		d.number(k, v, dst)
	}
	if k.sets != "" && len(d.p.errs) == before {
		owner.FieldByName(k.sets).SetBool(true)
	}
}

// mapping decodes the mapping v of the key k into dst, a struct or a
// pointer to one it allocates, after the section's defaults; a struct
// with an On field (limiter.AdaptiveConcurrency) is turned on.
func (d *decoder) mapping(k *key, v *yaml.Node, base loc, dst reflect.Value) {
	if dst.Kind() == reflect.Pointer {
		dst.Set(reflect.New(dst.Type().Elem()))
		dst = dst.Elem()
	}
	if k.section.defaults {
		setDefaults(k.section, dst)
	}
	if on := dst.FieldByName("On"); on.IsValid() && on.Kind() == reflect.Bool {
		on.SetBool(true)
	}
	inner := base
	inner.field = k.path + "."
	var scope string
	switch {
	case base.point != "":
		scope = fmt.Sprintf("in the %s of point %q", k.path, base.point)
	case base.route != 0:
		scope = fmt.Sprintf("in the %s of route %d", k.path, base.route)
	default:
		scope = "in " + k.path
	}
	d.fields(v, scope, inner, k.section, dst)
}

// text decodes a string into dst: a string, the bytes of one, or, for a
// key with an enum, a bool (the enum's second value) or a priority.
func (d *decoder) text(k *key, v *yaml.Node, dst reflect.Value) {
	want := cmp.Or(k.want, "a string")
	if len(k.enum) > 0 {
		want = strings.Join(k.enum[:len(k.enum)-1], ", ") + " or " + k.enum[len(k.enum)-1]
	}
	s, ok := d.scalar(k.name, v, "!!str", want)
	if !ok {
		return
	}
	if len(k.enum) > 0 && !slices.Contains(k.enum, s.Value) {
		d.p.add(pos{v.Line, v.Column}, "%s: want %s, got %q", k.name, want, s.Value)
		return
	}
	switch dst.Interface().(type) {
	case string:
		dst.SetString(s.Value)
	case []byte:
		dst.SetBytes([]byte(s.Value))
	case bool:
		dst.SetBool(s.Value == k.enum[1])
	case limiter.Priority:
		pr, _ := limiter.ParsePriority(s.Value) // the enum's names are the limiter's
		dst.Set(reflect.ValueOf(pr))
	}
}

// number decodes an integer into dst: an int, an int64 or a
// limiter.Threshold (key.field).
func (d *decoder) number(k *key, v *yaml.Node, dst reflect.Value) {
	n, ok := d.integer(k.name, v)
	t, threshold := dst.Addr().Interface().(*limiter.Threshold)
	switch {
	case !ok:
	case !threshold:
		dst.SetInt(n)
	case k.kind == kindThreshold && n < 0:
		*t = limiter.Threshold{}
	default:
		*t = limiter.At(n)
	}
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
	// Sized at once: grown by doubling, a large file's routes cost twice
	// their size again in copies. The same holds for points.
	d.out.f.Routes = slices.Grow(d.out.f.Routes, len(items))
	for i, item := range items {
		r := Route{}
		base := loc{route: i + 1}
		d.out.at[base] = span{key: pos{item.Line, item.Column}, val: pos{item.Line, item.Column}}
		if d.resolve(item).Kind != yaml.MappingNode {
			d.p.add(pos{item.Line, item.Column}, "route %d: want a mapping with %s: and %s:, got %s", i+1, keyRoutePoint.name, keyRouteMatch.name, describe(d.resolve(item)))
			d.out.bad[base] = true
		} else {
			d.fields(item, fmt.Sprintf("in route %d", i+1), base, routeSection, reflect.ValueOf(&r).Elem())
		}
		d.out.f.Routes = append(d.out.f.Routes, r)
	}
}

// list decodes the list v of the key k of a point into dst, a slice of
// the struct of k's section, item by item; each item's keys are located
// under it (perKey[1].visitThreshold), and an item that is not a mapping
// is reported at its place.
func (d *decoder) list(k *key, v *yaml.Node, base loc, dst reflect.Value) {
	items, ok := d.sequence(v, fmt.Sprintf("%s of point %q", k.path, base.point), k.want)
	if !ok {
		return
	}
	if len(items) > k.maxItems {
		d.p.add(pos{v.Line, v.Column}, "%s of point %q: %d items; a point holds at most %d", k.path, base.point, len(items), k.maxItems)
		items = items[:k.maxItems]
	}
	dst.Set(reflect.MakeSlice(dst.Type(), len(items), len(items)))
	for i, item := range items {
		at := itemLoc(base, k, i)
		name := strings.TrimSuffix(at.field, ".")
		at.field = name
		d.out.at[at] = span{key: pos{item.Line, item.Column}, val: pos{item.Line, item.Column}}
		if d.resolve(item).Kind != yaml.MappingNode {
			d.p.add(pos{item.Line, item.Column}, "%s of point %q: want a mapping with %s: and its settings, got %s", name, base.point, k.section.keys[0].name, describe(d.resolve(item)))
			d.out.bad[at] = true
			continue
		}
		d.fields(item, fmt.Sprintf("in %s of point %q", name, base.point), itemLoc(base, k, i), k.section, dst.Index(i))
	}
}

// points decodes the mapping of points, in file order.
func (d *decoder) points(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		d.out.f.Points = slices.Grow(d.out.f.Points, min(len(n.Content)/2, maxPoints))
	}
	d.entries(n, keyPoints.path, "a mapping of point names to their settings", func(name string, k, v *yaml.Node) {
		if len(d.out.f.Points) == maxPoints {
			d.p.add(pos{k.Line, k.Column}, "%s: a config holds at most %d points", keyPoints.path, maxPoints)
		}
		if len(d.out.f.Points) >= maxPoints {
			return
		}
		p := Point{Name: name}
		base := loc{point: name}
		d.out.at[base] = span{key: pos{k.Line, k.Column}, val: pos{v.Line, v.Column}}
		if m := d.resolve(v); m.Kind != yaml.MappingNode && m.ShortTag() != "!!null" {
			d.out.bad[base] = true
		}
		d.fields(v, fmt.Sprintf("in point %q", name), base, pointSection, reflect.ValueOf(&p).Elem())
		d.out.f.Points = append(d.out.f.Points, p)
	})
}

// headers decodes a mapping of header names to a value or a list of values.
func (d *decoder) headers(n *yaml.Node, point string, dst *[][2]string) {
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
			d.out.at[loc{point: point, field: fmt.Sprintf("%s[%d]", keyFallbackHeaders.path, len(*dst))}] = span{key: pos{k.Line, k.Column}, val: pos{vn.Line, vn.Column}}
			*dst = append(*dst, [2]string{name, vn.Value})
		}
	})
}
