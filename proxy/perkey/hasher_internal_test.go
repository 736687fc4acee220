package perkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestShortIsHMAC: the allocation-free HMAC of Short is crypto/hmac's.
func TestShortIsHMAC(t *testing.T) {
	h := NewHasher()
	for _, n := range []int{0, 1, 55, 56, 63, 64, 65, 119, 120, 200, MaxKeyBytes, MaxKeyBytes + 1, 4096} {
		key := strings.Repeat("\xa5", n)
		mac := hmac.New(sha256.New, h.secret[:])
		mac.Write([]byte(key))
		want := hex.EncodeToString(mac.Sum(nil))[:ShortLen]
		if got := h.Short(key); got != want {
			t.Errorf("Short(%d bytes) = %q, want HMAC-SHA256's %q", n, got, want)
		}
	}
}
