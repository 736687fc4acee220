// Package clientkey says which key a request belongs to, for the per-key
// rules of a point (sds.yaml's perKey[].key), and turns keys into numbers
// for counting and into labels that people may see.
//
// A Source is parsed once from its spec, when the config loads:
//
//	header:NAME      the value of request header NAME
//	query:NAME       the value of query parameter NAME
//	cookie:NAME      the value of cookie NAME
//	clientIP         the TCP peer's address
//	forwardedFor:N   the Nth address from the right of X-Forwarded-For,
//	                 for N trusted proxies in front (1 to 32)
//
// Source.Key then reads a request's raw key without allocating on the
// common path, or reports that the request has none; the caller applies
// the rule's missing: setting to such requests.
//
// # What a client can and cannot do to its key
//
// A client chooses its header, query and cookie values: per-key limits on
// them are as strong as the upstream's check of those values (an API key
// the upstream verifies). The rules below make sure that a client cannot
// get a second budget by sending the same key in two ways:
//
//   - Several values for one key (two X-Api-Key lines, ?k=a&k=b, two
//     cookies named k) are not resolved by picking one: the upstream might
//     pick another, and a client sending a valid key next to a random one
//     would be served under the valid one while counted under a fresh key
//     each time. If the values differ, the request's key is Conflicting, one
//     key shared by every such request, so that the trick buys at most one
//     key's budget in all. Equal values are one value.
//   - Values are compared exactly, byte for byte, as the upstream reads
//     them: a header line without the spaces and tabs around it (RFC 9110's
//     optional whitespace, which HTTP/1 parsing removes anyway, so that
//     HTTP/1 and HTTP/2 agree); a query parameter unescaped as
//     url.ParseQuery does; a cookie as Request.Cookies reads it, quotes
//     removed. No case folding, no splitting of a header on commas: a key
//     is an opaque secret.
//   - An empty value is no value, but an empty value beside another one
//     makes them differ: the upstream may read either.
//   - A key longer than MaxKeyBytes is replaced by its SHA-256 digest, never
//     cut: two long keys with a common beginning stay two keys, and what the
//     limiter keeps per key stays bounded.
//
// clientIP and forwardedFor:N key on addresses in canonical form
// (net/netip's String, IPv4-mapped IPv6 unmapped), so that one client is
// one key whatever the spelling. The leftmost elements of X-Forwarded-For
// are whatever the client sent; with N trusted proxies in front, the Nth
// element from the right is the first one a trusted proxy wrote, and Key
// never looks further left. Any element from the rightmost to the Nth that
// is not an address makes the key missing (fail closed), as do fewer than
// N addresses.
//
// # Keys are secrets
//
// A raw key (an API key, a session cookie, an address) must never reach a
// log, a metric, a header or /status. Hasher.Sum64 turns it into the number
// a counting structure uses, and Hasher.Label turns that number into the
// label people see, both with secrets drawn when the Hasher is made.
package clientkey
