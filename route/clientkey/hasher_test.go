package clientkey_test

import (
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

func TestHasherLabel(t *testing.T) {
	h := clientkey.NewHasher()
	for _, key := range []string{"", "a", "abc", clientkey.Conflicting, strings.Repeat("k", clientkey.MaxKeyBytes)} {
		sum := h.Sum64(key)
		s := h.Label(sum)
		if len(s) != clientkey.LabelLen || strings.Trim(s, "0123456789abcdef") != "" {
			t.Errorf("Label(Sum64(%d bytes)) = %q, want %d lower-case hex digits", len(key), s, clientkey.LabelLen)
		}
		if again := h.Label(h.Sum64(key)); again != s {
			t.Errorf("Label(Sum64(%d bytes)) = %q then %q, want it stable", len(key), s, again)
		}
	}
}

// TestHasherSecrets: two Hashers (two processes) label and number the
// same key differently, and one Hasher tells keys apart.
func TestHasherSecrets(t *testing.T) {
	a, b := clientkey.NewHasher(), clientkey.NewHasher()
	same := 0
	for i, key := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"} {
		if a.Sum64(key) == b.Sum64(key) {
			t.Errorf("Sum64(%q) is the same in two Hashers", key)
		}
		if a.Label(uint64(i)) == b.Label(uint64(i)) {
			same++
		}
	}
	if same > 1 {
		t.Errorf("%d of 8 labels are the same in two Hashers, want them independent", same)
	}
	seen := map[string]uint64{}
	collisions := 0
	for i := range uint64(10000) {
		s := a.Label(i)
		if _, dup := seen[s]; dup {
			collisions++ // 2^-32 per pair: about one in 86,000 runs
		}
		seen[s] = i
	}
	if collisions > 1 {
		t.Errorf("%d label collisions among 10,000 sums, want about none", collisions)
	}
}

func TestZeroHasherPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("zero Hasher: Label did not panic, want a panic saying to use NewHasher")
		}
	}()
	var h clientkey.Hasher
	h.Label(1)
}
