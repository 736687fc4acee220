package proxy

import (
	"net"
	"net/http"
	"time"
)

// NewTransport returns the upstream transport of a sidecar: one upstream
// host, so a deep keep-alive pool to it; no proxy from the environment;
// HTTP/2 over TLS when offered; no compression of its own (a client that
// did not ask for gzip would otherwise have it asked for on its behalf and
// the answer decompressed by the proxy: the upstream sees the client's
// Accept-Encoding, and the client gets the upstream's bytes). h2c speaks
// cleartext HTTP/2 only (gRPC to an h2c:// upstream).
func NewTransport(h2c bool) *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	}
	return t
}
