package clientkey_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// A key's spec, as sds.yaml's perKey[].key writes it, parsed once when the
// config loads; a bad one gets a message saying what to write.
func ExampleParseSource() {
	src, err := clientkey.ParseSource("forwardedFor:2")
	fmt.Println(src.Kind(), src.Hops(), err)

	_, err = clientkey.ParseSource("header:X-Forwarded-For")
	fmt.Println(err)
	// Output:
	// forwardedFor 2 <nil>
	// key "header:X-Forwarded-For": a client writes what it likes in X-Forwarded-For; write forwardedFor:N, N the number of trusted proxies in front
}

// Behind one trusted proxy, the key is the address that proxy appended,
// whatever the client wrote to the left of it.
func ExampleSource_Key() {
	src, _ := clientkey.ParseSource("forwardedFor:1")
	r := httptest.NewRequest("GET", "/search", nil)
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.9") // the client sent 6.6.6.6
	fmt.Println(src.Key(r))

	api, _ := clientkey.ParseSource("header:X-Api-Key")
	r.Header["X-Api-Key"] = []string{"valid", "random"} // two values: one shared key
	key, ok := api.Key(r)
	fmt.Println(key == clientkey.Conflicting, ok)

	r.Header.Del("X-Api-Key")
	fmt.Println(api.Key(r)) // none: the rule's missing: applies
	// Output:
	// 203.0.113.9 true
	// true true
	//  false
}

// The counting structure uses Sum64; headers, logs and /status show the
// Label of the sum, never the key.
func ExampleHasher() {
	h := clientkey.NewHasher() // one per process
	key := "sk_live_0123456789"
	sum := h.Sum64(key)
	fmt.Println(sum == h.Sum64(key), len(h.Label(sum)), h.Label(sum) == h.Label(sum))
	// Output: true 8 true
}
