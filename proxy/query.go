package proxy

import "net/url"

// upstreamQuery is the raw query the upstream is sent for a request whose
// URL is in: the client's, byte for byte. ReverseProxy re-encodes a query
// holding a ';' or an invalid '%' escape (or more than 10,000 parameters)
// and drops what it cannot parse before Rewrite runs; a sidecar leaves the
// query to the service behind it, which decides what ';' means. Nothing in
// the proxy reads the query (routes match the path, the host and the
// method), so what it acts on and what the upstream reads cannot differ.
//
// An upstream URL's own query (sds.yaml cannot give one: validate rejects
// it; a Config built in code may have one) comes first, joined to the client's by '&' as
// httputil.ProxyRequest.SetURL joins them. An empty client query ("" or a
// bare "?") adds nothing; in.ForceQuery, kept on the outgoing URL, sends
// the bare "?".
func upstreamQuery(upstream, in *url.URL) string {
	switch {
	case upstream.RawQuery == "":
		return in.RawQuery
	case in.RawQuery == "":
		return upstream.RawQuery
	}
	return upstream.RawQuery + "&" + in.RawQuery
}
