package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// everyKey returns a YAML file that gives every key of sec (and of the
// sections under it) a value of its kind, indented by indent.
func everyKey(sec *section, indent string) string {
	var b strings.Builder
	for _, k := range sec.keys {
		fmt.Fprintf(&b, "%s%s:", indent, k.name)
		switch k.kind {
		case kindString:
			if len(k.enum) > 0 {
				b.WriteString(" " + k.enum[0] + "\n")
			} else {
				b.WriteString(" /x\n")
			}
		case kindBool:
			b.WriteString(" true\n")
		case kindInt, kindThreshold:
			b.WriteString(" 1\n")
		case kindDuration:
			b.WriteString(" 1s\n")
		case kindStrings:
			b.WriteString(" [A]\n")
		case kindHeaders:
			b.WriteString(" {X-A: b, X-B: [c, d]}\n")
		case kindMapping:
			b.WriteString("\n" + everyKey(k.section, indent+"  "))
		case kindList:
			b.WriteString("\n" + indent + "  -\n" + everyKey(k.section, indent+"    "))
		case kindNamed:
			b.WriteString("\n" + indent + "  p:\n" + everyKey(k.section, indent+"    "))
		default:
			panic(fmt.Sprintf("key %s: kind %d", k.name, k.kind))
		}
	}
	return b.String()
}

// TestDecoderKeys: the keys the decoder reads in each section are exactly
// those the section defines (keys.go), which the schema describes. It
// fails when the decoder gains a setter for a key without a definition,
// and when a defined key has no setter.
func TestDecoderKeys(t *testing.T) {
	t.Parallel()
	data := everyKey(topSection, "")
	p := &problems{}
	d := &decoder{p: p, budget: maxNodes, setters: map[*section][]string{}, out: &decoded{
		f: newFile(), at: map[loc]span{}, bad: map[loc]bool{}, bodyFile: map[string]string{},
	}}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(data), &doc); err != nil {
		t.Fatalf("the file of every key does not parse: %v\n%s", err, data)
	}
	d.top(doc.Content[0])
	if len(p.errs) > 0 {
		t.Errorf("decoding a value of its kind for every defined key: got %v, want no problem\n%s", p.errs, data)
	}
	for _, sec := range sections() {
		got, ok := d.setters[sec]
		if !ok {
			t.Errorf("section %q: the decoder never decoded it", sec.name)
			continue
		}
		want := slices.Sorted(slices.Values(sec.names()))
		if !slices.Equal(got, want) {
			t.Errorf("section %q: the decoder reads %v, want the keys defined in keys.go %v (define each key the decoder reads, with its doc)", sec.name, got, want)
		}
	}
	for sec := range d.setters {
		if !slices.Contains(sections(), sec) {
			t.Errorf("section %q: decoded, but not reachable from the top level's definitions", sec.name)
		}
	}
}

// TestKeyDefinitions: every key has a kind, a doc that is a sentence, a
// default of its kind, and a section exactly when its kind has one.
func TestKeyDefinitions(t *testing.T) {
	t.Parallel()
	for _, sec := range sections() {
		for _, k := range sec.keys {
			where := sec.name + "." + k.name
			if k.kind < kindString || k.kind > kindNamed {
				t.Errorf("%s: kind %d, want one of the kinds", where, k.kind)
			}
			if !strings.HasSuffix(k.doc, ".") || len(k.doc) < 10 {
				t.Errorf("%s: doc %q, want a sentence", where, k.doc)
			}
			if k.kind == kindDuration && k.unit != "" {
				t.Errorf("%s: unit %q, want none for a duration", where, k.unit)
			}
			nested := k.kind == kindMapping || k.kind == kindList || k.kind == kindNamed
			if nested != (k.section != nil) {
				t.Errorf("%s: kind %d with section %v", where, k.kind, k.section)
			}
			switch k.def.(type) {
			case nil:
			case string:
				if k.kind != kindString && k.kind != kindDuration {
					t.Errorf("%s: a string default for kind %d", where, k.kind)
				}
			case bool:
				if k.kind != kindBool {
					t.Errorf("%s: a boolean default for kind %d", where, k.kind)
				}
			case int64:
				if k.kind != kindInt && k.kind != kindThreshold && k.kind != kindDuration {
					t.Errorf("%s: an integer default for kind %d", where, k.kind)
				}
			default:
				t.Errorf("%s: default %#v, want a string, bool or int64", where, k.def)
			}
		}
	}
}
