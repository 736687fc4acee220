package perkey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash/maphash"
)

// ShortLen is the length of a Short label: 8 hex digits, 32 bits.
const ShortLen = 8

// Hasher turns raw keys into numbers for counting (Sum64) and into labels
// that people may see (Short), with two secrets drawn from crypto/rand when
// it is made and never shown: a maphash seed and an HMAC-SHA256 key.
// Results are stable for the life of one Hasher (make one per process) and
// differ between Hashers, so between processes and replicas.
//
// A Hasher is immutable and safe for concurrent use. Make one with
// NewHasher; the zero Hasher panics.
type Hasher struct {
	seed   maphash.Seed
	secret [32]byte // the HMAC-SHA256 key of Short
	ok     bool
}

// NewHasher returns a Hasher with fresh secrets.
func NewHasher() *Hasher {
	h := &Hasher{seed: maphash.MakeSeed(), ok: true}
	rand.Read(h.secret[:]) // never fails (crypto/rand, Go 1.24 and later)
	return h
}

// Sum64 is the number standing for key in a counting structure: maphash
// with the Hasher's seed, so that a client who does not know the seed
// cannot choose keys that collide with another's. It does not allocate.
func (h *Hasher) Sum64(key string) uint64 {
	h.check()
	return maphash.String(h.seed, key)
}

// Short is key's label for headers (Sds-Degraded: ...; key=LABEL), logs
// and /status: the first ShortLen hex digits of HMAC-SHA256(secret, key).
// One key always has the same label in one process; two keys share one
// with probability 2^-32.
//
// A label cannot be turned back into its key, nor used to find which keys
// are in use: HMAC-SHA256 is a one-way pseudo-random function, 32 bits of
// it cannot identify a key among more than 2^32 candidates, and checking a
// guess (say, every IPv4 address) needs the secret, which never leaves the
// process. Seeing labels of keys one chose (a client sees its own in
// Sds-Degraded) reveals nothing about the secret or about other keys' labels.
// Short allocates only the returned string.
func (h *Hasher) Short(key string) string {
	h.check()
	var sum [sha256.Size]byte
	if len(key) <= MaxKeyBytes {
		// HMAC (RFC 2104) on the stack: H(k^opad || H(k^ipad || key)).
		var in [sha256.BlockSize + MaxKeyBytes]byte
		var out [sha256.BlockSize + sha256.Size]byte
		for i := range sha256.BlockSize {
			var k byte
			if i < len(h.secret) {
				k = h.secret[i]
			}
			in[i], out[i] = k^0x36, k^0x5c
		}
		n := sha256.BlockSize + copy(in[sha256.BlockSize:], key)
		inner := sha256.Sum256(in[:n])
		copy(out[sha256.BlockSize:], inner[:])
		sum = sha256.Sum256(out[:])
	} else {
		sum = h.longMAC(key)
	}
	var label [ShortLen]byte
	hex.Encode(label[:], sum[:ShortLen/2])
	return string(label[:])
}

// longMAC is HMAC-SHA256 of a key too long for Short's stack buffer.
func (h *Hasher) longMAC(key string) (sum [sha256.Size]byte) {
	mac := hmac.New(sha256.New, h.secret[:])
	mac.Write([]byte(key))
	copy(sum[:], mac.Sum(nil))
	return sum
}

func (h *Hasher) check() {
	if !h.ok {
		panic("perkey: zero Hasher; make one with NewHasher")
	}
}
