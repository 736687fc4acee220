package clientkey

import "crypto/rand"

// cryptoRead fills b from crypto/rand, which never fails (Go 1.24 and
// later: it crashes the program rather than return an error).
func cryptoRead(b []byte) { rand.Read(b) }
