package main_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// queryRoutes: the upstream's echo on a point (Host routed.example) and
// unprotected (any other Host).
const queryRoutes = `routes:
  - point: echo
    match: {host: routed.example, path: /echo-headers}
points:
  echo: {visitThreshold: 1000000}
`

// TestQueryPassthrough: the upstream receives the query byte for byte as
// the client sent it, on a point and unprotected: a ';', an invalid
// escape, '+' and escapes kept, parameters in their order, a bare '?'
// kept. (httputil.ReverseProxy alone drops the parameters it cannot parse
// and re-encodes the rest.)
func TestQueryPassthrough(t *testing.T) {
	t.Parallel()
	e := setup(t, "10s", 10, queryRoutes)
	addr := strings.TrimPrefix(e.proxy.url, "http://")
	for _, host := range []string{"routed.example", "other.example"} {
		for _, target := range []string{
			"/echo-headers?a=1;b=2",
			"/echo-headers?x=%zz&y=2",
			"/echo-headers?q=a+b&r=%2F",
			"/echo-headers?b=2&a=1;c",
			"/echo-headers?%",
			"/echo-headers?",
			"/echo-headers",
		} {
			r := rawGet(t, addr, target, host)
			var echoed struct{ URI string }
			if err := json.Unmarshal([]byte(r.body), &echoed); err != nil || r.status != http.StatusOK {
				t.Errorf("GET %s (Host %s): got %v (%v), want the upstream's echo", target, host, r, err)
				continue
			}
			if echoed.URI != target {
				t.Errorf("GET %s (Host %s): upstream request-target got %q, want %q", target, host, echoed.URI, target)
			}
		}
	}
	if n, ok := e.metric("sds_requests_total", "point", "echo", "result", "proxied"); !ok || n != 7 {
		t.Errorf("sds_requests_total{point=echo,result=proxied}: got %v (%v), want 7", n, ok)
	}
}
