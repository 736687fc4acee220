package config

import (
	"os"
	"strings"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	root, err := os.ReadFile("../sds.yaml")
	if err != nil {
		b.Fatal(err)
	}
	broken := []byte(strings.Replace(string(root), "visitThreshold: 100", "visitThreshold: [100", 1))
	for _, bm := range []struct {
		name string
		data []byte
	}{{"example", root}, {"syntax-error-at-end", broken}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Parse("sds.yaml", bm.data, Options{})
			}
		})
	}
}
