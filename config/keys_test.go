package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

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
				if k.kind != kindString && k.kind != kindDuration && k.kind != kindBytes {
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

// TestKeyPaths: each key's path is the names of the mappings above it and
// its own, from the top level or from the route or point that holds it,
// and no two keys under one root share a path.
func TestKeyPaths(t *testing.T) {
	t.Parallel()
	seen := map[*section]bool{}
	var walk func(sec *section, prefix string, paths map[string]bool)
	walk = func(sec *section, prefix string, paths map[string]bool) {
		if seen[sec] {
			t.Errorf("section %q: listed by two keys, so its keys' paths are wrong under one of them", sec.name)
			return
		}
		seen[sec] = true
		for _, k := range sec.keys {
			want := prefix + k.name
			if k.path != want {
				t.Errorf("section %q: key %s: got path %q, want %q", sec.name, k.name, k.path, want)
			}
			if paths[want] {
				t.Errorf("path %q: got two keys, want one", want)
			}
			paths[want] = true
			switch k.kind {
			case kindMapping:
				walk(k.section, want+".", paths)
			case kindList, kindNamed:
				walk(k.section, "", map[string]bool{})
			}
		}
	}
	walk(topSection, "", map[string]bool{})
}

// TestKeyFields: every key names a field of the struct its section
// decodes into, of a type its kind decodes (by reflection, so that a
// wrong name fails here rather than on the first file that sets the key).
func TestKeyFields(t *testing.T) {
	t.Parallel()
	kinds := map[kind][]reflect.Kind{
		kindString: {reflect.String, reflect.Slice, reflect.Bool, reflect.Int, reflect.Uint8}, kindBool: {reflect.Bool},
		kindInt: {reflect.Int, reflect.Int64, reflect.Struct}, kindThreshold: {reflect.Struct}, kindDuration: {reflect.Int64}, kindBytes: {reflect.Int64},
		kindStrings: {reflect.Slice}, kindHeaders: {reflect.Slice}, kindMapping: {reflect.Struct, reflect.Pointer},
		kindList: {reflect.Slice}, kindNamed: {reflect.Slice},
	}
	var walk func(sec *section, typ reflect.Type)
	walk = func(sec *section, typ reflect.Type) {
		for _, k := range sec.keys {
			ft := typ
			if k.field != "" {
				f, ok := typ.FieldByName(k.field)
				if !ok {
					t.Errorf("key %s: %s has no field %s", k.path, typ, k.field)
					continue
				}
				ft = f.Type
			}
			if !slices.Contains(kinds[k.kind], ft.Kind()) {
				t.Errorf("key %s: field %s of type %s for kind %d", k.path, k.field, ft, k.kind)
			}
			if k.section == nil {
				continue
			}
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			walk(k.section, ft)
		}
	}
	walk(topSection, reflect.TypeFor[File]())
}
