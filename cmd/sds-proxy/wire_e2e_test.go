package main_test

// End-to-end test of the 1xx answers the proxy's HTTP/1.1 client relays.

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"testing"
)

// TestEarlyHints: a 103 Early Hints from the upstream reaches a GET client
// through the proxy, with its Link header, before the 200.
func TestEarlyHints(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, pointRoute+"    visitThreshold: 1000000\n")
	for _, path := range []string{"/early-hints", "/early-hints?again"} {
		var hints []string
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, http.StatusText(code)+": "+h.Get("Link"))
				return nil
			},
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.proxy.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.do(req)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusOK || len(hints) != 1 || hints[0] != "Early Hints: </style.css>; rel=preload" {
			t.Errorf("GET %s: %v, 1xx seen %q; want one 103 with the Link, then 200", path, r, hints)
		}
	}
}
