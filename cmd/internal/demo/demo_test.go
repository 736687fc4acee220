package demo

import (
	"bytes"
	"os"
	"testing"
)

// TestExampleIsEmbedded: the example demo runs without -config is the
// repository's sds.yaml (example.yaml is its copy, for go:embed).
func TestExampleIsEmbedded(t *testing.T) {
	t.Parallel()
	root, err := os.ReadFile("../../../sds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(exampleConfig, root) {
		t.Errorf("cmd/internal/demo/example.yaml differs from sds.yaml; copy it: go generate ./cmd/internal/demo")
	}
}

func TestOrdinal(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 22: "22nd", 101: "101st", 111: "111th"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d): got %q, want %q", n, got, want)
		}
	}
}
