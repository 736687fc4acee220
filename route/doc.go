// Package route is how the proxy names the point of a request: rules
// that match a request by method, path, path prefix and host (Rule), a
// table that finds the first matching rule among thousands at the cost
// of a few map lookups (Table), and the normal form of paths both are
// compared in (NormalizePath, RequestPath), so that no spelling of a path
// reaches the upstream under another point's name. It knows nothing of
// points or limiters: a match is an index into the rules. Config
// validation asks it too (Normalize, Covers, FoldHost), so that validate
// judges a route by the rules the proxy routes by. It also says what the
// upstream is sent of a request's target (SetPath, UpstreamQuery) and
// answers the requests that cannot be routed (BadPath, RefuseConnect).
package route
