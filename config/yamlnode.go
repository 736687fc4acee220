package config

// The helpers that walk yaml.v3 nodes for decode, every problem at its
// position.

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sds-proxy/sds-proxy/internal/editdist"
)

// resolve follows aliases and spends one unit of the node budget.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	d.budget--
	return follow(n)
}

// follow follows aliases to the node they name.
func follow(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// exhausted reports, once, that the node budget ran out.
func (d *decoder) exhausted(at *yaml.Node) bool {
	if d.budget > 0 {
		return false
	}
	if d.budget > -1<<30 {
		d.p.add(pos{at.Line, at.Column}, "the file expands, aliases followed, to more than %d YAML nodes", maxNodes)
		d.budget = -1 << 30
	}
	return true
}

// entries calls each for every key of the mapping n in order, after
// checking that keys are unique scalars. A null n is an empty mapping.
func (d *decoder) entries(n *yaml.Node, what, want string, each func(key string, k, v *yaml.Node)) {
	m := d.resolve(n)
	if m.ShortTag() == "!!null" {
		return
	}
	if m.Kind != yaml.MappingNode {
		d.p.add(pos{n.Line, n.Column}, "%s: want %s, got %s", what, want, describe(m))
		return
	}
	first := map[string]pos{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if d.exhausted(n) {
			return
		}
		k, v := d.resolve(m.Content[i]), m.Content[i+1]
		at := pos{m.Content[i].Line, m.Content[i].Column}
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			d.p.add(at, "%s: a key must be a name, got %s", what, describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.p.add(at, "%s: merge keys (<<) are not supported; write the keys out", what)
			continue
		}
		if prev, dup := first[k.Value]; dup {
			d.p.add(at, "%s: duplicate key %q (first at line %d); keep one", what, k.Value, prev.line)
			continue
		}
		first[k.Value] = at
		each(k.Value, m.Content[i], v)
	}
}

// fields decodes the mapping n into owner, the struct of sec's keys, and
// records each key's position under base (base.field prefixes its path).
func (d *decoder) fields(n *yaml.Node, scope string, base loc, sec *section, owner reflect.Value) {
	what := strings.TrimPrefix(strings.TrimPrefix(scope, "in "), "at ")
	if base.field != "" {
		what = strings.TrimSuffix(base.field, ".")
	}
	d.entries(n, what, "a mapping", func(key string, k, v *yaml.Node) {
		def := sec.lookup(key)
		if def == nil {
			d.p.add(pos{k.Line, k.Column}, "unknown key %q %s%s", key, scope, suggest(key, sec.names()))
			return
		}
		l := base
		l.field = def.path
		if sec.item {
			l.field = base.field + def.path
		}
		d.out.at[l] = span{key: pos{k.Line, k.Column}, val: pos{v.Line, v.Column}}
		before := len(d.p.errs)
		d.value(def, v, base, owner)
		if len(d.p.errs) > before {
			d.out.bad[l] = true
			return
		}
		if def.kind == kindThreshold || def.kind == kindDuration {
			d.negative(l, v)
		}
		if def.seconds {
			d.bareMillis(def, v)
		}
	})
}

// negative records the text of v, the value of the threshold or duration
// at l, when it is negative (decoded.negative).
func (d *decoder) negative(l loc, v *yaml.Node) {
	s := follow(v)
	if s.Kind != yaml.ScalarNode || !strings.HasPrefix(s.Value, "-") {
		return
	}
	if d.out.negative == nil {
		d.out.negative = map[loc]string{}
	}
	d.out.negative[l] = s.Value
}

// bareMillis warns when the value v of the duration key k, one meant in
// seconds (key.seconds), is an integer of milliseconds from 1 to 999:
// window: 10 is a 10ms window, and most likely meant 10s.
func (d *decoder) bareMillis(k *key, v *yaml.Node) {
	s := follow(v)
	if s.Kind != yaml.ScalarNode || s.ShortTag() != "!!int" {
		return
	}
	var ms int64
	if err := s.Decode(&ms); err != nil || ms < 1 || ms > 999 {
		return
	}
	d.p.warn(pos{v.Line, v.Column}, "%[1]s is %[2]dms: a bare integer is milliseconds (as in SDS); did you mean %[2]ds? (write %[2]dms if you meant milliseconds)", k.path, ms)
}

// sequence returns the items of the list n; null is an empty list.
func (d *decoder) sequence(n *yaml.Node, what, want string) ([]*yaml.Node, bool) {
	s := d.resolve(n)
	if s.ShortTag() == "!!null" {
		return nil, true
	}
	if s.Kind != yaml.SequenceNode {
		d.p.add(pos{n.Line, n.Column}, "%s: want %s, got %s", what, want, describe(s))
		return nil, false
	}
	return d.items(s), true
}

// items returns the items of the list s, within the node budget.
func (d *decoder) items(s *yaml.Node) []*yaml.Node {
	if d.budget < len(s.Content) {
		d.budget = 0
		d.exhausted(s)
		return nil
	}
	d.budget -= len(s.Content)
	return s.Content
}

// scalar resolves v and checks it is a scalar of the given tag.
func (d *decoder) scalar(key string, v *yaml.Node, tag, want string) (*yaml.Node, bool) {
	s := d.resolve(v)
	if s.Kind != yaml.ScalarNode || s.ShortTag() != tag {
		hint := ""
		if tag == "!!str" && s.Kind == yaml.ScalarNode && s.ShortTag() != "!!null" {
			hint = fmt.Sprintf("; quote it: %s: %q", key, s.Value)
		}
		d.p.add(pos{v.Line, v.Column}, "%s: want %s, got %s%s", key, want, describe(s), hint)
		return nil, false
	}
	return s, true
}

// integer decodes a YAML integer.
func (d *decoder) integer(key string, v *yaml.Node) (int64, bool) {
	s, ok := d.scalar(key, v, "!!int", "an integer")
	if !ok {
		return 0, false
	}
	var n int64
	if err := s.Decode(&n); err != nil {
		d.p.add(pos{v.Line, v.Column}, "%s: %s is out of range", key, s.Value)
		return 0, false
	}
	return n, true
}

// duration decodes a Go duration string ("250ms") or an integer of
// milliseconds (250) into dst, the value of k (key.sdsOff folds -1ms to 0).
func (d *decoder) duration(k *key, v *yaml.Node, dst reflect.Value) {
	s := d.resolve(v)
	want := fmt.Sprintf("%s: want a duration such as 250ms or an integer of milliseconds", k.name)
	var dur time.Duration
	switch {
	case s.Kind == yaml.ScalarNode && s.ShortTag() == "!!int":
		var ms int64
		if err := s.Decode(&ms); err != nil || ms > maxMillis || ms < math.MinInt64/int64(time.Millisecond) {
			d.p.add(pos{v.Line, v.Column}, "%s: %s milliseconds is out of range", k.name, s.Value)
			return
		}
		dur = time.Duration(ms) * time.Millisecond
	case s.Kind == yaml.ScalarNode && s.ShortTag() == "!!str":
		var err error
		if dur, err = time.ParseDuration(s.Value); err != nil {
			d.p.add(pos{v.Line, v.Column}, "%s, got %q (units: ms, s, m, h)", want, s.Value)
			return
		}
	default:
		d.p.add(pos{v.Line, v.Column}, "%s, got %s", want, describe(s))
		return
	}
	if k.sdsOff && dur == -time.Millisecond {
		dur = 0
	}
	dst.SetInt(int64(dur))
}

// strings decodes a list of strings into dst, each item's position at
// base.field[i].
func (d *decoder) strings(key string, v *yaml.Node, base loc, dst reflect.Value) {
	items, ok := d.sequence(v, key, "a list such as [a, b]")
	if !ok {
		return
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		if s, ok := d.scalar(key, item, "!!str", "a string"); ok {
			l := base
			l.field = fmt.Sprintf("%s[%d]", base.field, len(out))
			d.out.at[l] = span{key: pos{item.Line, item.Column}, val: pos{item.Line, item.Column}}
			out = append(out, s.Value)
		}
	}
	dst.Set(reflect.ValueOf(out))
}

// describe names a node's kind and value for a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
	default:
		return "an alias"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!null":
		return "no value"
	case "!!str":
		return fmt.Sprintf("the string %q", v)
	case "!!int":
		return "the integer " + v
	case "!!float":
		return "the number " + v
	case "!!bool":
		return "the boolean " + v
	}
	return fmt.Sprintf("%s %q", n.ShortTag(), v)
}

// suggest returns "; did you mean X?" for the known key nearest to key, or
// the list of known keys when none is near. It bounds its cost by
// comparing at most 100 keys of at most 32 bytes.
func suggest(key string, known []string) string {
	if len(known) > 100 || len(key) > 32 {
		return ""
	}
	best, bestDist := "", 3
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("; did you mean %q?", k)
		}
		if len(k) > 32 {
			continue // as key: bounds the distance's cost
		}
		if dist := editdist.Distance(strings.ToLower(key), strings.ToLower(k)); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	sorted := slices.Sorted(slices.Values(known))
	return "; known keys: " + strings.Join(sorted, ", ")
}
