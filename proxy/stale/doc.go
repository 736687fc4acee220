// Package stale keeps the last good answers of points with stale: and
// serves them back when such a point degrades a GET or HEAD: serve stale,
// never someone else's (issue 22). The request path records answers while
// it relays them (Cache.Record, Recorder.Write, Recorder.Done) and, when
// it degrades a request, looks one up (Cache.Lookup) and serves it
// (Answer.Serve) with Age and the Sds-Degraded value it gives. This
// package knows nothing of the config format or of the proxy; the caller
// fills a Request.
//
// # What is kept
//
// The rules of a shared cache (RFC 9111 §3), made stricter so that no user
// ever gets an answer meant for another. An answer is kept only if all
// hold:
//
//   - the request is a GET, without Upgrade, and its Cache-Control (if
//     any) parses and has no no-store;
//   - the status is one a cache may keep by heuristic: 200, 203, 204, 300,
//     301, 308, 404, 405, 410, 414 or 501 (never 206, never 101);
//   - the answer is not a stream: no Upgrade, no "Connection: upgrade",
//     Content-Type neither text/event-stream nor application/grpc*;
//   - its Cache-Control (all lines) parses, with
//     github.com/pquerna/cachecontrol, and has none of no-store, private
//     and no-cache, with or without field names;
//   - it has no Set-Cookie;
//   - its Vary is not "*", names at most 32 headers, and none that the
//     proxy writes or removes on the way to the upstream (X-Forwarded-For,
//     X-Forwarded-Host, X-Forwarded-Proto, Forwarded, X-Real-Ip, Via,
//     Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
//     Transfer-Encoding, Upgrade, Proxy-Authorization, Proxy-Authenticate);
//   - if the request has Authorization: the answer says public or
//     s-maxage;
//   - if the request has Cookie: the answer says public or s-maxage, or
//     its Vary names Cookie (the cookie is then part of its key);
//   - a header field that the rules read (Set-Cookie, Vary, Cache-Control,
//     Cookie, Authorization, ...) is not held under two spellings of its
//     name (a header map that net/http did not build);
//   - the body ended cleanly, with the Content-Length the answer gave if
//     it gave one, and the answer's size is within the per-answer bound.
//
// What is kept of it: the status, the header without the hop-by-hop
// fields (those above from Connection to Proxy-Authenticate, and those
// that Connection names), without Age (kept apart, as the age it arrived
// with) and Content-Length (Serve writes both), Date kept; and the body.
//
// # Keys
//
// An answer's key is the point's name, the scheme, the host (ASCII letters
// lower-cased, the port as given), the normalised escaped path and the raw
// query exactly, then the values of the request headers its Vary names:
// every line of each, compared exactly, names case-insensitive (an
// absent header is no line; an empty line is a line). A HEAD request
// finds the answer of a GET. An answer replaces the one of the same key
// and Vary values unless that one arrived later. Answers of one key that
// came with different Vary lists live side by side (at most 8 lists, the
// oldest list's answers go first); when several match a request, the one
// that arrived last is served.
//
// # What is served
//
// The age of an answer at now is now minus when its header arrived (the
// now given to Record), plus the Age the upstream sent with it (whole
// seconds). Its freshness lifetime is s-maxage, else max-age, else
// Expires − Date (Date absent: when it arrived; Expires invalid: 0), else
// 0. An answer is served at now under the point's maxAge only if
// age < maxAge and:
//
//   - with stale-if-error=N: age < lifetime + N;
//   - else with must-revalidate, proxy-revalidate or s-maxage:
//     age < lifetime (only while fresh);
//   - else no other limit.
//
// stale-if-error both limits an answer (it is served no later than N past
// its freshness, whatever maxAge allows) and permits what
// must-revalidate alone would not (RFC 9111 §4.2.4 lets the origin
// permit stale answers explicitly, and RFC 5861 is such a permission). An
// answer that could never be served (its Age already past its limit) is
// not kept. Request directives do not change what is served: serving
// stale is the point's degraded answer, as its fallback is.
//
// # Memory
//
// All points share one cache of maxBytes (staleCache.maxBytes); 0 is off.
// An answer counts for
//
//	size = len(body)
//	     + Σ len(name) over its kept header's names
//	     + Σ (len(value) + FieldOverhead (128)) over its kept header's lines
//	     + len(key) + len(Vary values) + Σ len(Vary names) + len(point)
//	     + EntryOverhead (1024)
//
// bytes, where key is the encoded request key (the point, scheme, host,
// path and query, each after its length as a varint) and Vary values the
// encoded request header values its Vary selects (each line after its
// length). The constants cover the entry's structures on the heap: a
// test measures that the formula is not below what an answer takes.
//
// The kept answers never count for more than maxBytes together: the
// least recently used (a served answer counts as used) are evicted as an
// answer is inserted, and at once when SetMaxBytes lowers the bound. An
// answer larger than the per-answer bound, min(maxBytes/16,
// MaxAnswerBytes), is never kept (SetMaxBytes drops those past its new
// one): its recording stops copying and frees its buffer the moment it
// passes the bound, or never starts when Content-Length says so. Bodies
// being recorded hold at most maxBytes/4 together beyond their first 4
// KiB each (no more than a connection's own buffers); a recording that
// would pass that is dropped. So answers and recordings take at most
// 1.25 × maxBytes, plus 4 KiB per recording in flight.
//
// # Zero values and units
//
// A zero Cache is off (maxBytes 0) until SetMaxBytes; a nil *Cache is off;
// a nil *Recorder (Record's answer for what is not kept) takes every Write
// and Done and does nothing. Sizes are bytes, ages and maxAge
// time.Duration, the Age header whole seconds (RFC 9111 §5.1), and every
// boundary is strict: an answer whose age equals its limit is not served.
//
// # Concurrency and time
//
// A Cache is safe for concurrent use under one mutex; the request path
// takes it when a recording completes and when it serves a degraded
// request, never per byte. Every call takes the instant it acts at (now);
// the package never reads the clock. Retain (a reload) drops the answers
// of points that lost stale: and the recordings begun before it.
package stale
