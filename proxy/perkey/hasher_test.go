package perkey_test

import (
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/proxy/perkey"
)

func TestHasherShort(t *testing.T) {
	h := perkey.NewHasher()
	for _, key := range []string{"", "a", "abc", perkey.Conflicting, strings.Repeat("k", perkey.MaxKeyBytes), strings.Repeat("k", perkey.MaxKeyBytes+1)} {
		s := h.Short(key)
		if len(s) != perkey.ShortLen || strings.Trim(s, "0123456789abcdef") != "" {
			t.Errorf("Short(%d bytes) = %q, want %d lower-case hex digits", len(key), s, perkey.ShortLen)
		}
		if again := h.Short(key); again != s {
			t.Errorf("Short(%d bytes) = %q then %q, want it stable", len(key), s, again)
		}
	}
}

// TestHasherSecrets: two Hashers (two processes) label and number the
// same key differently, and one Hasher tells keys apart.
func TestHasherSecrets(t *testing.T) {
	a, b := perkey.NewHasher(), perkey.NewHasher()
	same := 0
	for _, key := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"} {
		if a.Short(key) == b.Short(key) {
			same++
		}
		if a.Sum64(key) == b.Sum64(key) {
			t.Errorf("Sum64(%q) is the same in two Hashers", key)
		}
	}
	if same > 1 {
		t.Errorf("%d of 8 labels are the same in two Hashers, want them independent", same)
	}
	seen := map[string]string{}
	for i := range 10000 {
		key := strings.Repeat("x", i%300) + string(rune('a'+i%26)) + strings.Repeat("y", i/300)
		s := a.Short(key)
		if other, dup := seen[s]; dup && other != key {
			// 2^-32 per pair: about one in 86,000 runs of 10,000 keys.
			t.Logf("Short collision between two keys: %q", s)
		}
		seen[s] = key
	}
}

func TestZeroHasherPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("zero Hasher: Short did not panic, want a panic saying to use NewHasher")
		}
	}()
	var h perkey.Hasher
	h.Short("k")
}
