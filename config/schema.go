package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Schema returns the JSON Schema (draft-07) of sds.yaml, generated from
// the key definitions the decoder reads (keys.go): every key with its
// description, type, default and the enums and bounds validation enforces.
// Editors use it through yaml-language-server to complete keys and flag
// mistakes as they are typed; docs/sds.schema.json is a copy.
//
// The schema is looser than validation, never stricter: whatever it
// rejects, validation rejects too, but rules about several keys at once
// (timeoutCountThreshold needs timeoutThreshold, a route's point must
// exist ...) are left to sds-proxy validate. A mapping or list may be
// written empty as null, as the decoder allows.
//
// The output is indented JSON ending in a newline, the same on every call.
func Schema() []byte {
	definitions := map[string]any{}
	for _, sec := range sections() {
		if sec != topSection {
			definitions[sec.name] = sectionSchema(sec, []any{"object", "null"})
		}
	}
	doc := sectionSchema(topSection, "object")
	doc["$schema"] = "http://json-schema.org/draft-07/schema#"
	doc["title"] = "sds.yaml"
	doc["definitions"] = definitions
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic(fmt.Sprintf("config: the schema does not encode: %v", err)) // maps of strings, numbers and bools always do
	}
	return b.Bytes()
}

// sections returns every section reachable from the top level, each once,
// top level first.
func sections() []*section {
	out := []*section{topSection}
	for i := 0; i < len(out); i++ {
		for _, k := range out[i].keys {
			if k.section != nil && !slices.Contains(out, k.section) {
				out = append(out, k.section)
			}
		}
	}
	return out
}

// sectionSchema returns the schema of a mapping of sec's keys, of JSON
// type typ.
func sectionSchema(sec *section, typ any) map[string]any {
	props := map[string]any{}
	for _, k := range sec.keys {
		props[k.name] = keySchema(k)
	}
	return map[string]any{
		"type":                 typ,
		"description":          sec.doc,
		"properties":           props,
		"additionalProperties": false,
	}
}

// ref returns a reference to the definition of sec.
func ref(sec *section) map[string]any {
	return map[string]any{"$ref": "#/definitions/" + sec.name}
}

// keySchema returns the schema of k's value.
func keySchema(k *key) map[string]any {
	s := map[string]any{"description": describeKey(k)}
	if k.def != nil {
		s["default"] = k.def
	}
	switch k.kind {
	case kindString:
		s["type"] = "string"
		if k.minLength > 0 {
			s["minLength"] = k.minLength
		}
		if k.maxLength > 0 {
			s["maxLength"] = k.maxLength
		}
		if k.pattern != "" {
			s["pattern"] = k.pattern
		}
		if len(k.enum) > 0 {
			s["enum"] = k.enum
		}
	case kindBool:
		s["type"] = "boolean"
	case kindInt, kindThreshold:
		s["type"] = "integer"
		numberLimits(s, k)
	case kindBytes:
		s["type"] = []any{"string", "integer"}
		s["pattern"] = bytesPattern
		numberLimits(s, k)
	case kindDuration:
		s["type"] = []any{"string", "integer"}
		s["pattern"] = durationPattern
		s["minimum"], s["maximum"] = -maxMillis, maxMillis
		numberLimits(s, k)
	case kindStrings:
		s["type"] = []any{"array", "null"}
		item := map[string]any{"type": "string"}
		if k.pattern != "" {
			item["pattern"] = k.pattern
		}
		s["items"] = item
		if k.maxItems > 0 {
			s["maxItems"] = k.maxItems
		}
	case kindHeaders:
		scalar := []any{"string", "number", "boolean"}
		s["type"] = []any{"object", "null"}
		s["propertyNames"] = map[string]any{"pattern": tokenPattern}
		s["additionalProperties"] = map[string]any{
			"type":  append(scalar, "array"),
			"items": map[string]any{"type": scalar},
		}
	case kindMapping:
		s["allOf"] = []any{ref(k.section)}
	case kindList:
		s["type"] = []any{"array", "null"}
		s["items"] = ref(k.section)
		if k.maxItems > 0 {
			s["maxItems"] = k.maxItems
		}
	case kindNamed:
		s["type"] = []any{"object", "null"}
		s["additionalProperties"] = ref(k.section)
		if k.pattern != "" {
			s["propertyNames"] = map[string]any{"pattern": k.pattern}
		}
		if k.maxItems > 0 {
			s["maxProperties"] = k.maxItems
		}
	}
	return s
}

// numberLimits adds k's bounds to s.
func numberLimits(s map[string]any, k *key) {
	if k.min != nil {
		s["minimum"] = *k.min
	}
	if k.max != nil {
		s["maximum"] = *k.max
	}
}

// describeKey returns k's doc with whether a change needs a restart
// (key.restart), its unit, for a duration how to write one, and for a
// threshold how to turn it off.
func describeKey(k *key) string {
	d := k.doc
	if k.restart {
		d += " Changing it needs a restart."
	}
	switch {
	case k.kind == kindDuration:
		d += " A duration such as 250ms, 2s or 1m30s, or an integer of milliseconds."
	case k.kind == kindBytes:
		d += " A size such as 64MiB, 512KiB or 1GiB, or an integer of bytes."
	case k.unit != "":
		d += " Unit: " + k.unit + "."
	}
	if k.kind == kindThreshold {
		d += " Absent or negative (-1): off."
	}
	return d
}
