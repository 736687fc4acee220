package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// The schema tests validate YAML against Schema with a real JSON Schema
// validator, as yaml-language-server does in an editor: the YAML is read
// into JSON values (instance), then checked.

// schemaFile is the copy of the schema kept in the repository.
const schemaFile = "../docs/sds.schema.json"

// compileSchema compiles Schema with jsonschema, which also checks it
// against the draft-07 meta-schema.
func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("sds.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("sds.schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

// instance reads a YAML document into the JSON values a schema validator
// checks, by the tags the decoder reads (yaml-language-server's YAML 1.2
// core schema: yes is a string). ok is false for a document JSON cannot
// hold: no document, a key that is not a scalar, a number JSON has no
// value for, or more than maxNodes nodes once aliases are followed.
func instance(data []byte) (v any, ok bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil, false
	}
	budget := maxNodes
	var conv func(n *yaml.Node) (any, bool)
	conv = func(n *yaml.Node) (any, bool) {
		if budget--; budget < 0 {
			return nil, false
		}
		switch n.Kind {
		case yaml.AliasNode:
			return conv(n.Alias)
		case yaml.SequenceNode:
			out := []any{}
			for _, item := range n.Content {
				v, ok := conv(item)
				if !ok {
					return nil, false
				}
				out = append(out, v)
			}
			return out, true
		case yaml.MappingNode:
			out := map[string]any{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				for k.Kind == yaml.AliasNode {
					k = k.Alias
				}
				if k.Kind != yaml.ScalarNode {
					return nil, false
				}
				v, ok := conv(n.Content[i+1])
				if !ok {
					return nil, false
				}
				out[k.Value] = v
			}
			return out, true
		case yaml.ScalarNode:
		default:
			return nil, false
		}
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!bool":
			var b bool
			return b, n.Decode(&b) == nil
		case "!!int":
			var i int64
			if n.Decode(&i) == nil {
				return i, true
			}
			var f float64
			return f, n.Decode(&f) == nil && !math.IsInf(f, 0)
		case "!!float":
			var f float64
			return f, n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
		}
		return n.Value, true
	}
	return conv(doc.Content[0])
}

// schemaErr validates the YAML data against s; ok is false when data is
// not a document JSON can hold (see instance).
func schemaErr(s *jsonschema.Schema, data []byte) (err error, ok bool) {
	v, ok := instance(data)
	if !ok {
		return nil, false
	}
	return s.Validate(v), true
}

// TestSchemaFileIsCurrent: docs/sds.schema.json is what Schema generates.
func TestSchemaFileIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Schema()) {
		t.Errorf("%s differs from Schema(); regenerate it: go run ./cmd/sds-proxy schema > docs/sds.schema.json", schemaFile)
	}
	if !bytes.Equal(Schema(), Schema()) {
		t.Error("two calls of Schema differ")
	}
}

// TestSchemaDescribesEveryKey: every key of every section is a property
// of the schema, with its description and, where it has one, its default.
func TestSchemaDescribesEveryKey(t *testing.T) {
	t.Parallel()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	doc := v.(map[string]any)
	for _, sec := range sections() {
		node := doc
		if sec != topSection {
			node, _ = doc["definitions"].(map[string]any)[sec.name].(map[string]any)
		}
		props, _ := node["properties"].(map[string]any)
		for _, k := range sec.keys {
			p, ok := props[k.name].(map[string]any)
			if !ok {
				t.Errorf("section %q: key %s is not in the schema", sec.name, k.name)
				continue
			}
			if d, _ := p["description"].(string); !strings.HasPrefix(d, k.doc) {
				t.Errorf("section %q: key %s: description %q, want it to start with %q", sec.name, k.name, d, k.doc)
			}
			if _, has := p["default"]; has != (k.def != nil) {
				t.Errorf("section %q: key %s: default in the schema %v, want %v", sec.name, k.name, p["default"], k.def)
			}
		}
		if len(props) != len(sec.keys) {
			t.Errorf("section %q: %d properties in the schema, want %d", sec.name, len(props), len(sec.keys))
		}
	}
}

// validConfig is a config that validates, and where it was found.
type validConfig struct {
	name string
	data []byte
}

// validConfigs returns the example sds.yaml, the valid configs of the
// test data, the benchmark's configs, and every sds.yaml in a ConfigMap
// under deploy/.
func validConfigs(t *testing.T) []validConfig {
	t.Helper()
	var out []validConfig
	paths := []string{"../sds.yaml"}
	for _, glob := range []string{"testdata/valid/*.yaml", "../bench/*.yaml"} {
		matches, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, matches...)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, validConfig{path, data})
	}
	out = append(out, validConfig{"the valid const of parse_test.go", []byte(valid)})
	configMaps := 0
	err := filepath.WalkDir("../deploy", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var obj struct {
				Kind string            `yaml:"kind"`
				Data map[string]string `yaml:"data"`
			}
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return nil // not a Kubernetes object, such as a kustomize patch list
			}
			if src, ok := obj.Data["sds.yaml"]; ok && obj.Kind == "ConfigMap" {
				configMaps++
				out = append(out, validConfig{path + ": ConfigMap data sds.yaml", []byte(src)})
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if configMaps < 2 {
		t.Errorf("found %d ConfigMaps with an sds.yaml under deploy/, want the base's and the component's at least", configMaps)
	}
	return out
}

// TestSchemaAcceptsValidConfigs: every config that validate accepts in
// the repository validates against the schema.
func TestSchemaAcceptsValidConfigs(t *testing.T) {
	t.Parallel()
	s := compileSchema(t)
	for _, c := range validConfigs(t) {
		if _, err := Parse(c.name, c.data, Options{Upstream: "http://127.0.0.1:9000"}); err != nil {
			t.Errorf("%s: validate rejects it, want a valid config:\n%v", c.name, err)
			continue
		}
		if err, ok := schemaErr(s, c.data); !ok || err != nil {
			t.Errorf("%s: the schema rejects it (JSON-able %v):\n%v", c.name, ok, err)
		}
	}
}

// TestExampleNamesSchema: the example sds.yaml's first line points editors
// at the schema, at its path in the repository.
func TestExampleNamesSchema(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../sds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	const want = "# yaml-language-server: $schema=./docs/sds.schema.json" // relative to sds.yaml
	if first != want {
		t.Errorf("sds.yaml starts with %q, want %q", first, want)
	}
}

// mutation is a change to a valid base config: value set at path.
type mutation struct {
	path  []string // keys from the top; "0" is a list's first item
	value any
	// rejected is true when the schema must reject the result: a wrong
	// type, an unknown key, a value out of its bounds or enum.
	rejected bool
}

// baseConfig returns a valid config, as JSON values, with a route and a
// point with a fallback.
func baseConfig() map[string]any {
	return map[string]any{
		"upstream": "http://127.0.0.1:9000",
		"routes":   []any{map[string]any{"point": "p", "match": map[string]any{}}},
		"points": map[string]any{"p": map[string]any{
			"visitThreshold": 10,
			"fallback":       map[string]any{"status": 503},
		}},
	}
}

// set returns node with value at path: each step is a mapping's key, or
// "0" for a list's first item; the mappings and lists missing on the way
// are made, and anything else on the way is replaced.
func set(node any, path []string, value any) any {
	if len(path) == 0 {
		return value
	}
	if path[0] == "0" {
		list, _ := node.([]any)
		if len(list) == 0 {
			list = []any{nil}
		}
		list[0] = set(list[0], path[1:], value)
		return list
	}
	m, ok := node.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	m[path[0]] = set(m[path[0]], path[1:], value)
	return m
}

// sectionPaths returns the path from the top to each section's mapping:
// a list's first item ("0"), a named mapping's entry "p".
func sectionPaths() map[*section][]string {
	paths := map[*section][]string{topSection: nil}
	for _, sec := range sections() {
		for _, k := range sec.keys {
			if k.section == nil {
				continue
			}
			p := append(slices.Clone(paths[sec]), k.name)
			switch k.kind {
			case kindList:
				p = append(p, "0")
			case kindNamed:
				p = append(p, "p")
			}
			if _, seen := paths[k.section]; !seen {
				paths[k.section] = p
			}
		}
	}
	return paths
}

// mutations returns, for every key, values of other types, values just
// beyond its bounds, enum and pattern (all of which the schema rejects)
// and values at its bounds (which it accepts); and an unknown key in
// every section.
func mutations() []mutation {
	var out []mutation
	for sec, base := range sectionPaths() {
		at := func(k string) []string { return append(slices.Clone(base), k) }
		out = append(out, mutation{at("bogusKey"), 1, true})
		for _, k := range sec.keys {
			bad, good := keyValues(k)
			for _, v := range bad {
				out = append(out, mutation{at(k.name), v, true})
			}
			for _, v := range good {
				out = append(out, mutation{at(k.name), v, false})
			}
		}
	}
	return out
}

// keyValues returns values of k that the schema rejects (bads) and
// accepts (goods): of other types, beyond or at its bounds, enum and
// pattern.
func keyValues(k *key) (bads, goods []any) {
	bad := func(vs ...any) { bads = append(bads, vs...) }
	good := func(vs ...any) { goods = append(goods, vs...) }
	switch k.kind {
	case kindString:
		bad(5, true, 1.5, []any{"a"}, map[string]any{"a": "b"}, nil)
		for _, e := range k.enum {
			good(e)
			bad(strings.ToUpper(e), e+"x")
		}
		if k.minLength > 0 {
			bad("")
		}
		if k.maxLength > 0 {
			good(strings.Repeat("é", k.maxLength))
			bad(strings.Repeat("x", k.maxLength+1))
		}
		if k.pattern != "" {
			bad(" a b\n")
		}
	case kindBool:
		bad("yes", "true", 1, nil, []any{true})
		good(true, false)
	case kindInt, kindThreshold:
		bad("5", 1.5, true, nil, []any{1}, map[string]any{})
		for _, n := range []int64{-1, 0, 1} {
			if (k.min == nil || n >= *k.min) && (k.max == nil || n <= *k.max) {
				good(n)
			}
		}
	case kindBytes:
		bad("64 MiB", "64Mi", "64MB", "-1", true, 1.5, nil, []any{"1MiB"})
		good("64MiB", "512KiB", "1GiB", "100B", "100", int64(1<<20))
	case kindDuration:
		bad("ten seconds", "10", "10 s", true, 1.5, nil, []any{"1s"}, "1d")
		good("250ms", "1m30s", "1.5h", "0")
		if k.min == nil || *k.min <= 250 {
			good(250)
		}
	case kindStrings:
		bad("a", 5, []any{5}, []any{nil}, []any{[]any{"a"}}, map[string]any{"a": "b"})
		good(nil)
		if k.maxItems > 0 {
			bad(slices.Repeat([]any{"A"}, k.maxItems+1))
		}
		if k.pattern != "" {
			bad([]any{"a b"})
		}
	case kindHeaders:
		bad("a", []any{"a"}, map[string]any{"A": nil}, map[string]any{"A": []any{nil}},
			map[string]any{"A": map[string]any{"b": "c"}}, map[string]any{"A B": "c"}, map[string]any{"": "c"})
		good(nil, map[string]any{"A": 1, "B": []any{"c", true}})
	case kindMapping:
		bad("a", 5, []any{"a"}, map[string]any{"bogusKey": 1})
		good(nil)
	case kindList:
		bad("a", 5, map[string]any{"a": "b"}, []any{5}, []any{"a"})
		good(nil)
	case kindNamed:
		bad("a", 5, []any{"a"}, map[string]any{"p": 5}, map[string]any{"p": "a"})
		good(nil)
		if k.pattern != "" {
			bad(map[string]any{"bad name": map[string]any{}}, map[string]any{strings.Repeat("n", maxNameLen+1): map[string]any{}})
		}
	}
	if k.kind == kindInt || k.kind == kindThreshold || k.kind == kindDuration || k.kind == kindBytes {
		if k.min != nil {
			good(*k.min)
			bad(*k.min - 1)
		}
		if k.max != nil {
			good(*k.max)
			bad(*k.max + 1)
		}
	}
	return bads, goods
}

// TestSchemaRejectsOnlyWhatValidateRejects: over a table of changes to a
// valid config built from the key definitions, whatever the schema
// rejects validate rejects too, and the schema does reject wrong types,
// unknown keys and values beyond the bounds, enums and patterns of the
// definitions.
func TestSchemaRejectsOnlyWhatValidateRejects(t *testing.T) {
	t.Parallel()
	s := compileSchema(t)
	base, err := yaml.Marshal(baseConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("base.yaml", base, Options{}); err != nil {
		t.Fatalf("the base config is invalid: %v\n%s", err, base)
	}
	ms := mutations()
	if len(ms) < 300 {
		t.Errorf("%d mutations, want one per key and kind of mistake (300 or more)", len(ms))
	}
	for _, m := range ms {
		data, err := yaml.Marshal(set(baseConfig(), m.path, m.value))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s: %#v", strings.Join(m.path, "."), m.value)
		schemaRejects, ok := schemaErr(s, data)
		if !ok {
			t.Fatalf("%s: not a JSON document:\n%s", name, data)
		}
		if m.rejected && schemaRejects == nil {
			t.Errorf("%s: the schema accepts it, want it rejected\n%s", name, data)
		}
		if !m.rejected && schemaRejects != nil {
			t.Errorf("%s: the schema rejects it, want it accepted: %v\n%s", name, schemaRejects, data)
		}
		if _, err := Parse("sds.yaml", data, Options{}); schemaRejects != nil && err == nil {
			t.Errorf("%s: the schema rejects it but validate accepts it: %v\n%s", name, schemaRejects, data)
		}
	}
}

// FuzzSchemaLooserThanValidate: for any YAML, if the schema rejects it,
// validate rejects it too. The corpus starts from every valid config and
// every broken one of the test data.
func FuzzSchemaLooserThanValidate(f *testing.F) {
	broken, _ := filepath.Glob("testdata/broken/*.yaml")
	for _, path := range append([]string{"../sds.yaml", "../bench/sds-all-strategies.yaml"}, broken...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	valid, _ := filepath.Glob("testdata/valid/*.yaml")
	for _, path := range valid {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	s := compileSchema(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		schemaRejects, ok := schemaErr(s, data)
		if !ok || schemaRejects == nil {
			return
		}
		if _, err := Parse("sds.yaml", data, Options{Upstream: "http://127.0.0.1:9000"}); err == nil {
			t.Fatalf("the schema rejects it but validate accepts it: %v\n%s", schemaRejects, data)
		}
	})
}
