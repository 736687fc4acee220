package main_test

// End-to-end tests of the proxy's HTTP/1.1 client behind an upstream that
// breaks the framing of its answers (sds-upstream's /api/wire, the faults
// of proxy/h1/h1test), and of the 1xx answers it relays.

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"path/filepath"
	"testing"

	"github.com/sds-proxy/sds-proxy/proxy/h1/h1test"
)

// TestWireFaults: for every framing fault, eight keep-alive clients through
// the real proxy, on a plain route and on a point, each asking its own
// paths with every third request faulty: no client gets an answer meant
// for another, and every correct request gets its own answer.
func TestWireFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.config = filepath.Join(e.dir, "sds.yaml")
	e.write(e.config, configHeader(e.upstream, "10s", 10)+
		"routes:\n  - point: p\n    match: {pathPrefix: /api/wire/p}\npoints:\n  p:\n    visitThreshold: 1000000\n")
	e.proxy = startProxy(t, e.config)
	const clients = 8
	for _, f := range h1test.Faults() {
		perClient := 15
		if f.Expensive {
			perClient = 2
		}
		for _, prefix := range []string{"/api/wire/plain", "/api/wire/p"} {
			got := h1test.Drive(e.proxy.url, prefix, "fault="+f.Name, f, clients, perClient)
			if len(got.Wrong) > 0 || got.CleanFailed > 0 {
				t.Errorf("%s, %s: %v; first wrong: %q", f.Doc, prefix, got, got.Wrong)
			} else if got.Checked != clients*perClient {
				t.Errorf("%s, %s: %d answers checked, want %d", f.Doc, prefix, got.Checked, clients*perClient)
			}
		}
	}
}

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
