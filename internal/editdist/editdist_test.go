package editdist

import (
	"fmt"
	"testing"
)

// TestDistance: the Levenshtein distance, boundary rows included.
func TestDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "run", 3},
		{"run", "", 3},
		{"valdate", "validate", 1},
		{"kitten", "sitting", 3},
		{"ab", "ba", 2},
		{"status", "status", 0},
		{"visitThreshold", "visitThreshhold", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q): got %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func ExampleDistance() {
	fmt.Println(Distance("valdate", "validate"))
	// Output: 1
}
