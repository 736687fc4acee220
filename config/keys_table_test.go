package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/limiter"
)

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

// keyWord is a word of a message that names a key: a camelCase name or a
// dotted path, such as timeoutThreshold or tls.acme.domains.
var keyWord = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*`)

// keyColon is a lower-case word written as a key, "name:" before a space,
// a value or the end, such as "add point: p" or "write window: 10s".
var keyColon = regexp.MustCompile(`(^|[\s(,])([a-z][a-z0-9]*):(\s|$|\{)`)

// spelled returns the key that the string literal s spells, or "": s is a
// key's name or path, or a message naming one by a camelCase name, a
// dotted path or "name:".
func spelled(s string, keys map[string]bool) string {
	if keys[s] {
		return s
	}
	for _, w := range keyWord.FindAllString(s, -1) {
		for _, part := range append([]string{w}, strings.Split(w, ".")...) {
			if keys[part] && (strings.Contains(part, ".") || strings.ToLower(part) != part) {
				return part
			}
		}
	}
	for _, m := range keyColon.FindAllStringSubmatch(s, -1) {
		if keys[m[2]] {
			return m[2]
		}
	}
	return ""
}

// notKeys are the string literals outside keys.go that spell a key's name
// and mean something else.
var notKeys = map[string]string{
	"h2c": "the upstream URL's scheme h2c://",
	"route %d can never match: route %d (line %d) matches every request it would; move it above route %d or remove it": "the verb match",
}

// TestKeysNamedOnce: the table in keys.go is the one place a key's name is
// written. Outside it, no string literal of the package's code spells a
// key: not as a setter's or a position's key, not as a label of the
// reload's explanation, and not in a message, which takes the name from
// the table (keyX.name, keyX.path).
func TestKeysNamedOnce(t *testing.T) {
	t.Parallel()
	keys := map[string]bool{}
	for _, sec := range sections() {
		for _, k := range sec.keys {
			keys[k.name], keys[k.path] = true, true
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "keys.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if _, ok := n.(*ast.ImportSpec); ok {
				return false
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
			}
			if _, ok := notKeys[s]; ok {
				return true
			}
			if k := spelled(s, keys); k != "" {

				t.Errorf("%s: %s spells the key %s; take it from its definition in keys.go", fset.Position(lit.Pos()), lit.Value, k)
			}
			return true
		})
	}
	if checked < 10 {
		t.Errorf("checked %d files, want the package's (10 or more)", checked)
	}
}

// TestSpelled: the check of TestKeysNamedOnce finds a key written in each
// way it can be, and leaves prose alone.
func TestSpelled(t *testing.T) {
	t.Parallel()
	keys := map[string]bool{"window": true, "timeoutThreshold": true, "tls.acme.domains": true, "domains": true, "point": true}
	for _, tt := range []struct{ s, want string }{
		{"window", "window"},
		{"timeoutThreshold: 0 counts every call", "timeoutThreshold"},
		{"tls.acme.domains: %q is a wildcard", "tls.acme.domains"},
		{"write window: 10s", "window"},
		{"add point: and %s", "point"},
		{"window %v does not split evenly", ""},
		{"point %q is not named by any route", ""},
		{"host:port", ""},
	} {
		if got := spelled(tt.s, keys); got != tt.want {
			t.Errorf("spelled(%q): got %q, want %q", tt.s, got, tt.want)
		}
	}
}

// changeAll changes every settable leaf under v: a threshold to 37, a
// number by 37, a boolean to its opposite, a string by a letter, a list by
// an item; a nil pointer gets a value first.
func changeAll(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[limiter.Threshold]():
		v.Set(reflect.ValueOf(limiter.At(37)))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				changeAll(v.Field(i))
			}
		}
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		changeAll(v.Elem())
	case v.CanInt():
		v.SetInt(v.Int() + 37)
	case v.Kind() == reflect.Bool:
		v.SetBool(!v.Bool())
	case v.Kind() == reflect.String:
		v.SetString(v.String() + "x")
	case v.Kind() == reflect.Slice:
		v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
	}
}

// explained reports whether named holds k's path or, for a mapping, every
// key under it is explained.
func explained(k *key, named map[string]bool) bool {
	if named[k.path] {
		return true
	}
	if k.kind != kindMapping {
		return false
	}
	for _, sub := range k.section.keys {
		if !explained(sub, named) {
			return false
		}
	}
	return true
}

// under returns the paths of the keys of sec and of the mappings under it.
func under(sec *section, into map[string]bool) map[string]bool {
	for _, k := range sec.keys {
		into[k.path] = true
		if k.kind == kindMapping {
			under(k.section, into)
		}
	}
	return into
}

// TestExplanationKeys: the reload's explanation (FileSettings, Diff and
// PointSettings) names only keys of the table, by their paths, and, with
// every setting changed, explains every key of the table: itself, or each
// key under it. Routes are explained whole, by RoutesDiff.
func TestExplanationKeys(t *testing.T) {
	t.Parallel()
	from, to := newFile(), newFile()
	from.TLS.ACME = &ACME{} // so that each acme key is compared, not the mapping
	to.TLS.ACME = &ACME{}
	changeAll(reflect.ValueOf(to).Elem())
	fileKeys := under(topSection, map[string]bool{})
	named := map[string]bool{keyPoints.path: true, keyRoutes.path: true}
	reload, restart := FileSettings(from, to)
	diff := Diff(from, to)
	for _, s := range append(reload, restart...) {
		named[s.Key] = true
	}
	for _, name := range append(diff.Settings, diff.NeedsRestart...) {
		named[name] = true
	}
	for name := range named {
		if !fileKeys[name] {
			t.Errorf("FileSettings or Diff: names %q, want a key of the table", name)
		}
	}
	for _, k := range topSection.keys {
		if !explained(k, named) {
			t.Errorf("key %s: FileSettings and Diff name neither it nor every key under it (got %v)", k.path, named)
		}
	}

	p, q := newPoint("p"), newPoint("p")
	changeAll(reflect.ValueOf(&q).Elem())
	pointKeys := under(pointSection, map[string]bool{})
	named = map[string]bool{}
	for _, s := range PointSettings(&p, &q) {
		if !pointKeys[s.Key] {
			t.Errorf("PointSettings: names %q, want a key of a point", s.Key)
		}
		named[s.Key] = true
	}
	for _, k := range pointSection.keys {
		if !explained(k, named) {
			t.Errorf("key %s: PointSettings names neither it nor every key under it (got %v)", k.path, named)
		}
	}
}
