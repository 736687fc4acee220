package clientkey

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
)

// LabelLen is the length of a Label: 8 hex digits, 32 bits.
const LabelLen = 8

// Hasher turns raw keys into numbers for counting (Sum64), and those
// numbers into labels that people may see (Label), with two secrets drawn
// from crypto/rand when it is made and never shown: a maphash seed and an
// HMAC-SHA256 key. Results are stable for the life of one Hasher (make one
// per process) and differ between Hashers, so between processes and
// replicas.
//
// A Hasher is immutable and safe for concurrent use. Make one with
// NewHasher; the zero Hasher panics.
type Hasher struct {
	seed maphash.Seed
	// ipad and opad are the HMAC-SHA256 key, XORed with 0x36 and 0x5c
	// (RFC 2104), ready to be hashed.
	ipad, opad [sha256.BlockSize]byte
	ok         bool
}

// NewHasher returns a Hasher with fresh secrets.
func NewHasher() *Hasher {
	var secret [32]byte
	cryptoRead(secret[:])
	return newHasher(maphash.MakeSeed(), secret)
}

// newHasher returns the Hasher of seed and the HMAC key secret.
func newHasher(seed maphash.Seed, secret [32]byte) *Hasher {
	h := &Hasher{seed: seed, ok: true}
	for i := range sha256.BlockSize {
		var k byte
		if i < len(secret) {
			k = secret[i]
		}
		h.ipad[i], h.opad[i] = k^0x36, k^0x5c
	}
	return h
}

// Sum64 is the number standing for key in a counting structure: maphash
// with the Hasher's seed, so that a client who does not know the seed
// cannot choose keys that collide with another's. It does not allocate.
func (h *Hasher) Sum64(key string) uint64 {
	h.check()
	return maphash.String(h.seed, key)
}

// Label is the label of the key whose Sum64 is sum, for headers
// (Sds-Degraded: ...; key=LABEL), logs and /status: the first LabelLen hex
// digits of HMAC-SHA256(secret, sum as 8 big-endian bytes). It is a
// function of the sum, so that /status, which keeps sums and never keys,
// shows the label a client saw in its header. Two keys share a label with
// probability 2^-32.
//
// A label cannot be turned back into its key or its sum, nor used to find
// which keys are in use: HMAC-SHA256 is a one-way pseudo-random function,
// 32 bits of it cannot identify a key among more than 2^32 candidates,
// and checking a guess (say, every IPv4 address) needs both secrets,
// which never leave the process. Seeing the labels of keys one chose (a
// client sees its own in Sds-Degraded) reveals nothing about the secrets,
// the sums, or other keys' labels, so it does not help a client choose
// keys that collide in a counting structure. Label allocates only the
// returned string.
func (h *Hasher) Label(sum uint64) string {
	h.check()
	// HMAC (RFC 2104) on the stack: H(k^opad || H(k^ipad || sum)).
	var in [sha256.BlockSize + 8]byte
	copy(in[:], h.ipad[:])
	binary.BigEndian.PutUint64(in[sha256.BlockSize:], sum)
	inner := sha256.Sum256(in[:])
	var out [sha256.BlockSize + sha256.Size]byte
	copy(out[:], h.opad[:])
	copy(out[sha256.BlockSize:], inner[:])
	mac := sha256.Sum256(out[:])
	var label [LabelLen]byte
	hex.Encode(label[:], mac[:LabelLen/2])
	return string(label[:])
}

func (h *Hasher) check() {
	if !h.ok {
		panic("clientkey: zero Hasher; make one with NewHasher")
	}
}
