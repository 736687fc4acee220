package clientkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// TestLabelIsHMAC: Label's allocation-free HMAC is crypto/hmac's, for
// random secrets and sums and the edge sums.
func TestLabelIsHMAC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var secret [32]byte
		for i := range secret {
			secret[i] = byte(rng.Uint32())
		}
		h := newHasher(maphash.MakeSeed(), secret)
		for _, sum := range []uint64{0, 1, 1<<64 - 1, 1 << 63, rng.Uint64(), rng.Uint64()} {
			mac := hmac.New(sha256.New, secret[:])
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], sum)
			mac.Write(b[:])
			want := hex.EncodeToString(mac.Sum(nil))[:LabelLen]
			if got := h.Label(sum); got != want {
				t.Fatalf("Label(%#x) = %q, want HMAC-SHA256's %q", sum, got, want)
			}
		}
	}
}
