package clientkey_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// TestKeyOverTheWire sends raw HTTP/1.1 requests to a real net/http server
// and reads the key its handler finds: what a client can make net/http
// deliver is what Key must hold against.
func TestKeyOverTheWire(t *testing.T) {
	src, _ := clientkey.ParseSource("header:X-Api-Key")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := src.Key(r)
		if key == clientkey.Conflicting {
			key = "<conflicting>"
		}
		fmt.Fprintf(w, "%q %v", key, ok)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, headers, want string
	}{
		{"one", "X-Api-Key: abc\r\n", `"abc" true`},
		{"spaces around", "X-Api-Key: \t abc \t\r\n", `"abc" true`},
		{"lower case name", "x-api-key: abc\r\n", `"abc" true`},
		{"two spellings of the name", "x-api-key: abc\r\nX-API-KEY: def\r\n", `"<conflicting>" true`},
		{"same value twice", "X-Api-Key: abc\r\nx-api-key: abc\r\n", `"abc" true`},
		{"empty then value", "X-Api-Key:\r\nX-Api-Key: abc\r\n", `"<conflicting>" true`},
		{"underscore is another header", "X_Api_Key: def\r\nX-Api-Key: abc\r\n", `"abc" true`},
		{"comma list is one value", "X-Api-Key: abc, def\r\n", `"abc, def" true`},
		{"obs-fold joined by net/http", "X-Api-Key: abc\r\n def\r\n", `"abc def" true`},
		{"space before colon", "X-Api-Key : def\r\n", "400"},
		{"bare LF inside", "X-Api-Key: a\nX-Api-Key: b\r\n", `"<conflicting>" true`},
		{"NUL", "X-Api-Key: a\x00b\r\n", "400"},
	} {
		if got := rawGet(t, srv.Listener.Addr().String(), tc.headers); !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// rawGet sends GET / with the given header lines and returns the status
// code and body of the answer.
func rawGet(t *testing.T, addr, headers string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n", headers)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, body)
}
