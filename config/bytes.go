package config

import (
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// byteUnits are the units of a size, largest first: binary multiples, as
// Kubernetes writes memory (64Mi there, 64MiB here).
var byteUnits = []struct {
	suffix string
	size   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// parseBytes reads a size: digits, then optionally B, KiB, MiB or GiB
// (bytesPattern). It reports false for anything else, or a size past
// int64.
func parseBytes(s string) (int64, bool) {
	unit := int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, unit = rest, u.size
			break
		}
	}
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, false
	}
	return n * unit, true
}

// formatBytes writes n in the largest unit that divides it: 64MiB, 1500B.
func formatBytes(n int64) string {
	for _, u := range byteUnits {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// size decodes a size into dst, an int64: an integer of bytes, or a
// string such as 64MiB.
func (d *decoder) size(k *key, v *yaml.Node, dst reflect.Value) {
	s := d.resolve(v)
	want := k.name + ": want a size such as 64MiB, 512KiB or 1GiB, or an integer of bytes"
	if s.Kind != yaml.ScalarNode || s.ShortTag() != "!!int" && s.ShortTag() != "!!str" {
		d.p.add(pos{v.Line, v.Column}, "%s, got %s", want, describe(s))
		return
	}
	n, ok := parseBytes(s.Value)
	if !ok {
		hint := ""
		if strings.HasSuffix(s.Value, "Mi") || strings.HasSuffix(s.Value, "Gi") || strings.HasSuffix(s.Value, "Ki") || strings.HasSuffix(strings.ToUpper(s.Value), "MB") {
			hint = " (the units are B, KiB, MiB and GiB)"
		}
		d.p.add(pos{v.Line, v.Column}, "%s, got %q%s", want, s.Value, hint)
		return
	}
	dst.SetInt(n)
}
